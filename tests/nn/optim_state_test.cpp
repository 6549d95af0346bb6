// The Optimizer base: param groups, learning rates, zero_grad, parameter checks, and the
// state dict (layout, resuming bit for bit, load errors).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "optim_test_util.h"

import infini.nn;

namespace infini::optim::test::optim_state_test {
namespace {

TEST(OptimBase, GroupsParamsAndLearningRates) {
  Tensor a = param({1.0}), b = param({2.0}), c = param({3.0});
  SGD opt({{.params = {a, b}}, {.params = {c}, .options = SGDOptions{.lr = 0.5}}}, {.lr = 0.1});
  Optimizer& base = opt;
  EXPECT_EQ(base.num_param_groups(), 2u);
  EXPECT_EQ(base.num_params(), 3u);
  EXPECT_EQ(base.lr(0), 0.1);  // the defaults
  EXPECT_EQ(base.lr(1), 0.5);
  EXPECT_EQ(base.params(0).size(), 2u);
  EXPECT_TRUE(base.params(1)[0].is_same(c));
  const std::vector<Tensor> all = base.all_params();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_TRUE(all[0].is_same(a) && all[1].is_same(b) && all[2].is_same(c));
  base.set_lr(1, 0.25);
  EXPECT_EQ(base.lr(1), 0.25);
  EXPECT_EQ(opt.options(1).lr, 0.25);
  set_grad(c, {4.0});
  base.step();
  EXPECT_EQ(values(c)[0], 2.0);  // 3 - 0.25 * 4
  EXPECT_EQ(base.name(), "SGD");
}

TEST(OptimBase, AddParamGroup) {
  Tensor a = param({1.0}), b = param({2.0});
  Adam opt({a});
  opt.add_param_group({.params = {b}, .options = AdamOptions{.lr = 0.5}});
  EXPECT_EQ(opt.num_param_groups(), 2u);
  EXPECT_EQ(opt.lr(1), 0.5);
  set_grad(b, {1.0});
  opt.step();
  EXPECT_NEAR(values(b)[0], 1.5, 1e-7);  // first Adam step: lr * g / (|g| + eps)
  expect_error([&] { opt.add_param_group({.params = {a}}); }, "Adam", "already in param group 0");
  EXPECT_EQ(opt.num_param_groups(), 2u);
}

TEST(OptimBase, ZeroGradSetToNone) {
  Tensor a = param({1.0, 2.0}), b = param({3.0});
  SGD opt({a, b});
  set_grad(a, {5.0, 6.0});
  opt.zero_grad();
  EXPECT_FALSE(a.grad().defined());
  EXPECT_FALSE(b.grad().defined());  // never had one: stays undefined
}

TEST(OptimBase, ZeroGradToZeros) {
  Tensor a = param({1.0, 2.0}), b = param({3.0});
  SGD opt({a, b});
  set_grad(a, {5.0, 6.0});
  const Tensor old_grad = a.grad();
  opt.zero_grad(/*set_to_none=*/false);
  ASSERT_TRUE(a.grad().defined());
  EXPECT_EQ(values(a.grad()), (std::vector<double>{0.0, 0.0}));
  EXPECT_TRUE(a.grad().storage().is_same(old_grad.storage()));  // zeroed in place
  EXPECT_FALSE(b.grad().defined());
  // Backward accumulates into the zeroed grad.
  sum(mul(a, a)).backward();
  EXPECT_EQ(values(a.grad()), (std::vector<double>{2.0, 4.0}));
}

TEST(OptimBase, ZeroGradDetachesAGradWithHistory) {
  Tensor a = param({1.0, 2.0});
  SGD opt({a});
  sum(mul(a, a)).backward(Tensor(), false, /*create_graph=*/true);
  ASSERT_TRUE(a.grad().requires_grad());
  opt.zero_grad(false);
  EXPECT_FALSE(a.grad().requires_grad());
  EXPECT_EQ(values(a.grad()), (std::vector<double>{0.0, 0.0}));
}

TEST(OptimBase, ParameterErrors) {
  Tensor p = param({1.0});
  expect_error([] { SGD(std::vector<Tensor>{}); }, "SGD", "empty parameter list");
  expect_error([&] { SGD({p, p}); }, "SGD", "appears twice");
  expect_error([&] { SGD({{.params = {p}}, {.params = {p}}}); }, "SGD", "already in param group 0");
  expect_error([&] { SGD({mul(p, 2.0)}); }, "SGD", "not a leaf");
  expect_error<DTypeError>([] { SGD({arange(3)}); }, "SGD", "int64");
  expect_error([] { SGD({Tensor()}); }, "SGD", "undefined");
  expect_error([] { Adam({zeros({1}, {.dtype = kFloat64}).expand({3})}); }, "Adam", "several elements at one address");
}

TEST(OptimBase, GroupIndexErrors) {
  Tensor p = param({1.0});
  SGD opt({p});
  expect_error<IndexError>([&] { opt.lr(1); }, "SGD.lr", "param group 1 is out of range");
  expect_error<IndexError>([&] { opt.set_lr(3, 0.1); }, "SGD.set_lr", "param group 3");
  expect_error<IndexError>([&] { opt.params(1); }, "SGD.params", "param group 1");
  expect_error<IndexError>([&] { opt.options(1); }, "SGD.options", "param group 1");
  expect_error([&] { opt.set_lr(0, -1.0); }, "SGD.set_lr", "learning rate -1");
  EXPECT_EQ(opt.lr(0), 1e-3);
  expect_error([&] { opt.set_options(0, {.momentum = -1}); }, "SGD.set_options", "momentum -1");
}

// ---- state dict ----

TEST(OptimState, AdamKeysAndValues) {
  Tensor a = param({1.0, 2.0}), b = param({3.0});
  Adam opt({{.params = {a}}, {.params = {b}, .options = AdamOptions{.lr = 0.5, .betas = {0.8, 0.9}, .amsgrad = true}}});
  set_grad(a, {1.0, -1.0});
  opt.step();
  const StateDict state = opt.state_dict();
  std::vector<std::string> keys;
  for (const auto& [key, value] : state) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{
                      "param_groups.0.amsgrad", "param_groups.0.betas", "param_groups.0.eps", "param_groups.0.lr",
                      "param_groups.0.params", "param_groups.0.weight_decay", "param_groups.1.amsgrad",
                      "param_groups.1.betas", "param_groups.1.eps", "param_groups.1.lr", "param_groups.1.params",
                      "param_groups.1.weight_decay", "state.0.exp_avg", "state.0.exp_avg_sq", "state.0.step"}));
  EXPECT_EQ(state.at("param_groups.1.lr").dtype(), kFloat64);
  EXPECT_EQ(state.at("param_groups.1.lr").dim(), 0);
  EXPECT_EQ(state.at("param_groups.1.lr").item<double>(), 0.5);
  EXPECT_EQ(values(state.at("param_groups.1.betas")), (std::vector<double>{0.8, 0.9}));
  EXPECT_EQ(state.at("param_groups.1.amsgrad").dtype(), kInt64);
  EXPECT_EQ(state.at("param_groups.1.amsgrad").item<std::int64_t>(), 1);
  EXPECT_EQ(state.at("param_groups.0.params").dtype(), kInt64);
  EXPECT_EQ(values(state.at("param_groups.0.params")), (std::vector<double>{0}));
  EXPECT_EQ(values(state.at("param_groups.1.params")), (std::vector<double>{1}));
  expect_close(values(state.at("state.0.exp_avg")), {0.1, -0.1}, 1e-15);  // (1 - beta1) * grad
  // A snapshot: later steps do not change it.
  const std::vector<double> saved = values(state.at("state.0.exp_avg"));
  opt.step();
  EXPECT_EQ(values(state.at("state.0.exp_avg")), saved);
}

