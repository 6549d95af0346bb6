// The split backward of zero-bubble pipelines: autograd::backward_input computes only what
// the input gradients need and defers the parameters' part, which backward_weight runs;
// together they give what backward() gives. Also autograd::grad's pruning, which it shares.
#include <gtest/gtest.h>

#include <string>
#include <vector>
import infini.autograd;

namespace split_backward_test {
using namespace infini;

namespace {

Tensor parameter(const Shape& shape, std::uint64_t seed) {
  Generator generator(seed);
  return randn(shape, {.dtype = kFloat64}, &generator).requires_grad_();
}

std::vector<double> vals(const Tensor& t) {
  const Tensor c = t.detach().to(kFloat64).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

void expect_close(const Tensor& actual, const Tensor& expected, const std::string& what) {
  ASSERT_TRUE(actual.defined()) << what;
  ASSERT_EQ(actual.shape(), expected.shape()) << what;
  const std::vector<double> a = vals(actual), e = vals(expected);
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], e[i], 1e-12 * (1 + std::abs(e[i]))) << what << " [" << i << "]";
}

// A two-layer block with every kind of parameter use: linear with bias, a layer norm's
// scale and shift (elementwise mul/add), a weight used twice, and a bias-free matmul.
struct Block {
  Tensor w1 = parameter({6, 4}, 1), b1 = parameter({6}, 2), gamma = parameter({6}, 3), beta = parameter({6}, 4);
  Tensor w2 = parameter({6, 3}, 5);

