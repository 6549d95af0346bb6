// Op table entries for the activations of torch.nn.functional (hardtanh, relu6, logsigmoid,
// selu, celu, mish, hardswish, hardsigmoid, glu, prelu) and logaddexp, with float64
// references from <cmath>; plus values and gradients at the kinks and extremes (expected
// numbers from PyTorch 1.13's formulas), integer inputs, float32 and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "op_info.h"

namespace infini::test::activation_ops_test {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kSeluAlpha = 1.6732632423543772848170429916717;
constexpr double kSeluScale = 1.0507009873554804934193349852946;

Tensor make(const Shape& shape, const std::vector<double>& v) {
  return from_vector(v, {static_cast<std::int64_t>(v.size())}).reshape(shape);
}

Tensor leaf(const Shape& shape, double lo, double hi, std::uint64_t seed) {
  return sample(shape, lo, hi, seed).requires_grad_();
}

Tensor map1(const Tensor& x, const std::function<double(double)>& f) {
  std::vector<double> v = values(x);
  for (double& e : v) e = f(e);
  return make(x.shape(), v);
}

// Expects the values of t to be `expected` (NaN matches NaN) within tol * (1 + |expected|).
void expect_values(const Tensor& t, const std::vector<double>& expected, double tol = 1e-12,
                   const std::string& what = "") {
  const std::vector<double> v = values(t);
  ASSERT_EQ(v.size(), expected.size()) << what;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(expected[i])) {
      EXPECT_TRUE(std::isnan(v[i])) << what << " element " << i << ": " << v[i];
    } else if (std::isinf(expected[i])) {
      EXPECT_EQ(v[i], expected[i]) << what << " element " << i;
    } else {
      EXPECT_NEAR(v[i], expected[i], tol * (1 + std::abs(expected[i]))) << what << " element " << i;
    }
  }
}

// d(sum(f(x)))/dx at the given points.
std::vector<double> gradient_at(const std::function<Tensor(const Tensor&)>& f, const std::vector<double>& points) {
  Tensor x = make({static_cast<std::int64_t>(points.size())}, points).requires_grad_();
  sum(f(x)).backward();
  return values(x.grad());
}

// Samples of one float64 input in [lo, hi): 2-d, transposed, 0-d and zero-size.
std::vector<OpSample> unary_samples(double lo, double hi) {
  return {{"(3,4)", {leaf({3, 4}, lo, hi, 1)}},
          {"transposed", {leaf({4, 3}, lo, hi, 2)}, [](const TensorList& l) { return TensorList{l[0].t()}; }},
          {"0-d", {leaf({}, lo, hi, 3)}},
          {"zero-size", {leaf({0, 3}, lo, hi, 4)}}};
}

// An entry for `name` whose fn returns one output per function of `ops`, checked against
// the matching closed form of `refs`.
void unary_entry(const std::string& name, std::vector<std::function<Tensor(const Tensor&)>> ops,
                 std::vector<std::function<double(double)>> refs, double lo = -4, double hi = 4) {
  op_registry().push_back({.name = name,
                           .fn = [ops](const TensorList& in) {
                             TensorList out;
                             for (const auto& op : ops) out.push_back(op(in[0]));
                             return out;
                           },
                           .reference = [refs](const TensorList& in) {
                             TensorList out;
                             for (const auto& ref : refs) out.push_back(map1(in[0], ref));
                             return out;
                           },
                           .samples = [lo, hi] { return unary_samples(lo, hi); },
                           .gradgrad = true,
                           .tolerance = 1e-12});
}

double clamp_ref(double x, double lo, double hi) { return std::min(std::max(x, lo), hi); }
double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }

