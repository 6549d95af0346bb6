// Vectorized float32 rows (see vector_rows.h): Eigen array expressions over the rows,
// which evaluate 16 lanes at a time with AVX-512 (Eigen's exp and rational tanh).
#include "vector_rows.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <numbers>

#include "partial_sums.h"

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
  // take exp one element at a time), then the values summed in float64 over interleaved
  // partial sums (the block length is a multiple of their count, so one order throughout).
  constexpr std::int64_t kBlock = 256;
  static_assert(kBlock % kPartials == 0);
  Eigen::Array<float, kBlock, 1> block;
  double partial[kPartials] = {};
  for (std::int64_t i = 0; i < n; i += kBlock) {
    const std::int64_t length = std::min(kBlock, n - i);
    block.head(length) = (v.segment(i, length) - shift).exp();
    add_terms(partial, length, [&](std::int64_t j) { return static_cast<double>(block[j]); });
  }
  return {shift, total(partial)};
}

void scaled_exp_row(float* out, const float* x, float shift, float scale, std::int64_t n) noexcept {
  Row(out, n) = scale * (ConstRow(x, n) - shift).exp();
}

}  // namespace infini::cpu
