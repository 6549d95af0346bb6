// Internal to the elementwise kernels (unary.cu, binary.cu, accumulate.cu): the contiguous
// fast path's vectors, wrap-around integer arithmetic, and runtime op -> template argument
// dispatch. Operands that share one shape (SharedShape, offsets_of) are in strided.cuh.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "element_types.cuh"
#include "infini/cuda/cuda.h"
#include "strided.cuh"

namespace infini::cuda::detail {

// True when every array is 1-D with unit stride (or 0-D: one element at data).
inline bool all_contiguous(std::initializer_list<const StridedArray*> arrays) {
  return std::all_of(arrays.begin(), arrays.end(),
                     [](const StridedArray* a) { return a->ndim == 0 || (a->ndim == 1 && a->strides[0] == 1); });
}

// V elements loaded or stored as one aligned access (16 bytes for the widest operand).
template <class T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

// Elements per vector in the contiguous fast path of storage type T.
template <class T>
constexpr int kVecWidth = 16 / static_cast<int>(sizeof(T));

__host__ __device__ inline bool aligned(const void* p, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

// Integer arithmetic that wraps like C++ unsigned arithmetic (no signed overflow);
// other types compute as usual.
template <class C>
using wrap_t = std::conditional_t<sizeof(C) < 4, std::uint32_t, std::make_unsigned_t<C>>;

template <class C>
constexpr bool is_wrapping_integer = std::is_integral_v<C> && !std::is_same_v<C, bool>;

template <class C>
__device__ C add_wrap(C x, C y) {
  if constexpr (is_wrapping_integer<C>) return static_cast<C>(static_cast<wrap_t<C>>(x) + static_cast<wrap_t<C>>(y));
  else return static_cast<C>(x + y);
}
template <class C>
__device__ C sub_wrap(C x, C y) {
  if constexpr (is_wrapping_integer<C>) return static_cast<C>(static_cast<wrap_t<C>>(x) - static_cast<wrap_t<C>>(y));
  else return static_cast<C>(x - y);
}
template <class C>
__device__ C mul_wrap(C x, C y) {
  if constexpr (is_wrapping_integer<C>) return static_cast<C>(static_cast<wrap_t<C>>(x) * static_cast<wrap_t<C>>(y));
  else return static_cast<C>(x * y);
}
// -x, wrapping for the most negative integer.
template <class C>
__device__ C negate(C x) {
  if constexpr (is_wrapping_integer<C>) return static_cast<C>(0 - static_cast<std::make_unsigned_t<C>>(x));
  else return static_cast<C>(-x);
}

// x^e by squaring in uint64 arithmetic (wraps), then narrowed like the CPU kernels.
template <class C>
__device__ C integer_power(C x, std::uint64_t e) {
  std::uint64_t r = 1, base = static_cast<std::uint64_t>(static_cast<std::int64_t>(x));
  for (std::uint64_t k = e; k > 0; k >>= 1, base *= base)
    if (k & 1) r *= base;
  return static_cast<C>(static_cast<std::int64_t>(r));
}

// Calls f.template operator()<E(k)>() for the k == op (E an enum of Count values).
template <class E, int Count, class F>
void with_op(E op, F&& f) {
  [&]<int... I>(std::integer_sequence<int, I...>) {
    static_cast<void>(((static_cast<int>(op) == I && (f.template operator()<static_cast<E>(I)>(), true)) || ...));
  }(std::make_integer_sequence<int, Count>{});
}

}  // namespace infini::cuda::detail