const bool registered = [] {
  unary_entry("hardtanh",
              {[](const Tensor& x) { return hardtanh(x); }, [](const Tensor& x) { return hardtanh(x, -0.5, 2.5); }},
              {[](double x) { return clamp_ref(x, -1, 1); }, [](double x) { return clamp_ref(x, -0.5, 2.5); }});
  unary_entry("relu6", {[](const Tensor& x) { return relu6(x); }}, {[](double x) { return clamp_ref(x, 0, 6); }},
              -3, 9);
  unary_entry("logsigmoid", {[](const Tensor& x) { return logsigmoid(x); }},
              {[](double x) { return std::log(sigmoid_ref(x)); }}, -6, 6);
  unary_entry("selu", {[](const Tensor& x) { return selu(x); }},
              {[](double x) { return kSeluScale * (x > 0 ? x : kSeluAlpha * (std::exp(x) - 1)); }});
  unary_entry("celu", {[](const Tensor& x) { return celu(x, 0.7); }, [](const Tensor& x) { return celu(x, -1.5); }},
              {[](double x) { return x > 0 ? x : 0.7 * (std::exp(x / 0.7) - 1); },
               [](double x) { return x > 0 ? x : -1.5 * (std::exp(x / -1.5) - 1); }});
  unary_entry("mish", {[](const Tensor& x) { return mish(x); }},
              {[](double x) { return x * std::tanh(std::log(1 + std::exp(x))); }});
  unary_entry("hardswish", {[](const Tensor& x) { return hardswish(x); }},
              {[](double x) { return x * clamp_ref(x + 3, 0, 6) / 6; }}, -5, 5);
  unary_entry("hardsigmoid", {[](const Tensor& x) { return hardsigmoid(x); }},
              {[](double x) { return clamp_ref(x + 3, 0, 6) / 6; }}, -5, 5);

  // glu along the last dim and along dim 0 of a (4, 6) input: first half * sigmoid(second half).
  op_registry().push_back(
      {.name = "glu",
       .fn = [](const TensorList& in) { return TensorList{glu(in[0]), glu(in[0], 0)}; },
       .reference = [](const TensorList& in) {
         const std::int64_t rows = in[0].shape()[0], cols = in[0].shape()[1];
         const std::vector<double> x = values(in[0]);
         std::vector<double> last, first;
         for (std::int64_t i = 0; i < rows; ++i)
           for (std::int64_t j = 0; j < cols / 2; ++j)
             last.push_back(x[i * cols + j] * sigmoid_ref(x[i * cols + j + cols / 2]));
         for (std::int64_t i = 0; i < rows / 2; ++i)
           for (std::int64_t j = 0; j < cols; ++j)
             first.push_back(x[i * cols + j] * sigmoid_ref(x[(i + rows / 2) * cols + j]));
         return TensorList{make({rows, cols / 2}, last), make({rows / 2, cols}, first)};
       },
       .samples = [] {
         return std::vector<OpSample>{{"(4,6)", {leaf({4, 6}, -3, 3, 5)}},
                                      {"transposed", {leaf({6, 4}, -3, 3, 6)},
                                       [](const TensorList& l) { return TensorList{l[0].t()}; }},
                                      {"zero rows", {leaf({0, 4}, -3, 3, 7)}}};
       },
       .gradgrad = true});

  // prelu: weight per channel (dim 1), one shared weight, per element of a 1-d input, 0-d input.
  op_registry().push_back(
      {.name = "prelu",
       .fn = [](const TensorList& in) { return TensorList{prelu(in[0], in[1])}; },
       .reference = [](const TensorList& in) {
         const Tensor& x = in[0];
         const std::vector<double> v = values(x), w = values(in[1]);
         // The channel of flat index i: dim 1 (dim 0 for 1-d x) when there are several weights.
         std::int64_t inner = 1, channels = 1;
         if (w.size() > 1) {
           const std::int64_t channel_dim = x.dim() == 1 ? 0 : 1;
           channels = x.shape()[channel_dim];
           for (std::int64_t d = channel_dim + 1; d < x.dim(); ++d) inner *= x.shape()[d];
         }
         std::vector<double> out(v.size());
         for (std::size_t i = 0; i < v.size(); ++i) {
           const double a = w[(static_cast<std::int64_t>(i) / inner) % channels];
           out[i] = v[i] > 0 ? v[i] : a * v[i];
         }
         return TensorList{make(x.shape(), out)};
       },
       .samples = [] {
         return std::vector<OpSample>{
             {"(2,3,4) per channel", {leaf({2, 3, 4}, -2, 2, 8), leaf({3}, 0.1, 0.5, 9)}},
             {"(3,4) shared", {leaf({4, 3}, -2, 2, 10), leaf({1}, 0.1, 0.5, 11)},
              [](const TensorList& l) { return TensorList{l[0].t(), l[1]}; }},
             {"1-d per element", {leaf({5}, -2, 2, 12), leaf({5}, 0.1, 0.5, 13)}},
             {"0-d", {leaf({}, -2, 0, 14), leaf({}, 0.1, 0.5, 15)}}};
       },
       .gradgrad = true});

  op_registry().push_back(
      {.name = "logaddexp",
       .fn = [](const TensorList& in) { return TensorList{logaddexp(in[0], in[1])}; },
       .reference = [](const TensorList& in) {
         const Shape shape = broadcast_shapes("test", in[0].shape(), in[1].shape());
         const std::vector<double> a = values(in[0].expand(shape)), b = values(in[1].expand(shape));
         std::vector<double> out(a.size());
         for (std::size_t i = 0; i < a.size(); ++i) out[i] = std::log(std::exp(a[i]) + std::exp(b[i]));
         return TensorList{make(shape, out)};
       },
       .samples = [] {
         return std::vector<OpSample>{
             {"same shape", {leaf({3, 4}, -3, 3, 16), leaf({3, 4}, -3, 3, 17)}},
             {"broadcast (3,1) x (1,4)", {leaf({3, 1}, -3, 3, 18), leaf({1, 4}, -3, 3, 19)}},
             {"0-d operand", {leaf({4, 3}, -3, 3, 20), leaf({}, -3, 3, 21)},
              [](const TensorList& l) { return TensorList{l[0].t(), l[1]}; }},
             {"zero-size", {leaf({0, 4}, -3, 3, 22), leaf({4}, -3, 3, 23)}}};
       },
       .gradgrad = true,
       .tolerance = 1e-12});
  return true;
}();

