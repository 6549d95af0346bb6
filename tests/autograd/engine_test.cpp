// The autograd engine: leaves, accumulation, retain/create graph, autograd::grad, hooks,
// grad modes, version counters, anomaly mode and deep graphs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>
import infini.autograd;

namespace engine_test {
using namespace infini;

namespace {

Tensor leaf(std::vector<double> values, Shape shape = {}) {
  return from_vector(values, shape, {.dtype = kFloat64}).requires_grad_();
}

bool same_values(const Tensor& a, const Tensor& b) { return all(eq(a, b)).item<bool>(); }

std::vector<double> vals(const Tensor& t) {
  const Tensor c = t.detach().to(kFloat64).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

TEST(Engine, ChainRuleAndAccumulation) {
  Tensor x = leaf({1, 2, 3});
  Tensor y = leaf({4, 5, 6});
  // z = sum(x * y + x^2), dz/dx = y + 2x, dz/dy = x
  Tensor z = sum(add(mul(x, y), mul(x, x)));
  EXPECT_FALSE(z.is_leaf());
  EXPECT_EQ(z.grad_fn()->name(), "SumBackward");
  z.backward();
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{6, 9, 12}));
  EXPECT_EQ(vals(y.grad()), (std::vector<double>{1, 2, 3}));
  // A second graph accumulates into the same grad.
  sum(mul(x, 2.0)).backward();
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{8, 11, 14}));
}

TEST(Engine, TensorUsedSeveralTimesSumsGradients) {
  Tensor x = leaf({3});
  Tensor a = mul(x, x);        // 2x
  Tensor b = mul(a, x);        // x^3 -> 3x^2 total through both paths
  Tensor c = add(b, a);        // x^3 + x^2
  sum(c).backward();
  EXPECT_DOUBLE_EQ(vals(x.grad())[0], 3 * 9 + 2 * 3);
}

// The engine reuses gradient buffers nothing else holds (summing in place, keeping one as
// .grad); a gradient the caller still holds, even through a reshaped view, is copied instead.
TEST(Engine, GradientsTheCallerHoldsAreNeverReusedInPlace) {
  Tensor x = leaf({1, 2, 3});
  const Tensor g = from_vector<double>({1, 1, 1}, {3, 1});
  x.view({3, 1}).backward(g);  // the view's backward reshapes g without a copy
  Tensor grad = x.grad();
  add_(grad, full({3}, 5.0, {.dtype = kFloat64}));
  EXPECT_EQ(vals(g), (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{6, 6, 6}));
  // Two uses of one tensor: the second gradient is summed into the first buffer in place;
  // the caller's gradient is read, never written.
  Tensor y = leaf({1, 2});
  const Tensor h = from_vector<double>({10, 20});
  Tensor u = mul(y, 3.0);
  add(mul(u, 2.0), u).backward(h);  // d/dy = 3 * (2 + 1) * h
  EXPECT_EQ(vals(y.grad()), (std::vector<double>{90, 180}));
  EXPECT_EQ(vals(h), (std::vector<double>{10, 20}));
}

TEST(Engine, BroadcastGradientsAreSummed) {
  Tensor a = leaf({1, 2, 3}, {3, 1});
  Tensor b = leaf({10, 20}, {1, 2});
  sum(mul(a, b)).backward();  // (3, 2)
  EXPECT_EQ(vals(a.grad()), (std::vector<double>{30, 30, 30}));
  EXPECT_EQ(vals(b.grad()), (std::vector<double>{6, 6}));
}

TEST(Engine, SecondBackwardNeedsRetainGraph) {
  Tensor x = leaf({2});
  Tensor y = sum(exp(x));
  y.backward({}, /*retain_graph=*/true);
  y.backward();
  EXPECT_NEAR(vals(x.grad())[0], 2 * std::exp(2.0), 1e-12);
  Tensor z = sum(exp(x));
  z.backward();
  try {
    z.backward();
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("second time"), std::string::npos) << e.what();
  }
}

TEST(Engine, ImplicitGradientOnlyForOneElement) {
  Tensor x = leaf({1, 2});
  EXPECT_THROW(mul(x, 2.0).backward(), Error);
  mul(x, 2.0).backward(from_vector<double>({1, 10}));
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{2, 20}));
  EXPECT_THROW(mul(x, 2.0).backward(from_vector<double>({1, 2, 3})), ShapeError);
  EXPECT_THROW(zeros({1}).backward(), Error);  // no graph
}

