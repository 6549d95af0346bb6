// Contiguous float32 rows of the arithmetic and transcendental elementwise ops, vectorized
// for this CPU with Eigen's packet math (exp, tanh). A plain C++ header, like sgemm_packed.h: its unit
// imports no module, so it alone is built with -march=native. The strided and non-float
// cases stay in the module's scalar loops.
#pragma once

#include <cstdint>

namespace infini::cpu {

// out[j] = a[j] + b[j] for j < n (likewise -, *, /), IEEE single precision like the scalar
// loops; out may alias a or b (likewise below).
void add_row(float* out, const float* a, const float* b, std::int64_t n) noexcept;
void sub_row(float* out, const float* a, const float* b, std::int64_t n) noexcept;
void mul_row(float* out, const float* a, const float* b, std::int64_t n) noexcept;
void div_row(float* out, const float* a, const float* b, std::int64_t n) noexcept;
// out[j] = exp(x[j]).
void exp_row(float* out, const float* x, std::int64_t n) noexcept;
// out[j] = tanh(x[j]).
void tanh_row(float* out, const float* x, std::int64_t n) noexcept;
// out[j] = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), GELU's tanh approximation.
void gelu_tanh_row(float* out, const float* x, std::int64_t n) noexcept;
// out[j] = grad[j] * d/dx gelu_tanh(x[j]).
void gelu_tanh_backward_row(float* out, const float* grad, const float* x, std::int64_t n) noexcept;
// For n >= 1: shift = the row's maximum (0 when that is infinite, like torch.logsumexp) and
// sum = sum_j exp(x[j] - shift) accumulated in float64, so that log(sum_j exp(x[j])) =
// shift + log(sum): +inf if some x[j] is +inf, -inf if all are -inf.
struct ShiftedExpSum {
  float shift;
  double sum;
};
ShiftedExpSum shifted_exp_sum_row(const float* x, std::int64_t n) noexcept;
// out[j] = scale * exp(x[j] - shift).
void scaled_exp_row(float* out, const float* x, float shift, float scale, std::int64_t n) noexcept;

}  // namespace infini::cpu
