// Activation layers against their formulas in float64, gradients, printing, clone and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <numbers>
#include <vector>

#include "layer_test_util.h"

import infini.nn;

namespace infini::nn::test {
namespace {

const std::vector<double> kGrid = {-3, -1.5, -0.5, -0.1, 0.2, 0.7, 1.3, 4};

// module(kGrid) against f applied elementwise, and gradcheck through the module.
template <class M>
void expect_elementwise(M module, const std::function<double(double)>& f, const char* what) {
  const Tensor x = tensor(kGrid, {2, 4});
  std::vector<double> expected;
  for (double v : kGrid) expected.push_back(f(v));
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
}

}  // namespace
}  // namespace infini::nn::test