TEST(Engine, GradFunctionLeavesGradsAlone) {
  Tensor x = leaf({1, 2});
  Tensor y = leaf({3, 4});
  const TensorList g = autograd::grad({sum(mul(x, y))}, {x});
  EXPECT_EQ(vals(g[0]), (std::vector<double>{3, 4}));
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(y.grad().defined());
  // Unused inputs.
  Tensor unused = leaf({0});
  EXPECT_THROW(autograd::grad({sum(mul(x, y))}, {unused}), Error);
  const TensorList u = autograd::grad({sum(mul(x, y))}, {unused}, {}, {}, false, true);
  EXPECT_FALSE(u[0].defined());
  // Gradient w.r.t. an intermediate tensor.
  Tensor m = mul(x, 3.0);
  const TensorList gm = autograd::grad({sum(mul(m, m))}, {m});
  EXPECT_EQ(vals(gm[0]), (std::vector<double>{6, 12}));
}

TEST(Engine, CreateGraphGivesSecondDerivatives) {
  Tensor x = leaf({0.5, 2});
  const Tensor y = sum(mul(mul(x, x), x));  // x^3
  const TensorList g = autograd::grad({y}, {x}, {}, {}, /*create_graph=*/true);
  EXPECT_TRUE(g[0].requires_grad());
  EXPECT_EQ(vals(g[0]), (std::vector<double>{0.75, 12}));  // 3x^2
  const TensorList gg = autograd::grad({sum(g[0])}, {x});
  EXPECT_EQ(vals(gg[0]), (std::vector<double>{3, 12}));  // 6x
  // backward(create_graph) leaves a differentiable grad().
  Tensor z = leaf({3});
  sum(mul(mul(z, z), z)).backward({}, false, true);
  EXPECT_TRUE(z.grad().requires_grad());
  const TensorList third = autograd::grad({sum(z.grad())}, {z});
  EXPECT_EQ(vals(third[0]), (std::vector<double>{18}));
  // A grad() with history refers back to its own leaf (as in PyTorch): break the cycle.
  z.set_grad(Tensor());
}

TEST(Engine, NoGradAndInferenceModes) {
  Tensor x = leaf({1});
  {
    NoGradGuard guard;
    EXPECT_FALSE(mul(x, 2.0).requires_grad());
    {
      EnableGradGuard enable;
      EXPECT_TRUE(mul(x, 2.0).requires_grad());
    }
    EXPECT_FALSE(GradMode::is_enabled());
  }
  EXPECT_TRUE(GradMode::is_enabled());
  {
    InferenceModeGuard inference;
    EXPECT_TRUE(GradMode::is_inference());
    EXPECT_FALSE(exp(x).requires_grad());
  }
  EXPECT_FALSE(GradMode::is_inference());
  EXPECT_TRUE(mul(x, 2.0).requires_grad());
}

TEST(Engine, DetachAndRequiresGradRules) {
  Tensor x = leaf({1, 2});
  Tensor d = mul(x, 2.0).detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_EQ(d.data_ptr(), d.data_ptr());
  EXPECT_THROW(mul(x, 2.0).requires_grad_(), Error);  // non-leaf
  EXPECT_THROW(zeros({2}, {.dtype = kInt64}).requires_grad_(), DTypeError);
}

TEST(Engine, TensorHooksCanReplaceTheGradient) {
  Tensor x = leaf({1, 2});
  Tensor y = mul(x, 3.0);
  std::vector<double> seen;
  y.register_hook([&](const Tensor& g) {
    seen = vals(g);
    return mul(g, 10.0);
  });
  x.register_hook([](const Tensor& g) { return add(g, 1.0); });
  sum(y).backward();
  EXPECT_EQ(seen, (std::vector<double>{1, 1}));
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{31, 31}));  // 3 * 10 + 1
}

TEST(Engine, RetainGradKeepsANonLeafGradient) {
  Tensor x = leaf({1, 2});
  Tensor y = mul(x, 3.0);
  y.retain_grad();
  sum(mul(y, y)).backward();
  EXPECT_EQ(vals(y.grad()), (std::vector<double>{6, 12}));
}

TEST(Engine, PostAccumulateGradHooksSeeTheFinalGrad) {
  Tensor x = leaf({1, 2});
  std::vector<double> seen;
  int calls = 0;
  x.register_post_accumulate_grad_hook([&](const Tensor& leaf) {
    ++calls;
    seen = vals(leaf.grad());
  });
  sum(add(mul(x, 2.0), mul(x, 3.0))).backward();  // two paths, one accumulation
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, (std::vector<double>{5, 5}));
}

