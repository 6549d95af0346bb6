// autograd::checkpoint: the gradients of a checkpointed function equal those without it (and
// gradcheck's finite differences), only its inputs stay alive between forward and backward,
// dropout draws the same mask when recomputed (the generator left where it was), the
// recomputation runs under the forward's autocast state, callbacks queued inside it wait for
// the outer pass, and in a split backward (zero-bubble pipelines) the recomputed weight
// gradients wait for backward_weight.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>
import infini.autograd;

namespace checkpoint_test {
using namespace infini;

namespace {

Tensor random_leaf(Shape shape, double scale, DataType dtype = kFloat64) {
  return mul(randn(shape, {.dtype = dtype}), scale).detach().requires_grad_();
}

// L blocks x -> x + linear(gelu(linear(x, w1, b1)), w2) of width C (hidden 4C): each keeps
// its input, the hidden pre-activation and the GELU's output for backward.
struct Chain {
  std::vector<Tensor> w1, b1, w2;
  Chain(int blocks, std::int64_t C, DataType dtype) {
    manual_seed(11);
    for (int l = 0; l < blocks; ++l) {
      w1.push_back(random_leaf({4 * C, C}, 0.2, dtype));
      b1.push_back(random_leaf({4 * C}, 0.1, dtype));
      w2.push_back(random_leaf({C, 4 * C}, 0.1, dtype));
    }
  }
  Tensor block(std::size_t l, const Tensor& x) const { return add(x, linear(gelu(linear(x, w1[l], b1[l])), w2[l])); }
  Tensor forward(const Tensor& x, bool checkpointed) const {
    Tensor y = x;
    for (std::size_t l = 0; l < w1.size(); ++l)
      y = checkpointed ? autograd::checkpoint([this, l](const Tensor& t) { return block(l, t); }, y) : block(l, y);
    return y;
  }
  TensorList parameters() const {
    TensorList all;
    for (std::size_t l = 0; l < w1.size(); ++l) all.insert(all.end(), {w1[l], b1[l], w2[l]});
    return all;
  }
};

double max_difference(const Tensor& a, const Tensor& b) { return max(abs(sub(a, b))).item<double>(); }

TEST(Checkpoint, GradientsEqualThoseWithoutIt) {
  const Chain chain(3, 8, kFloat64);
  const Tensor x = random_leaf({5, 8}, 1.0);
  TensorList expected;
  for (const bool checkpointed : {false, true}) {
    TensorList leaves = chain.parameters();
    leaves.push_back(x);
    for (Tensor& t : leaves) t.set_grad(Tensor());
    const Tensor y = chain.forward(x, checkpointed);
    sum(mul(y, y)).backward();
    for (std::size_t i = 0; i < leaves.size(); ++i) {
      ASSERT_TRUE(leaves[i].grad().defined()) << "leaf " << i;
      if (!checkpointed) expected.push_back(leaves[i].grad().clone());
      else EXPECT_LT(max_difference(leaves[i].grad(), expected[i]), 1e-12) << "leaf " << i;
    }
  }
  // Finite differences through two checkpointed blocks, w.r.t. the input and a weight given
  // as inputs of the checkpoint (autograd::grad sees those; as in PyTorch's reentrant form, a
  // tensor fn captures gets its gradient in .grad only).
  const auto fn = [&chain](const TensorList& in) {
    const Tensor h = autograd::checkpoint(
        [](const TensorList& t) { return TensorList{mul(tanh(linear(t[0], t[1])), 1.5)}; }, in)[0];
    return TensorList{autograd::checkpoint([&](const Tensor& t) { return chain.block(0, t); }, h)};
  };
  const autograd::GradcheckResult result = autograd::gradcheck(fn, {random_leaf({3, 8}, 1.0), random_leaf({8, 8}, 0.3)});
  EXPECT_TRUE(result.ok) << result.message;
}

// backward_input through checkpointed blocks gives the input's gradient and leaves every
// parameter's for backward_weight, which then gives what a plain backward does; as a middle
// pipeline stage (input wanted) and as the first (no input: everything deferred).
TEST(Checkpoint, SplitBackwardDefersTheRecomputedWeightGradients) {
  const Chain chain(3, 8, kFloat64);
  TensorList expected;
  const Tensor x = random_leaf({5, 8}, 1.0);
  {
    const Tensor y = chain.forward(x, false);
    sum(mul(y, y)).backward();
    for (const Tensor& p : chain.parameters()) expected.push_back(p.grad().clone());
    expected.push_back(x.grad().clone());
  }
  for (const bool first_stage : {false, true}) {
    for (Tensor p : chain.parameters()) p.set_grad(Tensor());
    const Tensor input = x.detach().requires_grad_();
    const Tensor y = chain.forward(input, true);
    autograd::DeferredGrads deferred;
    const TensorList got = autograd::backward_input({sum(mul(y, y))}, first_stage ? TensorList{} : TensorList{input},
                                                    {}, deferred);
    const std::string stage = first_stage ? "first stage" : "middle stage";
    if (!first_stage) EXPECT_LT(max_difference(got[0], expected.back()), 1e-12) << stage;
    for (const Tensor& p : chain.parameters()) EXPECT_FALSE(p.grad().defined()) << stage << ": a weight in the input pass";
    EXPECT_FALSE(deferred.empty());
    autograd::backward_weight(deferred);
    const TensorList params = chain.parameters();
    for (std::size_t i = 0; i < params.size(); ++i) {
      ASSERT_TRUE(params[i].grad().defined()) << stage << ", parameter " << i;
      EXPECT_LT(max_difference(params[i].grad(), expected[i]), 1e-12) << stage << ", parameter " << i;
    }
  }
  EXPECT_THROW(autograd::defer_to_backward_weight(autograd::DeferredGrads{}), Error);  // outside a split pass
}

TEST(Checkpoint, KeepsOnlyTheBlockInputsBetweenForwardAndBackward) {
  const Chain chain(6, 64, kFloat32);
  const Tensor x = random_leaf({256, 64}, 1.0, kFloat32);
  std::int64_t kept[2];
  for (const bool checkpointed : {false, true}) {
    const std::int64_t before = memory_stats(Device::cpu()).allocated_bytes;
    const Tensor y = chain.forward(x, checkpointed);
    kept[checkpointed] = memory_stats(Device::cpu()).allocated_bytes - before;
    sum(y).backward();
  }
  // Without: per block the input (C), the hidden pre-activation and GELU's output (4C each)
  // and the output; with: the inputs and the output (C per block).
  EXPECT_GT(kept[0], 6 * 256 * 64 * 4 * 6);
  EXPECT_LT(kept[1], kept[0] / 5) << kept[1] << " bytes against " << kept[0];
}

TEST(Checkpoint, DropoutDrawsTheSameMaskWhenRecomputed) {
  const Tensor w = random_leaf({16, 16}, 0.3);
  const Tensor x = random_leaf({32, 16}, 1.0);
  const auto block = [&w](const Tensor& t) { return dropout(tanh(linear(t, w)), 0.5); };
  Tensor expected;
  PhiloxState after_plain;
  for (const bool checkpointed : {false, true}) {
    w.set_grad(Tensor());
    manual_seed(5);
    const Tensor y = checkpointed ? autograd::checkpoint(block, x) : block(x);
    sum(mul(y, y)).backward();
    if (!checkpointed) {
      expected = w.grad().clone();
      after_plain = default_generator().state();
      continue;
    }
    EXPECT_LT(max_difference(w.grad(), expected), 1e-12);
    // The recomputation put the generator back: the next draws are the plain run's.
    EXPECT_EQ(default_generator().state().offset, after_plain.offset);
  }
}

TEST(Checkpoint, RecomputesUnderTheForwardsAutocastState) {
  std::vector<bool> autocast_on;  // in each run of the function
  const auto fn = [&autocast_on](const Tensor& t) {
    autocast_on.push_back(is_autocast_enabled(DeviceType::CPU));
    return mul(t, 2.0);
  };
  const Tensor x = random_leaf({4}, 1.0);
  Tensor y;
  {
    const AutocastGuard autocast(DeviceType::CPU, kBFloat16);
    y = autograd::checkpoint(fn, x);
  }
  sum(y).backward();  // outside the guard: the recomputation turns it on again
  EXPECT_EQ(autocast_on, (std::vector<bool>{true, true}));
  EXPECT_FALSE(is_autocast_enabled(DeviceType::CPU));
  EXPECT_LT(max_difference(x.grad(), full({4}, 2.0, {.dtype = kFloat64})), 1e-15);
}

TEST(Checkpoint, CallbacksQueuedInsideWaitForTheOuterPass) {
  const Tensor v = random_leaf({3}, 1.0), w = random_leaf({3}, 1.0), x = random_leaf({3}, 1.0);
  std::vector<std::string> events;
  w.register_post_accumulate_grad_hook([&](const Tensor&) {
    events.push_back("w");  // inside the recomputation's pass
    autograd::queue_callback([&] { events.push_back(v.grad().defined() ? "callback after v" : "callback before v"); });
  });
  v.register_post_accumulate_grad_hook([&](const Tensor&) { events.push_back("v"); });
  // v's product runs before the checkpointed one: its gradient comes after the recomputation.
  const Tensor y = autograd::checkpoint([&w](const Tensor& t) { return mul(t, w); }, mul(x, v));
  sum(y).backward();
  EXPECT_EQ(events, (std::vector<std::string>{"w", "v", "callback after v"}));
}

TEST(Checkpoint, RunsPlainlyWithoutAnInputThatNeedsGradAndRefusesCreateGraph) {
  const Tensor w = random_leaf({3}, 1.0);
  const Tensor constant = from_vector(std::vector<double>{1, 2, 3}, {3}, {.dtype = kFloat64});
  // No input requires grad: no recomputation, and w still gets its gradient.
  sum(autograd::checkpoint([&w](const Tensor& t) { return mul(t, w); }, constant)).backward();
  EXPECT_LT(max_difference(w.grad(), constant), 1e-15);
  const Tensor x = random_leaf({3}, 1.0);
  const Tensor y = sum(autograd::checkpoint([](const Tensor& t) { return mul(t, t); }, x));
  EXPECT_THROW(autograd::grad({y}, {x}, {}, true, /*create_graph=*/true), Error);
  // A function that returns its input gets an output of its own.
  const Tensor same = autograd::checkpoint([](const Tensor& t) { return t; }, x);
  EXPECT_FALSE(same.is_same(x));
  sum(mul(same, 3.0)).backward();
  EXPECT_LT(max_difference(x.grad(), full({3}, 3.0, {.dtype = kFloat64})), 1e-15);
}

}  // namespace
}  // namespace checkpoint_test
