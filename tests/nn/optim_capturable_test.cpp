// Capturable Adam / AdamW (set_capturable: learning rates, step counts and the grad scale in
// tensors) and the clipping helpers that stay on the device (total_grad_norm_tensor,
// clip_coefficient of a tensor). On the CPU they must equal the eager optimizer and the host
// helpers bit for bit, step counts, learning-rate changes and state dicts included; on a GPU
// (skipped without one) a captured training step must replay like eager steps.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "optim_test_util.h"

import infini.nn;

namespace infini::optim::test::optim_capturable_test {
namespace {

// Grad element i of a parameter at step t: varied signs and sizes, shrinking after the first
// step so that amsgrad's maximum differs from exp_avg_sq.
std::vector<double> grad_values(int t, std::size_t n, double offset) {
  std::vector<double> g(n);
  for (std::size_t i = 0; i < n; ++i)
    g[i] = (t == 0 ? 1.0 : 0.2 / t) * std::sin(1.7 * static_cast<double>(i) + offset) + 0.01 * t;
  return g;
}

// Three parameters: a matrix and a bias in group 0, and `late` in group 1, which gets no grad
// before step 2 (so some steps update only some parameters).
struct Params {
  Tensor w, b, late;
  explicit Params(DataType dtype)
      : w(from_vector(std::vector<double>{0.5, -1.0, 2.0, 0.25, -0.75, 1.5}, {2, 3}).to(dtype).requires_grad_()),
        b(param({0.1, -0.2, 0.3}, dtype)),
        late(param({1.0, -1.0}, dtype)) {}
  std::vector<Tensor> all() const { return {w, b, late}; }
  void set_grads(int t) const {
    set_grad(w, grad_values(t, 6, 0.0));
    set_grad(b, grad_values(t, 3, 1.0));
    if (t >= 2) set_grad(late, grad_values(t, 2, 2.0));
  }
};

template <class Opt, class Options>
Opt make(const Params& p, const Options& group0, const Options& group1) {
  return Opt(std::vector<ParamGroup<Options>>{{{p.w, p.b}, group0}, {{p.late}, group1}}, group0);
}

Tensor scale_tensor(double s) { return scalar_tensor(s, {.dtype = kFloat64}); }

// Six steps of an eager and a capturable optimizer on equal parameters and grads, with a
// grad scale per step, set_lr after step 2 and set_options after step 4: equal bits
// throughout, and equal state dicts (the step counts come back from the device copy).
template <class Opt, class Options>
void check_equals_eager(const Options& group0, const Options& group1, DataType dtype) {
  const Params a(dtype), b(dtype);
  Opt eager = make<Opt>(a, group0, group1), capturable = make<Opt>(b, group0, group1);
  capturable.set_capturable(true);
  EXPECT_TRUE(capturable.capturable());
  for (int t = 0; t < 6; ++t) {
    a.set_grads(t);
    b.set_grads(t);
    const double scale = 0.5 + 0.1 * t;
    eager.scaled_step(scale);
    if (t % 2 == 0) capturable.scaled_step(scale_tensor(scale));
    else capturable.scaled_step(scale);  // a host scale goes the same way
    if (t == 2) {
      eager.set_lr(0, 0.02);
      capturable.set_lr(0, 0.02);
    }
    if (t == 4) {
      Options changed = group1;
      changed.lr = 0.003;
      eager.set_options(1, changed);
      capturable.set_options(1, changed);
    }
    for (std::size_t i = 0; i < 3; ++i)
      expect_identical(b.all()[i], a.all()[i], "step " + std::to_string(t) + " parameter " + std::to_string(i));
  }
  const StateDict e = eager.state_dict(), c = capturable.state_dict();
  EXPECT_EQ(c.at("state.0.step").item<std::int64_t>(), 6);
  EXPECT_EQ(c.at("state.2.step").item<std::int64_t>(), 4);
  for (const std::string key : {"state.0.step", "state.1.step", "state.2.step", "param_groups.0.lr", "param_groups.1.lr"})
    EXPECT_EQ(values(c.at(key)), values(e.at(key))) << key;
  for (const std::string key : {"state.0.exp_avg", "state.1.exp_avg_sq", "state.2.exp_avg"})
    expect_identical(c.at(key), e.at(key), key);
}

TEST(OptimCapturable, AdamWStepsEqualTheEagerOptimizerBitForBit) {
  for (DataType dtype : {kFloat32, kFloat64})
    check_equals_eager<AdamW>(AdamWOptions{.lr = 0.01, .betas = {0.8, 0.95}, .weight_decay = 0.1},
                              AdamWOptions{.lr = 0.05, .eps = 1e-6, .weight_decay = 0}, dtype);
}

TEST(OptimCapturable, AdamWithAmsgradStepsEqualTheEagerOptimizerBitForBit) {
  for (DataType dtype : {kFloat32, kFloat64})
    check_equals_eager<Adam>(AdamOptions{.lr = 0.01, .weight_decay = 0.05, .amsgrad = true},
                             AdamOptions{.lr = 0.02, .amsgrad = false}, dtype);
}

TEST(OptimCapturable, StepCountsMoveBetweenHostAndDeviceWithoutLoss) {
  const AdamWOptions options{.lr = 0.01};
  const Params a(kFloat64), b(kFloat64);
  AdamW first = make<AdamW>(a, options, options);
  first.set_capturable(true);
  for (int t = 0; t < 3; ++t) {
    a.set_grads(t);
    first.step();
  }
  // Loaded into a capturable optimizer over equal parameters, the state continues alike.
  for (std::size_t i = 0; i < 3; ++i) {
    NoGradGuard no_grad;
    Tensor target = b.all()[i];
    target.copy_(a.all()[i]);
  }
  AdamW second = make<AdamW>(b, options, options);
  second.set_capturable(true);
  second.load_state_dict(first.state_dict());
  EXPECT_EQ(second.state_dict().at("state.2.step").item<std::int64_t>(), 1);
  // Capturable mode off: the counts return to the host, and stepping goes on the same.
  first.set_capturable(false);
  EXPECT_FALSE(first.capturable());
  for (int t = 3; t < 5; ++t) {
    a.set_grads(t);
    b.set_grads(t);
    first.step();
    second.step();
    for (std::size_t i = 0; i < 3; ++i) expect_identical(b.all()[i], a.all()[i], "step " + std::to_string(t));
  }
  EXPECT_EQ(first.state_dict().at("state.0.step").item<std::int64_t>(), 5);
  EXPECT_EQ(second.state_dict().at("state.0.step").item<std::int64_t>(), 5);
  EXPECT_EQ(second.state_dict().at("state.2.step").item<std::int64_t>(), 3);
}

TEST(OptimCapturable, AGradScaleTensorOfTheWrongKindIsAnError) {
  const Params p(kFloat32);
  AdamW capturable = make<AdamW>(p, AdamWOptions{}, AdamWOptions{});
  capturable.set_capturable(true);
  p.set_grads(0);
  expect_error<Error>([&] { capturable.scaled_step(scalar_tensor(1.0, {.dtype = kFloat32})); }, "AdamW.scaled_step",
                      "grad_scale is float32[], expected one float64 element");
  expect_error<Error>([&] { capturable.scaled_step(ones({2}, {.dtype = kFloat64})); }, "AdamW.scaled_step",
                      "grad_scale is float64[2]");
  expect_error<Error>([&] { capturable.scaled_step(Tensor()); }, "AdamW.scaled_step", "grad_scale is an undefined tensor");
  // Nothing was counted by the refused steps.
  capturable.step();
  EXPECT_EQ(capturable.state_dict().at("state.0.step").item<std::int64_t>(), 1);
}

// Without capturable mode, scaled_step(Tensor) is scaled_step of the tensor's value: equal
// bits for AdamW (which folds the scale into its update) and SGD (which scales the grads).
TEST(OptimCapturable, ATensorScaleEqualsTheHostScaleForEagerOptimizers) {
  const Params a(kFloat32), b(kFloat32);
  AdamW by_value = make<AdamW>(a, AdamWOptions{.lr = 0.1}, AdamWOptions{}),
        by_tensor = make<AdamW>(b, AdamWOptions{.lr = 0.1}, AdamWOptions{});
  const Params c(kFloat32), d(kFloat32);
  SGD sgd_value(c.all(), SGDOptions{.lr = 0.1, .momentum = 0.9}), sgd_tensor(d.all(), SGDOptions{.lr = 0.1, .momentum = 0.9});
  for (int t = 0; t < 3; ++t) {
    for (const Params* p : {&a, &b, &c, &d}) p->set_grads(t);
    by_value.scaled_step(0.3);
    by_tensor.scaled_step(scale_tensor(0.3));
    sgd_value.scaled_step(0.3);
    sgd_tensor.scaled_step(scale_tensor(0.3));
    for (std::size_t i = 0; i < 3; ++i) {
      expect_identical(b.all()[i], a.all()[i], "AdamW step " + std::to_string(t));
      expect_identical(d.all()[i], c.all()[i], "SGD step " + std::to_string(t));
    }
  }
  expect_error<Error>([&] { sgd_tensor.scaled_step(scalar_tensor(2.0, {.dtype = kFloat32})); }, "SGD.scaled_step",
                      "expected one float64 element");
}

TEST(ClipGradTensor, TheNormAndCoefficientEqualTheHostValues) {
  const Params p(kFloat32);
  p.set_grads(3);
  for (double norm_type : {1.0, 2.0, 3.0, kInfNorm}) {
    const Tensor norm = total_grad_norm_tensor(p.all(), norm_type);
    EXPECT_EQ(norm.dtype(), kFloat64);
    EXPECT_EQ(norm.dim(), 0);
    EXPECT_EQ(norm.item<double>(), total_grad_norm(p.all(), norm_type)) << "norm_type " << norm_type;
  }
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  for (double total : {0.0, 0.3, 0.999999, 1.0, 2.5, 1e300, kInfNorm, kNaN}) {
    const double expected = clip_coefficient(total, 1.0);
    const double actual = clip_coefficient(scale_tensor(total), 1.0).item<double>();
    if (std::isnan(expected)) EXPECT_TRUE(std::isnan(actual)) << "total " << total;
    else EXPECT_EQ(actual, expected) << "total " << total;
  }
  EXPECT_EQ(clip_coefficient(scale_tensor(3.0), 1.5).item<double>(), 1.5 / (3.0 + 1e-6));
}

TEST(ClipGradTensor, BadArgumentsAreErrors) {
  const Params p(kFloat32);
  expect_error<Error>([&] { total_grad_norm_tensor(p.all()); }, "total_grad_norm_tensor", "no parameter has a grad");
  p.set_grads(0);
  expect_error<Error>([&] { total_grad_norm_tensor(p.all(), 0.0); }, "total_grad_norm_tensor",
                      "norm_type must be > 0 or infinity, got 0");
  expect_error<Error>([&] { clip_coefficient(scalar_tensor(1.0, {.dtype = kFloat32}), 1.0); }, "clip_coefficient",
                      "total_norm is float32[], expected one float64 element");
  expect_error<Error>([&] { clip_coefficient(scale_tensor(1.0), -1.0); }, "clip_coefficient",
                      "max_norm must be >= 0, got -1");
}

// ---- On a GPU --------------------------------------------------------------------------

#define REQUIRE_CUDA() \
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device"

// A training step of a small linear model on the GPU: loss, backward, the norm and clipping
// coefficient on the device, the update. Returns the loss and the norm.
struct GpuModel {
  Tensor w, x;
  explicit GpuModel(const Device& gpu)
      : w(from_vector(std::vector<double>{0.5, -1.0, 2.0, 0.25, -0.75, 1.5}, {3, 2}).to(gpu, kFloat32).requires_grad_()),
        x(zeros({4, 3}, {.dtype = kFloat32, .device = gpu})) {}
  std::vector<Tensor> step(Optimizer& opt) const {
    const Tensor loss = mean(pow(matmul(x, w), 2.0));
    loss.backward();
    const Tensor norm = total_grad_norm_tensor({w});
    opt.scaled_step(clip_coefficient(norm, 1.0));
    return {loss, norm};
  }
  void set_input(int t) const {
    NoGradGuard no_grad;
    Tensor input = x;
    input.copy_(from_vector(grad_values(t, 12, 0.5), {4, 3}));
  }
};

TEST(OptimCapturableCuda, ACapturedTrainingStepReplaysLikeEagerSteps) {
  REQUIRE_CUDA();
  const Device gpu = Device::cuda(0);
  const GpuModel eager_model(gpu), graph_model(gpu);
  AdamW eager({eager_model.w}, AdamWOptions{.lr = 0.05}), captured({graph_model.w}, AdamWOptions{.lr = 0.05});
  captured.set_capturable(true);
  // Step 0 eagerly (it makes the optimizer state), step 1 captured, then replays.
  CudaGraph graph;
  std::vector<Tensor> outputs;
  for (int t = 0; t < 6; ++t) {
    eager_model.set_input(t);
    graph_model.set_input(t);
    eager.zero_grad();
    const std::vector<Tensor> expected = eager_model.step(eager);
    if (t == 0) {
      captured.zero_grad();
      graph_model.step(captured);
    } else {
      if (t == 1) {
        captured.zero_grad();
        graph.capture_begin(gpu);
        outputs = graph_model.step(captured);
        graph.capture_end();
      }
      graph.replay();
      expect_close(values(outputs[0]), values(expected[0]), 1e-6, "loss at step " + std::to_string(t));
      expect_close(values(outputs[1]), values(expected[1]), 1e-6, "norm at step " + std::to_string(t));
    }
    expect_close(values(graph_model.w), values(eager_model.w), 1e-6, "w after step " + std::to_string(t));
    if (t == 3) {  // a new learning rate reaches the replays
      eager.set_lr(0, 0.01);
      captured.set_lr(0, 0.01);
    }
  }
  EXPECT_EQ(captured.state_dict().at("state.0.step").item<std::int64_t>(), 6);
}

TEST(OptimCapturableCuda, CapturingANonCapturableOrUnpreparedStepIsAnError) {
  REQUIRE_CUDA();
  const Device gpu = Device::cuda(0);
  const GpuModel model(gpu);
  AdamW plain({model.w}, AdamWOptions{});
  {
    CudaGraph graph;
    graph.capture_begin(gpu);
    expect_error<Error>([&] { model.step(plain); }, "AdamW.scaled_step", "call set_capturable(true) before capturing");
  }
  {
    SGD sgd({model.w}, SGDOptions{.lr = 0.1});
    model.w.set_grad(Tensor());
    CudaGraph graph;
    graph.capture_begin(gpu);
    expect_error<Error>([&] { model.step(sgd); }, "SGD.scaled_step", "not capturable");
  }
  AdamW fresh({model.w}, AdamWOptions{});
  fresh.set_capturable(true);
  model.w.set_grad(Tensor());
  CudaGraph graph;
  graph.capture_begin(gpu);
  expect_error<Error>([&] { model.step(fresh); }, "AdamW.step", "parameter 0 has no optimizer state yet");
}

}  // namespace
}  // namespace infini::optim::test::optim_capturable_test