TEST(Activations, HardtanhAndRelu6GradientsVanishAtTheBounds) {
  // PyTorch's hardtanh_backward passes the gradient strictly inside (and at NaN).
  const std::vector<double> x = {-1, 1, 0.5, kNaN, -2};
  expect_values(hardtanh(make({5}, x)), {-1, 1, 0.5, kNaN, -1});
  expect_values(make({5}, gradient_at([](const Tensor& v) { return hardtanh(v); }, x)), {0, 0, 1, 1, 0});
  expect_values(make({5}, gradient_at([](const Tensor& v) { return relu6(v); }, {0, 6, -1, 7, 3})), {0, 0, 0, 0, 1});
  // min_val > max_val: every element is max_val (clamp's rule) and no gradient passes.
  expect_values(hardtanh(make({3}, {-3, 0, 5}), 2, 1), {1, 1, 1});
  expect_values(make({3}, gradient_at([](const Tensor& v) { return hardtanh(v, 2, 1); }, {-3, 1.5, 5})), {0, 0, 0});
}

TEST(Activations, HardswishAndHardsigmoidGradientsAtTheKinks) {
  const std::vector<double> x = {-3, 3, 0, -4, 4, 1};
  // hardswish_backward: 0 below -3, x/3 + 1/2 on [-3, 3], 1 above.
  expect_values(make({6}, gradient_at([](const Tensor& v) { return hardswish(v); }, x)),
                {-0.5, 1.5, 0.5, 0, 1, 5.0 / 6});
  expect_values(make({6}, gradient_at([](const Tensor& v) { return hardsigmoid(v); }, x)),
                {0, 0, 1.0 / 6, 0, 0, 1.0 / 6});
  expect_values(hardswish(make({6}, x)), {0, 3, 0, 0, 4, 2.0 / 3});
  expect_values(hardsigmoid(make({6}, x)), {0, 1, 0.5, 0, 1, 4.0 / 6});
  // Second derivative of hardswish inside (-3, 3) is 1/3.
  Tensor v = make({2}, {-1, 2}).requires_grad_();
  const Tensor g = autograd::grad({sum(hardswish(v))}, {v}, {}, false, true)[0];
  expect_values(autograd::grad({sum(g)}, {v})[0], {1.0 / 3, 1.0 / 3});
}

