// Vectorized float32 rows (see vector_rows.h): Eigen array expressions over the rows,
// which evaluate 16 lanes at a time with AVX-512 (Eigen's exp and rational tanh).
#include "vector_rows.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <numbers>

namespace infini::cpu {
namespace {

using Row = Eigen::Map<Eigen::ArrayXf>;
using ConstRow = Eigen::Map<const Eigen::ArrayXf>;

constexpr float kSqrt2OverPi = static_cast<float>(std::numbers::sqrt2 * std::numbers::inv_sqrtpi);
constexpr float kCubic = 0.044715f;

}  // namespace

void add_row(float* out, const float* a, const float* b, std::int64_t n) noexcept {
  Row(out, n) = ConstRow(a, n) + ConstRow(b, n);
}
void sub_row(float* out, const float* a, const float* b, std::int64_t n) noexcept {
  Row(out, n) = ConstRow(a, n) - ConstRow(b, n);
}
void mul_row(float* out, const float* a, const float* b, std::int64_t n) noexcept {
  Row(out, n) = ConstRow(a, n) * ConstRow(b, n);
}
void div_row(float* out, const float* a, const float* b, std::int64_t n) noexcept {
  Row(out, n) = ConstRow(a, n) / ConstRow(b, n);
}

void exp_row(float* out, const float* x, std::int64_t n) noexcept { Row(out, n) = ConstRow(x, n).exp(); }

void tanh_row(float* out, const float* x, std::int64_t n) noexcept { Row(out, n) = ConstRow(x, n).tanh(); }

void gelu_tanh_row(float* out, const float* x, std::int64_t n) noexcept {
  const ConstRow v(x, n);
  Row(out, n) = 0.5f * v * (1.0f + (kSqrt2OverPi * (v + kCubic * v.cube())).tanh());
}

void gelu_tanh_backward_row(float* out, const float* grad, const float* x, std::int64_t n) noexcept {
  // d/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2), t = tanh(u(x))
  constexpr std::int64_t kChunk = 256;  // t lives in a stack buffer of this many lanes
  alignas(64) float t_buffer[kChunk];
  for (std::int64_t j = 0; j < n; j += kChunk) {
    const std::int64_t m = n - j < kChunk ? n - j : kChunk;
    const ConstRow v(x + j, m), g(grad + j, m);
    Row t(t_buffer, m);
    t = (kSqrt2OverPi * (v + kCubic * v.cube())).tanh();
    Row(out + j, m) =
        g * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t.square()) * kSqrt2OverPi * (1.0f + 3 * kCubic * v.square()));
  }
}

ShiftedExpSum shifted_exp_sum_row(const float* x, std::int64_t n) noexcept {
  const ConstRow v(x, n);
  const float max = v.maxCoeff();
  const float shift = std::isinf(max) ? 0.0f : max;
  // exp in float32 vectors into a block (a cast in the same expression as exp makes Eigen
  // take exp one element at a time), then each value added in float64 to one of 8
  // interleaved partial sums: vector adds instead of one chain of dependent ones, and a
  // fixed order.
  constexpr std::int64_t kBlock = 256, kLanes = 8;
  Eigen::Array<float, kBlock, 1> block;
  double partial[kLanes] = {};
  for (std::int64_t i = 0; i < n; i += kBlock) {
    const std::int64_t length = std::min(kBlock, n - i);
    block.head(length) = (v.segment(i, length) - shift).exp();
    const float* e = block.data();
    std::int64_t j = 0;
    for (; j + kLanes <= length; j += kLanes)
      for (std::int64_t k = 0; k < kLanes; ++k) partial[k] += static_cast<double>(e[j + k]);
    for (; j < length; ++j) partial[j % kLanes] += static_cast<double>(e[j]);
  }
  const double sum = ((partial[0] + partial[1]) + (partial[2] + partial[3])) +
                     ((partial[4] + partial[5]) + (partial[6] + partial[7]));
  return {shift, sum};
}

void scaled_exp_row(float* out, const float* x, float shift, float scale, std::int64_t n) noexcept {
  Row(out, n) = scale * (ConstRow(x, n) - shift).exp();
}

}  // namespace infini::cpu
