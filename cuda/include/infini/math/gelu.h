// GELU and its gradient per element, shared by the CPU kernels (clang) and the CUDA kernels
// (nvcc, device code). C is the compute type: float (also for f16/bf16 storage) or double.
#pragma once

#include <cmath>
#include <numbers>

#include "infini/math/host_device.h"

namespace infini::math {

// x Phi(x) = 0.5 x (1 + erf(x / sqrt 2)), the exact GELU.
template <class C>
INFINI_HD C gelu_erf(C x) {
  return C(0.5) * x * (C(1) + std::erf(x * C(std::numbers::sqrt2 / 2)));
}

// 0.5 x (1 + tanh(u)) with u = sqrt(2/pi) (x + 0.044715 x^3), GELU's tanh approximation.
template <class C>
INFINI_HD C gelu_tanh(C x) {
  const C k = C(std::numbers::sqrt2 * std::numbers::inv_sqrtpi);  // sqrt(2 / pi)
  return C(0.5) * x * (C(1) + std::tanh(k * (x + C(0.044715) * x * x * x)));
}

// g * gelu_erf'(x), exact: Phi(x) + x phi(x).
template <class C>
INFINI_HD C gelu_erf_backward(C g, C x) {
  const C cdf = C(0.5) * (C(1) + std::erf(x * C(std::numbers::sqrt2 / 2)));
  const C pdf = C(std::numbers::inv_sqrtpi / std::numbers::sqrt2) * std::exp(C(-0.5) * x * x);
  return g * (cdf + x * pdf);
}

// g * gelu_tanh'(x): 0.5 (1 + t) + 0.5 x (1 - t^2) du/dx with t = tanh(u),
// u = sqrt(2/pi) (x + 0.044715 x^3).
template <class C>
INFINI_HD C gelu_tanh_backward(C g, C x) {
  const C k = C(std::numbers::sqrt2 * std::numbers::inv_sqrtpi), c = C(0.044715);
  const C t = std::tanh(k * (x + c * x * x * x));
  return g * (C(0.5) * (C(1) + t) + C(0.5) * x * (C(1) - t * t) * k * (C(1) + C(3) * c * x * x));
}

}  // namespace infini::math
