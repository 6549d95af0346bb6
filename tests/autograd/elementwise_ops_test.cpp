// Op table entries for the elementwise family, with references from <cmath> in float64,
// plus dtype and error checks the table does not cover.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "op_info.h"

namespace infini::test::elementwise_ops_test {
namespace {

using Unary = std::function<double(double)>;
using Binary = std::function<double(double, double)>;

// A float64 tensor of `shape` holding `v` (row-major); works for 0-d and empty shapes.
Tensor make(const Shape& shape, const std::vector<double>& v) {
  return from_vector(v, {static_cast<std::int64_t>(v.size())}).reshape(shape);
}

Tensor map1(const Tensor& x, const Unary& f) {
  std::vector<double> v = values(x);
  for (double& e : v) e = f(e);
  return make(x.shape(), v);
}

// f over the broadcast of a and b, by explicit index arithmetic.
Tensor map2(const Tensor& a, const Tensor& b, const Binary& f) {
  const Shape shape = broadcast_shapes("test", a.shape(), b.shape());
  const std::vector<double> va = values(a.expand(shape)), vb = values(b.expand(shape));
  std::vector<double> out(va.size());
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = f(va[i], vb[i]);
  return make(shape, out);
}

Tensor grad_leaf(const Shape& shape, double lo, double hi, std::uint64_t seed) {
  return sample(shape, lo, hi, seed).requires_grad_();
}

std::vector<OpSample> unary_samples(double lo, double hi) {
  return {
      {"contiguous (3,4)", {grad_leaf({3, 4}, lo, hi, 1)}},
      {"transposed", {grad_leaf({4, 3}, lo, hi, 2)}, [](const TensorList& l) { return TensorList{l[0].t()}; }},
      {"sliced with step", {grad_leaf({3, 8}, lo, hi, 3)},
       [](const TensorList& l) { return TensorList{l[0].slice(1, 0, 8, 2)}; }},
      {"expanded", {grad_leaf({1, 4}, lo, hi, 4)}, [](const TensorList& l) { return TensorList{l[0].expand({3, 4})}; }},
      {"zero-size", {grad_leaf({0, 3}, lo, hi, 5)}},
      {"scalar", {grad_leaf({}, lo, hi, 6)}},
  };
}

std::vector<OpSample> binary_samples(double lo, double hi, double blo, double bhi) {
  return {
      {"same shape", {grad_leaf({3, 4}, lo, hi, 1), grad_leaf({3, 4}, blo, bhi, 2)}},
      {"broadcast (3,1) x (1,4)", {grad_leaf({3, 1}, lo, hi, 3), grad_leaf({1, 4}, blo, bhi, 4)}},
      {"broadcast (4) x (2,3,4)", {grad_leaf({4}, lo, hi, 5), grad_leaf({2, 3, 4}, blo, bhi, 6)}},
      {"scalar operand", {grad_leaf({3, 4}, lo, hi, 7), grad_leaf({}, blo, bhi, 8)}},
      {"transposed and sliced", {grad_leaf({4, 3}, lo, hi, 9), grad_leaf({3, 8}, blo, bhi, 10)},
       [](const TensorList& l) { return TensorList{l[0].t(), l[1].slice(1, 0, 8, 2)}; }},
      {"zero-size", {grad_leaf({0, 4}, lo, hi, 11), grad_leaf({1, 4}, blo, bhi, 12)}},
  };
}

void unary_entry(const std::string& name, std::function<Tensor(const Tensor&)> op, Unary ref, double lo = -2,
                 double hi = 2, bool differentiable = true) {
  op_registry().push_back({.name = name,
                           .fn = [op](const TensorList& in) { return TensorList{op(in[0])}; },
                           .reference = [ref](const TensorList& in) { return TensorList{map1(in[0], ref)}; },
                           .samples = [lo, hi] { return unary_samples(lo, hi); },
                           .differentiable = differentiable,
                           .gradgrad = differentiable,
                           .tolerance = 1e-12});
}

void binary_entry(const std::string& name, std::function<Tensor(const Tensor&, const Tensor&)> op, Binary ref,
                  double lo = -2, double hi = 2, double blo = -2, double bhi = 2, bool differentiable = true) {
  op_registry().push_back({.name = name,
                           .fn = [op](const TensorList& in) { return TensorList{op(in[0], in[1])}; },
                           .reference = [ref](const TensorList& in) { return TensorList{map2(in[0], in[1], ref)}; },
                           .samples = [=] { return binary_samples(lo, hi, blo, bhi); },
                           .differentiable = differentiable,
                           .gradgrad = differentiable,
                           .tolerance = 1e-12});
}

double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }
double gelu_ref(double x) { return 0.5 * x * (1 + std::erf(x / std::numbers::sqrt2)); }
double gelu_tanh_ref(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
}

const bool registered = [] {
  unary_entry("neg", [](const Tensor& x) { return neg(x); }, [](double x) { return -x; });
  unary_entry("operator-(unary)", [](const Tensor& x) { return -x; }, [](double x) { return -x; });
  unary_entry("abs", [](const Tensor& x) { return abs(x); }, [](double x) { return std::abs(x); });
  unary_entry("sign", [](const Tensor& x) { return sign(x); }, [](double x) { return double((0 < x) - (x < 0)); });
  unary_entry("exp", [](const Tensor& x) { return exp(x); }, [](double x) { return std::exp(x); });
  unary_entry("expm1", [](const Tensor& x) { return expm1(x); }, [](double x) { return std::expm1(x); });
  unary_entry("log", [](const Tensor& x) { return log(x); }, [](double x) { return std::log(x); }, 0.5, 3);
  unary_entry("log1p", [](const Tensor& x) { return log1p(x); }, [](double x) { return std::log1p(x); }, -0.5, 3);
  unary_entry("log2", [](const Tensor& x) { return log2(x); }, [](double x) { return std::log2(x); }, 0.5, 3);
  unary_entry("sqrt", [](const Tensor& x) { return sqrt(x); }, [](double x) { return std::sqrt(x); }, 0.5, 3);
  unary_entry("rsqrt", [](const Tensor& x) { return rsqrt(x); }, [](double x) { return 1 / std::sqrt(x); }, 0.5, 3);
  unary_entry("reciprocal", [](const Tensor& x) { return reciprocal(x); }, [](double x) { return 1 / x; }, 0.5, 3);
  unary_entry("sin", [](const Tensor& x) { return sin(x); }, [](double x) { return std::sin(x); });
  unary_entry("cos", [](const Tensor& x) { return cos(x); }, [](double x) { return std::cos(x); });
  unary_entry("tanh", [](const Tensor& x) { return tanh(x); }, [](double x) { return std::tanh(x); });
  unary_entry("sigmoid", [](const Tensor& x) { return sigmoid(x); }, sigmoid_ref);
  unary_entry("erf", [](const Tensor& x) { return erf(x); }, [](double x) { return std::erf(x); });
  unary_entry("relu", [](const Tensor& x) { return relu(x); }, [](double x) { return x > 0 ? x : 0.0; });
  unary_entry("leaky_relu", [](const Tensor& x) { return leaky_relu(x, 0.1); },
              [](double x) { return x > 0 ? x : 0.1 * x; });
  unary_entry("elu", [](const Tensor& x) { return elu(x, 0.7); },
              [](double x) { return x > 0 ? x : 0.7 * std::expm1(x); });
  unary_entry("gelu", [](const Tensor& x) { return gelu(x); }, gelu_ref);
  unary_entry("gelu_tanh", [](const Tensor& x) { return gelu(x, GeluApproximation::Tanh); }, gelu_tanh_ref);
  unary_entry("silu", [](const Tensor& x) { return silu(x); }, [](double x) { return x * sigmoid_ref(x); });
  unary_entry("softplus", [](const Tensor& x) { return softplus(x, 2.0, 3.0); },
              [](double x) { return 2 * x > 3 ? x : std::log1p(std::exp(2 * x)) / 2; });
  unary_entry("clamp", [](const Tensor& x) { return clamp(x, -1.0, 0.5); },
              [](double x) { return std::min(std::max(x, -1.0), 0.5); });
  unary_entry("pow", [](const Tensor& x) { return pow(x, 2.5); }, [](double x) { return std::pow(x, 2.5); }, 0.5, 2);
  unary_entry("logical_not", [](const Tensor& x) { return logical_not(gt(x, 0)); },
              [](double x) { return x > 0 ? 0.0 : 1.0; }, -2, 2, false);

  binary_entry("add", [](const Tensor& a, const Tensor& b) { return add(a, b, 2.0); },
               [](double a, double b) { return a + 2 * b; });
  binary_entry("operator+", [](const Tensor& a, const Tensor& b) { return a + b; }, std::plus<double>());
  binary_entry("sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); }, std::minus<double>());
  binary_entry("operator-", [](const Tensor& a, const Tensor& b) { return a - b; }, std::minus<double>());
  binary_entry("mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }, std::multiplies<double>());
  binary_entry("operator*", [](const Tensor& a, const Tensor& b) { return a * b; }, std::multiplies<double>());
  binary_entry("div", [](const Tensor& a, const Tensor& b) { return div(a, b); }, std::divides<double>(), -2, 2, 0.5, 2);
  binary_entry("operator/", [](const Tensor& a, const Tensor& b) { return a / b; }, std::divides<double>(), -2, 2, 0.5,
               2);
  binary_entry("rsub", [](const Tensor& a, const Tensor& b) { return add(rsub(a, 3.0), b); },
               [](double a, double b) { return 3 - a + b; });
  binary_entry("pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); },
               [](double a, double b) { return std::pow(a, b); }, 0.5, 2, -2, 2);
  // gelu's input gradients g * gelu'(x), from the closed forms' derivatives.
  binary_entry("gelu_backward", [](const Tensor& g, const Tensor& x) { return gelu_backward(g, x); },
               [](double g, double x) {
                 return g * (0.5 * (1 + std::erf(x / std::numbers::sqrt2)) +
                             x * std::exp(-x * x / 2) / std::sqrt(2 * std::numbers::pi));
               });
  binary_entry("gelu_tanh_backward",
               [](const Tensor& g, const Tensor& x) { return gelu_backward(g, x, GeluApproximation::Tanh); },
               [](double g, double x) {
                 const double k = std::sqrt(2 / std::numbers::pi), t = std::tanh(k * (x + 0.044715 * x * x * x));
                 return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x));
               });
  binary_entry("maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); },
               [](double a, double b) { return std::max(a, b); });
  binary_entry("minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); },
               [](double a, double b) { return std::min(a, b); });
  binary_entry("lerp", [](const Tensor& a, const Tensor& b) { return lerp(a, b, 0.3); },
               [](double a, double b) { return a + 0.3 * (b - a); });
  binary_entry("floor_divide", [](const Tensor& a, const Tensor& b) { return floor_divide(a, b); },
               [](double a, double b) { return std::floor(a / b); }, -4, 4, 0.5, 2, false);
  const std::pair<const char*, std::function<Tensor(const Tensor&, const Tensor&)>> comparisons[] = {
      {"eq", [](const Tensor& a, const Tensor& b) { return eq(a, b); }},
      {"ne", [](const Tensor& a, const Tensor& b) { return ne(a, b); }},
      {"lt", [](const Tensor& a, const Tensor& b) { return lt(a, b); }},
      {"le", [](const Tensor& a, const Tensor& b) { return le(a, b); }},
      {"gt", [](const Tensor& a, const Tensor& b) { return gt(a, b); }},
      {"ge", [](const Tensor& a, const Tensor& b) { return ge(a, b); }}};
  const Binary comparison_refs[] = {[](double a, double b) { return double(a == b); },
                                    [](double a, double b) { return double(a != b); },
                                    [](double a, double b) { return double(a < b); },
                                    [](double a, double b) { return double(a <= b); },
                                    [](double a, double b) { return double(a > b); },
                                    [](double a, double b) { return double(a >= b); }};
  for (int i = 0; i < 6; ++i) binary_entry(comparisons[i].first, comparisons[i].second, comparison_refs[i], -2, 2, -2, 2, false);
  binary_entry("logical_and", [](const Tensor& a, const Tensor& b) { return logical_and(gt(a, 0), gt(b, 0)); },
               [](double a, double b) { return double(a > 0 && b > 0); }, -2, 2, -2, 2, false);
  binary_entry("logical_or", [](const Tensor& a, const Tensor& b) { return logical_or(gt(a, 0), gt(b, 0)); },
               [](double a, double b) { return double(a > 0 || b > 0); }, -2, 2, -2, 2, false);
  binary_entry("logical_xor", [](const Tensor& a, const Tensor& b) { return logical_xor(gt(a, 0), gt(b, 0)); },
               [](double a, double b) { return double((a > 0) != (b > 0)); }, -2, 2, -2, 2, false);
  binary_entry("where", [](const Tensor& a, const Tensor& b) { return where(gt(a, b), a, mul(b, 2.0)); },
               [](double a, double b) { return a > b ? a : 2 * b; });
  binary_entry("masked_fill", [](const Tensor& a, const Tensor& b) { return add(masked_fill(add(a, mul(b, 0.0)), gt(b, 0.5), 7.0), b); },
               [](double a, double b) { return (b > 0.5 ? 7.0 : a) + b; });
  // In-place forms act on a non-leaf copy of the first operand; the second broadcasts into it.
  const std::pair<const char*, std::function<void(Tensor&, const Tensor&)>> inplace[] = {
      {"add_", [](Tensor& x, const Tensor& b) { add_(x, b, 2.0); }},
      {"operator+=", [](Tensor& x, const Tensor& b) { x += b; }},
      {"sub_", [](Tensor& x, const Tensor& b) { sub_(x, b); }},
      {"mul_", [](Tensor& x, const Tensor& b) { mul_(x, b); }},
      {"operator*=", [](Tensor& x, const Tensor& b) { x *= b; }},
      {"div_", [](Tensor& x, const Tensor& b) { div_(x, b); }},
      {"masked_fill_", [](Tensor& x, const Tensor& b) { masked_fill_(x, gt(b, 1.0), -3.0); }}};
  const Binary inplace_refs[] = {[](double a, double b) { return a + 2 * b; }, std::plus<double>(),
                                 std::minus<double>(),                         std::multiplies<double>(),
                                 std::multiplies<double>(),                    std::divides<double>(),
                                 [](double a, double b) { return b > 1.0 ? -3.0 : a; }};
  for (int i = 0; i < 7; ++i) {
    auto op = inplace[i].second;
    op_registry().push_back(
        {.name = inplace[i].first,
         .fn = [op](const TensorList& in) {
           Tensor x = mul(in[0], 1.0);
           op(x, in[1]);
           return TensorList{x};
         },
         .reference = [ref = inplace_refs[i]](const TensorList& in) { return TensorList{map2(in[0], in[1], ref)}; },
         .samples = [] {
           return std::vector<OpSample>{
               {"same shape", {grad_leaf({3, 4}, -2, 2, 1), grad_leaf({3, 4}, 0.5, 2, 2)}},
               {"broadcast operand", {grad_leaf({3, 4}, -2, 2, 3), grad_leaf({1, 4}, 0.5, 2, 4)}},
               {"scalar operand", {grad_leaf({2, 3}, -2, 2, 5), grad_leaf({}, 0.5, 2, 6)}},
               {"transposed target", {grad_leaf({4, 3}, -2, 2, 7), grad_leaf({3, 4}, 0.5, 2, 8)},
                [](const TensorList& l) { return TensorList{l[0].t(), l[1]}; }},
           };
         },
         .gradgrad = true,
         .tolerance = 1e-12});
  }
  // isnan / isinf on tensors that hold NaN and Inf.
  for (bool nan_test : {true, false}) {
    op_registry().push_back(
        {.name = nan_test ? "isnan" : "isinf",
         .fn = [nan_test](const TensorList& in) { return TensorList{nan_test ? isnan(in[0]) : isinf(in[0])}; },
         .reference = [nan_test](const TensorList& in) {
           return TensorList{map1(in[0], [nan_test](double x) { return double(nan_test ? std::isnan(x) : std::isinf(x)); })};
         },
         .samples = [] {
           const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
           return std::vector<OpSample>{{"specials", {make({2, 3}, {1, nan, -inf, inf, 0, -2})}},
                                        {"float32", {make({4}, {nan, 1, inf, 3}).to(kFloat32)}},
                                        {"zero-size", {make({0}, {})}}};
         },
         .differentiable = false});
  }
  return true;
}();

}  // namespace
}  // namespace infini::test::elementwise_ops_test