// A leaf's accumulator outlives the graph that made it while a later graph uses the leaf too
// (pipeline micro-batches in flight): in the later graph's backward it still runs as soon as
// its gradient is ready, not after every node created since.
TEST(Engine, LeafGradientsAccumulateAsSoonAsReady) {
  Tensor w = leaf({2}), v = leaf({3}), x = leaf({5});
  std::vector<std::string> events;
  w.register_post_accumulate_grad_hook([&](const Tensor&) { events.push_back("w"); });
  v.register_post_accumulate_grad_hook([&](const Tensor&) { events.push_back("v"); });
  const Tensor first = mul(w, x);  // w's accumulator is made here
  const Tensor second = mul(mul(v, 2.0), w);  // v * 2 is made after it, and is ready with w
  second.backward();
  EXPECT_EQ(events, (std::vector<std::string>{"w", "v"}));
  EXPECT_EQ(vals(w.grad()), (std::vector<double>{6}));
  first.backward();
  EXPECT_EQ(vals(w.grad()), (std::vector<double>{11}));
}

// A gradient a node computes by scattering (an embedding's) is summed into the leaf's grad()
// in place when nothing else gives the leaf a gradient in that pass: the grad keeps its
// storage and no table-sized temporary is made. Hooks, several uses in one pass and
// create_graph take the usual path with the same values.
TEST(Engine, AGradientIsSummedIntoTheLeafsGradInPlace) {
  constexpr std::int64_t rows = 1000, cols = 64;  // 256 KB of float32
  const Tensor table = randn({rows, cols}).requires_grad_();
  const Tensor idx = from_vector(std::vector<std::int64_t>{3, 7, 3}, {3});
  const auto expected = [&](double passes) {  // rows 3 (twice) and 7 get the output gradient 1
    Tensor e = zeros({rows, cols});
    e.slice(0, 3, 4).fill_(2.0 * passes);
    e.slice(0, 7, 8).fill_(passes);
    return e;
  };
  int accumulated = 0;
  table.register_post_accumulate_grad_hook([&](const Tensor&) { ++accumulated; });
  sum(embedding(idx, table)).backward();
  const void* storage = table.grad().data_ptr<float>();
  reset_peak_memory_stats(Device::cpu());
  const std::int64_t before = memory_stats(Device::cpu()).allocated_bytes;
  sum(embedding(idx, table)).backward();
  EXPECT_LT(memory_stats(Device::cpu()).peak_allocated_bytes - before, rows * cols * 4);
  EXPECT_EQ(table.grad().data_ptr<float>(), storage);
  EXPECT_EQ(accumulated, 2);
  EXPECT_TRUE(same_values(table.grad(), expected(2)));

  // Two uses in one pass: both gradients summed, once each.
  sum(add(embedding(idx, table), embedding(idx, table))).backward();
  EXPECT_TRUE(same_values(table.grad(), expected(4)));
  // A tensor hook sees this pass's gradient alone.
  Tensor seen;
  const Tensor hooked = randn({rows, cols}).requires_grad_();
  hooked.register_hook([&](const Tensor& g) {
    seen = g.clone();
    return Tensor();
  });
  sum(embedding(idx, hooked)).backward();
  sum(embedding(idx, hooked)).backward();
  EXPECT_TRUE(same_values(seen, expected(1)));
  EXPECT_TRUE(same_values(hooked.grad(), expected(2)));

  // A linear layer's weight gradient: the GEMM sums into the existing grad (beta = 1).
  const Tensor weight = randn({300, 200}).requires_grad_();  // 240 KB
  const Tensor x = randn({4, 200});
  sum(linear(x, weight)).backward();
  const void* weight_storage = weight.grad().data_ptr<float>();
  reset_peak_memory_stats(Device::cpu());
  const std::int64_t weight_before = memory_stats(Device::cpu()).allocated_bytes;
  sum(linear(x, weight)).backward();
  EXPECT_LT(memory_stats(Device::cpu()).peak_allocated_bytes - weight_before, 300 * 200 * 4);
  EXPECT_EQ(weight.grad().data_ptr<float>(), weight_storage);
  // d/dW sum(x W^T) = 1^T x: every row is x's column sums; twice after two passes.
  const Tensor twice = mul(sum(x, {0}, true).expand({300, 200}), 2.0);
  EXPECT_LT(max(abs(sub(weight.grad(), twice))).item<float>(), 1e-5f);
}

