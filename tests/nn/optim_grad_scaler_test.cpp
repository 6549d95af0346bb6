// GradScaler: scaling, unscaling, skipped steps on Inf/NaN, backoff and growth, state dict.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "optim_test_util.h"

import infini.nn;

namespace infini::optim::test::optim_grad_scaler_test {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(OptimGradScaler, Defaults) {
  GradScaler scaler;
  EXPECT_EQ(scaler.get_scale(), 65536.0);
  EXPECT_EQ(scaler.get_growth_factor(), 2.0);
  EXPECT_EQ(scaler.get_backoff_factor(), 0.5);
  EXPECT_EQ(scaler.get_growth_interval(), 2000);
  EXPECT_TRUE(scaler.is_enabled());
}

TEST(OptimGradScaler, ScaleMultipliesTheLossAndIsDifferentiable) {
  GradScaler scaler({.init_scale = 1024.0});
  Tensor p = param({1.0, 2.0}, kFloat32);
  Tensor loss = sum(mul(p, p));
  Tensor scaled = scaler.scale(loss);
  EXPECT_EQ(scaled.item<double>(), 5.0 * 1024.0);
  scaled.backward();
  EXPECT_EQ(values(p.grad()), (std::vector<double>{2048.0, 4096.0}));
}

TEST(OptimGradScaler, CleanStepUnscalesAndSteps) {
  GradScaler scaler({.init_scale = 8.0, .growth_interval = 2});
  Tensor p = param({1.0, 2.0}, kFloat32);
  SGD opt({p}, {.lr = 1.0});
  set_grad(p, {8.0, -16.0});  // scaled grads of (1, -2)
  EXPECT_TRUE(scaler.step(opt));
  EXPECT_EQ(values(p.grad()), (std::vector<double>{1.0, -2.0}));
  EXPECT_EQ(values(p), (std::vector<double>{0.0, 4.0}));
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 8.0);
  EXPECT_EQ(scaler.get_growth_tracker(), 1);
  set_grad(p, {8.0, 8.0});
  EXPECT_TRUE(scaler.step(opt));
  scaler.update();  // the second clean step in a row: growth
  EXPECT_EQ(scaler.get_scale(), 16.0);
  EXPECT_EQ(scaler.get_growth_tracker(), 0);
}

TEST(OptimGradScaler, InfSkipsTheStepAndBacksOff) {
  GradScaler scaler({.init_scale = 8.0, .growth_interval = 2});
  Tensor p = param({1.0, 2.0}, kFloat32), q = param({3.0}, kFloat32);
  SGD opt({p, q}, {.lr = 1.0});
  // One clean update, so the tracker is 1 when the overflow comes.
  set_grad(p, {8.0, 8.0});
  set_grad(q, {8.0});
  scaler.step(opt);
  scaler.update();
  ASSERT_EQ(scaler.get_growth_tracker(), 1);
  const std::vector<double> before_p = values(p), before_q = values(q);
  set_grad(p, {8.0, kInf});  // injected overflow
  set_grad(q, {8.0});
  EXPECT_FALSE(scaler.step(opt));
  EXPECT_EQ(values(p), before_p);  // skipped
  EXPECT_EQ(values(q), before_q);
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 4.0);
  EXPECT_EQ(scaler.get_growth_tracker(), 0);
  // NaN counts as well.
  set_grad(p, {NAN, 1.0});
  EXPECT_FALSE(scaler.step(opt));
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 2.0);
}

TEST(OptimGradScaler, ExplicitUnscaleBeforeClippingUnscalesOnce) {
  GradScaler scaler({.init_scale = 4.0});
  Tensor p = param({0.0, 0.0}, kFloat32);
  SGD opt({p}, {.lr = 1.0});
  set_grad(p, {12.0, 16.0});  // unscaled (3, 4), norm 5
  scaler.unscale_(opt);
  EXPECT_EQ(values(p.grad()), (std::vector<double>{3.0, 4.0}));
  EXPECT_NEAR(clip_grad_norm_({p}, 1.0), 5.0, 1e-6);
  EXPECT_TRUE(scaler.step(opt));  // does not unscale again
  expect_close(values(p), {-0.6, -0.8}, 1e-6);
  scaler.update();
}

TEST(OptimGradScaler, SeveralOptimizersBackOffWhenAnySawInf) {
  GradScaler scaler({.init_scale = 8.0});
  Tensor a = param({1.0}, kFloat32), b = param({1.0}, kFloat32);
  SGD opt_a({a}, {.lr = 1.0}), opt_b({b}, {.lr = 1.0});
  set_grad(a, {8.0});
  set_grad(b, {kInf});
  EXPECT_TRUE(scaler.step(opt_a));
  EXPECT_FALSE(scaler.step(opt_b));
  EXPECT_EQ(values(a), (std::vector<double>{0.0}));
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 4.0);
}

TEST(OptimGradScaler, GrowthStopsBeforeInfinity) {
  GradScaler scaler({.init_scale = 1e308, .growth_interval = 1});
  Tensor p = param({1.0});
  SGD opt({p});
  set_grad(p, {0.0});
  scaler.step(opt);
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 1e308);  // 2e308 is not finite: kept
}

TEST(OptimGradScaler, UpdateWithANewScale) {
  GradScaler scaler;
  scaler.update(128.0);
  EXPECT_EQ(scaler.get_scale(), 128.0);
  expect_error([&] { scaler.update(0.0); }, "GradScaler.update", "new_scale must be finite and > 0, got 0");
}

