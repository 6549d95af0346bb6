// Op table entries for nansum, nanmean, var_mean and std_mean, with float64 references
// over explicit groups (NaN-free samples and samples with NaNs); all-NaN groups, dtypes
// and errors in plain tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "reduction_reference.h"

namespace infini::test::reduction_nan_test {
namespace {

using Group = std::vector<double>;

const double nan = std::numeric_limits<double>::quiet_NaN();

double nansum_of(const Group& v) {
  double s = 0;
  for (double e : v)
    if (!std::isnan(e)) s += e;
  return s;
}

double nanmean_of(const Group& v) {
  double n = 0;
  for (double e : v) n += std::isnan(e) ? 0 : 1;
  return nansum_of(v) / n;
}

double var_of(const Group& v, double correction) {
  const double m = sum_of(v) / static_cast<double>(v.size());
  double s = 0;
  for (double e : v) s += (e - m) * (e - m);
  return s / std::max(0.0, static_cast<double>(v.size()) - correction);
}

// (2,3,4) with NaN at x[0,0,0], x[0,1,0], x[1,2,3] and x[1,0,1]: no group of kCases3d is all NaN.
Tensor with_nans(std::uint64_t seed) {
  Tensor x = sample({2, 3, 4}, -2, 2, seed);
  NoGradGuard no_grad;
  for (std::int64_t p : {0, 4, 23, 13}) x.view({24}).select(0, p).fill_(nan);
  return x;
}

// An entry applying op for every case of kCases3d to samples with NaNs.
void nan_entry(const std::string& name, std::function<Tensor(const Tensor&, const ReduceCase&)> op,
               std::function<double(const Group&)> ref) {
  op_registry().push_back({.name = name,
                           .fn = [op](const TensorList& in) {
                             TensorList out;
                             for (const ReduceCase& c : kCases3d) out.push_back(op(in[0], c));
                             return out;
                           },
                           .reference = [ref](const TensorList& in) {
                             TensorList out;
                             for (const ReduceCase& c : kCases3d)
                               out.push_back(reduce_ref(in[0], c.dims, c.keepdim, ref));
                             return out;
                           },
                           .samples = [] {
                             return std::vector<OpSample>{
                                 {"with NaNs", {with_nans(41).requires_grad_()}},
                                 {"with NaNs, transposed",
                                  {with_nans(42).permute({2, 1, 0}).contiguous().requires_grad_()},
                                  [](const TensorList& l) { return TensorList{l[0].permute({2, 1, 0})}; }}};
                           },
                           .gradgrad = true,
                           .tolerance = 1e-12});
}

// var_mean / std_mean: both results for every case, over NaN-free samples (second
// derivatives are those of var, std and mean, checked by their entries).
void pair_entry(const std::string& name, bool is_std, double correction, bool zero_dim) {
  const std::vector<ReduceCase> cases = zero_dim ? std::vector<ReduceCase>{{{}, false}} : kCases3d;
  op_registry().push_back(
      {.name = name,
       .fn = [is_std, correction, cases](const TensorList& in) {
         TensorList out;
         for (const ReduceCase& c : cases) {
           auto [spread, mean] = is_std ? std_mean(in[0], c.dims, correction, c.keepdim)
                                        : var_mean(in[0], c.dims, correction, c.keepdim);
           out.push_back(spread);
           out.push_back(mean);
         }
         return out;
       },
       .reference = [is_std, correction, cases](const TensorList& in) {
         TensorList out;
         for (const ReduceCase& c : cases) {
           out.push_back(reduce_ref(in[0], c.dims, c.keepdim, [&](const Group& v) {
             return is_std ? std::sqrt(var_of(v, correction)) : var_of(v, correction);
           }));
           out.push_back(reduce_ref(in[0], c.dims, c.keepdim,
                                    [](const Group& v) { return sum_of(v) / static_cast<double>(v.size()); }));
         }
         return out;
       },
       .samples = [zero_dim] { return zero_dim ? samples_0d(-2, 2) : samples_3d(-2, 2, false); },
       .tolerance = 1e-12});
}

const bool registered = [] {
  register_reduction({.name = "nansum",
                      .op = [](const Tensor& x, const ReduceCase& c) { return nansum(x, c.dims, c.keepdim); },
                      .ref = nansum_of});
  nan_entry("nansum", [](const Tensor& x, const ReduceCase& c) { return nansum(x, c.dims, c.keepdim); }, nansum_of);
  register_reduction({.name = "nanmean",
                      .op = [](const Tensor& x, const ReduceCase& c) { return nanmean(x, c.dims, c.keepdim); },
                      .ref = nanmean_of});
  nan_entry("nanmean", [](const Tensor& x, const ReduceCase& c) { return nanmean(x, c.dims, c.keepdim); }, nanmean_of);
  for (bool is_std : {false, true}) {
    const std::string name = is_std ? "std_mean" : "var_mean";
    pair_entry(name, is_std, 1, false);
    pair_entry(name, is_std, 0, false);
    if (!is_std) pair_entry(name, is_std, 0, true);  // std has no derivative at a 0-d input's 0
  }
  return true;
}();

TEST(ReductionNan, AllNanAndEmptyGroups) {
  const Tensor x = from_vector<double>({nan, nan, 1, nan}, {2, 2});
  EXPECT_EQ(values(nansum(x, {1})), (std::vector<double>{0, 1}));
  const std::vector<double> m = values(nanmean(x, {1}));
  EXPECT_TRUE(std::isnan(m[0]));
  EXPECT_EQ(m[1], 1);
  EXPECT_TRUE(std::isnan(nanmean(zeros({0})).item<double>()));  // 0 / 0, like mean
  EXPECT_EQ(nansum(zeros({0})).item<double>(), 0);
  // Gradients: 0 at NaN positions, 1 / count elsewhere (PyTorch: [0.5, 0, 0.5]).
  const Tensor v = from_vector<double>({1, nan, 3}).detach().requires_grad_();
  nanmean(v).backward();
  EXPECT_EQ(values(v.grad()), (std::vector<double>{0.5, 0, 0.5}));
  v.set_grad(Tensor());
  nansum(v).backward();
  EXPECT_EQ(values(v.grad()), (std::vector<double>{1, 0, 1}));
}

TEST(ReductionNan, DTypes) {
  // Integers have no NaN: nansum is sum (int64), nanmean is a DTypeError, like PyTorch.
  const Tensor i = from_vector<std::int32_t>({1, 2, 4});
  EXPECT_EQ(nansum(i).dtype(), kInt64);
  EXPECT_EQ(nansum(i).item<std::int64_t>(), 7);
  expect_error([&] { nanmean(i); }, "nanmean", "int32");
  const Tensor f = from_vector<float>({1, std::nanf(""), 2}).to(kFloat16);
  EXPECT_EQ(nansum(f).dtype(), kFloat16);
  EXPECT_EQ(nansum(f).item<double>(), 3);
  EXPECT_EQ(nanmean(f).item<double>(), 1.5);
  const Tensor x = from_vector<float>({1, 2, 3, 6});
  auto [v, m] = var_mean(x);
  EXPECT_EQ(v.dtype(), kFloat32);
  EXPECT_NEAR(v.item<double>(), 14.0 / 3.0, 1e-6);
  EXPECT_EQ(m.item<double>(), 3);
  auto [s, m2] = std_mean(x, {0}, 0, true);
  EXPECT_EQ(s.shape(), (Shape{1}));
  EXPECT_NEAR(s.item<double>(), std::sqrt(3.5), 1e-6);
  EXPECT_EQ(m2.item<double>(), 3);
}

TEST(ReductionNan, Errors) {
  const Tensor x = zeros({2, 3});
  expect_error([&] { nansum(x, {2}); }, "nansum", "2");
  expect_error([&] { nanmean(x, {0, 0}); }, "nanmean", "more than once");
  expect_error([&] { var_mean(x, {-3}); }, "var_mean", "-3");
  expect_error([&] { std_mean(x, {5}); }, "std_mean", "5");
  expect_error([&] { var_mean(from_vector<std::int64_t>({1})); }, "var_mean", "int64");
  expect_error([&] { std_mean(from_vector<bool>({true})); }, "std_mean", "bool");
}

TEST(ReductionNan, ConstantSliceStdMeanGradientIsFinite) {
  // std of a constant slice: PyTorch's gradient is 0, not NaN.
  const Tensor x = full({3}, 2.0, {.dtype = kFloat64}).requires_grad_();
  auto [s, m] = std_mean(x);
  add(s, m).backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{1.0 / 3, 1.0 / 3, 1.0 / 3}));
}

}  // namespace
}  // namespace infini::test::reduction_nan_test
