// LayerNorm, RMSNorm and GroupNorm: forward against naive float64 loops with non-trivial
// affine parameters, parameters and their init, gradients, clone, results in another dtype
// and errors.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "layer_test_util.h"

import infini.nn;

namespace infini::nn::test::normalization_test {
namespace {

// Normalises each consecutive block of `size` values to zero mean and unit (biased) variance.
std::vector<double> normalize_blocks(const std::vector<double>& x, std::size_t size, double eps) {
  std::vector<double> y(x.size());
  for (std::size_t start = 0; start < x.size(); start += size) {
    double mean = 0, var = 0;
    for (std::size_t k = 0; k < size; ++k) mean += x[start + k];
    mean /= static_cast<double>(size);
    for (std::size_t k = 0; k < size; ++k) var += (x[start + k] - mean) * (x[start + k] - mean);
    var /= static_cast<double>(size);
    for (std::size_t k = 0; k < size; ++k) y[start + k] = (x[start + k] - mean) / std::sqrt(var + eps);
  }
  return y;
}

// y[i] = y[i] * w[a] + b[a] with a = affine_index(i).
template <class AffineIndex>
std::vector<double> affine(std::vector<double> y, const std::vector<double>& w, const std::vector<double>& b,
                           AffineIndex affine_index) {
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = y[i] * w[affine_index(i)] + b[affine_index(i)];
  return y;
}

TEST(LayerNorm, ForwardMatchesNaiveLoops) {
  LayerNorm ln({2, 3}, {.eps = 1e-3});
  ln->to(kFloat64);
  assign(ln->weight, {1, 2, 3, 0.5, -1, 0});
  assign(ln->bias, {0.1, 0.2, 0.3, 0.4, 0.5, 0.6});
  const Tensor x = random_input({4, 2, 3}, 1, false);
  const auto expected = affine(normalize_blocks(values(x), 6, 1e-3), values(ln->weight), values(ln->bias),
                               [](std::size_t i) { return i % 6; });
  expect_close(values(ln(x)), expected, 1e-12);
  LayerNorm plain(3, LayerNormOptions{.elementwise_affine = false});
  const Tensor x32 = tensor({1, 2, 4, -1, 0, 1}, {2, 3}, kFloat32);
  expect_close(values(plain(x32)), normalize_blocks(values(x32), 3, 1e-5), 1e-6);
}

TEST(LayerNorm, ParametersInitAndOptions) {
  LayerNorm ln(8);
  EXPECT_EQ(names(ln->named_parameters()), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(values(ln->weight), std::vector<double>(8, 1.0));
  EXPECT_EQ(values(ln->bias), std::vector<double>(8, 0.0));
  EXPECT_EQ(ln->normalized_shape, Shape{8});
  EXPECT_EQ(ln->str(), "LayerNorm([8], eps=1e-05, elementwise_affine=true)");
  LayerNorm no_bias(8, {.bias = false});
  EXPECT_EQ(names(no_bias->named_parameters()), std::vector<std::string>{"weight"});
  EXPECT_FALSE(no_bias->bias.defined());
  LayerNorm none(8, LayerNormOptions{.elementwise_affine = false});
  EXPECT_TRUE(none->parameters().empty());
  EXPECT_TRUE(none->state_dict().empty());
}

TEST(LayerNorm, GradientsAndClone) {
  LayerNorm ln(Shape{3});
  ln->to(kFloat64);
  assign(ln->weight, {0.5, 1.5, -2});
  const Tensor x = random_input({2, 3}, 2);
  expect_gradcheck([&](const TensorList&) { return TensorList{ln(x)}; }, {x, ln->weight, ln->bias});
  auto copy = std::dynamic_pointer_cast<LayerNormImpl>(ln->clone());
  ASSERT_TRUE(copy);
  EXPECT_EQ(values(copy->weight), (std::vector<double>{0.5, 1.5, -2}));
  expect_close(values((*copy)(x)), values(ln(x)), 0);
}

TEST(LayerNorm, ForwardInAnotherDtypeGivesTheCastsBits) {
  LayerNorm ln(Shape{3, 4});
  assign(ln->weight, {0.5, 1.5, -2, 1, 0.25, 3, 1, 1, -1, 2, 0.75, 1});
  const Tensor x = random_input({5, 3, 4}, 3).to(kFloat32);
  for (const DataType dtype : {kBFloat16, kFloat16, kFloat64}) {
    const Tensor y = ln->forward(x, dtype);
    EXPECT_EQ(y.dtype(), dtype);
    EXPECT_EQ(y.shape(), x.shape());
    expect_close(values(y), values(ln(x).to(dtype)), 0);
  }
  expect_error<DTypeError>([&] { ln->forward(x, kInt64); }, "LayerNorm", "out_dtype");
}

TEST(LayerNorm, Errors) {
  expect_error<ShapeError>([] { LayerNorm(Shape{}); }, "LayerNorm", "non-empty");
  expect_error<ShapeError>([] { LayerNorm(-4); }, "LayerNorm", "[-4]");
  expect_error([] { LayerNorm(4, LayerNormOptions{.eps = -1}); }, "LayerNorm", "eps");
  LayerNorm ln(Shape{2, 3});
  expect_error<ShapeError>([&] { ln(zeros({4, 3, 2})); }, "LayerNorm", "[4, 3, 2]");
  expect_error<DTypeError>([&] { ln(zeros({2, 3}, {.dtype = kInt64})); }, "LayerNorm");
}

TEST(RMSNorm, ForwardMatchesNaiveLoopsWithDefaultAndGivenEps) {
  RMSNorm rms(4, {.eps = 1e-2});
  rms->to(kFloat64);
  assign(rms->weight, {1, 2, -1, 0.5});
  const Tensor x = random_input({3, 4}, 3, false);
  const std::vector<double> xv = values(x), w = values(rms->weight);
  const auto reference = [&](const std::vector<double>& v, double eps, bool affine) {
    std::vector<double> y(v.size());
    for (std::size_t r = 0; r < v.size() / 4; ++r) {
      double ms = 0;
      for (int k = 0; k < 4; ++k) ms += v[r * 4 + k] * v[r * 4 + k];
      const double scale = 1 / std::sqrt(ms / 4 + eps);
      for (int k = 0; k < 4; ++k) y[r * 4 + k] = v[r * 4 + k] * scale * (affine ? w[k] : 1.0);
    }
    return y;
  };
  expect_close(values(rms(x)), reference(xv, 1e-2, true), 1e-12);
  // eps unset: the input dtype's machine epsilon, which dominates for tiny inputs.
  RMSNorm plain(4, RMSNormOptions{.elementwise_affine = false});
  const Tensor tiny = tensor({1e-4, -2e-4, 3e-4, 0}, {1, 4}, kFloat32);
  expect_close(values(plain(tiny)), reference(values(tiny), FLT_EPSILON, false), 1e-5);
  const Tensor tiny64 = tiny.to(kFloat64);
  expect_close(values(plain(tiny64)), reference(values(tiny64), DBL_EPSILON, false), 1e-12);
  EXPECT_EQ(plain->str(), "RMSNorm([4], eps=None, elementwise_affine=false)");
}

TEST(RMSNorm, ParametersGradientsAndErrors) {
  RMSNorm rms(Shape{2, 2});
  EXPECT_EQ(names(rms->named_parameters()), std::vector<std::string>{"weight"});
  EXPECT_EQ(values(rms->weight), std::vector<double>(4, 1.0));
  rms->to(kFloat64);
  const Tensor x = random_input({3, 2, 2}, 4);
  expect_gradcheck([&](const TensorList&) { return TensorList{rms(x)}; }, {x, rms->weight});
  expect_error<ShapeError>([&] { rms(zeros({2, 3}, {.dtype = kFloat64})); }, "RMSNorm", "[2, 3]");
  expect_error([] { RMSNorm(2, RMSNormOptions{.eps = NAN}); }, "RMSNorm", "eps");
}

TEST(GroupNorm, ForwardMatchesNaiveLoops) {
  GroupNorm gn(2, 4, {.eps = 1e-4});
  gn->to(kFloat64);
  assign(gn->weight, {1, -1, 2, 0.5});
  assign(gn->bias, {0, 1, 2, 3});
  const Tensor x = random_input({3, 4, 5}, 5, false);
  // A group is 2 channels x 5 positions: 10 consecutive values; element i is in channel (i / 5) % 4.
  const auto expected = affine(normalize_blocks(values(x), 10, 1e-4), values(gn->weight), values(gn->bias),
                               [](std::size_t i) { return (i / 5) % 4; });
  expect_close(values(gn(x)), expected, 1e-12);
}

TEST(GroupNorm, ParametersGradientsCloneAndErrors) {
  GroupNorm gn(3, 6);
  EXPECT_EQ(names(gn->named_parameters()), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(values(gn->weight), std::vector<double>(6, 1.0));
  EXPECT_EQ(values(gn->bias), std::vector<double>(6, 0.0));
  EXPECT_EQ(gn->str(), "GroupNorm(3, 6, eps=1e-05, affine=true)");
  EXPECT_TRUE(GroupNorm(3, 6, GroupNormOptions{.affine = false})->parameters().empty());
  gn->to(kFloat64);
  const Tensor x = random_input({2, 6, 2, 2}, 6);
  expect_gradcheck([&](const TensorList&) { return TensorList{gn(x)}; }, {x, gn->weight, gn->bias});
  auto copy = std::dynamic_pointer_cast<GroupNormImpl>(gn->clone());
  ASSERT_TRUE(copy);
  EXPECT_EQ(copy->num_groups, 3);
  expect_close(values((*copy)(x)), values(gn(x)), 0);

  expect_error<ShapeError>([] { GroupNorm(3, 4); }, "GroupNorm", "divisible by num_groups");
  expect_error<ShapeError>([] { GroupNorm(0, 4); }, "GroupNorm", "num_groups (0");
  expect_error<ShapeError>([&] { gn(zeros({2, 4, 3}, {.dtype = kFloat64})); }, "GroupNorm", "(N, 6, *), got [2, 4, 3]");
  expect_error<ShapeError>([&] { gn(zeros({6}, {.dtype = kFloat64})); }, "GroupNorm", "got [6]");
}

}  // namespace
}  // namespace infini::nn::test::normalization_test
