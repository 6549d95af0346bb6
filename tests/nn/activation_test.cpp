// Activation layers against their formulas in float64, gradients, PReLU's weight (state
// dict, learning, clone), printing and errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <numbers>
#include <string>
#include <vector>

#include "layer_test_util.h"

import infini.nn;

namespace infini::nn::test::activation_test {
namespace {

const std::vector<double> kGrid = {-3, -1.5, -0.5, -0.1, 0.2, 0.7, 1.3, 4};

// Points away from the kinks of Hardswish and Hardsigmoid (+-3) and Hardtanh (+-1).
const std::vector<double> kHardGrid = {-3.5, -2.9, -1.2, -0.1, 0.2, 1.3, 2.9, 4};

// module(grid) against f applied elementwise, and gradcheck through the module.
template <class M>
void expect_elementwise(M module, const std::function<double(double)>& f, const char* what,
                        const std::vector<double>& grid = kGrid) {
  const Tensor x = tensor(grid, {2, 4});
  std::vector<double> expected;
  for (double v : grid) expected.push_back(f(v));
  expect_close(values(module(x)), expected, 1e-12, what);
  const Tensor leaf = x.detach().requires_grad_();
  expect_gradcheck([&](const TensorList&) { return TensorList{module(leaf)}; }, {leaf});
}

double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }

TEST(Activation, ElementwiseLayersMatchTheirFormulas) {
  expect_elementwise(ReLU(), [](double x) { return x > 0 ? x : 0; }, "ReLU");
  expect_elementwise(LeakyReLU(0.2), [](double x) { return x > 0 ? x : 0.2 * x; }, "LeakyReLU");
  expect_elementwise(GELU(), [](double x) { return 0.5 * x * (1 + std::erf(x / std::numbers::sqrt2)); }, "GELU");
  expect_elementwise(GELU("tanh"), [](double x) {
    return 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
  }, "GELU tanh");
  expect_elementwise(SiLU(), [](double x) { return x * sigmoid_ref(x); }, "SiLU");
  expect_elementwise(Tanh(), [](double x) { return std::tanh(x); }, "Tanh");
  expect_elementwise(Sigmoid(), sigmoid_ref, "Sigmoid");
}

double clamp_ref(double x, double lo, double hi) { return std::min(std::max(x, lo), hi); }

TEST(Activation, PiecewiseAndSelfNormalizingLayersMatchTheirFormulas) {
  constexpr double alpha = 1.6732632423543772848170429916717, scale = 1.0507009873554804934193349852946;
  expect_elementwise(ReLU6(), [](double x) { return clamp_ref(x, 0, 6); }, "ReLU6");
  expect_elementwise(Hardtanh(), [](double x) { return clamp_ref(x, -1, 1); }, "Hardtanh", kHardGrid);
  expect_elementwise(Hardtanh(-1, 2), [](double x) { return clamp_ref(x, -1, 2); }, "Hardtanh(-1, 2)");
  expect_elementwise(LogSigmoid(), [](double x) { return std::log(sigmoid_ref(x)); }, "LogSigmoid");
  expect_elementwise(SELU(), [&](double x) { return scale * (x > 0 ? x : alpha * std::expm1(x)); }, "SELU");
  expect_elementwise(CELU(), [](double x) { return x > 0 ? x : std::expm1(x); }, "CELU");
  expect_elementwise(CELU(0.5), [](double x) { return x > 0 ? x : 0.5 * std::expm1(x / 0.5); }, "CELU(0.5)");
  expect_elementwise(Mish(), [](double x) { return x * std::tanh(std::log1p(std::exp(x))); }, "Mish");
  expect_elementwise(Hardswish(), [](double x) { return x * clamp_ref(x + 3, 0, 6) / 6; }, "Hardswish", kHardGrid);
  expect_elementwise(Hardsigmoid(), [](double x) { return clamp_ref(x + 3, 0, 6) / 6; }, "Hardsigmoid", kHardGrid);
}

TEST(Activation, GLUHalvesItsDim) {
  const Tensor x = tensor(kGrid, {2, 4});
  std::vector<double> last, first;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) last.push_back(kGrid[i * 4 + j] * sigmoid_ref(kGrid[i * 4 + j + 2]));
  for (int j = 0; j < 4; ++j) first.push_back(kGrid[j] * sigmoid_ref(kGrid[4 + j]));
  expect_all_near(GLU()(x), {2, 2}, last, 1e-12);
  expect_all_near(GLU(0)(x), {1, 4}, first, 1e-12);
  const Tensor leaf = x.detach().requires_grad_();
  GLU glu;
  expect_gradcheck([&](const TensorList&) { return TensorList{glu(leaf)}; }, {leaf});
}

