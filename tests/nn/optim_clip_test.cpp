// clip_grad_norm_ and clip_grad_value_ against norms computed by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "optim_test_util.h"

import infini.nn;

namespace infini::optim::test::optim_clip_test {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(OptimClipGrad, TwoNormScalesAllGrads) {
  Tensor a = param({0, 0}), b = param({0}), no_grad = param({0});
  set_grad(a, {3.0, 4.0});
  set_grad(b, {12.0});
  const double total = clip_grad_norm_({a, b, no_grad}, 1.3);
  EXPECT_DOUBLE_EQ(total, 13.0);  // sqrt(9 + 16 + 144)
  const double coef = 1.3 / (13.0 + 1e-6);
  expect_close(values(a.grad()), {3.0 * coef, 4.0 * coef}, 1e-15);
  expect_close(values(b.grad()), {12.0 * coef}, 1e-15);
  EXPECT_FALSE(no_grad.grad().defined());
}

TEST(OptimClipGrad, NoScalingBelowMaxNorm) {
  Tensor a = param({0, 0});
  set_grad(a, {0.3, -0.4});
  const auto version = a.grad().version();
  EXPECT_DOUBLE_EQ(clip_grad_norm_({a}, 1.0), 0.5);
  EXPECT_EQ(values(a.grad()), (std::vector<double>{0.3, -0.4}));
  EXPECT_EQ(a.grad().version(), version);
}

TEST(OptimClipGrad, InfNorm) {
  Tensor a = param({0, 0, 0}), b = param({0});
  set_grad(a, {1.0, -5.0, 2.0});
  set_grad(b, {4.0});
  EXPECT_EQ(clip_grad_norm_({a, b}, 2.0, kInfNorm), 5.0);
  const double coef = 2.0 / (5.0 + 1e-6);
  expect_close(values(a.grad()), {coef, -5.0 * coef, 2.0 * coef}, 1e-15);
  expect_close(values(b.grad()), {4.0 * coef}, 1e-15);
}

TEST(OptimClipGrad, OneAndThreeNorms) {
  Tensor a = param({0, 0, 0});
  set_grad(a, {1.0, -2.0, 3.0});
  EXPECT_DOUBLE_EQ(clip_grad_norm_({a}, 100.0, 1.0), 6.0);
  EXPECT_NEAR(clip_grad_norm_({a}, 100.0, 3.0), std::cbrt(1.0 + 8.0 + 27.0), 1e-14);
}

TEST(OptimClipGrad, TotalNormAndCoefficientAreClipGradNormInTwoHalves) {
  Tensor a = param({0, 0}), b = param({0});
  set_grad(a, {3.0, 4.0});
  set_grad(b, {12.0});
  EXPECT_DOUBLE_EQ(total_grad_norm({a, b}), 13.0);
  EXPECT_EQ(values(a.grad()), (std::vector<double>{3.0, 4.0}));  // untouched
  EXPECT_DOUBLE_EQ(total_grad_norm({a, b}, kInfNorm), 12.0);
  EXPECT_EQ(clip_coefficient(13.0, 1.3), 1.3 / (13.0 + 1e-6));
  EXPECT_EQ(clip_coefficient(0.5, 1.0), 1.0);  // clamped to 1
  EXPECT_TRUE(std::isnan(clip_coefficient(std::nan(""), 1.0)));  // NaN passes, as in clip_grad_norm_
  EXPECT_EQ(total_grad_norm({}), 0.0);
  expect_error<Error>([] { clip_coefficient(1.0, -1.0); }, "clip_coefficient", "max_norm must be >= 0");
  expect_error<Error>([&] { total_grad_norm({a}, 0.0); }, "total_grad_norm", "norm_type must be > 0");
}

TEST(OptimClipGrad, NoGradsGiveZero) {
  Tensor a = param({1.0});
  EXPECT_EQ(clip_grad_norm_({a}, 1.0), 0.0);
  EXPECT_EQ(clip_grad_norm_({}, 1.0), 0.0);
}

TEST(OptimClipGrad, Float32LargeGradMatchesFloat64Sum) {
  // 200000 elements: several chunks spread over the threads.
  const std::int64_t n = 200000;
  Tensor p = zeros({n}).requires_grad_();
  p.set_grad(sin(arange(n, {.dtype = kFloat32}) * 0.01));
  const std::vector<double> g = values(p.grad());
  double sum = 0;
  for (double x : g) sum += x * x;
  const double expected = std::sqrt(sum);
  const double total = clip_grad_norm_({p}, 1.0);
  EXPECT_NEAR(total, expected, 1e-12 * expected);
  EXPECT_NEAR(std::sqrt([&] {
                double s = 0;
                for (double x : values(p.grad())) s += x * x;
                return s;
              }()),
              1.0, 1e-5);
  EXPECT_EQ(p.grad().dtype(), kFloat32);
}

TEST(OptimClipGrad, NonFinite) {
  Tensor a = param({0, 0});
  set_grad(a, {kInf, 1.0});
  expect_error([&] { clip_grad_norm_({a}, 1.0, 2.0, /*error_if_nonfinite=*/true); }, "clip_grad_norm_",
               "non-finite");
  expect_error([&] { clip_grad_norm_({a}, 1.0, 2.0, true); }, "clip_grad_norm_", "of order 2");
  EXPECT_EQ(values(a.grad())[1], 1.0);  // untouched by the failed call
  // Like PyTorch: the coefficient 1 / inf = 0 scales the grads (inf * 0 is NaN).
  EXPECT_EQ(clip_grad_norm_({a}, 1.0), kInf);
  EXPECT_TRUE(std::isnan(values(a.grad())[0]));
  EXPECT_EQ(values(a.grad())[1], 0.0);

  Tensor b = param({0, 0});
  set_grad(b, {NAN, 1.0});
  EXPECT_TRUE(std::isnan(clip_grad_norm_({b}, 1.0, kInfNorm)));  // NaN wins over the max
  EXPECT_TRUE(std::isnan(values(b.grad())[1]));                   // NaN coefficient scales too
}

TEST(OptimClipGrad, NormErrors) {
  Tensor a = param({0.0});
  set_grad(a, {1.0});
  expect_error([&] { clip_grad_norm_({a}, -1.0); }, "clip_grad_norm_", "max_norm must be >= 0, got -1");
  expect_error([&] { clip_grad_norm_({a}, 1.0, 0.0); }, "clip_grad_norm_", "norm_type must be > 0");
  expect_error([&] { clip_grad_norm_({a}, 1.0, -kInf); }, "clip_grad_norm_", "-inf");
  expect_error([&] { clip_grad_norm_({Tensor()}, 1.0); }, "clip_grad_norm_", "parameter 0 is an undefined tensor");
}

TEST(OptimClipGrad, Value) {
  Tensor a = param({0, 0, 0, 0}), b = param({0});
  set_grad(a, {-3.0, 0.5, 2.0, NAN});
  clip_grad_value_({a, b}, 1.0);
  const std::vector<double> g = values(a.grad());
  EXPECT_EQ(g[0], -1.0);
  EXPECT_EQ(g[1], 0.5);
  EXPECT_EQ(g[2], 1.0);
  EXPECT_TRUE(std::isnan(g[3]));
  EXPECT_FALSE(b.grad().defined());
  expect_error([&] { clip_grad_value_({a}, -0.5); }, "clip_grad_value_", "clip_value must be >= 0, got -0.5");
}

}  // namespace
}  // namespace infini::optim::test::optim_clip_test
