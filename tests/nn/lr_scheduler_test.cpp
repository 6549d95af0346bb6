// LR schedulers against their closed forms (written out below, step by step), the state
// dict round trip and every error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <numbers>
#include <string>
#include <vector>

#include "optim_test_util.h"

import infini.nn;

namespace infini::optim::test::lr_scheduler_test {
namespace {

constexpr double kPi = std::numbers::pi;

// An SGD with one parameter per group, group g at lrs[g].
std::unique_ptr<SGD> make_sgd(const std::vector<double>& lrs) {
  std::vector<ParamGroup<SGDOptions>> groups;
  for (double lr : lrs) groups.push_back({{param({0.0})}, SGDOptions{.lr = lr}});
  return std::make_unique<SGD>(std::move(groups));
}

using Expected = std::function<double(double base, std::int64_t step)>;

// Steps 0..steps: the optimizer's lrs and get_last_lr() against expected(base, step).
void expect_schedule(LRScheduler& scheduler, Optimizer& opt, const std::vector<double>& bases, std::int64_t steps,
                     const Expected& expected, const std::string& what) {
  for (std::int64_t step = 0; step <= steps; ++step) {
    if (step > 0) scheduler.step();
    ASSERT_EQ(scheduler.last_epoch(), step) << what;
    ASSERT_EQ(scheduler.get_last_lr().size(), bases.size()) << what;
    for (std::size_t g = 0; g < bases.size(); ++g) {
      const double want = expected(bases[g], step);
      EXPECT_NEAR(opt.lr(g), want, 1e-12 * std::max(1.0, std::abs(want))) << what << " step " << step << " group " << g;
      EXPECT_EQ(scheduler.get_last_lr()[g], opt.lr(g)) << what;
      EXPECT_EQ(scheduler.lr_at(g, step), opt.lr(g)) << what;
    }
  }
}

TEST(LRScheduler, ConstantLR) {
  auto opt = make_sgd({0.1, 0.02});
  ConstantLR s(*opt, 0.5, 4);
  expect_schedule(s, *opt, {0.1, 0.02}, 8, [](double b, std::int64_t t) { return t < 4 ? b * 0.5 : b; }, "ConstantLR");
  auto defaults = make_sgd({0.3});
  ConstantLR d(*defaults);  // factor 1/3 for 5 steps
  expect_schedule(d, *defaults, {0.3}, 7, [](double b, std::int64_t t) { return t < 5 ? b / 3 : b; }, "defaults");
}

TEST(LRScheduler, StepLR) {
  auto opt = make_sgd({0.1, 0.02});
  StepLR s(*opt, 3, 0.5);
  // 0.1 for steps 0-2, 0.05 for 3-5, 0.025 for 6-8, ...
  expect_schedule(s, *opt, {0.1, 0.02}, 12, [](double b, std::int64_t t) {
    double lr = b;
    for (std::int64_t k = 3; k <= t; k += 3) lr *= 0.5;
    return lr;
  }, "StepLR");
}

TEST(LRScheduler, MultiStepLR) {
  auto opt = make_sgd({1.0});
  MultiStepLR s(*opt, {6, 2, 6}, 0.1);  // unsorted; 6 twice
  expect_schedule(s, *opt, {1.0}, 9, [](double b, std::int64_t t) { return t < 2 ? b : t < 6 ? b * 0.1 : b * 0.001; },
                  "MultiStepLR");
}

TEST(LRScheduler, ExponentialLR) {
  auto opt = make_sgd({0.5});
  ExponentialLR s(*opt, 0.9);
  expect_schedule(s, *opt, {0.5}, 30, [](double b, std::int64_t t) {
    for (std::int64_t k = 0; k < t; ++k) b *= 0.9;
    return b;
  }, "ExponentialLR");
}

TEST(LRScheduler, LinearLRWarmup) {
  auto opt = make_sgd({0.8});
  LinearLR s(*opt, 0.25, 1.0, 4);
  const std::vector<double> factors = {0.25, 0.4375, 0.625, 0.8125, 1, 1, 1};
  expect_schedule(s, *opt, {0.8}, 6, [&](double b, std::int64_t t) { return b * factors[t]; }, "LinearLR");
  auto decay = make_sgd({1.0});
  LinearLR down(*decay, 1.0, 0.0, 2);  // 1, 0.5, 0, 0
  expect_schedule(down, *decay, {1.0}, 3, [](double, std::int64_t t) { return t == 0 ? 1.0 : t == 1 ? 0.5 : 0.0; },
                  "LinearLR decay");
}

TEST(LRScheduler, CosineAnnealingLR) {
  auto opt = make_sgd({0.1, 0.05});
  CosineAnnealingLR s(*opt, 10, 0.001);
  expect_schedule(s, *opt, {0.1, 0.05}, 25, [](double b, std::int64_t t) {
    return 0.001 + (b - 0.001) * (1 + std::cos(kPi * static_cast<double>(t) / 10)) / 2;
  }, "CosineAnnealingLR");
  EXPECT_NEAR(s.lr_at(0, 5), 0.0505, 1e-15);
  EXPECT_NEAR(s.lr_at(0, 10), 0.001, 1e-15);
}

TEST(LRScheduler, CosineWithWarmupIsLlmC) {
  // llm.c: lr (t + 1) / warmup while t < warmup, then min + (lr - min) (1 + cos(pi r)) / 2,
  // r = (t - warmup) / (total - warmup); here min = 0.1 lr (final_learning_rate_frac 0.1).
  auto opt = make_sgd({0.6});
  CosineWithWarmupLR s(*opt, 3, 11, 0.06);
  const std::vector<double> by_hand = {0.2, 0.4, 0.6, 0.6, 0.06 + 0.54 * (1 + std::cos(kPi / 8)) / 2};
  expect_schedule(s, *opt, {0.6}, 14, [&](double b, std::int64_t t) {
    if (t < 5) return by_hand[t];
    if (t == 7) return 0.06 + 0.54 * 0.5;  // halfway
    if (t >= 11) return 0.06;              // held at min_lr after total_steps
    return 0.06 + (b - 0.06) * 0.5 * (1 + std::cos(kPi * static_cast<double>(t - 3) / 8));
  }, "CosineWithWarmupLR");
  EXPECT_DOUBLE_EQ(cosine_with_warmup(1.0, 0, 10, 100, 0), 0.1);
  EXPECT_DOUBLE_EQ(cosine_with_warmup(1.0, 9, 10, 100, 0), 1.0);
  EXPECT_DOUBLE_EQ(cosine_with_warmup(1.0, 100, 10, 100, 0.01), 0.01);
  EXPECT_DOUBLE_EQ(cosine_with_warmup(1.0, 0, 0, 100, 0), 1.0);  // no warmup
}

// PyTorch's OneCycleLR phases for max_lr m, written out: initial = m / 25, min = initial / 1e4.
double one_cycle(double m, std::int64_t t, std::int64_t total, bool cos_anneal, bool three_phase) {
  const double initial = m / 25, lowest = initial / 1e4, n = static_cast<double>(total);
  const double up = 0.3 * n - 1;
  auto anneal = [&](double from, double to, double pct) {
    return cos_anneal ? to + (from - to) / 2 * (std::cos(kPi * pct) + 1) : from + (to - from) * pct;
  };
  const auto s = static_cast<double>(t);
  if (t == total) return lowest;  // the last step() holds the end lr
  if (s <= up) return anneal(initial, m, s / up);
  if (!three_phase) return anneal(m, lowest, (s - up) / (n - 1 - up));
  const double down = 0.6 * n - 2;
  if (s <= down) return anneal(m, initial, (s - up) / (down - up));
  return anneal(initial, lowest, (s - down) / (n - 1 - down));
}

TEST(LRScheduler, OneCycleLR) {
  for (const bool cos_anneal : {true, false}) {
    for (const bool three_phase : {false, true}) {
      auto opt = make_sgd({123.0, 123.0});  // the groups' own lrs are not used
      OneCycleLR s(*opt, {1.0, 0.5}, 20,
                   {.anneal_strategy = cos_anneal ? AnnealStrategy::Cos : AnnealStrategy::Linear,
                    .three_phase = three_phase});
      EXPECT_EQ(s.base_lrs(), (std::vector<double>{0.04, 0.02}));
      expect_schedule(s, *opt, {1.0, 0.5}, 20,
                      [&](double m, std::int64_t t) { return one_cycle(m, t, 20, cos_anneal, three_phase); },
                      "OneCycleLR");
      expect_error<Error>([&] { s.step(); }, "OneCycleLR", "tried to step 21 times; total_steps is 20");
      EXPECT_EQ(s.last_epoch(), 20);  // a failed step changes nothing
    }
  }
  // By hand, total 10: steps 0, 1, 2 go 0.04 -> 0.52 -> 1 (up ends at 0.3 * 10 - 1 = 2);
  // step 9 reaches 0.04 / 1e4.
  auto opt = make_sgd({1.0});
  OneCycleLR s(*opt, 1.0, 10);
  EXPECT_NEAR(s.lr_at(0, 1), 0.52, 1e-15);
  EXPECT_NEAR(s.lr_at(0, 2), 1.0, 1e-15);
  EXPECT_NEAR(s.lr_at(0, 9), 4e-6, 1e-18);
}

TEST(LRScheduler, LambdaLR) {
  auto opt = make_sgd({0.1, 0.2});
  LambdaLR s(*opt, [](std::int64_t t) { return 1.0 / static_cast<double>(t + 1); });
  expect_schedule(s, *opt, {0.1, 0.2}, 6, [](double b, std::int64_t t) { return b / static_cast<double>(t + 1); },
                  "LambdaLR");
  auto opt2 = make_sgd({1.0, 1.0});
  LambdaLR per_group(*opt2, std::vector<LambdaLR::Lambda>{[](std::int64_t) { return 0.5; },
                                                          [](std::int64_t t) { return static_cast<double>(t); }});
  per_group.step();
  per_group.step();
  EXPECT_EQ(per_group.get_last_lr(), (std::vector<double>{0.5, 2.0}));
}

TEST(LRScheduler, SequentialLRWarmupThenCosine) {
  auto opt = make_sgd({0.1});
  // Built one after the other, as in PyTorch: the cosine sees the warmup's first lr, but
  // SequentialLR gives every scheduler the original base lr.
  auto warmup = std::make_shared<LinearLR>(*opt, 0.1, 1.0, 3);
  auto cosine = std::make_shared<CosineAnnealingLR>(*opt, 5);
  SequentialLR s(*opt, {warmup, cosine}, {3});
  EXPECT_EQ(cosine->base_lrs(), (std::vector<double>{0.1}));
  expect_schedule(s, *opt, {0.1}, 12, [](double b, std::int64_t t) {
    if (t < 3) return b * (0.1 + 0.9 * static_cast<double>(t) / 3);
    return b * (1 + std::cos(kPi * static_cast<double>(t - 3) / 5)) / 2;
  }, "SequentialLR");
  // Three parts; the constant part restarts at its own step 0 at milestone 2.
  auto opt3 = make_sgd({1.0});
  auto a = std::make_shared<ExponentialLR>(*opt3, 0.5);
  auto b = std::make_shared<ConstantLR>(*opt3, 0.1, 2);
  auto c = std::make_shared<StepLR>(*opt3, 1, 0.5);
  SequentialLR three(*opt3, {a, b, c}, {2, 5});
  const std::vector<double> by_hand = {1, 0.5, 0.1, 0.1, 1, 1, 0.5, 0.25};
  expect_schedule(three, *opt3, {1.0}, 7, [&](double, std::int64_t t) { return by_hand[t]; }, "SequentialLR x3");
}

// Runs `make` twice: one scheduler steps `before` times, saves, and a fresh one on a fresh
// optimizer loads the state; then both step together and must agree exactly.
void expect_resumes(const std::function<std::unique_ptr<LRScheduler>(Optimizer&)>& make, std::int64_t before,
                    std::int64_t after, const std::string& what) {
  auto opt_a = make_sgd({0.1, 0.03}), opt_b = make_sgd({0.1, 0.03});
  auto a = make(*opt_a);
  for (std::int64_t i = 0; i < before; ++i) a->step();
  const StateDict state = a->state_dict();
  EXPECT_EQ(state.at("last_epoch").item<std::int64_t>(), before) << what;
  EXPECT_EQ(state.at("last_epoch").dtype(), kInt64) << what;
  EXPECT_EQ(state.at("base_lrs").shape(), (Shape{2})) << what;
  EXPECT_EQ(state.at("last_lr").dtype(), kFloat64) << what;
  auto b = make(*opt_b);
  b->load_state_dict(state);
  EXPECT_EQ(b->last_epoch(), before) << what;
  EXPECT_EQ(b->get_last_lr(), a->get_last_lr()) << what;
  for (std::int64_t i = 0; i < after; ++i) {
    a->step();
    b->step();
    EXPECT_EQ(b->get_last_lr(), a->get_last_lr()) << what << " step " << before + i + 1;
    EXPECT_EQ(opt_b->lr(1), opt_a->lr(1)) << what;
  }
}

TEST(LRScheduler, StateDictRoundTrip) {
  expect_resumes([](Optimizer& o) { return std::make_unique<ConstantLR>(o, 0.5, 6); }, 4, 5, "ConstantLR");
  expect_resumes([](Optimizer& o) { return std::make_unique<StepLR>(o, 2, 0.7); }, 5, 6, "StepLR");
  expect_resumes([](Optimizer& o) { return std::make_unique<MultiStepLR>(o, std::vector<std::int64_t>{3, 8}); }, 5, 6,
                 "MultiStepLR");
  expect_resumes([](Optimizer& o) { return std::make_unique<ExponentialLR>(o, 0.95); }, 7, 4, "ExponentialLR");
  expect_resumes([](Optimizer& o) { return std::make_unique<LinearLR>(o, 0.2, 1.0, 10); }, 3, 9, "LinearLR");
  expect_resumes([](Optimizer& o) { return std::make_unique<CosineAnnealingLR>(o, 9, 1e-4); }, 4, 8, "Cosine");
  expect_resumes([](Optimizer& o) { return std::make_unique<CosineWithWarmupLR>(o, 3, 12, 1e-3); }, 2, 12, "Warmup");
  expect_resumes([](Optimizer& o) { return std::make_unique<OneCycleLR>(o, 0.5, 15); }, 6, 9, "OneCycleLR");
  expect_resumes([](Optimizer& o) { return std::make_unique<LambdaLR>(o, [](std::int64_t t) { return 0.9 + 0.01 * t; }); },
                 3, 3, "LambdaLR");
  expect_resumes([](Optimizer& o) {
    auto warm = std::make_shared<LinearLR>(o, 0.5, 1.0, 4);
    auto cos = std::make_shared<CosineAnnealingLR>(o, 6);
    return std::make_unique<SequentialLR>(o, std::vector<std::shared_ptr<LRScheduler>>{warm, cos},
                                          std::vector<std::int64_t>{4});
  }, 3, 8, "SequentialLR");
}

TEST(LRScheduler, StateDictKeysAndLoadErrors) {
  auto opt = make_sgd({0.1, 0.03});
  StepLR s(*opt, 2, 0.5);
  s.step();
  const StateDict state = s.state_dict();
  EXPECT_EQ(state.size(), 5u);  // last_epoch base_lrs last_lr step_size gamma
  EXPECT_EQ(state.at("step_size").item<std::int64_t>(), 2);
  EXPECT_EQ(state.at("gamma").item<double>(), 0.5);

  StepLR other(*opt, 2, 0.1);
  expect_error<Error>([&] { other.load_state_dict(state); }, "StepLR.load_state_dict", "\"gamma\"");
  StateDict missing = state;
  missing.erase("last_lr");
  expect_error<Error>([&] { s.load_state_dict(missing); }, "StepLR.load_state_dict", "missing key \"last_lr\"");
  StateDict unknown = state;
  unknown["momentum"] = scalar_tensor(0.9);
  expect_error<Error>([&] { s.load_state_dict(unknown); }, "StepLR.load_state_dict", "\"momentum\"");
  StateDict negative = state;
  negative["last_epoch"] = scalar_tensor(std::int64_t{-1});
  expect_error<IndexError>([&] { s.load_state_dict(negative); }, "StepLR.load_state_dict", "-1");
  auto one_group = make_sgd({0.1});
  StepLR fewer(*one_group, 2, 0.5);
  expect_error<ShapeError>([&] { fewer.load_state_dict(state); }, "StepLR.load_state_dict", "expected [1]");
  EXPECT_EQ(s.last_epoch(), 1);  // failed loads change nothing

  // Nested hyperparameters of SequentialLR.
  auto o2 = make_sgd({1.0});
  auto a = std::make_shared<StepLR>(*o2, 3);
  auto b = std::make_shared<ExponentialLR>(*o2, 0.9);
  SequentialLR seq(*o2, {a, b}, {4});
  const StateDict nested = seq.state_dict();
  EXPECT_EQ(nested.at("schedulers.0.step_size").item<std::int64_t>(), 3);
  EXPECT_EQ(nested.at("schedulers.1.gamma").item<double>(), 0.9);
  EXPECT_EQ(nested.at("milestones").shape(), (Shape{1}));
}

TEST(LRScheduler, ConstructorErrors) {
  auto opt = make_sgd({0.1});
  expect_error<Error>([&] { ConstantLR(*opt, 1.5); }, "ConstantLR", "factor");
  expect_error<Error>([&] { ConstantLR(*opt, 0.5, -1); }, "ConstantLR", "total_iters");
  expect_error<Error>([&] { StepLR(*opt, 0); }, "StepLR", "step_size must be >= 1, got 0");
  expect_error<Error>([&] { StepLR(*opt, 2, -0.5); }, "StepLR", "gamma");
  expect_error<Error>([&] { MultiStepLR(*opt, {1}, -1); }, "MultiStepLR", "gamma");
  expect_error<Error>([&] { ExponentialLR(*opt, -0.1); }, "ExponentialLR", "gamma");
  expect_error<Error>([&] { LinearLR(*opt, 0.0); }, "LinearLR", "start_factor");
  expect_error<Error>([&] { LinearLR(*opt, 0.5, 1.5); }, "LinearLR", "end_factor");
  expect_error<Error>([&] { LinearLR(*opt, 0.5, 1.0, 0); }, "LinearLR", "total_iters");
  expect_error<Error>([&] { CosineAnnealingLR(*opt, 0); }, "CosineAnnealingLR", "T_max");
  expect_error<Error>([&] { CosineAnnealingLR(*opt, 5, -1); }, "CosineAnnealingLR", "eta_min");
  expect_error<Error>([&] { CosineWithWarmupLR(*opt, 10, 10); }, "CosineWithWarmupLR", "warmup_steps 10, total_steps 10");
  expect_error<Error>([&] { CosineWithWarmupLR(*opt, 1, 10, -1); }, "CosineWithWarmupLR", "min_lr");
  expect_error<Error>([&] { OneCycleLR(*opt, 1.0, 0); }, "OneCycleLR", "total_steps");
  expect_error<Error>([&] { OneCycleLR(*opt, 0.0, 10); }, "OneCycleLR", "max_lr");
  expect_error<Error>([&] { OneCycleLR(*opt, {1.0, 2.0}, 10); }, "OneCycleLR", "2 max lrs for 1 param groups");
  expect_error<Error>([&] { OneCycleLR(*opt, 1.0, 10, {.pct_start = 1.5}); }, "OneCycleLR", "pct_start");
  expect_error<Error>([&] { OneCycleLR(*opt, 1.0, 10, {.div_factor = 0}); }, "OneCycleLR", "div_factor");
  expect_error<Error>([&] { LambdaLR(*opt, LambdaLR::Lambda{}); }, "LambdaLR", "empty");
  expect_error<Error>([&] { LambdaLR(*opt, std::vector<LambdaLR::Lambda>(2, [](std::int64_t) { return 1.0; })); },
                      "LambdaLR", "2 lr_lambdas for 1 param groups");
  auto other = make_sgd({0.1});
  auto mine = std::make_shared<StepLR>(*opt, 2);
  auto theirs = std::make_shared<StepLR>(*other, 2);
  expect_error<Error>([&] { SequentialLR(*opt, {}, {}); }, "SequentialLR", "at least one");
  expect_error<Error>([&] { SequentialLR(*opt, {mine, theirs}, {3}); }, "SequentialLR", "another optimizer");
  expect_error<Error>([&] { SequentialLR(*opt, {mine, mine}, {}); }, "SequentialLR", "expected 1 milestones");
  expect_error<Error>([&] { SequentialLR(*opt, {mine, mine, mine}, {4, 2}); }, "SequentialLR", "non-decreasing");
  // A schedule that reaches a negative lr is refused by the optimizer.
  expect_error<Error>([&] { LambdaLR(*opt, [](std::int64_t) { return -1.0; }); }, "SGD.set_lr", "");
}

}  // namespace
}  // namespace infini::optim::test::lr_scheduler_test