TEST(Activation, PReLUHasALearnableWeight) {
  PReLU shared;
  EXPECT_EQ(shared->weight.shape(), Shape{1});
  EXPECT_EQ(values(shared->weight), std::vector<double>{0.25});
  PReLU per_channel(3, 0.1);
  EXPECT_EQ(keys(per_channel->state_dict()), std::vector<std::string>{"weight"});
  ASSERT_EQ(per_channel->parameters().size(), 1u);
  EXPECT_TRUE(per_channel->weight.requires_grad());
  expect_close(values(per_channel->weight), {0.1, 0.1, 0.1}, 1e-7);  // float32
  // (N=2, C=3, L=2): negative entries scaled by their channel's weight.
  per_channel->to(kFloat64);
  assign(per_channel->weight, {0.1, 0.2, 0.3});
  const std::vector<double> v = sample({2, 3, 2}, 7);
  std::vector<double> expected;
  for (std::size_t i = 0; i < v.size(); ++i) expected.push_back(v[i] > 0 ? v[i] : (0.1 * ((i / 2) % 3 + 1)) * v[i]);
  const Tensor x = make({2, 3, 2}, v).requires_grad_();
  expect_all_near(per_channel(x), {2, 3, 2}, expected, 1e-12);
  expect_gradcheck([&](const TensorList&) { return TensorList{per_channel(x)}; }, {x, per_channel->weight});
  // The weight learns: d sum(prelu(x)) / d weight[c] = sum of channel c's negative entries.
  per_channel->zero_grad();
  sum(per_channel(x)).backward();
  std::vector<double> negatives(3, 0.0);
  for (std::size_t i = 0; i < v.size(); ++i)
    if (v[i] <= 0) negatives[(i / 2) % 3] += v[i];
  expect_close(values(per_channel->weight.grad()), negatives, 1e-12);
  // clone copies the trained weight; reset_parameters fills init again.
  auto copy = std::dynamic_pointer_cast<PReLUImpl>(per_channel->clone());
  ASSERT_TRUE(copy);
  expect_close(values(copy->weight), {0.1, 0.2, 0.3}, 1e-15);
  copy->reset_parameters();
  expect_close(values(copy->weight), {0.1, 0.1, 0.1}, 1e-7);
  expect_close(values(per_channel->weight), {0.1, 0.2, 0.3}, 1e-15);
}

TEST(Activation, SoftmaxAndLogSoftmaxAlongTheirDim) {
  const Tensor x = tensor(kGrid, {2, 4});
  for (std::int64_t dim : {0, 1, -1}) {
    const std::int64_t d = dim < 0 ? dim + 2 : dim;
    std::vector<double> expected(8), expected_log(8);
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 4; ++j) {
        double z = 0;
        for (int k = 0; k < (d == 0 ? 2 : 4); ++k) z += std::exp(d == 0 ? kGrid[k * 4 + j] : kGrid[i * 4 + k]);
        expected[i * 4 + j] = std::exp(kGrid[i * 4 + j]) / z;
        expected_log[i * 4 + j] = kGrid[i * 4 + j] - std::log(z);
      }
    expect_close(values(Softmax(dim)(x)), expected, 1e-12, "Softmax");
    expect_close(values(LogSoftmax(dim)(x)), expected_log, 1e-12, "LogSoftmax");
  }
  const Tensor leaf = x.detach().requires_grad_();
  Softmax sm(1);
  expect_gradcheck([&](const TensorList&) { return TensorList{sm(leaf)}; }, {leaf});
  LogSoftmax lsm(0);
  expect_gradcheck([&](const TensorList&) { return TensorList{lsm(leaf)}; }, {leaf});
}

