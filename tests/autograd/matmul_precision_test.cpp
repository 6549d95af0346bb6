// set_float32_matmul_precision: under kMedium, float32 products round their operands to
// bfloat16 and sum in float32 (on AMX tiles where the CPU has them, else with AVX512-BF16).
// Checked against a naive float64 loop over the rounded operands, for every layout the GEMM
// reads in place, edge sizes of the 32 x 32 AMX blocks and of the 12 x 32 AVX-512 tiles, odd
// depths, depths that take several blocks, alpha/beta and gradients; the unrounded product
// must be measurably different, so a product that ignored the setting fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "op_info.h"

namespace infini::test::matmul_precision_test {
namespace {

// Sets a precision for one test and restores the default.
class PrecisionGuard {
 public:
  explicit PrecisionGuard(MatmulPrecision p) { set_float32_matmul_precision(p); }
  ~PrecisionGuard() { set_float32_matmul_precision(MatmulPrecision::kHighest); }
};

// x rounded to the nearest bfloat16, ties to even (x finite).
double round_bf16(double x) {
  auto bits = std::bit_cast<std::uint32_t>(static_cast<float>(x));
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return std::bit_cast<float>(bits & 0xffff0000u);
}

struct Reference {
  std::vector<double> value, scale;  // the product and the product of absolute values
};

// a (m,k) @ b (k,n) in float64, optionally over bfloat16-rounded operands.
Reference product(const Tensor& a, const Tensor& b, bool round) {
  const std::int64_t m = a.shape()[0], k = a.shape()[1], n = b.shape()[1];
  const std::vector<double> va = values(a), vb = values(b);
  Reference r{std::vector<double>(m * n), std::vector<double>(m * n)};
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t p = 0; p < k; ++p) {
        const double x = round ? round_bf16(va[i * k + p]) : va[i * k + p];
        const double y = round ? round_bf16(vb[p * n + j]) : vb[p * n + j];
        r.value[i * n + j] += x * y;
        r.scale[i * n + j] += std::abs(x * y);
      }
  return r;
}

// max |got - ref| / scale over the elements.
double worst_error(const Tensor& got, const Reference& ref) {
  const std::vector<double> g = values(got);
  double worst = 0;
  for (std::size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::abs(g[i] - ref.value[i]) / ref.scale[i]);
  return worst;
}

TEST(MatmulPrecision, DefaultIsHighest) {
  EXPECT_EQ(float32_matmul_precision(), MatmulPrecision::kHighest);
  PrecisionGuard guard(MatmulPrecision::kMedium);
  EXPECT_EQ(float32_matmul_precision(), MatmulPrecision::kMedium);
}

TEST(MatmulPrecision, MediumRoundsOperandsToBfloat16InEveryLayout) {
  if (!has_bfloat16_matmul()) GTEST_SKIP() << "no AMX-BF16 or AVX512-BF16 here: kMedium computes in float32";
  PrecisionGuard guard(MatmulPrecision::kMedium);
  Generator gen(21);
  // Whole and partial 32 x 32 blocks, 16-row halves, depth tails (odd ones too), several
  // depth blocks (1536 deep on AMX, 768 with AVX512-BF16) and several row blocks (1024 rows).
  for (const auto& [m, k, n] : {std::array<std::int64_t, 3>{16, 32, 16}, {33, 70, 50}, {100, 777, 130},
                                {40, 3100, 70}, {1030, 40, 33}, {21, 1537, 97}}) {
    const Tensor a = randn({m, k}, {}, &gen), b = randn({k, n}, {}, &gen);
    const Tensor at = a.t().contiguous().t(), bt = b.t().contiguous().t();
    const Reference rounded = product(a, b, true), exact = product(a, b, false);
    for (const auto& [x, y] : {std::array<Tensor, 2>{a, b}, {at, b}, {a, bt}, {at, bt}}) {
      const Tensor got = matmul(x, y);
      EXPECT_LT(worst_error(got, rounded), 2e-6) << m << "x" << k << "x" << n;
      EXPECT_GT(worst_error(got, exact), 2e-5) << m << "x" << k << "x" << n;  // bfloat16 keeps 8 bits
    }
  }
}

TEST(MatmulPrecision, MediumKeepsAlphaBetaAndIgnoresNanWithZeroBeta) {
  if (!has_bfloat16_matmul()) GTEST_SKIP() << "no AMX-BF16 or AVX512-BF16 here: kMedium computes in float32";
  PrecisionGuard guard(MatmulPrecision::kMedium);
  Generator gen(22);
  const std::int64_t m = 64, k = 96, n = 40;
  const Tensor a = randn({m, k}, {}, &gen), b = randn({k, n}, {}, &gen), input = randn({1, m, n}, {}, &gen);
  const Reference rounded = product(a, b, true);
  const std::vector<double> got = values(baddbmm(input, a.unsqueeze(0), b.unsqueeze(0), 0.5, 2.0));
  const std::vector<double> in = values(input);
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], 0.5 * in[i] + 2.0 * rounded.value[i], 2e-6 * (2.0 * rounded.scale[i] + std::abs(in[i]))) << i;
  const Tensor nan_input = full({1, m, n}, std::numeric_limits<double>::quiet_NaN());
  EXPECT_LT(worst_error(baddbmm(nan_input, a.unsqueeze(0), b.unsqueeze(0), 0.0, 1.0).squeeze(0), rounded), 2e-6);
}

TEST(MatmulPrecision, MediumLeavesFloat64Exact) {
  PrecisionGuard guard(MatmulPrecision::kMedium);
  Generator gen(23);
  const Tensor a = randn({48, 64}, {.dtype = kFloat64}, &gen), b = randn({64, 40}, {.dtype = kFloat64}, &gen);
  EXPECT_LT(worst_error(matmul(a, b), product(a, b, false)), 1e-14);
}

// linear's gradients are products too: under kMedium they match the float64 products of
// the rounded operands (grad_input = g @ W, grad_weight = g^T @ x).
TEST(MatmulPrecision, MediumGradientsOfLinear) {
  if (!has_bfloat16_matmul()) GTEST_SKIP() << "no AMX-BF16 or AVX512-BF16 here: kMedium computes in float32";
  PrecisionGuard guard(MatmulPrecision::kMedium);
  Generator gen(24);
  const Tensor x = randn({70, 96}, {}, &gen).requires_grad_(), w = randn({50, 96}, {}, &gen).requires_grad_();
  const Tensor g = randn({70, 50}, {}, &gen);
  linear(x, w).backward(g);
  EXPECT_LT(worst_error(x.grad(), product(g, w.detach(), true)), 2e-6);
  EXPECT_LT(worst_error(w.grad(), product(g.t().contiguous(), x.detach(), true)), 2e-6);
}

}  // namespace
}  // namespace infini::test::matmul_precision_test
