// Loss modules against naive float64 references: cross entropy (class weights,
// ignore_index, label smoothing, probabilities, spatial dims), NLL, MSE, L1, smooth L1, Huber,
// KL divergence, BCE and BCE with logits (weight, pos_weight); reductions (BatchMean: KLDivLoss
// only), buffers in the state dict, gradients, hooks, errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "layer_test_util.h"

import infini.nn;

namespace infini::nn::test::loss_test {
namespace {

Tensor targets(const std::vector<std::int64_t>& v, const Shape& shape) { return from_vector(v, shape); }

double reduce(const std::vector<double>& per_element, Reduction r, double denominator) {
  double s = 0;
  for (double x : per_element) s += x;
  return r == Reduction::Sum ? s : s / denominator;
}

// Cross entropy of logits x (N, C, D) row-major against class indices t (N, D): per-position
// losses (0 where ignored) and the mean's denominator (the sum of the targets' weights).
struct Losses {
  std::vector<double> per_position;
  double denominator = 0;
};
Losses cross_entropy_reference(const std::vector<double>& x, const std::vector<std::int64_t>& t, int n, int c, int d,
                               const std::vector<double>& w, std::int64_t ignore_index, double smoothing,
                               bool inputs_are_log_probs = false) {
  Losses out;
  for (int b = 0; b < n; ++b)
    for (int p = 0; p < d; ++p) {
      const std::int64_t target = t[b * d + p];
      if (target == ignore_index) {
        out.per_position.push_back(0);
        continue;
      }
      double z = 0;
      for (int k = 0; k < c; ++k) z += std::exp(x[(b * c + k) * d + p]);
      const auto logp = [&](int k) { return inputs_are_log_probs ? x[(b * c + k) * d + p] : x[(b * c + k) * d + p] - std::log(z); };
      const auto weight = [&](std::int64_t k) { return w.empty() ? 1.0 : w[k]; };
      double smooth = 0;
      for (int k = 0; k < c; ++k) smooth -= weight(k) * logp(k);
      out.per_position.push_back((1 - smoothing) * -weight(target) * logp(static_cast<int>(target)) +
                                 smoothing / c * smooth);
      out.denominator += weight(target);
    }
  return out;
}

TEST(CrossEntropyLoss, ClassIndicesWithWeightsIgnoreIndexAndSmoothing) {
  const Tensor x = random_input({5, 4}, 1, false);
  const std::vector<std::int64_t> t = {3, 0, -100, 2, 0};
  const std::vector<double> w = {0.5, 1, 2, 3};
  for (double smoothing : {0.0, 0.2})
    for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
      CrossEntropyLoss loss(CrossEntropyOptions{.weight = tensor(w, {4}), .reduction = r, .label_smoothing = smoothing});
      const Losses ref = cross_entropy_reference(values(x), t, 5, 4, 1, w, -100, smoothing);
      const Tensor y = loss(x, targets(t, {5}));
      if (r == Reduction::None) expect_close(values(y), ref.per_position, 1e-12);
      else expect_close(values(y), {reduce(ref.per_position, r, ref.denominator)}, 1e-12);
    }
  // Defaults: unweighted mean over all positions, ignore_index -100.
  CrossEntropyLoss plain;
  const Losses ref = cross_entropy_reference(values(x), t, 5, 4, 1, {}, -100, 0);
  expect_close(values(plain(x, targets(t, {5}))), {reduce(ref.per_position, Reduction::Mean, 4)}, 1e-12);
  EXPECT_EQ(plain->options.ignore_index, -100);
  EXPECT_TRUE(plain->state_dict().empty());
}

TEST(CrossEntropyLoss, SpatialInputsAndCustomIgnoreIndex) {
  const Tensor x = random_input({2, 3, 4}, 2, false);  // (N, C, d)
  const std::vector<std::int64_t> t = {0, 2, 1, 1, 2, 2, 0, 1};
  CrossEntropyLoss loss(CrossEntropyOptions{.weight = std::nullopt, .ignore_index = 1});
  const Losses ref = cross_entropy_reference(values(x), t, 2, 3, 4, {}, 1, 0);
  expect_close(values(loss(x, targets(t, {2, 4}))), {reduce(ref.per_position, Reduction::Mean, ref.denominator)},
               1e-12);
}

TEST(CrossEntropyLoss, ClassProbabilities) {
  const Tensor x = random_input({3, 4}, 3, false);
  const std::vector<double> p = {0.1, 0.2, 0.3, 0.4, 1, 0, 0, 0, 0.25, 0.25, 0.25, 0.25};
  const std::vector<double> xv = values(x);
  CrossEntropyLoss loss(CrossEntropyOptions{.weight = std::nullopt, .label_smoothing = 0.1});
  double total = 0;
  for (int n = 0; n < 3; ++n) {
    double z = 0;
    for (int c = 0; c < 4; ++c) z += std::exp(xv[n * 4 + c]);
    for (int c = 0; c < 4; ++c) total -= (0.9 * p[n * 4 + c] + 0.1 / 4) * (xv[n * 4 + c] - std::log(z));
  }
  expect_close(values(loss(x, tensor(p, {3, 4}))), {total / 3}, 1e-12);
}

TEST(CrossEntropyLoss, WeightIsABufferAndGradientsFlowToTheInput) {
  CrossEntropyLoss loss({.weight = tensor({1, 2, 3}, {3})});
  EXPECT_EQ(keys(loss->state_dict()), std::vector<std::string>{"weight"});
  EXPECT_TRUE(loss->parameters().empty());
  const Tensor x = random_input({4, 3}, 4);
  const Tensor t = targets({0, 2, 1, 2}, {4});
  expect_gradcheck([&](const TensorList&) { return TensorList{loss(x, t)}; }, {x});
  TensorList seen;
  loss->register_forward_hook([&](Module&, const TensorList& in, Tensor&) { seen = in; });
  loss(x, t);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_TRUE(seen[1].is_same(t));
}

TEST(CrossEntropyLoss, Errors) {
  expect_error([] { CrossEntropyLoss(CrossEntropyOptions{.weight = std::nullopt, .label_smoothing = 1.5}); }, "CrossEntropyLoss",
               "label_smoothing must be in [0, 1], got 1.5");
  expect_error<ShapeError>([] { CrossEntropyLoss(CrossEntropyOptions{.weight = zeros({2, 2})}); }, "CrossEntropyLoss",
                           "1-d");
  expect_error<DTypeError>([] { CrossEntropyLoss(CrossEntropyOptions{.weight = zeros({2}, {.dtype = kInt64})}); },
                           "CrossEntropyLoss", "floating-point");
  CrossEntropyLoss loss;
  expect_error<IndexError>([&] { loss(zeros({2, 3}), targets({0, 3}, {2})); }, "CrossEntropyLoss", "out of bounds");
  expect_error<ShapeError>([&] { loss(zeros({2, 3}), targets({0, 1, 2}, {3})); }, "CrossEntropyLoss", "[3]");
  // A loss placed where one tensor is passed on (here a Sequential) says it takes two.
  Sequential seq(CrossEntropyLoss{});
  expect_error([&] { seq(zeros({2})); }, "CrossEntropyLoss.forward", "single tensor");
}

TEST(NLLLoss, MatchesTheWeightedReference) {
  const Tensor logp = log_softmax(random_input({4, 3}, 5, false), 1);
  const std::vector<std::int64_t> t = {2, -1, 0, 2};
  const std::vector<double> w = {2, 1, 0.5};
  NLLLoss loss({.weight = tensor(w, {3}), .ignore_index = -1});
  const Losses ref = cross_entropy_reference(values(logp), t, 4, 3, 1, w, -1, 0, /*inputs_are_log_probs=*/true);
  expect_close(values(loss(logp, targets(t, {4}))), {reduce(ref.per_position, Reduction::Mean, ref.denominator)},
               1e-12);
  NLLLoss sum_loss(NLLLossOptions{.reduction = Reduction::Sum});
  const Losses plain = cross_entropy_reference(values(logp), {2, 1, 0, 2}, 4, 3, 1, {}, -100, 0, true);
  expect_close(values(sum_loss(logp, targets({2, 1, 0, 2}, {4}))), {reduce(plain.per_position, Reduction::Sum, 1)},
               1e-12);
  EXPECT_EQ(keys(loss->state_dict()), std::vector<std::string>{"weight"});
  const Tensor x = random_input({2, 3}, 6);
  expect_gradcheck([&](const TensorList&) { return TensorList{sum_loss(x, targets({1, 0}, {2}))}; }, {x});
  expect_error<DTypeError>([&] { sum_loss(x, zeros({2})); }, "NLLLoss", "int64");
}

TEST(RegressionLosses, MSEAndL1MatchTheirFormulas) {
  const Tensor a = random_input({3, 4}, 7, false), b = random_input({3, 4}, 8, false);
  const std::vector<double> av = values(a), bv = values(b);
  std::vector<double> sq, ab;
  for (std::size_t i = 0; i < av.size(); ++i) {
    sq.push_back((av[i] - bv[i]) * (av[i] - bv[i]));
    ab.push_back(std::abs(av[i] - bv[i]));
  }
  expect_close(values(MSELoss()(a, b)), {reduce(sq, Reduction::Mean, 12)}, 1e-12);
  expect_close(values(MSELoss(Reduction::Sum)(a, b)), {reduce(sq, Reduction::Sum, 1)}, 1e-12);
  expect_close(values(MSELoss(Reduction::None)(a, b)), sq, 1e-12);
  expect_close(values(L1Loss()(a, b)), {reduce(ab, Reduction::Mean, 12)}, 1e-12);
  expect_close(values(L1Loss(Reduction::None)(a, b)), ab, 1e-12);
  const Tensor x = random_input({5}, 9);
  MSELoss mse;
  expect_gradcheck([&](const TensorList&) { return TensorList{mse(x, b.flatten().narrow(0, 0, 5))}; }, {x});
  expect_error<ShapeError>([&] { mse(zeros({3}), zeros({4})); }, "MSELoss", "[3]");
  expect_error<ShapeError>([] { L1Loss()(zeros({3}), zeros({2, 3})); }, "L1Loss", "[2, 3]");
}

TEST(RegressionLosses, SmoothL1AndHuberMatchTheirFormulas) {
  const Tensor a = random_input({3, 4}, 10, false), b = random_input({3, 4}, 11, false);
  const std::vector<double> av = values(a), bv = values(b);
  std::vector<double> smooth, huber;
  for (std::size_t i = 0; i < av.size(); ++i) {
    const double d = std::abs(av[i] - bv[i]);
    smooth.push_back(d < 0.5 ? 0.5 * d * d / 0.5 : d - 0.25);
    huber.push_back(d < 2 ? 0.5 * d * d : 2 * (d - 1));
  }
  expect_close(values(SmoothL1Loss({.reduction = Reduction::None, .beta = 0.5})(a, b)), smooth, 1e-12);
  expect_close(values(SmoothL1Loss({.beta = 0.5})(a, b)), {reduce(smooth, Reduction::Mean, 12)}, 1e-12);
  expect_close(values(HuberLoss({.reduction = Reduction::Sum, .delta = 2})(a, b)), {reduce(huber, Reduction::Sum, 1)},
               1e-12);
  // Defaults: beta = delta = 1, where the two losses agree.
  SmoothL1Loss smooth_default;
  HuberLoss huber_default;
  EXPECT_EQ(smooth_default->options.beta, 1.0);
  EXPECT_EQ(huber_default->options.delta, 1.0);
  expect_close(values(smooth_default(a, b)), values(huber_default(a, b)), 1e-15);
  EXPECT_TRUE(smooth_default->state_dict().empty());
  const Tensor x = random_input({5}, 12);
  const Tensor t = b.flatten().narrow(0, 0, 5);
  expect_gradcheck([&](const TensorList&) { return TensorList{smooth_default(x, t)}; }, {x});
  expect_gradcheck([&](const TensorList&) { return TensorList{huber_default(x, t)}; }, {x});
  expect_error([] { SmoothL1Loss({.beta = -1}); }, "SmoothL1Loss", "beta must be >= 0, got -1");
  expect_error([] { HuberLoss({.delta = 0}); }, "HuberLoss", "delta must be > 0, got 0");
  expect_error<ShapeError>([&] { huber_default(zeros({3}), zeros({4})); }, "HuberLoss", "[4]");
}

TEST(KLDivLoss, BatchMeanLogTargetAndDefaults) {
  const Tensor logits = random_input({3, 4}, 13, false);
  const Tensor input = log_softmax(logits, 1), target = softmax(random_input({3, 4}, 14, false), 1);
  const std::vector<double> x = values(input), p = values(target);
  std::vector<double> pointwise;
  for (std::size_t i = 0; i < x.size(); ++i) pointwise.push_back(p[i] * (std::log(p[i]) - x[i]));
  KLDivLoss plain;
  expect_close(values(plain(input, target)), {reduce(pointwise, Reduction::Mean, 12)}, 1e-12);
  KLDivLoss batch_mean({.reduction = Reduction::BatchMean});
  expect_close(values(batch_mean(input, target)), {reduce(pointwise, Reduction::Sum, 1) / 3}, 1e-12);
  KLDivLoss log_target({.reduction = Reduction::None, .log_target = true});
  expect_close(values(log_target(input, log(target))), pointwise, 1e-12);
  EXPECT_TRUE(plain->state_dict().empty());
  const Tensor leaf = logits.detach().requires_grad_();
  expect_gradcheck([&](const TensorList&) { return TensorList{batch_mean(log_softmax(leaf, 1), target)}; }, {leaf});
  expect_error<DTypeError>([&] { plain(zeros({2}, {.dtype = kInt64}), target); }, "KLDivLoss", "int64");
}

TEST(LossReductions, OnlyKLDivLossTakesBatchMean) {
  const Tensor a = random_input({2, 3}, 15, false), b = random_input({2, 3}, 16, false);
  MSELoss mse(Reduction::BatchMean);
  L1Loss l1(Reduction::BatchMean);
  expect_error([&] { mse(a, b); }, "MSELoss", "BatchMean");
  expect_error([&] { l1(a, b); }, "L1Loss", "BatchMean");
  expect_error([&] { SmoothL1Loss({.reduction = Reduction::BatchMean})(a, b); }, "SmoothL1Loss", "BatchMean");
  expect_error([&] { HuberLoss({.reduction = Reduction::BatchMean})(a, b); }, "HuberLoss", "BatchMean");
  expect_error([&] { CrossEntropyLoss({.reduction = Reduction::BatchMean})(a, targets({0, 2}, {2})); },
               "CrossEntropyLoss", "BatchMean");
  expect_error([&] { NLLLoss({.reduction = Reduction::BatchMean})(a, targets({0, 2}, {2})); }, "NLLLoss",
               "BatchMean");
}

TEST(BinaryLosses, BCEAndBCEWithLogitsMatchTheirFormulas) {
  const std::vector<double> logits = {-2, -0.5, 0.3, 1.5, 3, -1};
  const std::vector<double> t = {0, 1, 1, 0, 1, 0.5};
  const std::vector<double> w = {1, 2, 0.5, 1, 3, 1};
  const std::vector<double> pos = {2, 0.5, 1};  // per class: last dim of (2, 3)
  std::vector<double> bce, bce_logits;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    const double p = 1 / (1 + std::exp(-logits[i]));
    bce.push_back(-w[i] * (t[i] * std::log(p) + (1 - t[i]) * std::log(1 - p)));
    bce_logits.push_back(-w[i] * (pos[i % 3] * t[i] * std::log(p) + (1 - t[i]) * std::log(1 - p)));
  }
  const Tensor x = tensor(logits, {2, 3});
  const Tensor probs = tensor(std::vector<double>(logits.size()), {2, 3});
  {
    NoGradGuard no_grad;
    Tensor(probs).copy_(sigmoid(x));
  }
  BCELoss bce_loss(BCELossOptions{.weight = tensor(w, {2, 3}), .reduction = Reduction::None});
  expect_close(values(bce_loss(probs, tensor(t, {2, 3}))), bce, 1e-12);
  BCEWithLogitsLoss logit_loss({.weight = tensor(w, {2, 3}), .pos_weight = tensor(pos, {3})});
  expect_close(values(logit_loss(x, tensor(t, {2, 3}))), {reduce(bce_logits, Reduction::Mean, 6)}, 1e-12);
  EXPECT_EQ(keys(logit_loss->state_dict()), (std::vector<std::string>{"pos_weight", "weight"}));
  // Clamped logs: p = 0 with target 0 is finite.
  expect_close(values(BCELoss()(tensor({0, 1}, {2}), tensor({0, 1}, {2}))), {0}, 1e-12);
  const Tensor leaf = x.detach().requires_grad_();
  expect_gradcheck([&](const TensorList&) { return TensorList{logit_loss(leaf, tensor(t, {2, 3}))}; }, {leaf});
  expect_error([] { BCELoss()(tensor({1.5}, {1}), tensor({1}, {1})); }, "BCELoss", "[0, 1]");
  expect_error<DTypeError>([] { BCEWithLogitsLoss(BCEWithLogitsLossOptions{.pos_weight = zeros({2}, {.dtype = kInt64})}); },
                           "BCEWithLogitsLoss", "pos_weight");
  expect_error<ShapeError>([&] { logit_loss(zeros({2, 3}, {.dtype = kFloat64}), zeros({3, 2}, {.dtype = kFloat64})); },
                           "BCEWithLogitsLoss", "[3, 2]");
}

}  // namespace
}  // namespace infini::nn::test::loss_test
