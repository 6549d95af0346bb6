// Single IEEE operations on float or double, each rounded to nearest once and never fused
// with its neighbours into a multiply-add, on the host (clang or g++) and in CUDA device
// code (nvcc would otherwise contract a * b + c into one fma). Per-element math that must
// give the same bits on both devices (sgd_step.h, adam_step.h) is written with them.
#pragma once

#include <cmath>
#include <type_traits>

#include "infini/math/host_device.h"

// The per-element step functions are forced inline: a CPU loop vectorizes only when the step
// is inlined into it, and the float16 steps exceed clang's inlining threshold.
#if defined(__CUDACC__)
#define INFINI_STEP_INLINE __forceinline__
#else
#define INFINI_STEP_INLINE [[gnu::always_inline]] inline
#endif

namespace infini::math {

// The type a storage type T computes in: double for double, float for float, float16 and
// bfloat16 (the CPU's Half/BFloat16 and CUDA's __half/__nv_bfloat16).
template <class T>
using compute_of = std::conditional_t<std::is_same_v<T, double>, double, float>;

// On the host each helper is a separate function, so no expression ever holds a multiply and
// an add together for the compiler to contract.
template <class C>
INFINI_HD inline C add_rn(C a, C b) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<C, float>) return __fadd_rn(a, b);
  else return __dadd_rn(a, b);
#else
  return a + b;
#endif
}

template <class C>
INFINI_HD inline C sub_rn(C a, C b) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<C, float>) return __fsub_rn(a, b);
  else return __dsub_rn(a, b);
#else
  return a - b;
#endif
}

template <class C>
INFINI_HD inline C mul_rn(C a, C b) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<C, float>) return __fmul_rn(a, b);
  else return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

template <class C>
INFINI_HD inline C div_rn(C a, C b) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<C, float>) return __fdiv_rn(a, b);
  else return __ddiv_rn(a, b);
#else
  return a / b;
#endif
}

// Correctly rounded square root. clang's builtin does not set errno (std::sqrt may), so a
// loop calling it still vectorizes; the result is the same.
template <class C>
INFINI_HD inline C sqrt_rn(C a) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<C, float>) return __fsqrt_rn(a);
  else return __dsqrt_rn(a);
#elif defined(__clang__)
  return __builtin_elementwise_sqrt(a);
#else
  return std::sqrt(a);
#endif
}

}  // namespace infini::math