TEST(OptimState, SGDKeys) {
  Tensor a = param({1.0});
  SGD opt({a}, {.lr = 0.1, .momentum = 0.9, .nesterov = true});
  set_grad(a, {1.0});
  opt.step();
  const StateDict state = opt.state_dict();
  EXPECT_EQ(state.size(), 7u);
  for (const char* key : {"param_groups.0.lr", "param_groups.0.momentum", "param_groups.0.dampening",
                          "param_groups.0.weight_decay", "param_groups.0.nesterov", "param_groups.0.params",
                          "state.0.momentum_buffer"})
    EXPECT_TRUE(state.contains(key)) << key;
  EXPECT_EQ(state.at("param_groups.0.nesterov").item<std::int64_t>(), 1);
}

// Runs `steps` steps of opt over params with deterministic grads (step numbers from `first`).
void run(Optimizer& opt, const std::vector<Tensor>& params, int first, int steps) {
  for (int t = first; t < first + steps; ++t) {
    for (std::size_t i = 0; i < params.size(); ++i) {
      const double k = static_cast<double>(i + 1);
      // The last parameter has no grad every third step.
      if (i + 1 == params.size() && t % 3 == 1) {
        params[i].set_grad(Tensor());
        continue;
      }
      params[i].set_grad(sin(arange(params[i].numel(), {.dtype = params[i].dtype()}) * (0.7 * k + t)).view(
          params[i].shape()));
    }
    opt.step();
  }
}

