// Op table entries for cummax, cummin and logcumsumexp (along each dim), with running
// float64 references; ties, NaN, infinities, dtypes and errors in plain tests.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "reduction_reference.h"

namespace infini::test::reduction_cumulative_test {
namespace {

const double inf = std::numeric_limits<double>::infinity();
const double nan = std::numeric_limits<double>::quiet_NaN();

using Line = std::vector<double>;

// f applied to every line of x along dim (row-major index arithmetic), as x's shape.
Tensor per_line(const Tensor& x, std::int64_t dim, const std::function<Line(const Line&)>& f) {
  std::vector<double> v = values(x);
  if (x.dim() == 0) return from_vector(f(v), {1}).reshape({});
  const std::int64_t d = dim < 0 ? dim + x.dim() : dim;
  const std::int64_t n = x.shape()[d];
  std::int64_t step = 1;  // distance between neighbours along d
  for (std::int64_t k = d + 1; k < x.dim(); ++k) step *= x.shape()[k];
  for (std::size_t first = 0; first < v.size(); ++first) {
    if (static_cast<std::int64_t>(first) / step % n != 0) continue;  // not the start of a line
    Line line;
    for (std::int64_t k = 0; k < n; ++k) line.push_back(v[first + k * step]);
    const Line out = f(line);
    for (std::int64_t k = 0; k < n; ++k) v[first + k * step] = out[k];
  }
  return from_vector(v, {static_cast<std::int64_t>(v.size())}).reshape(x.shape());
}

// PyTorch's running max (min): an element takes over when it is NaN, or when the running
// value is not NaN and the element is >= (<=) it. values or indices.
Line running_extreme(const Line& line, bool is_max, bool indices) {
  Line out;
  double best = line.empty() ? 0 : line[0];
  std::size_t at = 0;
  for (std::size_t k = 0; k < line.size(); ++k) {
    const double e = line[k];
    if (std::isnan(e) || (!std::isnan(best) && (is_max ? e >= best : e <= best))) {
      best = e;
      at = k;
    }
    out.push_back(indices ? static_cast<double>(at) : best);
  }
  return out;
}

// log(sum(exp)) of every prefix, directly: the samples are small enough not to overflow.
Line running_logsumexp(const Line& line) {
  Line out;
  double s = 0;
  for (double e : line) out.push_back(std::log(s += std::exp(e)));
  return out;
}

std::vector<std::int64_t> dims_for(const Tensor& x) {
  return x.dim() == 0 ? std::vector<std::int64_t>{0, -1} : std::vector<std::int64_t>{0, 1, -1};
}

std::vector<OpSample> plain_samples() {
  std::vector<OpSample> s = samples_3d(-2, 2, true);
  for (OpSample& z : samples_0d(-2, 2)) s.push_back(std::move(z));
  return s;
}

const bool registered = [] {
  for (bool is_max : {true, false}) {
    op_registry().push_back({.name = is_max ? "cummax" : "cummin",
                             .fn = [is_max](const TensorList& in) {
                               TensorList out;
                               for (std::int64_t d : dims_for(in[0])) {
                                 auto [v, i] = is_max ? cummax(in[0], d) : cummin(in[0], d);
                                 out.push_back(v);
                                 out.push_back(i);
                               }
                               return out;
                             },
                             .reference = [is_max](const TensorList& in) {
                               TensorList out;
                               for (std::int64_t d : dims_for(in[0]))
                                 for (bool indices : {false, true})
                                   out.push_back(per_line(in[0], d, [&](const Line& l) {
                                     return running_extreme(l, is_max, indices);
                                   }));
                               return out;
                             },
                             .samples = plain_samples,
                             .gradgrad = true,
                             .tolerance = 0});
  }
  op_registry().push_back({.name = "logcumsumexp",
                           .fn = [](const TensorList& in) {
                             TensorList out;
                             for (std::int64_t d : dims_for(in[0])) out.push_back(logcumsumexp(in[0], d));
                             return out;
                           },
                           .reference = [](const TensorList& in) {
                             TensorList out;
                             for (std::int64_t d : dims_for(in[0]))
                               out.push_back(per_line(in[0], d, running_logsumexp));
                             return out;
                           },
                           .samples = plain_samples,
                           .gradgrad = true,
                           .tolerance = 1e-12});
  return true;
}();

Tensor leaf(const std::vector<double>& v) {
  return from_vector(v, {static_cast<std::int64_t>(v.size())}).detach().requires_grad_();
}

TEST(ReductionCumulative, TiesAndNanLikePyTorch) {
  // PyTorch 1.13: cummax([1, 3, nan, 2, nan, 5]) = [1, 3, nan, nan, nan, nan], indices
  // [0, 1, 2, 2, 4, 4]; cummin([3, 1, 1, 2, 0]) indices [0, 1, 2, 2, 4].
  auto [v, i] = cummax(from_vector<double>({1, 3, nan, 2, nan, 5}), 0);
  const std::vector<double> got = values(v);
  EXPECT_EQ(got[0], 1);
  EXPECT_EQ(got[1], 3);
  for (std::size_t k = 2; k < 6; ++k) EXPECT_TRUE(std::isnan(got[k])) << k;
  EXPECT_EQ(i.dtype(), kInt64);
  EXPECT_EQ(values(i), (std::vector<double>{0, 1, 2, 2, 4, 4}));
  const Tensor x = leaf({3, 1, 1, 2, 0});
  auto [mv, mi] = cummin(x, 0);
  EXPECT_EQ(values(mv), (std::vector<double>{3, 1, 1, 1, 0}));
  EXPECT_EQ(values(mi), (std::vector<double>{0, 1, 2, 2, 4}));
  EXPECT_FALSE(mi.requires_grad());
  // The gradient goes to the index each running value came from.
  mv.backward(from_vector<double>({1, 2, 4, 8, 16}));
  EXPECT_EQ(values(x.grad()), (std::vector<double>{1, 2, 12, 0, 16}));
}

TEST(ReductionCumulative, DTypesAndShapes) {
  auto [v, i] = cummax(from_vector<std::int32_t>({1, 3, 2, 3}), 0);
  EXPECT_EQ(v.dtype(), kInt32);
  EXPECT_EQ(values(v), (std::vector<double>{1, 3, 3, 3}));
  EXPECT_EQ(values(i), (std::vector<double>{0, 1, 1, 3}));
  auto [b, bi] = cummax(from_vector<bool>({true, false}), 0);
  EXPECT_EQ(values(b), (std::vector<double>{1, 1}));
  EXPECT_EQ(values(bi), (std::vector<double>{0, 0}));
  const Tensor h = from_vector<float>({0.5f, -2.25f, 3.5f}).to(kBFloat16);
  EXPECT_EQ(values(cummin(h, 0).values), (std::vector<double>{0.5, -2.25, -2.25}));
  EXPECT_EQ(cummax(zeros({3, 0}), 1).values.shape(), (Shape{3, 0}));
  EXPECT_EQ(logcumsumexp(zeros({0, 2}), 0).shape(), (Shape{0, 2}));
  EXPECT_EQ(logcumsumexp(scalar_tensor(2.0), 0).item<double>(), 2);
  // float16 accumulates in float64 and rounds once; float32 gradients match float64's.
  const Tensor h2 = logcumsumexp(from_vector<float>({0, 0}).to(kFloat16), 0);
  EXPECT_EQ(h2.dtype(), kFloat16);
  EXPECT_NEAR(values(h2)[1], std::log(2.0), 1e-3);
  const Tensor f = from_vector<float>({1, 2, 3}).requires_grad_();
  sum(logcumsumexp(f, 0)).backward();
  const Line out = running_logsumexp({1, 2, 3});
  const std::vector<double> g = values(f.grad());
  for (std::size_t i = 0; i < 3; ++i) {
    double want = 0;  // sum over j >= i of exp(x_i - out_j)
    for (std::size_t j = i; j < 3; ++j) want += std::exp(static_cast<double>(i + 1) - out[j]);
    EXPECT_NEAR(g[i], want, 1e-6) << i;
  }
  // Long strided float32 lines (above the parallel threshold), accumulated in float64:
  // within one float32 rounding (2^-24) of the float64 result.
  Generator generator(9);
  const Tensor big = rand({300, 200}, {}, &generator);
  const std::vector<double> got = values(logcumsumexp(big, 0)),
                            ref = values(per_line(big.to(kFloat64), 0, running_logsumexp));
  for (std::size_t k = 0; k < got.size(); ++k)
    ASSERT_NEAR(got[k], ref[k], 0x1p-24 * std::abs(ref[k])) << "element " << k;
}

TEST(ReductionCumulative, LogCumSumExpSpecialValues) {
  // No overflow at 1000; infinities and NaN as PyTorch: [inf, 1, -inf, inf] -> inf,
  // [1, nan, 2] -> [1, nan, nan].
  EXPECT_EQ(values(logcumsumexp(from_vector<double>({1000, 1000}), 0)),
            (std::vector<double>{1000, 1000 + std::log(2.0)}));
  EXPECT_NEAR(values(logcumsumexp(from_vector<float>({1000, 1000}), 0))[1], 1000.6931471805599, 1e-4);
  EXPECT_EQ(values(logcumsumexp(from_vector<double>({inf, 1, -inf, inf}), 0)),
            (std::vector<double>{inf, inf, inf, inf}));
  EXPECT_EQ(values(logcumsumexp(from_vector<double>({-inf, -inf, 0}), 0)), (std::vector<double>{-inf, -inf, 0}));
  const std::vector<double> n = values(logcumsumexp(from_vector<double>({1, nan, 2}), 0));
  EXPECT_EQ(n[0], 1);
  EXPECT_TRUE(std::isnan(n[1]) && std::isnan(n[2]));
}

TEST(ReductionCumulative, LogCumSumExpGradientIsFiniteAtMinusInfinity) {
  // x = [-inf, -inf, 1, -inf, 2], g = [1, -2, 0, 3, 1]: PyTorch 1.13 gives NaN for the two
  // leading -inf; their gradient is 0 here (nothing flows through an all -inf prefix).
  // Elsewhere dL/dx_i = sum over j >= i of g_j exp(x_i - out_j) (PyTorch: 3.2689, 0, 0.7311).
  const Tensor x = leaf({-inf, -inf, 1, -inf, 2});
  const Tensor y = logcumsumexp(x, 0);
  y.backward(from_vector<double>({1, -2, 0, 3, 1}));
  const double out4 = std::log(std::exp(1.0) + std::exp(2.0));
  const std::vector<double> g = values(x.grad());
  EXPECT_EQ(g[0], 0);
  EXPECT_EQ(g[1], 0);
  EXPECT_NEAR(g[2], 3 * std::exp(1.0 - 1.0) + std::exp(1.0 - out4), 1e-14);
  EXPECT_EQ(g[3], 0);
  EXPECT_NEAR(g[4], std::exp(2.0 - out4), 1e-14);
  // Zero incoming gradients give zeros, and large inputs no overflow.
  const Tensor z = leaf({800, 801, -800});
  logcumsumexp(z, 0).backward(zeros({3}, {.dtype = kFloat64}));
  EXPECT_EQ(values(z.grad()), (std::vector<double>{0, 0, 0}));
  const Tensor w = leaf({800, 800});
  sum(logcumsumexp(w, 0)).backward();  // exp(800 + (-800 + r)): the exponent loses ~1e-13
  EXPECT_NEAR(values(w.grad())[0], 1.5, 1e-12);
  EXPECT_NEAR(values(w.grad())[1], 0.5, 1e-12);
}

TEST(ReductionCumulative, Errors) {
  const Tensor x = zeros({2, 3});
  expect_error([&] { cummax(x, 2); }, "cummax", "2");
  expect_error([&] { cummin(x, -3); }, "cummin", "-3");
  expect_error([&] { logcumsumexp(x, 5); }, "logcumsumexp", "5");
  expect_error([&] { logcumsumexp(from_vector<std::int64_t>({1, 2}), 0); }, "logcumsumexp", "int64");
}

}  // namespace
}  // namespace infini::test::reduction_cumulative_test
