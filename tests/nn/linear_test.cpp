// Linear and Bilinear: forward against naive float64 loops, parameters and their default
// initialisation, gradients, hooks, state dicts, clone and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "layer_test_util.h"

import infini.nn;

namespace infini::nn::test::linear_test {
namespace {

TEST(Linear, ForwardMatchesNaiveLoops) {
  Linear fc(4, 3);
  fc->to(kFloat64);
  const Tensor x = random_input({2, 5, 4}, 1, false);
  const std::vector<double> xv = values(x), w = values(fc->weight), b = values(fc->bias);
  std::vector<double> expected;
  for (int n = 0; n < 10; ++n)
    for (int o = 0; o < 3; ++o) {
      double s = b[o];
      for (int i = 0; i < 4; ++i) s += xv[n * 4 + i] * w[o * 4 + i];
      expected.push_back(s);
    }
  const Tensor y = fc(x);
  EXPECT_EQ(y.shape(), (Shape{2, 5, 3}));
  expect_close(values(y), expected, 1e-12);
  // float32 layer, float32 input.
  Linear f32(4, 3, false);
  assign(f32->weight, {1, 0, 0, 0, 0, 1, 0, 0, 1, 1, 1, 1});
  expect_close(values(f32(tensor({1, 2, 3, 4}, {4}, kFloat32))), {1, 2, 10}, 1e-6);
}

TEST(Linear, ParametersAndDefaultInit) {
  Linear fc(100, 50);
  EXPECT_EQ(names(fc->named_parameters()), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(fc->weight.shape(), (Shape{50, 100}));
  EXPECT_EQ(fc->bias.shape(), (Shape{50}));
  EXPECT_TRUE(fc->weight.requires_grad());
  EXPECT_EQ(fc->weight.dtype(), kFloat32);
  // weight, bias ~ U(-1/sqrt(in), 1/sqrt(in))
  const double bound = 1 / std::sqrt(100.0);
  const std::vector<double> w = values(fc->weight), b = values(fc->bias);
  EXPECT_LE(max_abs(w), bound * (1 + 1e-6));
  EXPECT_GT(max_abs(w), 0.98 * bound);
  EXPECT_NEAR(std_of(w), bound / std::sqrt(3.0), 0.03 * bound);
  EXPECT_LE(max_abs(b), bound * (1 + 1e-6));
  EXPECT_EQ(keys(fc->state_dict()), (std::vector<std::string>{"bias", "weight"}));

  Linear no_bias(3, 2, false);
  EXPECT_FALSE(no_bias->bias.defined());
  EXPECT_EQ(names(no_bias->named_parameters()), std::vector<std::string>{"weight"});
  EXPECT_EQ(no_bias->str(), "Linear(in_features=3, out_features=2, bias=false)");
  EXPECT_EQ(fc->str(), "Linear(in_features=100, out_features=50, bias=true)");
}

TEST(Linear, ResetParametersWithAGeneratorRepeats) {
  Linear a(8, 4), b(8, 4);
  Generator g1(3), g2(3);
  a->reset_parameters(&g1);
  b->reset_parameters(&g2);
  EXPECT_EQ(values(a->weight), values(b->weight));
  EXPECT_EQ(values(a->bias), values(b->bias));
}

TEST(Linear, GradientsOfInputWeightAndBias) {
  Linear fc(3, 2);
  fc->to(kFloat64);
  const Tensor x = random_input({4, 3}, 2);
  expect_gradcheck([&](const TensorList&) { return TensorList{fc(x)}; }, {x, fc->weight, fc->bias});
  // d sum(y) / d bias = number of rows.
  sum(fc(x)).backward();
  EXPECT_EQ(values(fc->bias.grad()), (std::vector<double>{4, 4}));
}

TEST(Linear, CloneIsDeepAndKeepsOptions) {
  Linear fc(3, 2, false);
  fc->eval();
  auto copy = std::dynamic_pointer_cast<LinearImpl>(fc->clone());
  ASSERT_TRUE(copy);
  EXPECT_EQ(copy->in_features, 3);
  EXPECT_FALSE(copy->bias.defined());
  EXPECT_FALSE(copy->is_training());
  EXPECT_EQ(values(copy->weight), values(fc->weight));
  EXPECT_NE(copy->weight.data_ptr(), fc->weight.data_ptr());
}

TEST(Linear, Errors) {
  expect_error<ShapeError>([] { Linear(-1, 3); }, "Linear", "in_features must be >= 0, got -1");
  expect_error<ShapeError>([] { Linear(2, -3); }, "Linear", "out_features");
  Linear fc(4, 3);
  expect_error<ShapeError>([&] { fc(zeros({2, 5})); }, "Linear", "(*, 4), got [2, 5]");
  expect_error<ShapeError>([&] { fc(zeros({})); }, "Linear", "(*, 4)");
  expect_error<DTypeError>([&] { fc(zeros({2, 4}, {.dtype = kFloat64})); }, "Linear");
}

// y[n, o] = sum_ij x1[n, i] W[o, i, j] x2[n, j] + b[o]
std::vector<double> bilinear_reference(const std::vector<double>& x1, const std::vector<double>& x2,
                                       const std::vector<double>& w, const std::vector<double>& b, int n, int in1,
                                       int in2, int out) {
  std::vector<double> y;
  for (int r = 0; r < n; ++r)
    for (int o = 0; o < out; ++o) {
      double s = b.empty() ? 0 : b[o];
      for (int i = 0; i < in1; ++i)
        for (int j = 0; j < in2; ++j) s += x1[r * in1 + i] * w[(o * in1 + i) * in2 + j] * x2[r * in2 + j];
      y.push_back(s);
    }
  return y;
}

TEST(Bilinear, ForwardMatchesNaiveLoops) {
  Bilinear bl(3, 4, 2);
  bl->to(kFloat64);
  const Tensor x1 = random_input({2, 3, 3}, 3, false), x2 = random_input({2, 3, 4}, 4, false);
  const Tensor y = bl(x1, x2);
  EXPECT_EQ(y.shape(), (Shape{2, 3, 2}));
  expect_close(values(y), bilinear_reference(values(x1), values(x2), values(bl->weight), values(bl->bias), 6, 3, 4, 2),
               1e-12);
  Bilinear no_bias(2, 2, 1, false);
  no_bias->to(kFloat64);
  const Tensor a = random_input({5, 2}, 5, false), b = random_input({5, 2}, 6, false);
  expect_close(values(no_bias(a, b)), bilinear_reference(values(a), values(b), values(no_bias->weight), {}, 5, 2, 2, 1),
               1e-12);
}

TEST(Bilinear, ParametersAndDefaultInit) {
  Bilinear bl(25, 7, 40);
  EXPECT_EQ(names(bl->named_parameters()), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(bl->weight.shape(), (Shape{40, 25, 7}));
  EXPECT_EQ(bl->bias.shape(), (Shape{40}));
  const double bound = 1 / std::sqrt(25.0);  // 1/sqrt(in1_features)
  const std::vector<double> w = values(bl->weight);
  EXPECT_LE(max_abs(w), bound * (1 + 1e-6));
  EXPECT_GT(max_abs(w), 0.98 * bound);
  EXPECT_LE(max_abs(values(bl->bias)), bound * (1 + 1e-6));
  EXPECT_EQ(bl->str(), "Bilinear(in1_features=25, in2_features=7, out_features=40, bias=true)");
}

TEST(Bilinear, GradientsAndHooksSeeBothInputs) {
  Bilinear bl(2, 3, 2);
  bl->to(kFloat64);
  const Tensor x1 = random_input({3, 2}, 7), x2 = random_input({3, 3}, 8);
  expect_gradcheck([&](const TensorList&) { return TensorList{bl(x1, x2)}; }, {x1, x2, bl->weight, bl->bias});
  std::size_t seen = 0;
  bl->register_forward_pre_hook([&](Module&, const TensorList& in) { seen = in.size(); });
  bl(x1, x2);
  EXPECT_EQ(seen, 2u);
  auto copy = std::dynamic_pointer_cast<BilinearImpl>(bl->clone());
  expect_close(values((*copy)(x1, x2)), values(bl(x1, x2)), 0);
}

TEST(Bilinear, Errors) {
  expect_error<ShapeError>([] { Bilinear(2, -1, 3); }, "Bilinear", "in2_features");
  Bilinear bl(2, 3, 4);
  expect_error<ShapeError>([&] { bl(zeros({5, 2}), zeros({5, 2})); }, "Bilinear", "input2 of shape (*, 3)");
  expect_error<ShapeError>([&] { bl(zeros({5, 2}), zeros({4, 3})); }, "Bilinear", "same leading dims");
  expect_error([&] { bl->forward(zeros({5, 2})); }, "Bilinear.forward", "single tensor");
}

}  // namespace
}  // namespace infini::nn::test::linear_test
