// Adam and AdamW against torch.optim.Adam / AdamW's documented algorithm, written out in
// float64 below.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "optim_test_util.h"

import infini.nn;

namespace infini::optim::test::optim_adam_test {
namespace {

// torch.optim.Adam's algorithm (AdamW's with `decoupled`) for one parameter vector.
struct AdamReference {
  double lr, beta1, beta2, eps, weight_decay;
  bool amsgrad, decoupled;
  std::vector<double> p;
  std::vector<double> m = {}, v = {}, vmax = {};
  int t = 0;

  void step(const std::vector<double>& grad) {
    m.resize(p.size());
    v.resize(p.size());
    vmax.resize(p.size());
    ++t;
    for (std::size_t i = 0; i < p.size(); ++i) {
      double g = grad[i];
      if (decoupled) p[i] -= lr * weight_decay * p[i];
      else g += weight_decay * p[i];
      m[i] = beta1 * m[i] + (1 - beta1) * g;
      v[i] = beta2 * v[i] + (1 - beta2) * g * g;
      vmax[i] = std::max(vmax[i], v[i]);
      const double m_hat = m[i] / (1 - std::pow(beta1, t));
      const double v_hat = (amsgrad ? vmax[i] : v[i]) / (1 - std::pow(beta2, t));
      p[i] -= lr * m_hat / (std::sqrt(v_hat) + eps);
    }
  }
};

AdamReference reference(const AdamOptions& o, const std::vector<double>& start) {
  return {o.lr, o.betas[0], o.betas[1], o.eps, o.weight_decay, o.amsgrad, false, start};
}
AdamReference reference(const AdamWOptions& o, const std::vector<double>& start) {
  return {o.lr, o.betas[0], o.betas[1], o.eps, o.weight_decay, o.amsgrad, true, start};
}

// Grads of step t for a 3-element parameter; they shrink after the first step, so amsgrad's
// running maximum differs from exp_avg_sq.
std::vector<double> grad_at(int t) {
  const double shrink = t == 0 ? 1.0 : 0.1 / t;
  return {2.0 * shrink, -1.5 * shrink + 0.05 * t, 0.3 - 0.2 * t};
}

const std::vector<double> kStart = {1.0, -2.0, 0.5};

template <class Opt, class Options>
void check_against_reference(const Options& options, int steps, DataType dtype = kFloat64, double tol = 1e-13) {
  Tensor p = param(kStart, dtype);
  Opt opt({p}, options);
  AdamReference ref = reference(options, kStart);
  for (int t = 0; t < steps; ++t) {
    set_grad(p, grad_at(t));
    opt.step();
    ref.step(grad_at(t));
    expect_close(values(p), ref.p, tol, "step " + std::to_string(t));
  }
  const StateDict state = opt.state_dict();
  EXPECT_EQ(state.at("state.0.step").dtype(), kInt64);
  EXPECT_EQ(state.at("state.0.step").item<std::int64_t>(), steps);
  expect_close(values(state.at("state.0.exp_avg")), ref.m, tol, "exp_avg");
  expect_close(values(state.at("state.0.exp_avg_sq")), ref.v, tol, "exp_avg_sq");
  if (options.amsgrad) expect_close(values(state.at("state.0.max_exp_avg_sq")), ref.vmax, tol, "max_exp_avg_sq");
  else EXPECT_FALSE(state.contains("state.0.max_exp_avg_sq"));
}

TEST(OptimAdam, FirstStepMovesEachParameterByAboutLr) {
  // After one step m_hat = g and v_hat = g^2, so p -= lr * g / (|g| + eps).
  Tensor p = param({1.0, -2.0, 0.5});
  Adam opt({p}, {.lr = 0.01});
  set_grad(p, {0.5, -4.0, 1e-3});
  opt.step();
  expect_close(values(p), {1.0 - 0.01 * 0.5 / (0.5 + 1e-8), -2.0 + 0.01 * 4.0 / (4.0 + 1e-8),
                           0.5 - 0.01 * 1e-3 / (1e-3 + 1e-8)},
               1e-15);
}

TEST(OptimAdam, Defaults) {
  Tensor p = param({1.0});
  Adam adam({p});
  EXPECT_EQ(adam.defaults().lr, 1e-3);
  EXPECT_EQ(adam.defaults().betas[0], 0.9);
  EXPECT_EQ(adam.defaults().betas[1], 0.999);
  EXPECT_EQ(adam.defaults().eps, 1e-8);
  EXPECT_EQ(adam.defaults().weight_decay, 0.0);
  EXPECT_FALSE(adam.defaults().amsgrad);
  AdamW adamw({p.detach().clone().requires_grad_()});
  EXPECT_EQ(adamw.defaults().weight_decay, 1e-2);
  EXPECT_EQ(adamw.defaults().lr, 1e-3);
}

TEST(OptimAdam, DefaultsMatchReference) { check_against_reference<Adam>(AdamOptions{}, 4); }

TEST(OptimAdam, L2WeightDecayAndBetasMatchReference) {
  check_against_reference<Adam>(AdamOptions{.lr = 0.01, .betas = {0.8, 0.99}, .eps = 1e-6, .weight_decay = 0.1}, 5);
}

TEST(OptimAdam, AmsgradMatchesReference) {
  check_against_reference<Adam>(AdamOptions{.lr = 0.05, .betas = {0.5, 0.9}, .amsgrad = true}, 5);
}

TEST(OptimAdam, Float32MatchesReference) {
  check_against_reference<Adam>(AdamOptions{.lr = 0.01, .weight_decay = 0.05, .amsgrad = true}, 4, kFloat32, 2e-6);
}

TEST(OptimAdam, BFloat16ComputesInFloat32) {
  check_against_reference<Adam>(AdamOptions{.lr = 0.05}, 3, kBFloat16, 3e-2);
}

TEST(OptimAdamW, DecayAloneScalesTheParameter) {
  // With a zero grad the moments stay 0, so only the decoupled decay moves p.
  Tensor p = param({1.0, -2.0});
  AdamW opt({p}, {.lr = 0.1, .weight_decay = 0.5});
  set_grad(p, {0.0, 0.0});
  opt.step();
  EXPECT_EQ(values(p), (std::vector<double>{0.95, -1.9}));
}

TEST(OptimAdamW, DefaultsMatchReference) { check_against_reference<AdamW>(AdamWOptions{.lr = 0.1}, 4); }

TEST(OptimAdamW, AmsgradAndDecayMatchReference) {
  check_against_reference<AdamW>(AdamWOptions{.lr = 0.02, .betas = {0.7, 0.95}, .weight_decay = 0.3, .amsgrad = true},
                                 5);
}

TEST(OptimAdamW, Float32MatchesReference) {
  check_against_reference<AdamW>(AdamWOptions{.lr = 0.01, .weight_decay = 0.1}, 4, kFloat32, 2e-6);
}

TEST(OptimAdamW, GroupsWithTheirOwnOptionsAndAParamWithoutGrad) {
  // Typical: decay for weights, none for biases.
  Tensor weight = param(kStart), bias = param(kStart), frozen = param({3.0});
  const AdamWOptions decay{.lr = 0.05, .weight_decay = 0.2};
  const AdamWOptions no_decay{.lr = 0.01, .betas = {0.5, 0.9}, .weight_decay = 0, .amsgrad = true};
  AdamW opt({{.params = {weight, frozen}, .options = decay}, {.params = {bias}, .options = no_decay}});
  AdamReference ref_w = reference(decay, kStart), ref_b = reference(no_decay, kStart);
  for (int t = 0; t < 4; ++t) {
    set_grad(weight, grad_at(t));
    set_grad(bias, grad_at(t + 1));
    opt.step();
    ref_w.step(grad_at(t));
    ref_b.step(grad_at(t + 1));
  }
  expect_close(values(weight), ref_w.p, 1e-13, "weight");
  expect_close(values(bias), ref_b.p, 1e-13, "bias");
  EXPECT_EQ(values(frozen), (std::vector<double>{3.0}));
  const StateDict state = opt.state_dict();
  EXPECT_FALSE(state.contains("state.1.step"));
  EXPECT_EQ(state.at("state.2.step").item<std::int64_t>(), 4);
  EXPECT_EQ(values(state.at("param_groups.1.params")), (std::vector<double>{2}));
}

// scaled_step(s) makes the update of mul_(grad, s) + step(), bit for bit, in float32 (whose
// rounding of g * s it must repeat) and float64, for AdamW with decay and for Adam with L2
// and amsgrad; Adam leaves the grads unscaled, SGD (the default path) scales them in place.
template <class Opt, class Options>
void check_scaled_step(const Options& options, DataType dtype) {
  Tensor fused = param(kStart, dtype), reference = param(kStart, dtype);
  Opt fused_opt({fused}, options), reference_opt({reference}, options);
  for (int t = 0; t < 4; ++t) {
    const double scale = 0.37 / (t + 1);
    set_grad(fused, grad_at(t));
    set_grad(reference, grad_at(t));
    fused_opt.scaled_step(scale);
    {
      NoGradGuard no_grad;
      Tensor grad = reference.grad();
      mul_(grad, scale);
    }
    reference_opt.step();
    expect_identical(fused, reference, "step " + std::to_string(t));
    expect_identical(fused.grad(), from_vector(grad_at(t)).to(dtype), "the grad stays unscaled");
  }
  const StateDict a = fused_opt.state_dict(), b = reference_opt.state_dict();
  expect_identical(a.at("state.0.exp_avg"), b.at("state.0.exp_avg"), "exp_avg");
  expect_identical(a.at("state.0.exp_avg_sq"), b.at("state.0.exp_avg_sq"), "exp_avg_sq");
}

TEST(OptimAdamW, ScaledStepEqualsScalingTheGradsFirst) {
  for (DataType dtype : {kFloat32, kFloat64}) {
    check_scaled_step<AdamW>(AdamWOptions{.lr = 0.01, .weight_decay = 0.1}, dtype);
    check_scaled_step<Adam>(AdamOptions{.lr = 0.01, .weight_decay = 0.1, .amsgrad = true}, dtype);
  }
  // A scale of 1 is step() itself.
  Tensor a = param(kStart, kFloat32), b = param(kStart, kFloat32);
  AdamW opt_a({a}, AdamWOptions{.lr = 0.1}), opt_b({b}, AdamWOptions{.lr = 0.1});
  set_grad(a, grad_at(0));
  set_grad(b, grad_at(0));
  opt_a.scaled_step(1.0);
  opt_b.step();
  expect_identical(a, b);
}

TEST(OptimSGD, ScaledStepScalesTheGradsThenSteps) {
  Tensor p = param(kStart);
  SGD opt({p}, SGDOptions{.lr = 0.5});
  set_grad(p, grad_at(0));
  opt.scaled_step(0.25);
  expect_close(values(p.grad()), {0.5, -0.375, 0.075}, 1e-15);
  expect_close(values(p), {1.0 - 0.5 * 0.5, -2.0 + 0.5 * 0.375, 0.5 - 0.5 * 0.075}, 1e-15);
}

TEST(OptimAdamW, StepCountsPerParameter) {
  // A parameter that misses a step has its own (smaller) step count for bias correction.
  Tensor a = param({1.0}), b = param({1.0});
  const AdamWOptions options{.lr = 0.1, .weight_decay = 0};
  AdamW opt({a, b}, options);
  AdamReference ref_a = reference(options, {1.0}), ref_b = reference(options, {1.0});
  for (int t = 0; t < 3; ++t) {
    set_grad(a, {0.5 + t});
    ref_a.step({0.5 + t});
    if (t != 1) {
      set_grad(b, {0.5 + t});
      ref_b.step({0.5 + t});
    } else {
      b.set_grad(Tensor());
    }
    opt.step();
  }
  expect_close(values(a), ref_a.p, 1e-14);
  expect_close(values(b), ref_b.p, 1e-14);
  EXPECT_EQ(opt.state_dict().at("state.1.step").item<std::int64_t>(), 2);
}

TEST(OptimAdam, OptionErrors) {
  Tensor p = param({1.0});
  expect_error([&] { Adam({p}, {.lr = -1e-3}); }, "Adam", "learning rate -0.001");
  expect_error([&] { Adam({p}, {.eps = -1}); }, "Adam", "epsilon value -1");
  expect_error([&] { Adam({p}, {.betas = {1.0, 0.999}}); }, "Adam", "beta parameter at index 0: 1");
  expect_error([&] { Adam({p}, {.betas = {0.9, -0.5}}); }, "Adam", "beta parameter at index 1: -0.5");
  expect_error([&] { Adam({p}, {.weight_decay = -0.1}); }, "Adam", "weight_decay value -0.1");
  expect_error([&] { AdamW({p}, {.betas = {0.9, 1.5}}); }, "AdamW", "index 1: 1.5");
  expect_error([&] { AdamW({{.params = {p}, .options = AdamWOptions{.lr = -3}}}); }, "AdamW", "learning rate -3");
}

TEST(OptimAdam, FusedUpdateChecksItsOperands) {
  Tensor p = zeros({2}, {.dtype = kFloat64});
  Tensor g = ones({2}, {.dtype = kFloat64});
  Tensor m = zeros({2}, {.dtype = kFloat64}), v = zeros({2}, {.dtype = kFloat64});
  expect_error<DTypeError>([&] { adam_update_(p, g, zeros({2}), v, Tensor(), {}); }, "adam_update_",
                           "exp_avg is float32");
  expect_error([&] { adam_update_(p, g, m, v, Tensor(), {.amsgrad = true}); }, "adam_update_", "max_exp_avg_sq");
  expect_error([&] { adam_update_(p, g, m, v, Tensor(), {.step = 0}); }, "adam_update_", "step must be >= 1");
  expect_error([&] {
    adam_update_(p, g, zeros({2, 2}, {.dtype = kFloat64}).select(1, 0), v, Tensor(), {});  // stride 2
  }, "adam_update_", "not contiguous");
}

}  // namespace
}  // namespace infini::optim::test::optim_adam_test