TEST(OptimGradScaler, Disabled) {
  GradScaler scaler({.enabled = false});
  Tensor p = param({1.0}, kFloat32);
  SGD opt({p}, {.lr = 1.0});
  Tensor loss = sum(p);
  EXPECT_TRUE(scaler.scale(loss).is_same(loss));
  EXPECT_EQ(scaler.get_scale(), 1.0);
  set_grad(p, {kInf});
  scaler.unscale_(opt);  // no-op
  EXPECT_TRUE(scaler.step(opt));  // steps without checks
  EXPECT_TRUE(std::isinf(values(p)[0]));
  scaler.update();  // no-op
  EXPECT_TRUE(scaler.state_dict().empty());
  scaler.load_state_dict({});  // ignored when disabled
}

TEST(OptimGradScaler, OrderErrors) {
  GradScaler scaler;
  Tensor p = param({1.0}, kFloat32);
  SGD opt({p});
  expect_error([&] { scaler.update(); }, "GradScaler.update", "no inf checks were recorded");
  set_grad(p, {1.0});
  scaler.unscale_(opt);
  expect_error([&] { scaler.unscale_(opt); }, "GradScaler.unscale_", "already been called on this optimizer");
  scaler.step(opt);
  expect_error([&] { scaler.unscale_(opt); }, "GradScaler.unscale_", "after step()");
  expect_error([&] { scaler.step(opt); }, "GradScaler.step", "step() has already been called");
  scaler.update();
  set_grad(p, {1.0});
  EXPECT_TRUE(scaler.step(opt));  // a new iteration
}

TEST(OptimGradScaler, Float16GradsAreRejected) {
  GradScaler scaler;
  Tensor p = param({1.0}, kFloat16);
  SGD opt({p});
  set_grad(p, {1.0});
  expect_error<DTypeError>([&] { scaler.unscale_(opt); }, "GradScaler.unscale_", "float16");
  expect_error([&] { scaler.update(); }, "GradScaler.update", "no inf checks");  // nothing was recorded
}

TEST(OptimGradScaler, OptionErrors) {
  expect_error([] { GradScaler({.init_scale = 0}); }, "GradScaler", "scale must be finite and > 0, got 0");
  expect_error([] { GradScaler({.growth_factor = 1.0}); }, "GradScaler", "growth_factor must be finite and > 1, got 1");
  expect_error([] { GradScaler({.backoff_factor = 1.0}); }, "GradScaler", "backoff_factor must be in (0, 1), got 1");
  expect_error([] { GradScaler({.growth_interval = 0}); }, "GradScaler", "growth_interval must be >= 1, got 0");
}

TEST(OptimGradScaler, StateDictRoundTrip) {
  GradScaler scaler({.init_scale = 8.0, .growth_factor = 4.0, .backoff_factor = 0.25, .growth_interval = 3});
  Tensor p = param({1.0}, kFloat32);
  SGD opt({p});
  set_grad(p, {1.0});
  scaler.step(opt);
  scaler.update();
  const StateDict state = scaler.state_dict();
  EXPECT_EQ(state.size(), 5u);
  EXPECT_EQ(state.at("scale").item<double>(), 8.0);
  EXPECT_EQ(state.at("scale").dtype(), kFloat64);
  EXPECT_EQ(state.at("growth_factor").item<double>(), 4.0);
  EXPECT_EQ(state.at("backoff_factor").item<double>(), 0.25);
  EXPECT_EQ(state.at("growth_interval").item<std::int64_t>(), 3);
  EXPECT_EQ(state.at("_growth_tracker").item<std::int64_t>(), 1);
  EXPECT_EQ(state.at("_growth_tracker").dtype(), kInt64);

  GradScaler loaded;
  loaded.load_state_dict(state);
  EXPECT_EQ(loaded.get_scale(), 8.0);
  EXPECT_EQ(loaded.get_growth_factor(), 4.0);
  EXPECT_EQ(loaded.get_backoff_factor(), 0.25);
  EXPECT_EQ(loaded.get_growth_interval(), 3);
  EXPECT_EQ(loaded.get_growth_tracker(), 1);
}

TEST(OptimGradScaler, LoadErrors) {
  const std::string op = "GradScaler.load_state_dict";
  GradScaler scaler;
  const StateDict good = GradScaler({.init_scale = 2.0}).state_dict();
  expect_error([&] { scaler.load_state_dict({}); }, op, "the state dict is empty");
  StateDict missing = good;
  missing.erase("scale");
  expect_error([&] { scaler.load_state_dict(missing); }, op, "missing key \"scale\"");
  StateDict unknown = good;
  unknown["found_inf"] = scalar_tensor(0.0);
  expect_error([&] { scaler.load_state_dict(unknown); }, op, "unexpected key(s) \"found_inf\"");
  StateDict bad_scale = good;
  bad_scale["scale"] = scalar_tensor(-1.0);
  expect_error([&] { scaler.load_state_dict(bad_scale); }, op, "got -1");
  StateDict bad_tracker = good;
  bad_tracker["_growth_tracker"] = scalar_tensor(std::int64_t{2000});
  expect_error([&] { scaler.load_state_dict(bad_tracker); }, op, "_growth_tracker 2000 is outside");
  EXPECT_EQ(scaler.get_scale(), 65536.0);  // unchanged
}

}  // namespace
}  // namespace infini::optim::test::optim_grad_scaler_test