std::vector<Tensor> make_params() {
  return {(arange(6, {.dtype = kFloat32}) * 0.1).view({2, 3}).requires_grad_(),
          (arange(4, {.dtype = kFloat32}) - 2.0).requires_grad_(), full({3}, 0.5f).requires_grad_()};
}

std::vector<Tensor> copies(const std::vector<Tensor>& params) {
  std::vector<Tensor> out;
  for (const Tensor& p : params) out.push_back(p.detach().clone().requires_grad_());
  return out;
}

template <class Opt, class Options>
std::unique_ptr<Opt> make(const std::vector<Tensor>& p, const Options& first, const Options& second) {
  return std::make_unique<Opt>(
      std::vector<ParamGroup<Options>>{{.params = {p[0], p[1]}, .options = first}, {.params = {p[2]}, .options = second}});
}

// 3 steps, save, load into a fresh optimizer over copies, 3 more steps == 6 steps in one go.
template <class Opt, class Options>
void check_resume(const Options& first, const Options& second) {
  std::vector<Tensor> straight = make_params(), resumed = make_params();
  auto opt_straight = make<Opt>(straight, first, second);
  run(*opt_straight, straight, 0, 6);

  auto opt_before = make<Opt>(resumed, first, second);
  run(*opt_before, resumed, 0, 3);
  const StateDict saved = opt_before->state_dict();
  std::vector<Tensor> continued = copies(resumed);
  auto opt_after = make<Opt>(continued, Options{}, Options{});  // options come from the state dict
  opt_after->load_state_dict(saved);
  run(*opt_after, continued, 3, 3);

  for (std::size_t i = 0; i < straight.size(); ++i) expect_identical(continued[i], straight[i], "param " + std::to_string(i));
  const StateDict a = opt_after->state_dict(), b = opt_straight->state_dict();
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [key, value] : b) expect_identical(a.at(key), value, key);
}

TEST(OptimState, SGDResumesBitForBit) {
  check_resume<SGD>(SGDOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.2, .weight_decay = 0.01},
                    SGDOptions{.lr = 0.05, .momentum = 0.5, .nesterov = true});
}

TEST(OptimState, AdamResumesBitForBit) {
  check_resume<Adam>(AdamOptions{.lr = 0.01, .betas = {0.8, 0.99}, .weight_decay = 0.1},
                     AdamOptions{.lr = 0.02, .amsgrad = true});
}

TEST(OptimState, AdamWResumesBitForBit) {
  check_resume<AdamW>(AdamWOptions{.lr = 0.01, .amsgrad = true}, AdamWOptions{.lr = 0.03, .weight_decay = 0});
}

