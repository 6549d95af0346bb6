// Regression tests for ops whose values or gradients differed from PyTorch at the edges of
// their domain (issue 17): overflow in binary_cross_entropy_with_logits, NaN gradients of
// binary_cross_entropy at 0 and 1, clamp with min > max, pow at 0^0, std of a constant
// slice, rms_norm's default eps, elu's second derivative at large inputs and the float32
// fused cross-entropy's gradient at large logits. Expected numbers are PyTorch's formulas
// evaluated in float64 in the test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <vector>
import infini.autograd;

namespace pytorch_defects_test {
using namespace infini;

namespace {

Tensor leaf(const std::vector<double>& values, DataType dtype = kFloat64, Shape shape = {}) {
  return from_vector(values, shape, {.dtype = dtype}).requires_grad_();
}

std::vector<double> vals(const Tensor& t) {
  const Tensor c = t.detach().to(kFloat64).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

// |actual - expected| <= tolerance * (1 + |expected|) element by element (infinities must match).
void expect_values(const Tensor& actual, const std::vector<double>& expected, double tolerance,
                   const std::string& what) {
  ASSERT_TRUE(actual.defined()) << what;
  const std::vector<double> a = vals(actual);
  ASSERT_EQ(a.size(), expected.size()) << what;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isinf(expected[i])) EXPECT_EQ(a[i], expected[i]) << what << " [" << i << "]";
    else EXPECT_NEAR(a[i], expected[i], tolerance * (1 + std::abs(expected[i]))) << what << " [" << i << "]";
  }
}

// log(1 + exp(-x)) = max(-x, 0) + log1p(exp(-|x|)), exactly in float64.
double log1p_exp_neg(double x) { return std::max(-x, 0.0) + std::log1p(std::exp(-std::abs(x))); }
double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

// PyTorch: loss = (1 - t) x + (1 + (pw - 1) t) log(1 + exp(-x)); d/dx = (1 - t) - (1 + (pw - 1) t) sigmoid(-x).
TEST(PytorchDefects, BceWithLogitsIsFiniteForLargeNegativeLogits) {
  const std::vector<double> x = {-800, -90, -30, 0, 30, 800}, t = {0.7, 1, 0.3, 0.3, 0.5, 0.2};
  const std::vector<double> pw = {2, 0.5, 1, 3, 1.5, 2};
  for (DataType dtype : {kFloat64, kFloat32}) {
    const double tolerance = dtype == kFloat64 ? 1e-13 : 1e-6;
    for (bool with_pos_weight : {false, true}) {
      const std::string what = std::string(dtype == kFloat64 ? "float64" : "float32") + (with_pos_weight ? " pw" : "");
      Tensor input = leaf(x, dtype);
      const Tensor target = from_vector(t, {}, {.dtype = dtype});
      const std::optional<Tensor> pos_weight =
          with_pos_weight ? std::optional(from_vector(pw, {}, {.dtype = dtype})) : std::nullopt;
      const Tensor loss = binary_cross_entropy_with_logits(input, target, {}, Reduction::None, pos_weight);
      sum(loss).backward();
      std::vector<double> expected_loss, expected_grad;
      for (std::size_t i = 0; i < x.size(); ++i) {
        const double scale = with_pos_weight ? 1 + (pw[i] - 1) * t[i] : 1;
        expected_loss.push_back((1 - t[i]) * x[i] + scale * log1p_exp_neg(x[i]));
        expected_grad.push_back((1 - t[i]) - scale * sigmoid(-x[i]));
      }
      expect_values(loss, expected_loss, tolerance, what + " loss");
      expect_values(input.grad(), expected_grad, tolerance, what + " grad");
    }
  }
  // The example: x = -800, t = 0.7 gives 0.3 * -800 + 800 = 560.
  EXPECT_DOUBLE_EQ(binary_cross_entropy_with_logits(full({1}, -800.0, {.dtype = kFloat64}),
                                                    full({1}, 0.7, {.dtype = kFloat64}))
                       .item<double>(),
                   560.0);
}

// PyTorch: d/dp = w (p - t) / max(p (1 - p), 1e-12) (over N for the mean), finite at p = 0 and 1.
TEST(PytorchDefects, BceGradientIsFiniteAtZeroAndOne) {
  const std::vector<double> p = {0, 1, 0, 1, 0.25, 1e-14}, t = {0.3, 0.6, 0, 1, 0.5, 0.5};
  const std::vector<double> w = {1, 2, 3, 0.5, 1.5, 1};
  const double n = static_cast<double>(p.size());
  Tensor input = leaf(p);
  Tensor target = leaf(t);
  const Tensor loss = binary_cross_entropy(input, target, from_vector(w), Reduction::Mean);
  loss.backward();
  double expected_loss = 0;
  std::vector<double> grad_input, grad_target;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const double log_p = std::max(std::log(p[i]), -100.0), log_q = std::max(std::log(1 - p[i]), -100.0);
    expected_loss -= w[i] * (t[i] * log_p + (1 - t[i]) * log_q) / n;
    grad_input.push_back(w[i] * (p[i] - t[i]) / std::max(p[i] * (1 - p[i]), 1e-12) / n);
    grad_target.push_back(w[i] * (log_q - log_p) / n);
  }
  EXPECT_NEAR(loss.item<double>(), expected_loss, 1e-13 * expected_loss);
  expect_values(input.grad(), grad_input, 1e-13, "grad input");
  expect_values(target.grad(), grad_target, 1e-13, "grad target");
}

