// Op table entries for median, nanmedian, kthvalue and mode (values and indices), with
// float64 references over explicit slices; ties, NaN, empty inputs, dtypes and errors in
// plain tests and non-differentiable entries.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "reduction_reference.h"

namespace infini::test::order_statistics_test {
namespace {

using Group = std::vector<double>;
using Pick = std::function<std::int64_t(const Group&)>;  // the index a slice selects

const double nan = std::numeric_limits<double>::quiet_NaN();

// a < b with NaN after every number.
bool nan_last_less(double a, double b) { return !std::isnan(a) && (std::isnan(b) || a < b); }

// Positions of v in stable ascending order (equal values by position), NaN after every number.
std::vector<std::int64_t> stable_order(const Group& v) {
  std::vector<std::int64_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::ranges::sort(order, [&](std::int64_t a, std::int64_t b) {
    if (nan_last_less(v[a], v[b]) || nan_last_less(v[b], v[a])) return nan_last_less(v[a], v[b]);
    return a < b;
  });
  return order;
}

std::int64_t nans_in(const Group& v) { return std::ranges::count_if(v, [](double e) { return std::isnan(e); }); }

// The first NaN if any, else the lower middle.
std::int64_t median_pick(const Group& v) {
  const auto order = stable_order(v);
  const std::int64_t n = static_cast<std::int64_t>(v.size()), nans = nans_in(v);
  return nans > 0 ? order[n - nans] : order[(n - 1) / 2];
}

// The lower middle of the non-NaN values; the first NaN when all are NaN.
std::int64_t nanmedian_pick(const Group& v) {
  const std::int64_t present = static_cast<std::int64_t>(v.size()) - nans_in(v);
  return stable_order(v)[present > 0 ? (present - 1) / 2 : 0];
}

// The smallest of the most frequent values (NaNs all distinct), at its last occurrence.
std::int64_t mode_pick(const Group& v) {
  std::int64_t best = -1, best_count = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::int64_t count = std::isnan(v[i]) ? 1 : std::ranges::count(v, v[i]);
    if (best < 0 || count > best_count ||
        (count == best_count && (nan_last_less(v[i], v[best]) || v[i] == v[best]))) {
      best = static_cast<std::int64_t>(i);
      best_count = count;
    }
  }
  return best;
}

struct DimCase {
  std::int64_t dim;
  bool keepdim;
};
const std::vector<DimCase> kDimCases3d = {{0, false}, {1, true}, {2, false}, {-1, true}};
const std::vector<DimCase> kDimCases0d = {{0, false}, {-1, true}};

// (2,3,4) integers in [-2, 2) with NaN at x[0,0,0], x[0,0,1], x[1,2,3] and all of x[1,0,:]
// when with_nan: ties in every slice, NaN in some.
Tensor ties(bool with_nan, std::uint64_t seed) {
  std::vector<double> v = values(sample({2, 3, 4}, -2, 2, seed));
  for (double& e : v) e = std::floor(e);
  if (with_nan)
    for (std::size_t p : {0, 1, 23, 12, 13, 14, 15}) v[p] = nan;
  return from_vector(v, {2, 3, 4});
}

// One entry: op(x, dim, keepdim) -> (values, indices) for each dim case against pick.
void along_entry(const std::string& name, std::function<ValuesIndices(const Tensor&, std::int64_t, bool)> op,
                 Pick pick, std::function<std::vector<OpSample>()> samples, bool differentiable) {
  op_registry().push_back(
      {.name = name,
       .fn = [op](const TensorList& in) {
         TensorList out;
         for (const DimCase& c : in[0].dim() == 0 ? kDimCases0d : kDimCases3d) {
           auto [v, i] = op(in[0], c.dim, c.keepdim);
           out.push_back(v);
           out.push_back(i);
         }
         return out;
       },
       .reference = [pick](const TensorList& in) {
         TensorList out;
         for (const DimCase& c : in[0].dim() == 0 ? kDimCases0d : kDimCases3d) {
           out.push_back(reduce_ref(in[0], {c.dim}, c.keepdim, [&](const Group& v) { return v[pick(v)]; }));
           out.push_back(reduce_ref(in[0], {c.dim}, c.keepdim, [&](const Group& v) { return double(pick(v)); }));
         }
         return out;
       },
       .samples = std::move(samples),
       .differentiable = differentiable,
       .tolerance = 0});
}

// One entry for the all-elements form op(x) against pick.
void all_entry(const std::string& name, std::function<Tensor(const Tensor&)> op, Pick pick,
               std::function<std::vector<OpSample>()> samples, bool differentiable) {
  op_registry().push_back({.name = name,
                           .fn = [op](const TensorList& in) { return TensorList{op(in[0])}; },
                           .reference = [pick](const TensorList& in) {
                             auto value = [&](const Group& v) { return v[pick(v)]; };
                             return TensorList{reduce_ref(in[0], {}, false, value)};
                           },
                           .samples = std::move(samples),
                           .differentiable = differentiable,
                           .gradgrad = differentiable,
                           .tolerance = 0});
}

std::vector<OpSample> distinct_samples() {
  std::vector<OpSample> s = samples_3d(-2, 2, false);
  for (OpSample& z : samples_0d(-2, 2)) s.push_back(std::move(z));
  return s;
}

std::vector<OpSample> tie_samples(bool with_nan) {
  return {{"ties", {ties(with_nan, 51)}},
          {"ties, transposed", {ties(with_nan, 52).permute({2, 1, 0}).contiguous()},
           [](const TensorList& l) { return TensorList{l[0].permute({2, 1, 0})}; }}};
}

// (2,3,4) distinct values with NaN at x[0,0,0], x[0,2,1], x[1,1,3]: no slice all NaN.
std::vector<OpSample> some_nan_samples() {
  Tensor x = sample({2, 3, 4}, -2, 2, 53);
  {
    NoGradGuard no_grad;
    for (std::int64_t p : {0, 9, 19}) x.view({24}).select(0, p).fill_(nan);
  }
  return {{"some NaN", {x.requires_grad_()}}};
}

const bool registered = [] {
  auto median_dim = [](const Tensor& x, std::int64_t d, bool k) { return median(x, d, k); };
  auto nanmedian_dim = [](const Tensor& x, std::int64_t d, bool k) { return nanmedian(x, d, k); };
  auto mode_dim = [](const Tensor& x, std::int64_t d, bool k) { return mode(x, d, k); };
  auto median_all = [](const Tensor& x) { return median(x); };
  auto nanmedian_all = [](const Tensor& x) { return nanmedian(x); };
  along_entry("median", median_dim, median_pick, distinct_samples, true);
  along_entry("median", median_dim, median_pick, [] { return tie_samples(true); }, false);
  all_entry("median", median_all, median_pick, distinct_samples, true);
  all_entry("median", median_all, median_pick, [] { return tie_samples(true); }, false);
  along_entry("nanmedian", nanmedian_dim, nanmedian_pick, distinct_samples, true);
  along_entry("nanmedian", nanmedian_dim, nanmedian_pick, some_nan_samples, true);
  along_entry("nanmedian", nanmedian_dim, nanmedian_pick, [] { return tie_samples(true); }, false);
  all_entry("nanmedian", nanmedian_all, nanmedian_pick, some_nan_samples, true);
  all_entry("nanmedian", nanmedian_all, nanmedian_pick, [] { return tie_samples(true); }, false);
  for (std::int64_t k : {1, 2}) {
    auto kth = [k](const Tensor& x, std::int64_t d, bool keep) { return kthvalue(x, k, d, keep); };
    auto pick = [k](const Group& v) { return stable_order(v)[k - 1]; };
    along_entry("kthvalue", kth, pick, [k] { return k == 1 ? distinct_samples() : samples_3d(-2, 2, false); }, true);
    along_entry("kthvalue", kth, pick, [] { return tie_samples(true); }, false);
  }
  along_entry("mode", mode_dim, mode_pick, distinct_samples, true);
  along_entry("mode", mode_dim, mode_pick, [] { return tie_samples(false); }, false);
  return true;
}();

Tensor leaf(const std::vector<double>& v) {
  return from_vector(v, {static_cast<std::int64_t>(v.size())}).detach().requires_grad_();
}

TEST(OrderStatistics, ValuesAndIndicesLikePyTorch) {
  // PyTorch 1.13: mode([1, 3, 3, 2, 2, 0]) = (2, 4); mode([5, 1, 5, 1, 2]) = (1, 3).
  auto [mv, mi] = mode(from_vector<double>({1, 3, 3, 2, 2, 0}));
  EXPECT_EQ(mv.item<double>(), 2);
  EXPECT_EQ(mi.item<std::int64_t>(), 4);
  EXPECT_EQ(mode(from_vector<double>({5, 1, 5, 1, 2})).indices.item<std::int64_t>(), 3);
  // median([1, nan, 3, nan], 0) = (nan, 1): the first NaN.
  auto [v, i] = median(from_vector<double>({1, nan, 3, nan}), 0);
  EXPECT_TRUE(std::isnan(v.item<double>()));
  EXPECT_EQ(i.item<std::int64_t>(), 1);
  auto [nv, ni] = nanmedian(from_vector<double>({nan, nan, nan}), 0);
  EXPECT_TRUE(std::isnan(nv.item<double>()));
  EXPECT_EQ(ni.item<std::int64_t>(), 0);
  EXPECT_EQ(nanmedian(from_vector<double>({nan, 4, 1, 3, nan, 2})).item<double>(), 2);
  // kthvalue([3, nan, 1], 3) = (nan, 1): NaN is the largest.
  auto [kv, ki] = kthvalue(from_vector<double>({3, nan, 1}), 3);
  EXPECT_TRUE(std::isnan(kv.item<double>()));
  EXPECT_EQ(ki.item<std::int64_t>(), 1);
  EXPECT_EQ(kthvalue(from_vector<double>({3, 5, 1}), 2, 0, true).values.shape(), (Shape{1}));
  EXPECT_EQ(median(from_vector<double>({4, 1, 3, 2})).item<double>(), 2);  // the lower middle
  // A 0-d tensor is its own median at index 0, kept dims or not.
  auto [zv, zi] = median(scalar_tensor(2.5, {.dtype = kFloat64}), 0, true);
  EXPECT_EQ(zv.shape(), Shape{});
  EXPECT_EQ(zv.item<double>(), 2.5);
  EXPECT_EQ(zi.item<std::int64_t>(), 0);
}

TEST(OrderStatistics, GradientOfAllElementsIsSharedByTies) {
  // PyTorch: median([1, 2, 2, 1]) = 1 with gradient [0.5, 0, 0, 0.5]; a NaN median shares it
  // among the NaNs.
  Tensor x = leaf({1, 2, 2, 1});
  median(x).backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{0.5, 0, 0, 0.5}));
  x = leaf({1, nan, 2, nan});
  median(x).backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{0, 0.5, 0, 0.5}));
  x = leaf({nan, 3, 1, 3});  // the lower middle of 1, 3, 3
  nanmedian(x).backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{0, 0.5, 0, 0.5}));
  // Along a dim the gradient goes to the returned index only.
  x = leaf({2, 2, 2});
  auto [v, i] = mode(x, 0);
  v.backward();
  EXPECT_EQ(i.item<std::int64_t>(), 2);
  EXPECT_EQ(values(x.grad()), (std::vector<double>{0, 0, 1}));
}