TEST(OptimState, LoadConvertsStateToTheParameterDtypeAndAcceptsAFloatStep) {
  Tensor a = param({1.0, 2.0});  // float64
  Adam opt({a});
  StateDict state = opt.state_dict();
  state["state.0.step"] = scalar_tensor(2.0f);  // PyTorch's float32 step
  state["state.0.exp_avg"] = from_vector<float>({0.5f, 0.25f});
  state["state.0.exp_avg_sq"] = from_vector<float>({1.0f, 4.0f});
  opt.load_state_dict(state);
  const StateDict loaded = opt.state_dict();
  EXPECT_EQ(loaded.at("state.0.step").item<std::int64_t>(), 2);
  EXPECT_EQ(loaded.at("state.0.exp_avg").dtype(), kFloat64);
  EXPECT_EQ(values(loaded.at("state.0.exp_avg_sq")), (std::vector<double>{1.0, 4.0}));
}

TEST(OptimState, LoadCopiesTheTensors) {
  Tensor a = param({1.0});
  SGD opt({a}, {.momentum = 0.9});
  StateDict state = opt.state_dict();
  Tensor buffer = from_vector<double>({3.0});
  state["state.0.momentum_buffer"] = buffer;
  opt.load_state_dict(state);
  buffer.fill_(7.0);
  EXPECT_EQ(values(opt.state_dict().at("state.0.momentum_buffer")), (std::vector<double>{3.0}));
}

// A saved Adam state with two groups (params 0, 1 | 2), every parameter stepped once.
struct Saved {
  std::vector<Tensor> params = {param({1.0, 2.0}), param({3.0}), param({4.0})};
  std::unique_ptr<Adam> opt = std::make_unique<Adam>(
      std::vector<ParamGroup<AdamOptions>>{{.params = {params[0], params[1]}}, {.params = {params[2]}}});
  StateDict state;
  Saved() {
    for (const Tensor& p : params) p.set_grad(ones_like(p));
    opt->step();
    state = opt->state_dict();
  }
};

TEST(OptimState, LoadErrorsGroupsAndParams) {
  const std::string op = "Adam.load_state_dict";
  Saved s;
  Adam one_group({param({1.0, 2.0}), param({3.0}), param({4.0})});
  expect_error([&] { one_group.load_state_dict(s.state); }, op, "the state dict has 2 parameter groups");
  Adam other_sizes(std::vector<ParamGroup<AdamOptions>>{{.params = {param({1.0})}}, {.params = {param({3.0}), param({4.0})}}});
  expect_error([&] { other_sizes.load_state_dict(s.state); }, op, "param group 0 of the state dict has 2 parameters");

  StateDict gap = s.state;
  for (const char* key : {"amsgrad", "betas", "eps", "lr", "params", "weight_decay"}) {
    gap.erase(std::string("param_groups.1.") + key);
    gap[std::string("param_groups.2.") + key] = s.state.at(std::string("param_groups.1.") + key);
  }
  expect_error([&] { s.opt->load_state_dict(gap); }, op, "numbered up to 2");

  StateDict twice = s.state;
  twice["param_groups.1.params"] = from_vector<std::int64_t>({0});
  expect_error([&] { s.opt->load_state_dict(twice); }, op, "parameter number 0 appears twice");

  StateDict float_ids = s.state;
  float_ids["param_groups.0.params"] = from_vector<double>({0, 1});
  expect_error<DTypeError>([&] { s.opt->load_state_dict(float_ids); }, op, "param_groups.0.params");

  StateDict orphan = s.state;
  orphan["state.9.step"] = scalar_tensor(std::int64_t{1});
  expect_error([&] { s.opt->load_state_dict(orphan); }, op, "state.9 belongs to no parameter");
}