TEST(Activations, SmoothActivationsAtExtremeInputs) {
  const std::vector<double> x = {0, -800, 800, -20};
  expect_values(logsigmoid(make({4}, x)), {-std::log(2.0), -800, 0, -20 - std::log1p(std::exp(-20.0))});
  expect_values(make({4}, gradient_at([](const Tensor& v) { return logsigmoid(v); }, x)),
                {0.5, 1, 0, sigmoid_ref(20)});
  expect_values(mish(make({4}, x)), {0, 0, 800, -20 * std::tanh(std::log1p(std::exp(-20.0)))});
  // d mish = tanh(sp) + x sigmoid(x) (1 - tanh(sp)^2), sp = softplus(x).
  const auto mish_grad = [](double v) {
    const double t = std::tanh(std::log1p(std::exp(v)));
    return t + v * sigmoid_ref(v) * (1 - t * t);
  };
  expect_values(make({4}, gradient_at([](const Tensor& v) { return mish(v); }, x)),
                {0.6, 0, 1, mish_grad(-20)}, 1e-9);
  expect_values(selu(make({3}, {-1, 0, 2})), {kSeluScale * kSeluAlpha * std::expm1(-1.0), 0, kSeluScale * 2});
  expect_values(make({2}, gradient_at([](const Tensor& v) { return selu(v); }, {0, 1})),
                {kSeluScale * kSeluAlpha, kSeluScale});
  // celu with a negative alpha, and its gradient exp(x / alpha) at and below 0.
  expect_values(celu(make({3}, {0, -1, 2}), -2), {0, -2 * std::expm1(0.5), 2});
  expect_values(make({3}, gradient_at([](const Tensor& v) { return celu(v, -2); }, {0, -1, 2})),
                {1, std::exp(0.5), 1});
  expect_values(celu(make({1}, {-1000}), 2), {-2});
  // Far below 0 the gradient keeps its relative precision (PyTorch: exp(x / alpha) itself).
  const std::vector<double> points = {-36, -40, -600};
  const std::vector<double> slopes = gradient_at([](const Tensor& v) { return celu(v, 1.0); }, points);
  for (std::size_t i = 0; i < points.size(); ++i)
    EXPECT_NEAR(slopes[i] / std::exp(points[i]), 1.0, 1e-12) << "celu'(" << points[i] << ")";
}

TEST(Activations, PreluGradientAtZeroIsTheWeight) {
  Tensor x = make({3}, {0, -1, 1}).requires_grad_();
  Tensor w = make({1}, {0.25}).requires_grad_();
  sum(prelu(x, w)).backward();
  expect_values(x.grad(), {0.25, 0.25, 1});
  expect_values(w.grad(), {-1});
  // One weight per channel of an (N, C, L) input.
  expect_values(prelu(make({1, 2, 2}, {-1, 2, -3, -4}), make({2}, {0.1, 0.2})), {-0.1, 2, -0.6, -0.8});
  EXPECT_EQ(prelu(make({}, {-2}), make({1}, {0.25})).shape(), Shape{});
}

TEST(Activations, GluHalvesTheDim) {
  const Tensor x = make({2, 2}, {1, 2, 0, -1});
  expect_values(glu(x), {1 * sigmoid_ref(2), 0});
  expect_values(glu(x, 0), {sigmoid_ref(0), 2 * sigmoid_ref(-1)});
  EXPECT_EQ(glu(zeros({0, 4}, {.dtype = kFloat64})).shape(), (Shape{0, 2}));
}

TEST(Activations, LogaddexpInfinitiesNaNAndGradients) {
  Tensor a = make({6}, {kInf, -kInf, kInf, 1, kNaN, 2}).requires_grad_();
  Tensor b = make({6}, {kInf, -kInf, -kInf, 1, 1, kNaN}).requires_grad_();
  const Tensor y = logaddexp(a, b);
  expect_values(y, {kInf, -kInf, kInf, 1 + std::log(2.0), kNaN, kNaN});
  sum(y).backward();
  // PyTorch: grad / (1 + exp(b - a)): NaN where a == b == +-inf.
  expect_values(a.grad(), {kNaN, kNaN, 1, 0.5, kNaN, kNaN});
  expect_values(b.grad(), {kNaN, kNaN, 0, 0.5, kNaN, kNaN});
  // No overflow for large arguments.
  expect_values(logaddexp(make({2}, {1000, -1000}), make({2}, {1000, -1001})),
                {1000 + std::log(2.0), -1000 + std::log1p(std::exp(-1.0))});
}