  std::vector<Tensor> parameters() const { return {w1, b1, gamma, beta, w2}; }
  void zero_grad() {
    for (const Tensor& p : parameters()) p.set_grad(Tensor());
  }
  // x: (rows, 4) -> (rows, 3)
  Tensor operator()(const Tensor& x) const {
    Tensor h = tanh(linear(x, w1, b1));
    h = layer_norm(h, {6}, gamma, beta);
    h = add(h, mul(h, b1));  // b1 a second time, elementwise
    return matmul(h, w2);
  }
};

TEST(SplitBackward, InputThenWeightEqualsBackward) {
  Block block;
  Generator generator(7);
  const Tensor x0 = randn({5, 4}, {.dtype = kFloat64}, &generator);
  const Tensor g = randn({5, 3}, {.dtype = kFloat64}, &generator);

  Tensor x = x0.clone().requires_grad_();
  block(x).backward(g);
  std::vector<Tensor> expected;
  for (const Tensor& p : block.parameters()) expected.push_back(p.grad().clone());
  const Tensor expected_dx = x.grad().clone();
  block.zero_grad();

  Tensor x2 = x0.clone().requires_grad_();
  const Tensor y = block(x2);
  autograd::DeferredGrads deferred;
  const TensorList dx = autograd::backward_input({y}, {x2}, {g}, deferred);
  expect_close(dx.at(0), expected_dx, "input gradient");
  EXPECT_FALSE(x2.grad().defined());  // returned, not accumulated
  for (const Tensor& p : block.parameters()) EXPECT_FALSE(p.grad().defined());
  EXPECT_FALSE(deferred.empty());

  autograd::backward_weight(deferred);
  EXPECT_TRUE(deferred.empty());
  const std::vector<Tensor> params = block.parameters();
  for (std::size_t i = 0; i < params.size(); ++i) expect_close(params[i].grad(), expected[i], "parameter " + std::to_string(i));
  EXPECT_FALSE(x2.grad().defined());
  // The graph is freed: a second backward is an error.
  EXPECT_THROW(y.backward(g), Error);
}

// The linear node runs twice: backward_input computes only dx (no dW, no dbias), and
// backward_weight only dW and dbias.
TEST(SplitBackward, EachHalfComputesOnlyItsOwnGradients) {
  Block block;
  Tensor x = parameter({5, 4}, 9);
  const Tensor y = linear(x, block.w1, block.b1);
  std::vector<std::vector<bool>> defined_outputs;
  y.grad_fn()->register_post_hook([&](const TensorList& grads, const TensorList&) {
    std::vector<bool> defined;
    for (const Tensor& t : grads) defined.push_back(t.defined());
    defined_outputs.push_back(defined);
  });
  autograd::DeferredGrads deferred;
  autograd::backward_input({y}, {x}, {ones_like(y)}, deferred);
  autograd::backward_weight(deferred);
  ASSERT_EQ(defined_outputs.size(), 2u);
  EXPECT_EQ(defined_outputs[0], (std::vector<bool>{true, false, false}));
  EXPECT_EQ(defined_outputs[1], (std::vector<bool>{false, true, true}));
  // dW = g^T x with g = ones: every row of dW is the column sums of x.
  const std::vector<double> xs = vals(x), dw = vals(block.w1.grad());
  for (int o = 0; o < 6; ++o)
    for (int i = 0; i < 4; ++i) {
      double column = 0;
      for (int r = 0; r < 5; ++r) column += xs[static_cast<std::size_t>(r * 4 + i)];
      EXPECT_NEAR(dw[static_cast<std::size_t>(o * 4 + i)], column, 1e-12);
    }
  EXPECT_EQ(vals(block.b1.grad()), std::vector<double>(6, 5.0));
}

// Without inputs (a pipeline's first stage) everything is deferred.
TEST(SplitBackward, NoInputsDefersEverything) {
  Block block;
  const Tensor x = parameter({3, 4}, 11).detach();
  sum(block(x)).backward();
  std::vector<Tensor> expected;
  for (const Tensor& p : block.parameters()) expected.push_back(p.grad().clone());
  block.zero_grad();

  const Tensor loss = sum(block(x));
  autograd::DeferredGrads deferred;
  EXPECT_TRUE(autograd::backward_input({loss}, {}, {}, deferred).empty());
  for (const Tensor& p : block.parameters()) EXPECT_FALSE(p.grad().defined());
  autograd::backward_weight(deferred);
  const std::vector<Tensor> params = block.parameters();
  for (std::size_t i = 0; i < params.size(); ++i) expect_close(params[i].grad(), expected[i], "parameter " + std::to_string(i));
}

// Hooks run once: the input's in the first half, the parameters' in the second.
TEST(SplitBackward, HooksRunOnceInTheirHalf) {
  Block block;
  Tensor x = parameter({2, 4}, 13);
  int input_hook = 0, weight_hook = 0, pre_hook = 0;
  x.register_hook([&](const Tensor&) { ++input_hook; return Tensor(); });
  block.w2.register_hook([&](const Tensor& g) { ++weight_hook; return mul(g, 2.0); });
  const Tensor y = block(x);
  y.grad_fn()->register_pre_hook([&](const TensorList&) { ++pre_hook; return TensorList{}; });
  autograd::DeferredGrads deferred;
  autograd::backward_input({y}, {x}, {ones_like(y)}, deferred);
  EXPECT_EQ(input_hook, 1);
  EXPECT_EQ(pre_hook, 1);
  EXPECT_EQ(weight_hook, 0);
  autograd::backward_weight(deferred);
  EXPECT_EQ(input_hook, 1);
  EXPECT_EQ(pre_hook, 1);  // the matmul re-runs with the gradients its hooks gave it
  EXPECT_EQ(weight_hook, 1);
  // w2's hook doubled its gradient: 2 * h^T @ ones.
  Tensor h = layer_norm(tanh(linear(x.detach(), block.w1.detach(), block.b1.detach())), {6}, block.gamma.detach(),
                        block.beta.detach());
  h = add(h, mul(h, block.b1.detach()));
  expect_close(block.w2.grad(), mul(matmul(h.t(), ones_like(y.detach())), 2.0), "hooked w2 gradient");
}

TEST(SplitBackward, RetainGraphAndErrors) {
  Block block;
  Tensor x = parameter({2, 4}, 17);
  const Tensor y = block(x);
  autograd::DeferredGrads deferred;
  autograd::backward_input({y}, {x}, {ones_like(y)}, deferred, /*retain_graph=*/true);
  try {
    autograd::backward_input({y}, {x}, {ones_like(y)}, deferred);
    FAIL() << "expected an error for a DeferredGrads still holding work";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("backward_input"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("empty DeferredGrads"), std::string::npos) << e.what();
  }
  autograd::backward_weight(deferred, /*retain_graph=*/true);
  const std::vector<double> once = vals(block.w1.grad());
  y.backward(ones_like(y));  // the graph was kept: a full backward doubles the gradient
  const std::vector<double> twice = vals(block.w1.grad());
  for (std::size_t i = 0; i < once.size(); ++i) EXPECT_NEAR(twice[i], 2 * once[i], 1e-12);

  autograd::DeferredGrads unused;
  EXPECT_THROW(autograd::backward_input({y}, {x.detach()}, {ones_like(y)}, unused), Error);  // no grad
  EXPECT_THROW(autograd::backward_input({y}, {x}, {}, unused), Error);                      // not one element
  autograd::backward_weight(unused);  // nothing deferred: nothing to do
  EXPECT_TRUE(unused.empty());
}

// autograd::grad runs only the nodes on a path to its inputs, and asks them only for the
// gradients on such paths.
TEST(SplitBackward, GradSkipsWhatItsInputsDoNotNeed) {
  Tensor x = parameter({3, 2}, 19), w = parameter({4, 2}, 23);
  const Tensor scaled_w = mul(w, 3.0);  // on w's path only
  int scaled_w_runs = 0;
  scaled_w.grad_fn()->register_pre_hook([&](const TensorList&) { ++scaled_w_runs; return TensorList{}; });
  const Tensor y = linear(x, scaled_w, Tensor());
  std::vector<bool> linear_outputs;
  y.grad_fn()->register_post_hook([&](const TensorList& grads, const TensorList&) {
    for (const Tensor& t : grads) linear_outputs.push_back(t.defined());
  });
  const Tensor dx = autograd::grad({sum(y)}, {x}).at(0);
  EXPECT_EQ(scaled_w_runs, 0);
  EXPECT_EQ(linear_outputs, (std::vector<bool>{true, false}));
  // d(sum(x (3w)^T))/dx = ones @ 3w: each row is 3 * the column sums of w.
  const std::vector<double> ws = vals(w), dxs = vals(dx);
  for (int r = 0; r < 3; ++r)
    for (int i = 0; i < 2; ++i)
      EXPECT_NEAR(dxs[static_cast<std::size_t>(r * 2 + i)], 3 * (ws[static_cast<std::size_t>(i)] + ws[2 + static_cast<std::size_t>(i)] + ws[4 + static_cast<std::size_t>(i)] + ws[6 + static_cast<std::size_t>(i)]), 1e-12);
  EXPECT_FALSE(w.grad().defined());
}

}  // namespace

}  // namespace split_backward_test