// Callbacks queued during a pass run after every node of that pass, in order, before
// backward() returns; a callback may queue another; a pass that throws runs none.
TEST(Engine, QueuedCallbacksRunAfterThePass) {
  Tensor x = leaf({1, 2}), y = leaf({3});
  std::vector<std::string> events;
  x.register_post_accumulate_grad_hook([&](const Tensor&) {
    events.push_back("x");
    autograd::queue_callback([&] {
      events.push_back(concat("first, y.grad = ", vals(y.grad())[0]));
      autograd::queue_callback([&] { events.push_back("queued by a callback"); });
    });
    autograd::queue_callback([&] { events.push_back("second"); });
  });
  y.register_post_accumulate_grad_hook([&](const Tensor&) { events.push_back("y"); });
  sum(mul(x, y)).backward();
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(std::vector<std::string>(events.begin() + 2, events.end()),
            (std::vector<std::string>{"first, y.grad = 3", "second", "queued by a callback"}));

  EXPECT_THROW(autograd::queue_callback([] {}), Error);  // outside a pass
  events.clear();
  Tensor z = leaf({1});
  z.register_post_accumulate_grad_hook([&](const Tensor&) {
    autograd::queue_callback([&] { events.push_back("never"); });
    throw Error("test", "a hook failing after queueing a callback");
  });
  EXPECT_THROW(sum(mul(z, 2.0)).backward(), Error);
  EXPECT_TRUE(events.empty());
  sum(mul(x, y)).backward();  // the engine is usable afterwards
  EXPECT_EQ(vals(y.grad()), (std::vector<double>{6}));
}

TEST(Engine, NodeHooks) {
  Tensor x = leaf({1, 2});
  Tensor y = mul(x, 2.0);
  int pre = 0, post = 0;
  y.grad_fn()->register_pre_hook([&](const TensorList& g) {
    ++pre;
    return TensorList{mul(g[0], 0.5)};
  });
  y.grad_fn()->register_post_hook([&](const TensorList&, const TensorList&) { ++post; });
  sum(y).backward();
  EXPECT_EQ(pre, 1);
  EXPECT_EQ(post, 1);
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{1, 1}));
}

TEST(Engine, ModifyingASavedTensorIsDetected) {
  Tensor x = leaf({1, 2});
  Tensor a = mul(x, 1.0);
  Tensor y = mul(a, a);  // saves a
  add_(a, 1.0);          // a changes after being saved
  try {
    sum(y).backward();
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("modified by an in-place operation"), std::string::npos) << e.what();
  }
}

TEST(Engine, InPlaceOpsAreDifferentiable) {
  Tensor x = leaf({1, 2});
  Tensor y = mul(x, 3.0);
  mul_(y, 2.0);
  add_(y, x);
  sum(mul(y, y)).backward();  // y = 7x, d(49 x^2)/dx = 98 x
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{98, 196}));
  EXPECT_THROW(add_(x, 1.0), Error);  // a leaf that requires grad
  NoGradGuard no_grad;
  add_(x, 1.0);  // fine under no_grad (optimizer updates)
  EXPECT_EQ(vals(x), (std::vector<double>{2, 3}));
}

TEST(Engine, AnomalyModeNamesTheOp) {
  Tensor x = leaf({0, 1});
  DetectAnomalyGuard anomaly;
  try {
    sum(sqrt(x)).backward();  // d sqrt / dx at 0 is inf
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SqrtBackward"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'sqrt'"), std::string::npos) << e.what();
  }
}

TEST(Engine, LongChainDoesNotRecurse) {
  Tensor x = leaf({1});
  Tensor y = x;
  for (int i = 0; i < 10000; ++i) y = mul(y, 1.0001);
  sum(y).backward();
  EXPECT_NEAR(vals(x.grad())[0], std::pow(1.0001, 10000), 1e-9);
}

TEST(Engine, ViewsAndCopiesAreDifferentiable) {
  Tensor x = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
  // t, slice, expand and reshape each map the gradient back to x.
  Tensor y = x.t().slice(0, 0, 3, 2).unsqueeze(0).expand({4, 2, 2}).reshape({-1});
  sum(mul(y, y)).backward();
  // y holds x[:,0] and x[:,2] four times each: d/dx = 8 x there, 0 in column 1.
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{8, 0, 24, 32, 0, 48}));
  Tensor z = leaf({1, 2});
  sum(mul(z.to(kFloat32).to(kFloat64), z.clone())).backward();
  EXPECT_EQ(vals(z.grad()), (std::vector<double>{2, 4}));
  Tensor base = mul(x, 1.0);
  Tensor view = base.t();
  EXPECT_THROW(add_(view, 1.0), Error);  // in place through a view of a graph tensor
}

TEST(Engine, OverlappingViewGradientsAccumulate) {
  Tensor x = leaf({1, 2, 3, 4});
  Tensor windows = x.unfold(0, 2, 1);  // (3, 2): [1 2] [2 3] [3 4]
  sum(windows).backward();
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{1, 2, 2, 1}));
}

}  // namespace

}  // namespace engine_test
