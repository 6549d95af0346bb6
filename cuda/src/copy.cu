// copy: dst[i] = convert<dst.type>(src[i]) between strided arrays of the same sizes.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

#include "check.cuh"
#include "strided.cuh"

namespace infini::cuda {
namespace {

template <class T>
constexpr bool is_16bit_float = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

// f16/bf16 -> float (exact); every other type is returned unchanged.
template <class S>
__device__ auto widen(S x) {
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

// dst and src share sizes (taken from dst); each of the numel elements is located by
// unravelling its row-major linear index i once and applying both arrays' strides.
template <class D, class S>
__global__ void copy_kernel(StridedArray dst, StridedArray src, std::int64_t numel) {
  D* out = static_cast<D*>(dst.data);
  const S* in = static_cast<const S*>(src.data);
  const std::int64_t step = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < numel; i += step) {
    std::int64_t rest = i, out_offset = 0, in_offset = 0;
    for (int d = dst.ndim - 1; d > 0; --d) {
      const std::int64_t index = rest % dst.sizes[d];
      rest /= dst.sizes[d];
      out_offset += index * dst.strides[d];
      in_offset += index * src.strides[d];
    }
    if (dst.ndim > 0) {
      out_offset += rest * dst.strides[0];
      in_offset += rest * src.strides[0];
    }
    out[out_offset] = convert<D>(in[in_offset]);
  }
}

template <class T>
struct Tag {
  using type = T;
};

// Calls f(Tag<T>{}) with T the device storage type of `type`.
template <class F>
void visit(ElementType type, F&& f) {
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
  throw CudaError("copy: unknown element type");
}

}  // namespace

void copy(const StridedArray& dst, const StridedArray& src, int device) {
  const std::int64_t numel = detail::numel(dst);
  if (src.ndim != dst.ndim || !std::equal(dst.sizes, dst.sizes + dst.ndim, src.sizes))
    throw CudaError("copy: dst and src sizes differ");
  if (numel == 0) return;
  detail::use_device(device);
  StridedArray out = dst, in = src;
  detail::coalesce({&out, &in});
  visit(dst.type, [&](auto d) {
    visit(src.type, [&](auto s) {
      using D = typename decltype(d)::type;
      using S = typename decltype(s)::type;
      copy_kernel<D, S><<<detail::blocks_for(numel), detail::kThreads>>>(out, in, numel);
    });
  });
  detail::check(cudaGetLastError(), "copy kernel launch");
  detail::check(cudaDeviceSynchronize(), "copy kernel");
}

}  // namespace infini::cuda