TEST(Activation, PrintingAndClone) {
  EXPECT_EQ(ReLU()->str(), "ReLU()");
  EXPECT_EQ(GELU("tanh")->str(), "GELU(approximate='tanh')");
  EXPECT_EQ(GELU()->str(), "GELU(approximate='none')");
  EXPECT_EQ(Softmax(1)->str(), "Softmax(dim=1)");
  EXPECT_EQ(LogSoftmax(-1)->str(), "LogSoftmax(dim=-1)");
  EXPECT_EQ(LeakyReLU()->str(), "LeakyReLU(negative_slope=0.01)");
  EXPECT_EQ(Sigmoid()->str(), "Sigmoid()");
  EXPECT_EQ(ReLU6()->str(), "ReLU6()");
  EXPECT_EQ(Mish()->str(), "Mish()");
  EXPECT_EQ(Hardtanh(-2, 0.5)->str(), "Hardtanh(min_val=-2, max_val=0.5)");
  EXPECT_EQ(CELU(0.5)->str(), "CELU(alpha=0.5)");
  EXPECT_EQ(GLU()->str(), "GLU(dim=-1)");
  EXPECT_EQ(PReLU(4)->str(), "PReLU(num_parameters=4)");
  auto hardtanh_copy = std::dynamic_pointer_cast<HardtanhImpl>(Hardtanh(-2, 0.5)->clone());
  ASSERT_TRUE(hardtanh_copy);
  EXPECT_EQ(hardtanh_copy->min_val, -2);
  EXPECT_EQ(hardtanh_copy->max_val, 0.5);
  EXPECT_TRUE(std::dynamic_pointer_cast<HardswishImpl>(Hardswish()->clone()));
  GELU g("tanh");
  auto copy = std::dynamic_pointer_cast<GELUImpl>(g->clone());
  ASSERT_TRUE(copy);
  EXPECT_EQ(copy->approximate, GeluApproximation::Tanh);
  EXPECT_TRUE(std::dynamic_pointer_cast<TanhImpl>(Tanh()->clone()));
  Sequential net(Linear(3, 4), ReLU(), Linear(4, 2), Softmax(-1));
  EXPECT_EQ(net(zeros({5, 3})).shape(), (Shape{5, 2}));
}

TEST(Activation, Errors) {
  expect_error([] { GELU("exact"); }, "GELU", "\"none\" or \"tanh\", got \"exact\"");
  expect_error([] { LeakyReLU{INFINITY}; }, "LeakyReLU", "finite");
  Softmax sm(2);
  expect_error<IndexError>([&] { sm(zeros({2, 3})); }, "Softmax");
  expect_error<DTypeError>([] { LogSoftmax(0)(zeros({3}, {.dtype = kInt64})); }, "LogSoftmax");
  expect_error([] { Hardtanh(1, 1); }, "Hardtanh", "min_val (1) must be less than max_val (1)");
  expect_error([] { CELU(0); }, "CELU", "nonzero");
  expect_error([] { PReLU(0); }, "PReLU", "num_parameters must be >= 1, got 0");
  expect_error<ShapeError>([] { PReLU(3)(zeros({2, 4})); }, "PReLU", "3 elements does not match the 4 channels");
  expect_error<ShapeError>([] { GLU()(zeros({2, 3})); }, "GLU", "must be even");
  expect_error<DTypeError>([] { Mish()(zeros({3}, {.dtype = kInt64})); }, "Mish", "int64");
}

}  // namespace
}  // namespace infini::nn::test::activation_test
