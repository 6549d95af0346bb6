// nn::init: statistics over large tensors, exact bounds, fans of conv-shaped weights,
// orthogonality against a Gram-Schmidt reference, seeding, and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <numbers>
#include <vector>

#include "layer_test_util.h"

import infini.nn;

namespace infini::nn::test::init_test {
namespace {

double phi(double x) { return std::exp(-x * x / 2) / std::sqrt(2 * std::numbers::pi); }
double Phi(double x) { return 0.5 * std::erfc(-x / std::numbers::sqrt2); }

// Mean and std of N(mu, sigma^2) truncated to [a, b] (closed form).
struct Moments {
  double mean, std;
};
Moments truncated_normal_moments(double mu, double sigma, double a, double b) {
  const double alpha = (a - mu) / sigma, beta = (b - mu) / sigma, z = Phi(beta) - Phi(alpha);
  const double shift = (phi(alpha) - phi(beta)) / z;
  const double var = 1 + (alpha * phi(alpha) - beta * phi(beta)) / z - shift * shift;
  return {mu + sigma * shift, sigma * std::sqrt(var)};
}

TEST(Init, UniformStaysWithinBoundsWithUniformMoments) {
  Generator g(1);
  for (DataType dtype : {kFloat32, kFloat64}) {
    const Tensor t = empty({1000, 1000}, {.dtype = dtype});
    EXPECT_TRUE(init::uniform_(t, -2, 3, &g).is_same(t));
    const std::vector<double> v = values(t);
    EXPECT_GE(*std::min_element(v.begin(), v.end()), -2.0);
    EXPECT_LE(*std::max_element(v.begin(), v.end()), 3.0);
    EXPECT_NEAR(mean_of(v), 0.5, 0.01);
    EXPECT_NEAR(std_of(v), 5 / std::sqrt(12.0), 0.01);
  }
  // Defaults: U(0, 1).
  const std::vector<double> v = values(init::uniform_(empty({10000}), 0, 1, &g));
  EXPECT_GE(*std::min_element(v.begin(), v.end()), 0.0);
  EXPECT_LT(*std::max_element(v.begin(), v.end()), 1.0);
  // a == b is a constant.
  EXPECT_EQ(values(init::uniform_(empty({3}), 1.5, 1.5, &g)), (std::vector<double>{1.5, 1.5, 1.5}));
}

TEST(Init, NormalHasTheAskedMeanAndStd) {
  Generator g(2);
  const Tensor t = empty({1000, 1000});
  init::normal_(t, 1, 2, &g);
  const std::vector<double> v = values(t);
  EXPECT_NEAR(mean_of(v), 1.0, 0.01);
  EXPECT_NEAR(std_of(v), 2.0, 0.01);
}

TEST(Init, TruncNormalIsBoundedWithTruncatedMoments) {
  Generator g(3);
  struct Case {
    double mean, std, a, b;
  };
  // The default [-2, 2], an asymmetric window, and one far in the upper tail.
  for (const Case c : {Case{0, 1, -2, 2}, Case{1, 2, 0, 1.5}, Case{0, 1, 5, 6}, Case{0, 1, -7, -6}}) {
    const Tensor t = empty({200000});
    init::trunc_normal_(t, c.mean, c.std, c.a, c.b, &g);
    const std::vector<double> v = values(t);
    EXPECT_GE(*std::min_element(v.begin(), v.end()), c.a);
    EXPECT_LE(*std::max_element(v.begin(), v.end()), c.b);
    const Moments m = truncated_normal_moments(c.mean, c.std, c.a, c.b);
    EXPECT_NEAR(mean_of(v), m.mean, 0.01 * c.std) << "window [" << c.a << ", " << c.b << "]";
    EXPECT_NEAR(std_of(v), m.std, 0.01 * c.std) << "window [" << c.a << ", " << c.b << "]";
  }
  // Defaults: N(0, 1) within [-2, 2]; std = sqrt(1 - 4 phi(2) / (Phi(2) - Phi(-2))).
  const std::vector<double> v = values(init::trunc_normal_(empty({200000}), 0, 1, -2, 2, &g));
  EXPECT_NEAR(std_of(v), std::sqrt(1 - 4 * phi(2) / (Phi(2) - Phi(-2))), 0.01);
}

TEST(Init, WritesThroughNonContiguousViewsAndParameters) {
  Generator g(4);
  const Tensor base = zeros({4, 6});
  init::trunc_normal_(base.t(), 0, 1, 0.5, 1.0, &g);  // every element of base is written
  for (double x : values(base)) {
    EXPECT_GE(x, 0.5);
    EXPECT_LE(x, 1.0);
  }
  Tensor param = zeros({3, 3}).requires_grad_();
  init::xavier_uniform_(param, 1, &g);
  EXPECT_TRUE(param.is_leaf());
  EXPECT_TRUE(param.requires_grad());
  EXPECT_GT(max_abs(values(param)), 0.0);
}

TEST(Init, ConstantZerosOnes) {
  const Tensor f = empty({2, 2});
  EXPECT_EQ(values(init::constant_(f, 2.5)), (std::vector<double>{2.5, 2.5, 2.5, 2.5}));
  EXPECT_EQ(values(init::zeros_(f)), (std::vector<double>{0, 0, 0, 0}));
  const Tensor i = empty({3}, {.dtype = kInt64});
  EXPECT_EQ(values(init::ones_(i)), (std::vector<double>{1, 1, 1}));
}

TEST(Init, FansOfLinearAndConvWeights) {
  const init::Fans linear = init::calculate_fan_in_and_fan_out(empty({4, 3}));
  EXPECT_EQ(linear.fan_in, 3);
  EXPECT_EQ(linear.fan_out, 4);
  const init::Fans conv = init::calculate_fan_in_and_fan_out(empty({8, 3, 5, 5}));  // (out, in, kh, kw)
  EXPECT_EQ(conv.fan_in, 3 * 25);
  EXPECT_EQ(conv.fan_out, 8 * 25);
  const init::Fans conv1d = init::calculate_fan_in_and_fan_out(empty({6, 2, 7}));
  EXPECT_EQ(conv1d.fan_in, 14);
  EXPECT_EQ(conv1d.fan_out, 42);
  expect_error<ShapeError>([] { init::calculate_fan_in_and_fan_out(empty({5})); },
                           "nn.init.calculate_fan_in_and_fan_out", "at least 2 dims");
}

TEST(Init, Gains) {
  using init::Nonlinearity;
  for (Nonlinearity n : {Nonlinearity::Linear, Nonlinearity::Conv1d, Nonlinearity::Conv2d, Nonlinearity::Conv3d,
                         Nonlinearity::ConvTranspose1d, Nonlinearity::ConvTranspose2d, Nonlinearity::ConvTranspose3d,
                         Nonlinearity::Sigmoid})
    EXPECT_EQ(init::calculate_gain(n), 1.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain(Nonlinearity::Tanh), 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain(Nonlinearity::ReLU), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(init::calculate_gain(Nonlinearity::LeakyReLU), std::sqrt(2.0 / (1 + 0.01 * 0.01)));
  EXPECT_DOUBLE_EQ(init::calculate_gain(Nonlinearity::LeakyReLU, 0.2), std::sqrt(2.0 / 1.04));
  EXPECT_DOUBLE_EQ(init::calculate_gain(Nonlinearity::SELU), 0.75);
  expect_error([] { init::calculate_gain(Nonlinearity::LeakyReLU, NAN); }, "nn.init.calculate_gain", "finite");
}

TEST(Init, XavierBoundsAndStdFollowTheFans) {
  Generator g(5);
  const Tensor w = empty({64, 32, 3, 3});  // fan_in 288, fan_out 576
  const double gain = 2.0, fan_sum = 288 + 576;
  init::xavier_uniform_(w, gain, &g);
  const double bound = gain * std::sqrt(6.0 / fan_sum);
  std::vector<double> v = values(w);
  EXPECT_LE(max_abs(v), bound);
  EXPECT_GT(max_abs(v), 0.99 * bound);
  EXPECT_NEAR(std_of(v), bound / std::sqrt(3.0), 0.02 * bound);
  init::xavier_normal_(w, gain, &g);
  v = values(w);
  EXPECT_NEAR(mean_of(v), 0.0, 0.02 * bound);
  EXPECT_NEAR(std_of(v), gain * std::sqrt(2.0 / fan_sum), 0.02 * bound);
}

TEST(Init, KaimingBoundsAndStdFollowTheChosenFan) {
  Generator g(6);
  const Tensor w = empty({128, 16, 5});  // fan_in 80, fan_out 640
  init::kaiming_uniform_(w, 0, init::FanMode::FanIn, init::Nonlinearity::ReLU, &g);
  double bound = std::sqrt(2.0) * std::sqrt(3.0 / 80);
  std::vector<double> v = values(w);
  EXPECT_LE(max_abs(v), bound);
  EXPECT_GT(max_abs(v), 0.99 * bound);
  init::kaiming_uniform_(w, 0, init::FanMode::FanOut, init::Nonlinearity::ReLU, &g);
  bound = std::sqrt(2.0) * std::sqrt(3.0 / 640);
  v = values(w);
  EXPECT_LE(max_abs(v), bound);
  EXPECT_GT(max_abs(v), 0.99 * bound);
  // Default: leaky_relu with slope a.
  init::kaiming_normal_(w, 0.2, init::FanMode::FanIn, init::Nonlinearity::LeakyReLU, &g);
  v = values(w);
  EXPECT_NEAR(std_of(v), std::sqrt(2.0 / 1.04) / std::sqrt(80.0), 0.01);
  init::kaiming_normal_(w, 0, init::FanMode::FanOut, init::Nonlinearity::Tanh, &g);
  EXPECT_NEAR(std_of(values(w)), 5.0 / 3.0 / std::sqrt(640.0), 0.003);
}

// Gram-Schmidt (twice, for accuracy) of the columns of a (m x n, m >= n, row-major):
// the Q of A = QR with R's diagonal positive.
std::vector<double> gram_schmidt(const std::vector<double>& a, int m, int n) {
  std::vector<double> q = a;
  for (int j = 0; j < n; ++j) {
    for (int pass = 0; pass < 2; ++pass)
      for (int k = 0; k < j; ++k) {
        double d = 0;
        for (int i = 0; i < m; ++i) d += q[i * n + k] * q[i * n + j];
        for (int i = 0; i < m; ++i) q[i * n + j] -= d * q[i * n + k];
      }
    double norm = 0;
    for (int i = 0; i < m; ++i) norm += q[i * n + j] * q[i * n + j];
    norm = std::sqrt(norm);
    for (int i = 0; i < m; ++i) q[i * n + j] /= norm;
  }
  return q;
}

std::vector<double> transpose(const std::vector<double>& a, int rows, int cols) {
  std::vector<double> t(a.size());
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) t[j * rows + i] = a[i * cols + j];
  return t;
}

TEST(Init, OrthogonalMatchesTheSignCorrectedQRReference) {
  struct Case {
    Shape shape;
    double gain;
  };
  for (const Case& c : {Case{{10, 6}, 1.0}, Case{{6, 10}, 1.0}, Case{{4, 3, 2, 2}, 2.0}, Case{{5, 5}, 0.5}}) {
    const int rows = static_cast<int>(c.shape[0]);
    int cols = 1;
    for (std::size_t d = 1; d < c.shape.size(); ++d) cols *= static_cast<int>(c.shape[d]);
    Generator g(7), same(7);
    const Tensor w = empty(c.shape, {.dtype = kFloat64});
    init::orthogonal_(w, c.gain, &g);
    // orthogonal_ factors the normal (rows, cols) matrix drawn first from the generator.
    const std::vector<double> a = values(randn({rows, cols}, {.dtype = kFloat64}, &same));
    std::vector<double> expected =
        rows >= cols ? gram_schmidt(a, rows, cols) : transpose(gram_schmidt(transpose(a, rows, cols), cols, rows), cols, rows);
    for (double& x : expected) x *= c.gain;
    expect_close(values(w), expected, 1e-10, "orthogonal_");
    // Orthonormal rows (fewer rows) or columns, scaled by gain^2.
    const std::vector<double> v = values(w);
    const bool by_rows = rows <= cols;
    const int count = by_rows ? rows : cols, length = by_rows ? cols : rows;
    for (int p = 0; p < count; ++p)
      for (int q = 0; q < count; ++q) {
        double d = 0;
        for (int k = 0; k < length; ++k) d += by_rows ? v[p * cols + k] * v[q * cols + k] : v[k * cols + p] * v[k * cols + q];
        EXPECT_NEAR(d, p == q ? c.gain * c.gain : 0.0, 1e-12);
      }
  }
  // float32: W W^T = I within float32 rounding.
  Generator g(8);
  const Tensor w = init::orthogonal_(empty({32, 64}), 1, &g);
  const std::vector<double> v = values(w);
  for (int p = 0; p < 32; ++p)
    for (int q = 0; q < 32; ++q) {
      double d = 0;
      for (int k = 0; k < 64; ++k) d += v[p * 64 + k] * v[q * 64 + k];
      EXPECT_NEAR(d, p == q ? 1.0 : 0.0, 1e-5);
    }
}

TEST(Init, SeededDrawsRepeat) {
  Generator g1(42), g2(42);
  const Tensor a = init::kaiming_uniform_(empty({16, 8}), 0, init::FanMode::FanIn, init::Nonlinearity::ReLU, &g1);
  const Tensor b = init::kaiming_uniform_(empty({16, 8}), 0, init::FanMode::FanIn, init::Nonlinearity::ReLU, &g2);
  EXPECT_EQ(values(a), values(b));
  EXPECT_EQ(values(init::trunc_normal_(empty({50}), 0, 1, -2, 2, &g1)),
            values(init::trunc_normal_(empty({50}), 0, 1, -2, 2, &g2)));
  EXPECT_EQ(values(init::orthogonal_(empty({4, 4}), 1, &g1)), values(init::orthogonal_(empty({4, 4}), 1, &g2)));
  // The default generator, through manual_seed.
  manual_seed(9);
  const std::vector<double> first = values(init::normal_(empty({20})));
  manual_seed(9);
  EXPECT_EQ(values(init::normal_(empty({20}))), first);
  EXPECT_NE(values(init::normal_(empty({20}))), first);
}

TEST(Init, ZeroElementTensorsAreLeftAlone) {
  for (const Shape& s : {Shape{0, 3}, Shape{3, 0, 2}}) {
    const Tensor t = empty(s);
    EXPECT_NO_THROW(init::xavier_uniform_(t));
    EXPECT_NO_THROW(init::kaiming_normal_(t));
    EXPECT_NO_THROW(init::orthogonal_(t));
    EXPECT_NO_THROW(init::trunc_normal_(t));
  }
}

TEST(Init, Errors) {
  const Tensor ints = zeros({4, 4}, {.dtype = kInt64});
  expect_error<DTypeError>([&] { init::uniform_(ints); }, "nn.init.uniform_", "int64");
  expect_error<DTypeError>([&] { init::kaiming_uniform_(ints); }, "nn.init.kaiming_uniform_", "floating-point");
  expect_error([] { init::uniform_(empty({2}), 1, 0); }, "nn.init.uniform_", "a <= b");
  expect_error([] { init::uniform_(empty({2}), 0, INFINITY); }, "nn.init.uniform_", "finite");
  expect_error([] { init::uniform_(empty({2}), -1e308, 1e308); }, "nn.init.uniform_", "overflows");
  expect_error([] { init::normal_(empty({2}), 0, -1); }, "nn.init.normal_", "std >= 0");
  expect_error([] { init::trunc_normal_(empty({2}), 0, 1, 2, -2); }, "nn.init.trunc_normal_", "a < b");
  expect_error([] { init::trunc_normal_(empty({2}), 0, 0); }, "nn.init.trunc_normal_", "std > 0");
  expect_error<ShapeError>([] { init::xavier_normal_(empty({3})); }, "nn.init.xavier_normal_", "[3]");
  expect_error<ShapeError>([] { init::kaiming_uniform_(empty({})); }, "nn.init.kaiming_uniform_", "at least 2 dims");
  expect_error<ShapeError>([] { init::orthogonal_(empty({3})); }, "nn.init.orthogonal_", "at least 2 dims");
  expect_error([] { init::zeros_(Tensor()); }, "nn.init.zeros_", "undefined");
  expect_error([] { init::normal_(Tensor()); }, "nn.init.normal_", "undefined");
}

}  // namespace
}  // namespace infini::nn::test::init_test
