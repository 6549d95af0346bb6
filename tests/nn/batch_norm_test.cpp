// BatchNorm1d/2d/3d: batch statistics in training, running statistics (hand-computed after
// two steps) in evaluation, the cumulative average, state dict names and dtypes, gradients,
// clone and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "layer_test_util.h"

import infini.nn;

namespace infini::nn::test::batch_norm_test {
namespace {

// Per-channel mean and biased variance of x (N, C, L), row-major.
struct ChannelStats {
  std::vector<double> mean, var;
};
ChannelStats channel_stats(const std::vector<double>& x, int n, int c, int l) {
  ChannelStats s{std::vector<double>(c, 0.0), std::vector<double>(c, 0.0)};
  for (int ch = 0; ch < c; ++ch) {
    for (int b = 0; b < n; ++b)
      for (int p = 0; p < l; ++p) s.mean[ch] += x[(b * c + ch) * l + p];
    s.mean[ch] /= n * l;
    for (int b = 0; b < n; ++b)
      for (int p = 0; p < l; ++p) s.var[ch] += std::pow(x[(b * c + ch) * l + p] - s.mean[ch], 2);
    s.var[ch] /= n * l;
  }
  return s;
}

// (x - mean[c]) / sqrt(var[c] + eps) * w[c] + b[c] for x (N, C, L).
std::vector<double> normalize(const std::vector<double>& x, int n, int c, int l, const std::vector<double>& mean,
                              const std::vector<double>& var, const std::vector<double>& w,
                              const std::vector<double>& b, double eps) {
  std::vector<double> y(x.size());
  for (int bt = 0; bt < n; ++bt)
    for (int ch = 0; ch < c; ++ch)
      for (int p = 0; p < l; ++p) {
        const int i = (bt * c + ch) * l + p;
        y[i] = (x[i] - mean[ch]) / std::sqrt(var[ch] + eps) * w[ch] + b[ch];
      }
  return y;
}

TEST(BatchNorm, RunningStatsAfterTwoStepsByHand) {
  BatchNorm1d bn(1);
  bn(tensor({1, 3}, {2, 1}, kFloat32));  // mean 2, unbiased var 2
  bn(tensor({2, 6}, {2, 1}, kFloat32));  // mean 4, unbiased var 8
  // running_mean = 0.9 * (0.9 * 0 + 0.1 * 2) + 0.1 * 4; running_var = 0.9 * (0.9 * 1 + 0.1 * 2) + 0.1 * 8
  expect_close(values(bn->running_mean), {0.58}, 1e-6);
  expect_close(values(bn->running_var), {1.79}, 1e-6);
  EXPECT_EQ(bn->num_batches_tracked.item<std::int64_t>(), 2);
  bn->eval();
  expect_close(values(bn(tensor({0.58, 2}, {2, 1}, kFloat32))), {0.0, (2 - 0.58) / std::sqrt(1.79 + 1e-5)}, 1e-6);
  EXPECT_EQ(bn->num_batches_tracked.item<std::int64_t>(), 2);  // evaluation does not count
}

TEST(BatchNorm, TrainingUsesBatchStatsAndEvalRunningStats) {
  BatchNorm1d bn(3, {.eps = 1e-3, .momentum = 0.3});
  bn->to(kFloat64);
  assign(bn->weight, {1, 2, -0.5});
  assign(bn->bias, {0, 1, 2});
  const std::vector<double> w = values(bn->weight), b = values(bn->bias);
  std::vector<double> rm(3, 0.0), rv(3, 1.0);
  for (std::uint64_t step = 0; step < 2; ++step) {
    const Tensor x = random_input({4, 3, 5}, 10 + step, false);
    const ChannelStats s = channel_stats(values(x), 4, 3, 5);
    expect_close(values(bn(x)), normalize(values(x), 4, 3, 5, s.mean, s.var, w, b, 1e-3), 1e-12, "training");
    for (int c = 0; c < 3; ++c) {
      rm[c] = 0.7 * rm[c] + 0.3 * s.mean[c];
      rv[c] = 0.7 * rv[c] + 0.3 * s.var[c] * 20.0 / 19.0;  // unbiased: 20 values per channel
    }
  }
  expect_close(values(bn->running_mean), rm, 1e-12);
  expect_close(values(bn->running_var), rv, 1e-12);
  bn->eval();
  const Tensor x = random_input({2, 3}, 12, false);  // (N, C) input
  expect_close(values(bn(x)), normalize(values(x), 2, 3, 1, rm, rv, w, b, 1e-3), 1e-12, "eval");
}

TEST(BatchNorm, UnsetMomentumAveragesAllBatches) {
  BatchNorm2d bn(2, {.momentum = std::nullopt});
  bn->to(kFloat64);
  std::vector<double> sum_mean(2, 0.0), sum_var(2, 0.0);
  for (std::uint64_t step = 0; step < 3; ++step) {
    const Tensor x = random_input({2, 2, 3, 3}, 20 + step, false);
    const ChannelStats s = channel_stats(values(x), 2, 2, 9);
    for (int c = 0; c < 2; ++c) {
      sum_mean[c] += s.mean[c];
      sum_var[c] += s.var[c] * 18.0 / 17.0;
    }
    bn(x);
  }
  expect_close(values(bn->running_mean), {sum_mean[0] / 3, sum_mean[1] / 3}, 1e-12);
  expect_close(values(bn->running_var), {sum_var[0] / 3, sum_var[1] / 3}, 1e-12);
  EXPECT_EQ(bn->str(), "BatchNorm2d(2, eps=1e-05, momentum=None, affine=true, track_running_stats=true)");
}

TEST(BatchNorm, WithoutRunningStatsEvalUsesTheBatch) {
  BatchNorm1d bn(2, BatchNormOptions{.affine = false, .track_running_stats = false});
  EXPECT_TRUE(bn->parameters().empty());
  EXPECT_TRUE(bn->state_dict().empty());
  EXPECT_FALSE(bn->running_mean.defined());
  bn->eval();
  const Tensor x = random_input({5, 2}, 30, false);
  const ChannelStats s = channel_stats(values(x), 5, 2, 1);
  expect_close(values(bn(x)), normalize(values(x), 5, 2, 1, s.mean, s.var, {1, 1}, {0, 0}, 1e-5), 1e-6);
}

TEST(BatchNorm, StateDictNamesInitAndDTypes) {
  BatchNorm2d bn(4);
  EXPECT_EQ(keys(bn->state_dict()),
            (std::vector<std::string>{"bias", "num_batches_tracked", "running_mean", "running_var", "weight"}));
  EXPECT_EQ(names(bn->named_parameters()), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(names(bn->named_buffers()), (std::vector<std::string>{"running_mean", "running_var", "num_batches_tracked"}));
  EXPECT_EQ(values(bn->weight), std::vector<double>(4, 1.0));
  EXPECT_EQ(values(bn->bias), std::vector<double>(4, 0.0));
  EXPECT_EQ(values(bn->running_mean), std::vector<double>(4, 0.0));
  EXPECT_EQ(values(bn->running_var), std::vector<double>(4, 1.0));
  EXPECT_EQ(bn->num_batches_tracked.dtype(), kInt64);
  EXPECT_EQ(bn->num_batches_tracked.dim(), 0);
  bn->to(kFloat64);
  EXPECT_EQ(bn->running_var.dtype(), kFloat64);
  EXPECT_EQ(bn->num_batches_tracked.dtype(), kInt64);
  EXPECT_EQ(bn->str(), "BatchNorm2d(4, eps=1e-05, momentum=0.1, affine=true, track_running_stats=true)");
  // Round trip through the state dict, counter included.
  bn(random_input({2, 4, 2, 2}, 40, false));
  BatchNorm2d other(4);
  other->to(kFloat64);
  other->load_state_dict(bn->state_dict());
  EXPECT_EQ(values(other->running_mean), values(bn->running_mean));
  EXPECT_EQ(other->num_batches_tracked.item<std::int64_t>(), 1);
  bn->reset_running_stats();
  EXPECT_EQ(values(bn->running_mean), std::vector<double>(4, 0.0));
  EXPECT_EQ(bn->num_batches_tracked.item<std::int64_t>(), 0);
}

TEST(BatchNorm, GradientsAndClone) {
  BatchNorm3d bn(2);
  bn->to(kFloat64);
  assign(bn->weight, {1.5, -1});
  const Tensor x = random_input({2, 2, 2, 1, 2}, 50);
  expect_gradcheck([&](const TensorList&) { return TensorList{bn(x)}; }, {x, bn->weight, bn->bias});
  auto copy = std::dynamic_pointer_cast<BatchNorm3dImpl>(bn->clone());
  ASSERT_TRUE(copy);
  EXPECT_EQ(values(copy->running_mean), values(bn->running_mean));
  EXPECT_EQ(copy->num_batches_tracked.item<std::int64_t>(), bn->num_batches_tracked.item<std::int64_t>());
  EXPECT_NE(copy->running_mean.data_ptr(), bn->running_mean.data_ptr());
  copy->eval();
  bn->eval();
  expect_close(values((*copy)(x)), values(bn(x)), 0);
}

TEST(BatchNorm, Errors) {
  expect_error<ShapeError>([] { BatchNorm1d(-1); }, "BatchNorm1d", "num_features");
  expect_error([] { BatchNorm1d(2, BatchNormOptions{.momentum = 1.5}); }, "BatchNorm1d", "momentum");
  expect_error([] { BatchNorm2d(2, BatchNormOptions{.eps = -1}); }, "BatchNorm2d", "eps");
  BatchNorm1d bn1(3);
  BatchNorm2d bn2(3);
  expect_error<ShapeError>([&] { bn1(zeros({2, 3, 4, 5})); }, "BatchNorm1d", "(N, C) or (N, C, L), got [2, 3, 4, 5]");
  expect_error<ShapeError>([&] { bn2(zeros({2, 3, 4})); }, "BatchNorm2d", "(N, C, H, W)");
  expect_error<ShapeError>([&] { bn1(zeros({2, 4})); }, "BatchNorm1d", "4 channels, expected 3");
  // One value per channel cannot give a batch variance; nothing is counted.
  expect_error([&] { bn1(zeros({1, 3})); }, "BatchNorm1d", "more than 1 value per channel");
  EXPECT_EQ(bn1->num_batches_tracked.item<std::int64_t>(), 0);
}

}  // namespace
}  // namespace infini::nn::test::batch_norm_test