TEST(OrderStatistics, EmptyInputsAndDTypes) {
  EXPECT_TRUE(std::isnan(median(zeros({0})).item<double>()));  // like PyTorch
  EXPECT_TRUE(std::isnan(nanmedian(zeros({2, 0})).item<double>()));
  EXPECT_EQ(median(zeros({0, 3}), 1).values.shape(), (Shape{0}));  // the reduced dim is not empty
  EXPECT_EQ(mode(zeros({0, 3}), 1, true).indices.shape(), (Shape{0, 1}));
  const Tensor i = from_vector<std::int32_t>({3, 1, 2, 4});
  EXPECT_EQ(median(i).dtype(), kInt32);
  EXPECT_EQ(median(i).item<std::int64_t>(), 2);
  EXPECT_EQ(nanmedian(i, 0).indices.item<std::int64_t>(), 2);
  auto [bv, bi] = mode(from_vector<bool>({true, false, true}));
  EXPECT_TRUE(bv.item<bool>());
  EXPECT_EQ(bi.item<std::int64_t>(), 2);
  const Tensor h = from_vector<float>({0.5f, -2.25f, 3.5f}).to(kFloat16);
  EXPECT_EQ(kthvalue(h, 1).values.dtype(), kFloat16);
  EXPECT_EQ(kthvalue(h, 1).values.item<double>(), -2.25);
  EXPECT_EQ(median(from_vector<float>({1, 5, 3})).item<double>(), 3);
}

TEST(OrderStatistics, Errors) {
  const Tensor x = zeros({2, 3});
  expect_error([&] { median(x, 2); }, "median", "2");
  expect_error([&] { nanmedian(x, -3); }, "nanmedian", "-3");
  expect_error([&] { mode(x, 5); }, "mode", "5");
  expect_error([&] { kthvalue(x, 1, 2); }, "kthvalue", "2");
  expect_error([&] { kthvalue(x, 4); }, "kthvalue", "k = 4 is out of range for dimension 1 of size 3");
  expect_error([&] { kthvalue(x, 0, 0); }, "kthvalue", "1 <= k <= 2");
  expect_error([&] { median(zeros({2, 0}), 1); }, "median", "dimension 1 of size 0");
  expect_error([&] { mode(zeros({0}), 0); }, "mode", "size 0");
  expect_error([&] { kthvalue(zeros({2, 0}), 1, 1); }, "kthvalue", "size 0");
  expect_error([&] { median(zeros({0}, {.dtype = kInt64})); }, "median", "empty int64");
}

}  // namespace
}  // namespace infini::test::order_statistics_test