// PyTorch: clamp(x, lo, hi) = min(max(x, lo), hi), so lo > hi gives hi everywhere; the
// gradient passes where lo <= x <= hi, i.e. nowhere.
TEST(PytorchDefects, ClampWithMinAboveMaxGivesMax) {
  Tensor x = leaf({-3, 0.5, 1, 1.5, 2, 5});
  const Tensor y = clamp(x, 2.0, 1.0);
  sum(y).backward();
  expect_values(y, {1, 1, 1, 1, 1, 1}, 0, "float64 values");
  expect_values(x.grad(), {0, 0, 0, 0, 0, 0}, 0, "float64 grad");
  expect_values(clamp(from_vector<std::int64_t>({-3, 1, 2, 5}), 2.0, 1.0), {1, 1, 1, 1}, 0, "int64 values");
  // Ordinary bounds are unchanged: the gradient passes inside [lo, hi], ends included.
  Tensor z = leaf({-3, 1, 1.5, 2, 5});
  const Tensor c = clamp(z, 1.0, 2.0);
  sum(c).backward();
  expect_values(c, {1, 1, 1.5, 2, 2}, 0, "ordinary values");
  expect_values(z.grad(), {0, 1, 1, 1, 0}, 0, "ordinary grad");
}

// PyTorch: d(a^b)/da = b a^(b - 1), masked to 0 where b == 0; d/db = a^b log a, 0 where
// a == 0 and b >= 0.
TEST(PytorchDefects, PowGradientAtZeroToTheZero) {
  const std::vector<double> base = {0, 0, 2, 3, 0}, exponent = {0, 2, 0, -1, 0.5};
  Tensor a = leaf(base), b = leaf(exponent);
  const Tensor y = pow(a, b);
  sum(y).backward();
  std::vector<double> expected_y, grad_a, grad_b;
  for (std::size_t i = 0; i < base.size(); ++i) {
    expected_y.push_back(std::pow(base[i], exponent[i]));
    grad_a.push_back(exponent[i] == 0 ? 0 : exponent[i] * std::pow(base[i], exponent[i] - 1));
    grad_b.push_back(base[i] == 0 && exponent[i] >= 0 ? 0 : std::pow(base[i], exponent[i]) * std::log(base[i]));
  }
  expect_values(y, expected_y, 1e-15, "values");
  expect_values(a.grad(), grad_a, 1e-15, "grad base");  // [4] is +inf, as in PyTorch
  expect_values(b.grad(), grad_b, 1e-15, "grad exponent");
}

