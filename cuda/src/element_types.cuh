// Internal: device storage types of the ElementTypes, conversions with C++ static_cast
// semantics, and the compute type of each storage type (float for f16/bf16).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "infini/cuda/cuda.h"

namespace infini::cuda::detail {

template <class T>
constexpr bool is_16bit_float = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

// The type element math is done in: float for f16/bf16, the storage type otherwise.
template <class T>
using compute_t = std::conditional_t<is_16bit_float<T>, float, T>;

template <class T>
constexpr bool is_float_compute = std::is_floating_point_v<compute_t<T>>;

// f16/bf16 -> float (exact); every other type is returned unchanged.
template <class S>
__host__ __device__ auto widen(S x) {
  if constexpr (std::is_same_v<S, __half>) return __half2float(x);
  else if constexpr (std::is_same_v<S, __nv_bfloat16>) return __bfloat162float(x);
  else return x;
}

// x rounded once, to nearest even, into the 16-bit float type D. Sources that are exact in
// float (bool, u8, i8, i16, f16, bf16, f32) go through float; i32, i64 and f64 use direct
// conversions so that no double rounding happens.
template <class D, class S>
__device__ D to_16bit_float(S x) {
  if constexpr (std::is_same_v<D, __half>) {
    if constexpr (std::is_same_v<S, double>) return __double2half(x);
    else if constexpr (std::is_same_v<S, std::int64_t>) return __ll2half_rn(x);
    else if constexpr (std::is_same_v<S, std::int32_t>) return __int2half_rn(x);
    else return __float2half_rn(widen(x));
  } else {
    if constexpr (std::is_same_v<S, double>) return __double2bfloat16(x);
    else if constexpr (std::is_same_v<S, std::int64_t>) return __ll2bfloat16_rn(x);
    else if constexpr (std::is_same_v<S, std::int32_t>) return __int2bfloat16_rn(x);
    else return __float2bfloat16_rn(widen(x));
  }
}

// static_cast semantics: to bool is `x != 0`, from bool is 0/1, float -> int truncates.
template <class D, class S>
__device__ D convert(S x) {
  if constexpr (std::is_same_v<D, S>) return x;
  else if constexpr (std::is_same_v<D, bool>) return widen(x) != 0;
  else if constexpr (is_16bit_float<D>) return to_16bit_float<D>(x);
  else return static_cast<D>(widen(x));
}

template <class C>
__device__ bool is_nan(C x) {
  if constexpr (std::is_floating_point_v<C>) return x != x;
  else return false;
}

template <class T>
struct Tag {
  using type = T;
};

// Calls f(Tag<T>{}) with T the device storage type of `type`; `op` names the caller in the
// error for an unknown type.
template <class F>
decltype(auto) visit(ElementType type, const char* op, F&& f) {
  switch (type) {
    case ElementType::Bool: return f(Tag<bool>{});
    case ElementType::U8: return f(Tag<std::uint8_t>{});
    case ElementType::I8: return f(Tag<std::int8_t>{});
    case ElementType::I16: return f(Tag<std::int16_t>{});
    case ElementType::I32: return f(Tag<std::int32_t>{});
    case ElementType::I64: return f(Tag<std::int64_t>{});
    case ElementType::F16: return f(Tag<__half>{});
    case ElementType::BF16: return f(Tag<__nv_bfloat16>{});
    case ElementType::F32: return f(Tag<float>{});
    case ElementType::F64: return f(Tag<double>{});
  }
  throw CudaError(std::string(op) + ": unknown element type");
}

// Like visit, for the floating-point types only (others are an error naming `op`).
template <class F>
decltype(auto) visit_floating(ElementType type, const char* op, F&& f) {
  switch (type) {
    case ElementType::F16: return f(Tag<__half>{});
    case ElementType::BF16: return f(Tag<__nv_bfloat16>{});
    case ElementType::F32: return f(Tag<float>{});
    case ElementType::F64: return f(Tag<double>{});
    default: break;
  }
  throw CudaError(std::string(op) + ": expected a floating-point element type");
}

}  // namespace infini::cuda::detail