namespace infini::test::elementwise_ops_test {
namespace {

// Contiguous float32 rows of +, -, *, / take vectorized kernels (cpu/vector_rows.h), with
// tails at every length below a vector; in place too, where out aliases a. Each element
// must be the correctly rounded float32 result: the float64 result rounded to float32 is
// that (53 >= 2 * 24 + 2 bits, so the double rounding is innocuous).
TEST(Elementwise, Float32RowsAreCorrectlyRounded) {
  Generator gen(31);
  using Op = Tensor (*)(const Tensor&, const Tensor&);
  using InPlace = Tensor& (*)(Tensor&, const Tensor&);
  const std::function<double(double, double)> exact[] = {std::plus<>(), std::minus<>(), std::multiplies<>(),
                                                        std::divides<>()};
  const Op ops[] = {[](const Tensor& a, const Tensor& b) { return add(a, b); },
                    [](const Tensor& a, const Tensor& b) { return sub(a, b); },
                    [](const Tensor& a, const Tensor& b) { return mul(a, b); },
                    [](const Tensor& a, const Tensor& b) { return div(a, b); }};
  const InPlace in_place[] = {[](Tensor& x, const Tensor& b) -> Tensor& { return add_(x, b); },
                              [](Tensor& x, const Tensor& b) -> Tensor& { return sub_(x, b); },
                              [](Tensor& x, const Tensor& b) -> Tensor& { return mul_(x, b); },
                              [](Tensor& x, const Tensor& b) -> Tensor& { return div_(x, b); }};
  for (const std::int64_t n : {1, 7, 16, 17, 31, 1000, 4099}) {
    const Tensor a = randn({n}, {}, &gen), b = add(rand({n}, {}, &gen), 0.5);  // b in [0.5, 1.5)
    const std::vector<double> va = values(a), vb = values(b);
    for (int k = 0; k < 4; ++k) {
      Tensor x = a.clone();
      in_place[k](x, b);
      const std::vector<double> got = values(ops[k](a, b)), got_in_place = values(x);
      for (std::int64_t j = 0; j < n; ++j) {
        const double want = static_cast<float>(exact[k](va[j], vb[j]));
        ASSERT_EQ(got[j], want) << "op " << k << ", n " << n << ", element " << j;
        ASSERT_EQ(got_in_place[j], want) << "in-place op " << k << ", n " << n << ", element " << j;
      }
    }
  }
}

TEST(Elementwise, PromotionAndResultTypes) {
  const Tensor i = from_vector<std::int64_t>({1, 2, 3});
  const Tensor f = from_vector<float>({0.5f, 1.5f, 2.5f});
  EXPECT_EQ(add(i, f).dtype(), kFloat32);
  EXPECT_EQ(add(i, 2).dtype(), kInt64);
  EXPECT_EQ(mul(i, 2.5).dtype(), kFloat32);  // int tensor * float scalar
  EXPECT_EQ(div(i, i).dtype(), kFloat32);     // true division
  EXPECT_EQ(values(div(i, 2)), (std::vector<double>{0.5, 1, 1.5}));
  EXPECT_EQ(values(floor_divide(from_vector<std::int64_t>({-7, 7}), 2)), (std::vector<double>{-4, 3}));
  EXPECT_EQ(exp(i).dtype(), kFloat32);
  EXPECT_EQ(gt(f, 1.0).dtype(), kBool);
  EXPECT_EQ(mul(f.to(kFloat16), 2.5).dtype(), kFloat16);
  EXPECT_EQ(values(mul(f.to(kBFloat16), 2.0)), (std::vector<double>{1, 3, 5}));
  EXPECT_EQ(add(from_vector<std::uint8_t>({1}), from_vector<std::int8_t>({1})).dtype(), kInt16);
  EXPECT_EQ(values(pow(from_vector<std::int64_t>({2, 3}), 3)), (std::vector<double>{8, 27}));
  EXPECT_EQ(pow(from_vector<std::int64_t>({2, 3}), 3).dtype(), kInt64);
}

TEST(Elementwise, HalfPrecisionComputesInFloat) {
  // exp in float16: computed in float, rounded once.
  const Tensor x = from_vector<float>({0.1f, 1.0f, 2.0f}).to(kFloat16);
  const std::vector<double> got = values(exp(x));
  for (int k = 0; k < 3; ++k) {
    const float input = static_cast<float>(Half(std::vector<float>{0.1f, 1.0f, 2.0f}[k]));
    EXPECT_EQ(got[k], static_cast<float>(Half(std::exp(input))));
  }
}

TEST(Elementwise, Errors) {
  const Tensor a = zeros({2, 3}), b = zeros({4});
  expect_error([&] { add(a, b); }, "add", "[2, 3] and [4]");
  expect_error([&] { mul(a, zeros({3, 3})); }, "mul", "cannot be broadcast");
  expect_error([&] { where(a, a, a); }, "where", "condition must be bool");
  expect_error([&] { masked_fill(a, zeros({2, 3}), 1.0); }, "masked_fill", "mask must be bool");
  expect_error([&] { masked_fill(zeros({3}), gt(zeros({2, 3}), 0), 1.0); }, "masked_fill", "does not broadcast");
  expect_error([&] { floor_divide(from_vector<std::int64_t>({1}), from_vector<std::int64_t>({0})); }, "floor_divide",
               "division by zero");
  expect_error([&] { pow(from_vector<std::int64_t>({2}), from_vector<std::int64_t>({-1})); }, "pow", "negative");
  expect_error([&] { neg(zeros({2}, {.dtype = kBool})); }, "neg", "bool");
  Tensor i = zeros({2}, {.dtype = kInt64});
  expect_error([&] { div_(i, 2.0); }, "div", "cannot be stored");
  Tensor small = zeros({3});
  expect_error([&] { add_(small, zeros({2, 3})); }, "add", "does not broadcast");
  if (cuda_device_count() == 0)
    expect_error([&] { add(a, empty({2, 3}, {.dtype = kFloat32, .device = Device::cuda(0)})); }, "allocate", "cuda:0");
  else
    expect_error([&] { add(a, zeros({2, 3}, {.dtype = kFloat32, .device = Device::cuda(0)})); }, "add", "one device");
}

}  // namespace
}  // namespace infini::test::elementwise_ops_test