// PyTorch: d var/dx = 2 (x - mean) / (N - correction); d std/dx = (x - mean) / (std (N -
// correction)), masked to 0 where std == 0 (a constant slice).
TEST(PytorchDefects, StdGradientIsZeroOnConstantSlice) {
  const std::vector<double> v = {1.5, 1.5, 1.5, 1, 2, 4};  // rows: constant, varying
  for (double correction : {1.0, 0.0}) {
    Tensor xs = leaf(v, kFloat64, {2, 3}), xv = leaf(v, kFloat64, {2, 3});
    const Tensor s = infini::std(xs, {1}, correction), var_ = var(xv, {1}, correction);
    sum(s).backward();
    sum(var_).backward();
    std::vector<double> expected_std, expected_var, grad_std, grad_var;
    for (std::size_t row = 0; row < 2; ++row) {
      const double* r = v.data() + 3 * row;
      const double m = (r[0] + r[1] + r[2]) / 3;
      double ss = 0;
      for (int i = 0; i < 3; ++i) ss += (r[i] - m) * (r[i] - m);
      const double variance = ss / (3 - correction), sd = std::sqrt(variance);
      expected_std.push_back(sd);
      expected_var.push_back(variance);
      for (int i = 0; i < 3; ++i) {
        grad_std.push_back(sd == 0 ? 0 : (r[i] - m) / (sd * (3 - correction)));
        grad_var.push_back(2 * (r[i] - m) / (3 - correction));
      }
    }
    const std::string what = "correction " + std::to_string(correction);
    expect_values(s, expected_std, 1e-14, what + " std");
    expect_values(var_, expected_var, 1e-14, what + " var");
    expect_values(xs.grad(), grad_std, 1e-14, what + " std grad");
    expect_values(xv.grad(), grad_var, 1e-14, what + " var grad");
  }
  // Over every dim of a constant tensor, in float32 too.
  Tensor c = leaf({0.5, 0.5, 0.5, 0.5}, kFloat32);
  infini::std(c, {}, 1).backward();
  expect_values(c.grad(), {0, 0, 0, 0}, 0, "all dims");
  // Constants whose sum / N rounds (0.1 + 0.1 + 0.1 != 0.3): std may come out as a
  // rounding error instead of PyTorch's exact 0, but its gradient is still exactly 0.
  for (DataType dtype : {kFloat64, kFloat32})
    for (std::size_t n : {3, 6, 7, 10}) {
      Tensor x = leaf(std::vector<double>(n, 0.1), dtype);
      const Tensor s = infini::std(x);
      s.backward();
      const std::string what = "0.1 x " + std::to_string(n);
      EXPECT_LT(s.item<double>(), 1e-15) << what;
      expect_values(x.grad(), std::vector<double>(n, 0), 0, what + " grad");
    }
}

// PyTorch's rms_norm without eps uses the epsilon of the type it computes in: float64's
// for float64, float32's otherwise.
TEST(PytorchDefects, RmsNormDefaultEpsIsMachineEpsilon) {
  const std::vector<double> v = {1e-8, -2e-8, 3e-8, 0.5e-8, 1, -2, 0.25, 3};
  const struct {
    DataType dtype;
    double scale, eps, tolerance;
  } cases[] = {{kFloat64, 1, std::numeric_limits<double>::epsilon(), 1e-14},
               {kFloat32, 1e4, std::numeric_limits<float>::epsilon(), 1e-6}};
  for (const auto& c : cases) {
    std::vector<double> x = v;
    for (std::size_t i = 0; i < 4; ++i) x[i] *= c.scale;  // row 0 of the size of sqrt(eps)
    std::vector<double> expected;
    for (std::size_t row = 0; row < 2; ++row) {
      double ms = 0;
      for (std::size_t i = 0; i < 4; ++i) ms += x[4 * row + i] * x[4 * row + i] / 4;
      for (std::size_t i = 0; i < 4; ++i) expected.push_back(x[4 * row + i] / std::sqrt(ms + c.eps));
    }
    const Tensor y = rms_norm(from_vector(x, {2, 4}, {.dtype = c.dtype}), {4});
    expect_values(y, expected, c.tolerance, c.dtype == kFloat64 ? "float64" : "float32");
  }
  // An explicit eps is used as given.
  const Tensor y = rms_norm(from_vector(v, {2, 4}), {4}, {}, 1e-16);
  EXPECT_NEAR(vals(y)[0], 1e-8 / std::sqrt((1 + 4 + 9 + 0.25) * 1e-16 / 4 + 1e-16), 1e-14);
}

