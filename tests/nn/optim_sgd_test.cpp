// SGD against torch.optim.SGD's documented algorithm, written out in float64 below.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "optim_test_util.h"

import infini.nn;

namespace infini::optim::test::optim_sgd_test {
namespace {

// torch.optim.SGD's algorithm for one parameter vector, step by step in float64.
struct SGDReference {
  SGDOptions o;
  std::vector<double> p;
  std::vector<double> buf = {};
  bool has_buf = false;

  void step(const std::vector<double>& grad) {
    buf.resize(p.size());
    for (std::size_t i = 0; i < p.size(); ++i) {
      double g = grad[i] + o.weight_decay * p[i];
      if (o.momentum != 0) {
        buf[i] = has_buf ? o.momentum * buf[i] + (1 - o.dampening) * g : g;
        g = o.nesterov ? g + o.momentum * buf[i] : buf[i];
      }
      p[i] -= o.lr * g;
    }
    has_buf = has_buf || o.momentum != 0;
  }
};

// The grad of step t (0, 1, ...) for a 3-element parameter: varied signs and sizes.
std::vector<double> grad_at(int t) { return {0.5 - 0.3 * t, -1.0 + 0.25 * t * t, 2.0 / (t + 1)}; }

const std::vector<double> kStart = {1.0, -2.0, 3.0};

// Runs `steps` SGD steps with `options` on a float64 parameter and the reference side by side.
void check_against_reference(const SGDOptions& options, int steps) {
  Tensor p = param(kStart);
  SGD opt({p}, options);
  SGDReference ref{options, kStart};
  for (int t = 0; t < steps; ++t) {
    set_grad(p, grad_at(t));
    opt.step();
    ref.step(grad_at(t));
    expect_close(values(p), ref.p, 1e-14, "step " + std::to_string(t));
  }
  if (options.momentum != 0) expect_close(values(opt.state_dict().at("state.0.momentum_buffer")), ref.buf, 1e-14);
}

TEST(OptimSGD, PlainStepByHand) {
  Tensor p = param(kStart);
  SGD opt({p}, {.lr = 0.1});
  set_grad(p, {0.5, -1.0, 2.0});
  opt.step();
  expect_close(values(p), {0.95, -1.9, 2.8}, 1e-15);
  opt.step();  // the same grad again
  expect_close(values(p), {0.9, -1.8, 2.6}, 1e-15);
  EXPECT_FALSE(opt.state_dict().contains("state.0.momentum_buffer"));  // no momentum, no state
}

TEST(OptimSGD, Defaults) {
  Tensor p = param({1.0});
  SGD opt({p});
  EXPECT_EQ(opt.defaults().lr, 1e-3);
  EXPECT_EQ(opt.defaults().momentum, 0.0);
  EXPECT_EQ(opt.defaults().dampening, 0.0);
  EXPECT_EQ(opt.defaults().weight_decay, 0.0);
  EXPECT_FALSE(opt.defaults().nesterov);
}

TEST(OptimSGD, PlainMatchesReference) { check_against_reference({.lr = 0.1}, 4); }

TEST(OptimSGD, MomentumFirstStepTakesTheGradUndampened) {
  Tensor p = param({1.0});
  SGD opt({p}, {.lr = 0.5, .momentum = 0.9, .dampening = 0.5});
  set_grad(p, {2.0});
  opt.step();  // buf = 2 (no dampening on the first step), p = 1 - 0.5 * 2
  EXPECT_EQ(values(p)[0], 0.0);
  opt.step();  // buf = 0.9 * 2 + 0.5 * 2 = 2.8, p = 0 - 0.5 * 2.8
  EXPECT_NEAR(values(p)[0], -1.4, 1e-15);
}

TEST(OptimSGD, MomentumDampeningWeightDecayMatchReference) {
  check_against_reference({.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01}, 5);
}

TEST(OptimSGD, NesterovMatchesReference) {
  check_against_reference({.lr = 0.05, .momentum = 0.8, .weight_decay = 0.1, .nesterov = true}, 4);
}

TEST(OptimSGD, GroupsWithTheirOwnOptionsAndAParamWithoutGrad) {
  Tensor a = param(kStart), frozen = param({7.0, 8.0}), b = param(kStart);
  const SGDOptions first{.lr = 0.1, .momentum = 0.5};
  const SGDOptions second{.lr = 0.01, .momentum = 0.9, .weight_decay = 0.1, .nesterov = true};
  SGD opt({{.params = {a, frozen}, .options = first}, {.params = {b}, .options = second}});
  SGDReference ref_a{first, kStart}, ref_b{second, kStart};
  for (int t = 0; t < 3; ++t) {
    set_grad(a, grad_at(t));
    set_grad(b, grad_at(t + 1));
    opt.step();
    ref_a.step(grad_at(t));
    ref_b.step(grad_at(t + 1));
  }
  expect_close(values(a), ref_a.p, 1e-14, "group 0");
  expect_close(values(b), ref_b.p, 1e-14, "group 1");
  EXPECT_EQ(values(frozen), (std::vector<double>{7.0, 8.0}));
  const StateDict state = opt.state_dict();
  EXPECT_FALSE(state.contains("state.1.momentum_buffer"));  // the skipped parameter has no state
  EXPECT_TRUE(state.contains("state.2.momentum_buffer"));
}

TEST(OptimSGD, Float32MatchesReference) {
  const SGDOptions options{.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01};
  Tensor p = param(kStart, kFloat32);
  SGD opt({p}, options);
  SGDReference ref{options, kStart};
  for (int t = 0; t < 4; ++t) {
    set_grad(p, grad_at(t));
    opt.step();
    ref.step(grad_at(t));
  }
  EXPECT_EQ(p.dtype(), kFloat32);
  expect_close(values(p), ref.p, 1e-6);
}

TEST(OptimSGD, BFloat16ComputesInFloat32) {
  const SGDOptions options{.lr = 0.125, .momentum = 0.5};
  Tensor p = param(kStart, kBFloat16);
  SGD opt({p}, options);
  SGDReference ref{options, kStart};
  for (int t = 0; t < 3; ++t) {
    set_grad(p, grad_at(t));
    opt.step();
    ref.step(grad_at(t));
  }
  EXPECT_EQ(p.dtype(), kBFloat16);
  EXPECT_EQ(opt.state_dict().at("state.0.momentum_buffer").dtype(), kBFloat16);
  expect_close(values(p), ref.p, 2e-2);  // bfloat16 keeps 8 significant bits
}

TEST(OptimSGD, LargeParameterUsesTheParallelLoop) {
  const std::int64_t n = 100000;
  Tensor p = (arange(n, {.dtype = kFloat32}) * 1e-4).requires_grad_();
  Tensor g = cos(arange(n, {.dtype = kFloat32}));
  const SGDOptions options{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01};
  SGD opt({p}, options);
  SGDReference ref{options, values(p)};
  for (int t = 0; t < 3; ++t) {
    p.set_grad(g);
    opt.step();
    ref.step(values(g));
  }
  expect_close(values(p), ref.p, 1e-5);
}

TEST(OptimSGD, NonContiguousParameterIsUpdatedInPlace) {
  Tensor base = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor p = base.t();  // 3 x 2, strides (1, 3)
  p.requires_grad_();
  SGD opt({p}, {.lr = 0.5});
  p.set_grad(from_vector<double>({1, 1, 1, 1, 1, 1}, {3, 2}) * from_vector<double>({2, 4}, {1, 2}));
  opt.step();
  // Column 0 of p (row 0 of base) moves by 0.5 * 2, column 1 (row 1 of base) by 0.5 * 4.
  EXPECT_EQ(values(base), (std::vector<double>{0, 1, 2, 2, 3, 4}));
  EXPECT_TRUE(p.storage().is_same(base.storage()));
}

TEST(OptimSGD, StepBumpsTheVersionSoSavedTensorsAreChecked) {
  Tensor p = param({1.0, 2.0});
  SGD opt({p}, {.lr = 0.1});
  Tensor loss = sum(mul(p, p));  // saves p for backward
  loss.backward(Tensor(), /*retain_graph=*/true);
  const auto before = p.version();
  opt.step();
  EXPECT_GT(p.version(), before);
  EXPECT_THROW(loss.backward(), Error);  // p changed since it was saved
}

TEST(OptimSGD, GradFromBackward) {
  Tensor p = param({1.0, -2.0});
  SGD opt({p}, {.lr = 0.25});
  sum(mul(p, p)).backward();  // grad 2p
  opt.step();
  EXPECT_EQ(values(p), (std::vector<double>{0.5, -1.0}));
}

TEST(OptimSGD, OptionErrors) {
  Tensor p = param({1.0});
  expect_error([&] { SGD({p}, {.lr = -0.5}); }, "SGD", "learning rate -0.5");
  expect_error([&] { SGD({p}, {.lr = NAN}); }, "SGD", "learning rate nan");
  expect_error([&] { SGD({p}, {.momentum = -0.1}); }, "SGD", "momentum -0.1");
  expect_error([&] { SGD({p}, {.weight_decay = -1}); }, "SGD", "weight_decay -1");
  expect_error([&] { SGD({p}, {.nesterov = true}); }, "SGD", "Nesterov momentum requires");
  expect_error([&] { SGD({p}, {.momentum = 0.9, .dampening = 0.1, .nesterov = true}); }, "SGD", "dampening 0.1");
  // Per-group options are checked too.
  expect_error([&] { SGD({{.params = {p}, .options = SGDOptions{.lr = -2}}}); }, "SGD", "learning rate -2");
}

TEST(OptimSGD, StepErrors) {
  Tensor p = param({1.0, 2.0});
  SGD opt({p});
  p.set_grad(from_vector<float>({1, 2}));
  expect_error<DTypeError>([&] { opt.step(); }, "SGD.step", "float32");
  EXPECT_EQ(values(p), (std::vector<double>{1.0, 2.0}));  // nothing was updated
}

TEST(OptimSGD, FusedUpdateChecksItsOperands) {
  Tensor p = param({1.0, 2.0});
  Tensor g = from_vector<double>({1, 2});
  expect_error<ShapeError>([&] { sgd_update_(p.detach(), from_vector<double>({1, 2, 3}), Tensor(), {.lr = 1}); },
                           "sgd_update_", "[3]");
  expect_error([&] { sgd_update_(p.detach(), g, Tensor(), {.lr = 1, .momentum = 0.9}); }, "sgd_update_",
               "momentum_buffer is an undefined tensor");
  expect_error<DTypeError>([&] { sgd_update_(from_vector<std::int64_t>({1, 2}), g, Tensor(), {.lr = 1}); },
                           "sgd_update_", "int64");
}

}  // namespace
}  // namespace infini::optim::test::optim_sgd_test