TEST(OptimState, LoadErrorsKeys) {
  const std::string op = "Adam.load_state_dict";
  Saved s;
  StateDict missing = s.state;
  missing.erase("param_groups.0.lr");
  expect_error([&] { s.opt->load_state_dict(missing); }, op, "missing key \"param_groups.0.lr\"");
  StateDict missing_state = s.state;
  missing_state.erase("state.2.exp_avg_sq");
  expect_error([&] { s.opt->load_state_dict(missing_state); }, op, "missing key \"state.2.exp_avg_sq\"");
  StateDict unknown_option = s.state;
  unknown_option["param_groups.1.momentum"] = scalar_tensor(0.9);
  expect_error([&] { s.opt->load_state_dict(unknown_option); }, op, "unexpected key(s) \"param_groups.1.momentum\"");
  StateDict unknown_state = s.state;
  unknown_state["state.1.momentum_buffer"] = zeros({1}, {.dtype = kFloat64});
  expect_error([&] { s.opt->load_state_dict(unknown_state); }, op, "\"state.1.momentum_buffer\"");
  for (const char* key : {"bogus", "state.x.step", "param_groups.01.lr", "state.0", "param_groups.0."}) {
    StateDict odd = s.state;
    odd[key] = scalar_tensor(1.0);
    expect_error([&] { s.opt->load_state_dict(odd); }, op, std::string("unexpected key \"") + key + "\"");
  }
}

TEST(OptimState, LoadErrorsValues) {
  const std::string op = "Adam.load_state_dict";
  Saved s;
  StateDict shape = s.state;
  shape["state.0.exp_avg"] = zeros({3}, {.dtype = kFloat64});
  expect_error<ShapeError>([&] { s.opt->load_state_dict(shape); }, op, "\"state.0.exp_avg\" has shape [3]");
  StateDict dtype = s.state;
  dtype["state.1.exp_avg_sq"] = zeros({1}, {.dtype = kInt64});
  expect_error<DTypeError>([&] { s.opt->load_state_dict(dtype); }, op, "\"state.1.exp_avg_sq\" has dtype int64");
  StateDict fractional_step = s.state;
  fractional_step["state.0.step"] = scalar_tensor(1.5);
  expect_error([&] { s.opt->load_state_dict(fractional_step); }, op, "expected an integer");
  StateDict negative_step = s.state;
  negative_step["state.0.step"] = scalar_tensor(std::int64_t{-1});
  expect_error([&] { s.opt->load_state_dict(negative_step); }, op, "expected >= 0");
  StateDict lr_shape = s.state;
  lr_shape["param_groups.0.lr"] = from_vector<double>({0.1});
  expect_error<ShapeError>([&] { s.opt->load_state_dict(lr_shape); }, op, "expected a 0-d tensor");
  StateDict bad_flag = s.state;
  bad_flag["param_groups.0.amsgrad"] = scalar_tensor(std::int64_t{2});
  expect_error([&] { s.opt->load_state_dict(bad_flag); }, op, "expected a flag");
  StateDict bad_betas = s.state;
  bad_betas["param_groups.1.betas"] = from_vector<double>({0.9});
  expect_error<ShapeError>([&] { s.opt->load_state_dict(bad_betas); }, op, "expected [2]");
  StateDict invalid = s.state;
  invalid["param_groups.1.lr"] = scalar_tensor(-0.5);
  expect_error([&] { s.opt->load_state_dict(invalid); }, op, "learning rate -0.5");
  StateDict ams = s.state;
  ams["param_groups.1.amsgrad"] = scalar_tensor(std::int64_t{1});
  expect_error([&] { s.opt->load_state_dict(ams); }, op, "missing key \"state.2.max_exp_avg_sq\"");

  // A failed load changes nothing.
  EXPECT_EQ(s.opt->lr(1), 1e-3);
  const StateDict after = s.opt->state_dict();
  ASSERT_EQ(after.size(), s.state.size());
  for (const auto& [key, value] : s.state) expect_identical(after.at(key), value, key);
}

}  // namespace
}  // namespace infini::optim::test::optim_state_test
