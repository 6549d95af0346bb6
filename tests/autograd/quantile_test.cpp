// Op table entries for quantile and nanquantile (double and tensor q, every interpolation,
// with and without dim), with float64 references over explicit slices; NaN, rounding,
// the gradient w.r.t. q, float32 and errors in plain tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "reduction_reference.h"

namespace infini::test::quantile_test {
namespace {

using Group = std::vector<double>;
using Interp = QuantileInterpolation;

const double nan = std::numeric_limits<double>::quiet_NaN();
const std::vector<Interp> kInterpolations = {Interp::Linear, Interp::Lower, Interp::Higher, Interp::Midpoint,
                                             Interp::Nearest};

// PyTorch's quantile of one slice: sort (NaN last), rank q (n - 1) (quantile: n - 1 when
// there is a NaN; nanquantile: q (non-NaN count - 1), at least 0), round, interpolate.
double quantile_of(Group v, double q, Interp m, bool ignore_nan) {
  std::ranges::sort(v, [](double a, double b) { return !std::isnan(a) && (std::isnan(b) || a < b); });
  const double n = static_cast<double>(v.size());
  const double nans = static_cast<double>(std::ranges::count_if(v, [](double e) { return std::isnan(e); }));
  double rank = ignore_nan ? std::max(q * (n - nans - 1), 0.0) : nans > 0 ? n - 1 : q * (n - 1);
  if (m == Interp::Lower) rank = std::floor(rank);
  if (m == Interp::Higher) rank = std::ceil(rank);
  if (m == Interp::Nearest) rank = std::nearbyint(rank);  // half to even
  const double below = v[static_cast<std::size_t>(std::floor(rank))];
  const double above = v[static_cast<std::size_t>(std::ceil(rank))];
  if (m == Interp::Linear) return below + (rank - std::floor(rank)) * (above - below);
  if (m == Interp::Midpoint) return below + 0.5 * (above - below);
  return below;
}

struct Case {
  std::optional<std::int64_t> dim;
  bool keepdim;
};
const std::vector<Case> kCases3d = {{{}, true}, {1, true}, {-1, false}, {0, false}};
const std::vector<Case> kCases0d = {{{}, true}, {0, false}, {-1, true}};
// Fewer for the modes other than linear (they only move the gathered ranks): gradcheck
// time grows with the number of outputs.
const std::vector<Case> kFewCases3d = {{{}, true}, {-1, false}};

// The reference for a 0-d (scalar) or 1-d q: one reduction per q value, q's dim first.
Tensor quantile_ref(const Tensor& x, const std::vector<double>& qs, bool q_is_1d, const Case& c, Interp m,
                    bool ignore_nan) {
  const std::vector<std::int64_t> dims = c.dim ? std::vector<std::int64_t>{*c.dim} : std::vector<std::int64_t>{};
  std::vector<double> out;
  Shape shape;
  for (double q : qs) {
    const Tensor r = reduce_ref(x, dims, c.keepdim, [&](const Group& v) { return quantile_of(v, q, m, ignore_nan); });
    shape = r.shape();
    for (double e : values(r)) out.push_back(e);
  }
  if (q_is_1d) shape.insert(shape.begin(), static_cast<std::int64_t>(qs.size()));
  return from_vector(out, {static_cast<std::int64_t>(out.size())}).reshape(shape);
}

Tensor quantile_call(bool ignore_nan, const Tensor& x, const Tensor& q, const Case& c, Interp m) {
  return ignore_nan ? nanquantile(x, q, c.dim, c.keepdim, m) : quantile(x, q, c.dim, c.keepdim, m);
}

const std::vector<Case>& cases_for(const Tensor& x, Interp m) {
  return x.dim() == 0 ? kCases0d : m == Interp::Linear ? kCases3d : kFewCases3d;
}

// (2,3,4) distinct values with NaN at x[0,0,0], x[0,2,1], x[1,1,3]: no slice all NaN.
Tensor some_nan(std::uint64_t seed) {
  Tensor x = sample({2, 3, 4}, -2, 2, seed);
  NoGradGuard no_grad;
  for (std::int64_t p : {0, 9, 19}) x.view({24}).select(0, p).fill_(nan);
  return x;
}

// Samples of x alone (q a double): distinct values and a 0-d one, or with NaNs.
std::vector<OpSample> x_samples(bool with_nan) {
  if (with_nan)
    return {{"some NaN", {some_nan(61).requires_grad_()}},
            {"some NaN, transposed", {some_nan(62).permute({2, 1, 0}).contiguous().requires_grad_()},
             [](const TensorList& l) { return TensorList{l[0].permute({2, 1, 0})}; }}};
  std::vector<OpSample> s = samples_3d(-2, 2, false);
  s.resize(2);  // contiguous and transposed (the op table adds a strided copy)
  for (OpSample& z : samples_0d(-2, 2)) s.push_back(std::move(z));
  return s;
}

// Entry with a double q: each interpolation of `modes` and every case (second derivatives
// are checked by the tensor-q entries).
void double_q_entry(const std::string& name, double q, const std::vector<Interp>& modes, bool with_nan,
                    bool differentiable) {
  const bool ignore_nan = name == "nanquantile";
  op_registry().push_back(
      {.name = name,
       .fn = [q, modes, ignore_nan](const TensorList& in) {
         TensorList out;
         for (Interp m : modes)
           for (const Case& c : cases_for(in[0], m))
             out.push_back(ignore_nan ? nanquantile(in[0], q, c.dim, c.keepdim, m)
                                      : quantile(in[0], q, c.dim, c.keepdim, m));
         return out;
       },
       .reference = [q, modes, ignore_nan](const TensorList& in) {
         TensorList out;
         for (Interp m : modes)
           for (const Case& c : cases_for(in[0], m)) out.push_back(quantile_ref(in[0], {q}, false, c, m, ignore_nan));
         return out;
       },
       .samples = [with_nan] { return x_samples(with_nan); },
       .differentiable = differentiable,
       .tolerance = 1e-12});
}

// Entry with a tensor q (0-d or 1-d) as a second leaf, requiring grad for the linear mode
// (and checked to the second derivative without NaNs).
void tensor_q_entry(const std::string& name, Interp m, bool with_nan) {
  const bool ignore_nan = name == "nanquantile";
  op_registry().push_back(
      {.name = name,
       .fn = [m, ignore_nan](const TensorList& in) {
         TensorList out;
         for (const Case& c : cases_for(in[0], m)) out.push_back(quantile_call(ignore_nan, in[0], in[1], c, m));
         return out;
       },
       .reference = [m, ignore_nan](const TensorList& in) {
         TensorList out;
         for (const Case& c : cases_for(in[0], m))
           out.push_back(quantile_ref(in[0], values(in[1]), in[1].dim() == 1, c, m, ignore_nan));
         return out;
       },
       .samples = [m, with_nan] {
         // Ranks q (m - 1) stay off integers and halves (where the rounding modes and the
         // linear weight jump) for every slice size m up to 50.
         auto q = [m](const std::vector<double>& v, const Shape& shape) {
           Tensor t = from_vector(v, {static_cast<std::int64_t>(v.size())}).reshape(shape).detach();
           return m == Interp::Linear ? t.requires_grad_() : t;
         };
         const Tensor x = with_nan ? some_nan(63) : sample({2, 3, 4}, -2, 2, 64);
         return std::vector<OpSample>{{"1-d q", {x.detach().requires_grad_(), q({0.13, 0.37, 0.71}, {3})}},
                                      {"0-d q", {x.detach().requires_grad_(), q({0.37}, {})}},
                                      {"0-d x", {sample({}, -2, 2, 65).requires_grad_(), q({0.37, 0.71}, {2})}}};
       },
       .gradgrad = m == Interp::Linear && !with_nan,
       .tolerance = 1e-12});
}

const bool registered = [] {
  for (const std::string name : {"quantile", "nanquantile"}) {
    double_q_entry(name, 0.3, kInterpolations, false, true);
    for (double q : {0.0, 1.0}) double_q_entry(name, q, {Interp::Linear}, false, true);
    for (Interp m : kInterpolations) tensor_q_entry(name, m, false);
  }
  // With NaNs: nanquantile skips them (differentiable); quantile is NaN for those slices.
  double_q_entry("nanquantile", 0.3, kInterpolations, true, true);
  tensor_q_entry("nanquantile", Interp::Linear, true);
  double_q_entry("quantile", 0.3, kInterpolations, true, false);
  return true;
}();

TEST(Quantile, NanAndRoundingLikePyTorch) {
  // PyTorch 1.13 on [[1, nan, 3, 2], [4, 0, 2, 2]]: quantile(x, 0.4, dim=1) = [nan, 2] in
  // every mode; nanquantile(x, [0.25, 0.5], dim=1, keepdim=True) per mode below.
  const Tensor x = from_vector<double>({1, nan, 3, 2, 4, 0, 2, 2}, {2, 4});
  const Tensor q = from_vector<double>({0.25, 0.5});
  const std::vector<std::pair<Interp, std::vector<double>>> expected = {
      {Interp::Linear, {1.5, 1.5, 2, 2}},  {Interp::Lower, {1, 0, 2, 2}},    {Interp::Higher, {2, 2, 2, 2}},
      {Interp::Midpoint, {1.5, 1, 2, 2}}, {Interp::Nearest, {1, 2, 2, 2}}};
  for (const auto& [m, want] : expected) {
    const std::vector<double> got = values(quantile(x, 0.4, 1, false, m));
    EXPECT_TRUE(std::isnan(got[0]));
    EXPECT_EQ(got[1], 2);
    const Tensor n = nanquantile(x, q, 1, true, m);
    EXPECT_EQ(n.shape(), (Shape{2, 2, 1}));
    EXPECT_EQ(values(n), want) << static_cast<int>(m);
  }
  // Nearest rounds half to even: ranks 0.5 -> 0, 1.5 -> 2.
  EXPECT_EQ(values(quantile(from_vector<double>({0, 1, 2, 3, 4}), from_vector<double>({0.125, 0.375}), {}, false,
                            Interp::Nearest)),
            (std::vector<double>{0, 2}));
  EXPECT_EQ(quantile(from_vector<double>({1, 2, 3, 4}), 0.5, {}, false, Interp::Nearest).item<double>(), 3);
  // nanquantile of only NaNs is NaN.
  EXPECT_TRUE(std::isnan(nanquantile(from_vector<double>({nan, nan}), 0.3).item<double>()));
  EXPECT_TRUE(std::isnan(nanquantile(from_vector<double>({nan, nan}), 0.3, {}, false, Interp::Higher).item<double>()));
}

TEST(Quantile, GradientReachesXAndQ) {
  // PyTorch 1.13: quantile(x, [0.3, 0.7], dim=0).sum() for x = [[1, 5, 3, 2], [4, 0, 2, 7]]
  // gives x.grad = ones and q.grad = [14, 14] (sum of above - below times n - 1 = 1).
  const Tensor x = from_vector<double>({1, 5, 3, 2, 4, 0, 2, 7}, {2, 4}).detach().requires_grad_();
  const Tensor q = from_vector<double>({0.3, 0.7}).detach().requires_grad_();
  const Tensor y = quantile(x, q, 0);
  EXPECT_EQ(y.shape(), (Shape{2, 4}));
  const std::vector<double> v = values(y), want = {1.9, 1.5, 2.3, 3.5, 3.1, 3.5, 2.7, 5.5};
  for (std::size_t k = 0; k < v.size(); ++k) EXPECT_NEAR(v[k], want[k], 1e-15) << k;
  sum(y).backward();
  EXPECT_EQ(values(x.grad()), std::vector<double>(8, 1));
  EXPECT_EQ(values(q.grad()), (std::vector<double>{14, 14}));
}

TEST(Quantile, ShapesAndFloat32) {
  EXPECT_EQ(quantile(scalar_tensor(2.0), 0.3, 0, true).shape(), Shape{});
  EXPECT_EQ(quantile(zeros({2, 3}), 0.3, {}, true).shape(), (Shape{1, 1}));
  EXPECT_EQ(quantile(zeros({2, 3}), from_vector<float>({0.3f}), 1, true).shape(), (Shape{1, 2, 1}));
  // float32: q is a float32, the rank 0.4 * 3 is rounded to float32 like PyTorch's.
  const Tensor f = from_vector<float>({4, 1, 3, 2});
  const Tensor y = quantile(f, 0.4);
  EXPECT_EQ(y.dtype(), kFloat32);
  EXPECT_NEAR(y.item<double>(), 2.2, 1e-6);
  EXPECT_EQ(nanquantile(f, from_vector<float>({0.0f, 1.0f})).dtype(), kFloat32);
  EXPECT_EQ(values(nanquantile(f, from_vector<float>({0.0f, 1.0f}))), (std::vector<double>{1, 4}));
}

TEST(Quantile, Errors) {
  const Tensor x = zeros({2, 3});
  expect_error([] { quantile(zeros({0}), 0.5); }, "quantile", "non-empty input, got shape [0]");
  expect_error([&] { quantile(x, 1.5); }, "quantile", "got 1.5");
  expect_error([&] { nanquantile(x, -0.1); }, "nanquantile", "[0, 1]");
  expect_error([&] { quantile(x, std::nan("")); }, "quantile", "nan");
  expect_error([&] { quantile(x, from_vector<float>({0.5f, 1.5f})); }, "quantile",
               "q values must be in the range [0, 1]");
  expect_error([&] { quantile(x, from_vector<double>({0.5})); }, "quantile", "q must have the input's dtype float32");
  expect_error([&] { quantile(x, zeros({1, 1})); }, "quantile", "0-d or 1-d");
  expect_error([] { quantile(from_vector<std::int64_t>({1, 2}), 0.5); }, "quantile",
               "float32 or float64 input, got int64");
  expect_error([] { nanquantile(from_vector<float>({1}).to(kFloat16), 0.5); }, "nanquantile", "float16");
  expect_error([&] { quantile(x, 0.5, 2); }, "quantile", "2");
  expect_error([&] { nanquantile(x, 0.5, -3); }, "nanquantile", "-3");
}

}  // namespace
}  // namespace infini::test::quantile_test