TEST(Activations, IntegerAndFloat32Inputs) {
  // hardtanh and relu6 keep integer inputs integer (bounds truncated), like PyTorch.
  const Tensor ints = from_vector<std::int64_t>({-3, 0, 5, 9});
  const Tensor h = hardtanh(ints, -1.5, 2.7);
  EXPECT_EQ(h.dtype(), kInt64);
  EXPECT_EQ(values(h), (std::vector<double>{-1, 0, 2, 2}));
  EXPECT_EQ(values(relu6(ints)), (std::vector<double>{0, 0, 5, 6}));
  // logaddexp promotes an integer operand to the other's floating type.
  const Tensor mixed = logaddexp(from_vector<float>({1.0f}), from_vector<std::int64_t>({2}));
  EXPECT_EQ(mixed.dtype(), kFloat32);
  expect_values(mixed, {2 + std::log1p(std::exp(-1.0))}, 1e-6);
  // float32 at extremes stays finite and matches the float64 closed forms.
  const Tensor x32 = from_vector<float>({-100, -20, 0, 20, 100});
  const std::vector<double> xs = {-100, -20, 0, 20, 100};
  std::vector<double> ls, mi, hs;
  for (double v : xs) {
    ls.push_back(std::min(v, 0.0) - std::log1p(std::exp(-std::abs(v))));
    mi.push_back(v * std::tanh(std::log1p(std::exp(v))));
    hs.push_back(v * clamp_ref(v + 3, 0, 6) / 6);
  }
  EXPECT_EQ(logsigmoid(x32).dtype(), kFloat32);
  expect_values(logsigmoid(x32), ls, 1e-6);
  expect_values(mish(x32), mi, 1e-6);
  expect_values(hardswish(x32), hs, 1e-6);
  constexpr double negative = kSeluScale * kSeluAlpha;
  expect_values(selu(x32), {negative * std::expm1(-100.0), negative * std::expm1(-20.0), 0, kSeluScale * 20,
                            kSeluScale * 100},
                1e-6);
}

TEST(Activations, Errors) {
  const Tensor ints = from_vector<std::int64_t>({1, 2});
  expect_error([&] { hardtanh(from_vector<std::uint8_t>({1}), -1, 1); }, "hardtanh", "negative");
  expect_error([] { hardtanh(zeros({2}, {.dtype = kBool})); }, "hardtanh", "bool");
  for (const auto& [name, op] : std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>>{
           {"logsigmoid", [](const Tensor& x) { return logsigmoid(x); }},
           {"selu", [](const Tensor& x) { return selu(x); }},
           {"celu", [](const Tensor& x) { return celu(x); }},
           {"mish", [](const Tensor& x) { return mish(x); }},
           {"hardswish", [](const Tensor& x) { return hardswish(x); }},
           {"hardsigmoid", [](const Tensor& x) { return hardsigmoid(x); }},
           {"glu", [](const Tensor& x) { return glu(x); }}})
    expect_error([&] { op(ints); }, name, "int64");
  expect_error([] { celu(zeros({2}), 0); }, "celu", "alpha cannot be 0");
  expect_error([] { glu(zeros({3, 5})); }, "glu", "dim -1 of input of shape [3, 5] has size 5");
  expect_error([] { glu(zeros({})); }, "glu", "0-d");
  expect_error([] { glu(zeros({2, 4}), 2); }, "glu", "dimension 2");
  expect_error([] { prelu(zeros({2, 3}), zeros({2})); }, "prelu", "2 elements does not match the 3 channels");
  expect_error([] { prelu(zeros({2, 3}), zeros({1, 1})); }, "prelu", "[1, 1]");
  expect_error([] { prelu(zeros({2, 3}), zeros({3}, {.dtype = kFloat64})); }, "prelu", "float64");
  expect_error([] { prelu(zeros({}), zeros({2})); }, "prelu", "single weight");
  expect_error([&] { prelu(ints, from_vector<std::int64_t>({1})); }, "prelu", "int64");
  expect_error([&] { logaddexp(ints, ints); }, "logaddexp", "int64 and int64");
  expect_error([] { logaddexp(zeros({2}), zeros({3})); }, "logaddexp", "[3]");
}

}  // namespace
}  // namespace infini::test::activation_ops_test