// elu'(x) = 1 for x > 0, alpha exp(x) otherwise, so elu'' = 0 for x > 0: the unused
// exp(x) branch of the backward must not overflow into 0 * inf = NaN.
TEST(PytorchDefects, EluSecondDerivativeIsFiniteForLargeInputs) {
  const double alpha = 0.7;
  for (DataType dtype : {kFloat64, kFloat32}) {
    Tensor x = leaf({1000, 100, 0, -2}, dtype);
    const Tensor g = autograd::grad({sum(elu(x, alpha))}, {x}, {}, {}, true)[0];
    const Tensor gg = autograd::grad({sum(g)}, {x})[0];
    const double tolerance = dtype == kFloat64 ? 1e-15 : 1e-6;
    expect_values(g, {1, 1, alpha, alpha * std::exp(-2.0)}, tolerance, "first derivative");
    expect_values(gg, {0, 0, alpha, alpha * std::exp(-2.0)}, tolerance, "second derivative");
  }
}

// The fused float32 cross-entropy kept its log-sum-exp in float32, so exp(x - lse) in the
// backward carried half an ulp of |lse| (1e-3 at 2e4) as a relative error. Against the
// float64 softmax of the same float32 logits the gradient must now be as exact as float32's
// exp (PyTorch's float32 error is about 2e-8 here).
TEST(PytorchDefects, Float32CrossEntropyGradientIsPreciseForLargeLogits) {
  constexpr std::int64_t N = 3, C = 7;
  for (double offset : {100.0, -2e4, 2e4}) {
    std::vector<float> logits(N * C);
    for (std::int64_t i = 0; i < N * C; ++i) logits[i] = static_cast<float>(offset + 0.37 * ((i * 5) % C) - 1.1);
    const std::vector<std::int64_t> target = {2, 0, 6};
    Tensor x = from_vector(logits, {N, C}).requires_grad_();
    const Tensor loss = cross_entropy(x, from_vector(target, {N}));
    loss.backward();
    const std::vector<double> grad = vals(x.grad());
    double expected_loss = 0;
    for (std::int64_t i = 0; i < N; ++i) {
      double max = -1e300, sum = 0;
      for (std::int64_t c = 0; c < C; ++c) max = std::max(max, static_cast<double>(logits[i * C + c]));
      for (std::int64_t c = 0; c < C; ++c) sum += std::exp(logits[i * C + c] - max);
      const double lse = max + std::log(sum);
      expected_loss += (lse - logits[i * C + target[i]]) / N;
      for (std::int64_t c = 0; c < C; ++c) {
        const double expected = (std::exp(logits[i * C + c] - lse) - (c == target[i])) / N;
        EXPECT_NEAR(grad[i * C + c], expected, 6e-8) << "offset " << offset << " row " << i << " class " << c;
      }
    }
    EXPECT_NEAR(vals(loss)[0], expected_loss, 2e-7 * (1 + std::abs(expected_loss))) << "offset " << offset;
  }
}

}  // namespace

}  // namespace pytorch_defects_test
