// scatter_reduce: op table entries for the five reductions with and without self, against a
// naive float64 loop that lists what lands on each element; gradients at ties and zeros,
// integer means and bad inputs against PyTorch 1.13's numbers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "indexing_test_util.h"
#include "op_info.h"

namespace infini::test::scatter_reduce_test {
namespace {

using namespace indexing_util;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// What reduce makes of the values combined at one element (NaN propagates through amax/amin).
double combine(const std::string& reduce, const std::vector<double>& v) {
  double r = reduce == "prod" ? 1 : 0;
  if (reduce == "amax" || reduce == "amin") r = v[0];
  for (double x : v) {
    if (reduce == "sum" || reduce == "mean") r += x;
    else if (reduce == "prod") r *= x;
    else if (std::isnan(x) || std::isnan(r)) r = kNaN;
    else r = reduce == "amax" ? std::max(r, x) : std::min(r, x);
  }
  return reduce == "mean" ? r / static_cast<double>(v.size()) : r;
}

// self with, at every element something is written to (over idx's shape, along dim), the
// reduction of self's value (when included) and the src values written there.
Tensor scatter_reduce_ref(const Tensor& self, std::int64_t dim, const Tensor& idx, const Tensor& src,
                          const std::string& reduce, bool include_self) {
  const std::vector<double> sv = values(self), xv = values(src);
  const std::vector<std::int64_t> iv = ints(idx);
  const Shape self_shape = self.dim() == 0 ? Shape{1} : self.shape();
  const Shape idx_shape = idx.dim() == 0 ? Shape{1} : idx.shape(), src_shape = src.dim() == 0 ? Shape{1} : src.shape();
  if (dim < 0) dim += static_cast<std::int64_t>(self_shape.size());
  std::vector<std::vector<double>> landed(sv.size());
  for (std::size_t k = 0; k < iv.size(); ++k) {
    Coords c = unravel(static_cast<std::int64_t>(k), idx_shape);
    const double v = xv[ravel(c, src_shape)];
    c[dim] = wrap(iv[k], self_shape[dim]);
    landed[ravel(c, self_shape)].push_back(v);
  }
  std::vector<double> out = sv;
  for (std::size_t p = 0; p < out.size(); ++p) {
    if (landed[p].empty()) continue;
    if (include_self) landed[p].insert(landed[p].begin(), sv[p]);
    out[p] = combine(reduce, landed[p]);
  }
  return f64(self.shape(), out);
}

// (self, idx, src) for reductions along the last dim: duplicate targets, elements nothing is
// written to, a transposed self, a src larger than the index, zero-size and 0-d.
std::vector<OpSample> samples(const std::string& reduce) {
  const double lo = reduce == "prod" ? 0.5 : -2, hi = 2;
  const Tensor idx = i64({3, 3}, {1, 1, -3, 0, 2, 0, 3, 3, 3});
  std::vector<OpSample> s = {
      {"duplicates", {leaf({3, 4}, 1, lo, hi), idx, leaf({3, 3}, 2, lo, hi)}},
      {"transposed self", {leaf({4, 3}, 3, lo, hi), idx, leaf({3, 3}, 4, lo, hi)},
       [](const TensorList& l) { return TensorList{l[0].t(), l[1], l[2]}; }},
      {"index smaller than src", {leaf({3, 4}, 5, lo, hi), i64({2, 2}, {0, 0, 2, 1}), leaf({3, 3}, 6, lo, hi)}},
      {"zero-size index", {leaf({3, 4}, 7, lo, hi), i64({3, 0}, {}), leaf({3, 2}, 8, lo, hi)}},
      {"0-d", {leaf({}, 9, lo, hi), i64({}, {0}), leaf({}, 10, lo, hi)}},
  };
  return s;
}

// prod's exact zeros: in self, one and two per element (first derivatives only, like PyTorch).
std::vector<OpSample> zeros_sample() {
  return {{"zeros", {f64({2, 3}, {0, 1.5, 2, 0, -1, 3}).requires_grad_(), i64({2, 3}, {0, 1, 0, 0, 2, 0}),
                     f64({2, 3}, {0.5, -2, 1.5, 0, 2, 0}).requires_grad_()}}};
}

OpInfo entry(const std::string& reduce, bool include_self, std::vector<OpSample> (*make)(const std::string&),
             bool gradgrad) {
  return {.name = "scatter_reduce",
          .fn = [reduce, include_self](const TensorList& in) {
            return TensorList{scatter_reduce(in[0], -1, in[1], in[2], reduce, include_self)};
          },
          .reference = [reduce, include_self](const TensorList& in) {
            return TensorList{scatter_reduce_ref(in[0], -1, in[1], in[2], reduce, include_self)};
          },
          .samples = [make, reduce] { return make(reduce); },
          .gradgrad = gradgrad,
          .tolerance = 1e-12};
}

const bool registered = [] {
  for (const std::string reduce : {"sum", "prod", "mean", "amax", "amin"})
    for (const bool include_self : {true, false}) op_registry().push_back(entry(reduce, include_self, samples, true));
  for (const bool include_self : {true, false})
    op_registry().push_back(entry("prod", include_self, [](const std::string&) { return zeros_sample(); }, false));
  // Along dim 0 of a (3, 2) self.
  op_registry().push_back(
      {.name = "scatter_reduce",
       .fn = [](const TensorList& in) { return TensorList{scatter_reduce(in[0], 0, in[1], in[2], "mean", false)}; },
       .reference = [](const TensorList& in) {
         return TensorList{scatter_reduce_ref(in[0], 0, in[1], in[2], "mean", false)};
       },
       .samples = [] {
         return std::vector<OpSample>{
             {"along dim 0", {leaf({3, 2}, 1), i64({4, 2}, {0, 2, 0, 2, -1, 0, 0, 2}), leaf({4, 2}, 2)}}};
       }});
  return true;
}();

// y = scatter_reduce(self, 0, idx, src) for 1-d tensors, backward with the gradient
// (1, 2, ..., n): y, self's and src's gradients.
struct Result {
  std::vector<double> y, grad_self, grad_src;
};
Result run(const std::vector<double>& self, const std::vector<std::int64_t>& idx, const std::vector<double>& src,
           const std::string& reduce, bool include_self) {
  const auto n = static_cast<std::int64_t>(self.size()), k = static_cast<std::int64_t>(src.size());
  Tensor s = f64({n}, self).requires_grad_(), x = f64({k}, src).requires_grad_();
  const Tensor y = scatter_reduce(s, 0, i64({static_cast<std::int64_t>(idx.size())}, idx), x, reduce, include_self);
  y.backward(arange(1, n + 1, 1, {.dtype = kFloat64}));
  return {values(y), values(s.grad()), values(x.grad())};
}

using V = std::vector<double>;

TEST(ScatterReduce, AmaxAminSplitTheGradientAmongTies) {
  // PyTorch 1.13: ties among src, and between self and src when self is included.
  Result r = run({1, 5}, {0, 0, 1}, {3, 3, 5}, "amax", true);
  EXPECT_EQ(r.y, (V{3, 5}));
  EXPECT_EQ(r.grad_self, (V{0, 1}));
  EXPECT_EQ(r.grad_src, (V{0.5, 0.5, 1}));
  r = run({1, 5}, {0, 0, 1}, {3, 3, 5}, "amax", false);
  EXPECT_EQ(r.grad_self, (V{0, 0}));
  // Self is not combined, so src takes all of it (PyTorch 1.13 gives 1: it counts self's
  // equal value among the ties although self is excluded, and then drops self's share).
  EXPECT_EQ(r.grad_src, (V{0.5, 0.5, 2}));
  r = run({1, 5, 7}, {0, 0, 1}, {-3, -3, 5}, "amin", true);
  EXPECT_EQ(r.y, (V{-3, 5, 7}));
  EXPECT_EQ(r.grad_self, (V{0, 1, 3}));
  EXPECT_EQ(r.grad_src, (V{0.5, 0.5, 1}));
}

TEST(ScatterReduce, ProdGradientIsExactWithZeros) {
  // PyTorch 1.13: element 0 has one zero (in src), 1 one zero (self), 2 two zeros.
  Result r = run({2, 0, 3, 4}, {0, 0, 1, 1, 2, 2, 2}, {0, 4, 5, 6, 0, 0, 2}, "prod", true);
  EXPECT_EQ(r.y, (V{0, 0, 0, 4}));
  EXPECT_EQ(r.grad_self, (V{0, 60, 0, 4}));
  EXPECT_EQ(r.grad_src, (V{8, 0, 0, 0, 0, 0, 0}));
  r = run({2, 0, 3, 4}, {0, 0, 1, 1, 2, 2, 2}, {0, 4, 5, 6, 0, 0, 2}, "prod", false);
  EXPECT_EQ(r.y, (V{0, 30, 0, 4}));
  EXPECT_EQ(r.grad_self, (V{0, 0, 0, 4}));
  EXPECT_EQ(r.grad_src, (V{4, 0, 12, 10, 0, 0, 0}));
}

TEST(ScatterReduce, MeanAndSumCountWhatIsCombined) {
  Result r = run({2, 0, 3, 4}, {0, 0, 1, 1, 2}, {1.5, 4, 5, 6, 2}, "mean", true);
  EXPECT_EQ(r.y, (V{2.5, 11.0 / 3, 2.5, 4}));
  EXPECT_EQ(r.grad_self, (V{1.0 / 3, 2.0 / 3, 1.5, 4}));
  EXPECT_EQ(r.grad_src, (V{1.0 / 3, 1.0 / 3, 2.0 / 3, 2.0 / 3, 1.5}));
  r = run({2, 0, 3, 4}, {0, 0, 1, 1, 2}, {1.5, 4, 5, 6, 2}, "mean", false);
  EXPECT_EQ(r.y, (V{2.75, 5.5, 2, 4}));
  EXPECT_EQ(r.grad_self, (V{0, 0, 0, 4}));
  EXPECT_EQ(r.grad_src, (V{0.5, 0.5, 1, 1, 3}));
  r = run({2, 0, 3, 4}, {0, 0, 1, 1, 2}, {1.5, 4, 5, 6, 2}, "sum", false);
  EXPECT_EQ(r.y, (V{5.5, 11, 2, 4}));
  EXPECT_EQ(r.grad_self, (V{0, 0, 0, 4}));
  EXPECT_EQ(r.grad_src, (V{1, 1, 2, 2, 3}));
}

TEST(ScatterReduce, IntegersFloorTheMeanAndKeepTheirDtype) {
  const Tensor self = i64({4}, {5, -5, 7, 9}), idx = i64({4}, {0, 1, 1, 3}), src = i64({4}, {2, -2, -1, 1});
  auto y = [&](const std::string& reduce, bool include_self) {
    const Tensor out = scatter_reduce(self, 0, idx, src, reduce, include_self);
    EXPECT_EQ(out.dtype(), kInt64);
    return ints(out);
  };
  using I = std::vector<std::int64_t>;  // PyTorch 1.13's results
  EXPECT_EQ(y("mean", true), (I{3, -3, 7, 5}));
  EXPECT_EQ(y("mean", false), (I{2, -2, 7, 1}));
  EXPECT_EQ(y("amax", false), (I{2, -1, 7, 1}));
  EXPECT_EQ(y("amin", false), (I{2, -2, 7, 1}));
  EXPECT_EQ(y("prod", false), (I{2, 2, 7, 1}));
  EXPECT_EQ(y("sum", true), (I{7, -8, 7, 10}));
}

TEST(ScatterReduce, NaNPropagatesThroughAmaxAndAmin) {
  const Tensor self = f64({2}, {1, 2}), idx = i64({3}, {0, 0, 1}), src = f64({3}, {kNaN, 3, 1});
  const std::vector<double> amax = values(scatter_reduce(self, 0, idx, src, "amax"));
  EXPECT_TRUE(std::isnan(amax[0]));
  EXPECT_EQ(amax[1], 2);
  const std::vector<double> amin = values(scatter_reduce(self, 0, idx, src, "amin", false));
  EXPECT_TRUE(std::isnan(amin[0]));
  EXPECT_EQ(amin[1], 1);
}

TEST(ScatterReduce, Float32) {
  const Tensor self = full({2, 2}, 1.0, {.dtype = kFloat32});
  const Tensor y = scatter_reduce(self, 1, i64({2, 2}, {1, 1, 0, 0}), full({2, 2}, 0.25, {.dtype = kFloat32}), "mean");
  EXPECT_EQ(y.dtype(), kFloat32);
  EXPECT_EQ(values(y), (V{1, 0.5, 0.5, 1}));
}

TEST(ScatterReduce, BadInputs) {
  const Tensor self = f64({2, 3}, {1, 2, 3, 4, 5, 6}), src = f64({2, 2}, {1, 2, 3, 4});
  const Tensor idx = i64({2, 2}, {0, 1, 2, 0});
  expect_error<Error>([&] { scatter_reduce(self, 1, idx, src, "max"); }, "scatter_reduce",
                      {"\"max\"", "\"sum\", \"prod\", \"mean\", \"amax\" or \"amin\""});
  expect_error<DTypeError>([&] { scatter_reduce(self, 1, idx.to(kFloat64), src, "sum"); }, "scatter_reduce",
                           {"int64", "float64"});
  expect_error<DTypeError>([&] { scatter_reduce(self, 1, idx, src.to(kFloat32), "amax"); }, "scatter_reduce",
                           {"float64", "float32"});
  expect_error<IndexError>([&] { scatter_reduce(self, 1, i64({2, 2}, {0, 3, 1, 1}), src, "prod", false); },
                           "scatter_reduce", {"index 3", "size 3"});
  expect_error<ShapeError>([&] { scatter_reduce(self, 1, i64({2, 3}, {0, 0, 0, 0, 0, 0}), src, "mean"); },
                           "scatter_reduce", {"[2, 3]", "[2, 2]"});
  expect_error<ShapeError>([&] { scatter_reduce(self, 1, i64({2}, {0, 1}), src, "sum"); }, "scatter_reduce",
                           {"same number of dims"});
  expect_error<IndexError>([&] { scatter_reduce(self, 2, idx, src, "sum"); }, "scatter_reduce", {"2"});
  const Tensor flags = full({2}, true, {.dtype = kBool});
  expect_error<DTypeError>([&] { scatter_reduce(flags, 0, i64({1}, {0}), flags.narrow(0, 0, 1), "mean"); },
                           "scatter_reduce", {"bool"});
}

}  // namespace
}  // namespace infini::test::scatter_reduce_test
