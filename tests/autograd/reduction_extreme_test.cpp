// Op table entries for max/min (of all elements and along a dim, with indices), amax/amin
// and argmax/argmin, with float64 references; ties, NaN and index semantics in plain tests.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "reduction_reference.h"

namespace infini::test::reduction_extreme_test {
namespace {

using Group = std::vector<double>;

// Index of the first max (min) of v; NaN beats every number.
std::int64_t first_extreme(const Group& v, bool is_max) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < v.size(); ++i) {
    if (std::isnan(v[best])) break;
    if (std::isnan(v[i]) || (is_max ? v[i] > v[best] : v[i] < v[best])) best = i;
  }
  return static_cast<std::int64_t>(best);
}

// One-dim cases of max/min/argmax along a dim.
struct DimCase {
  std::int64_t dim;
  bool keepdim;
};
const std::vector<DimCase> kDimCases3d = {{0, false}, {1, true}, {2, false}, {-1, true}};
const std::vector<DimCase> kDimCases0d = {{0, false}, {-1, true}};

std::vector<OpSample> extreme_samples(bool zero_dim) {
  return zero_dim ? samples_0d(-2, 2) : samples_3d(-2, 2, false);
}

const bool registered = [] {
  for (bool is_max : {true, false}) {
    const std::string prefix = is_max ? "max" : "min";
    register_reduction({.name = "a" + prefix,
                        .op = [is_max](const Tensor& x, const ReduceCase& c) {
                          return is_max ? amax(x, c.dims, c.keepdim) : amin(x, c.dims, c.keepdim);
                        },
                        .ref = [is_max](const Group& v) { return v[first_extreme(v, is_max)]; },
                        .with_empty = false});
    for (bool zero_dim : {false, true}) {
      // Of all elements.
      op_registry().push_back({.name = prefix,
                               .fn = [is_max](const TensorList& in) { return TensorList{is_max ? max(in[0]) : min(in[0])}; },
                               .reference = [is_max](const TensorList& in) {
                                 return TensorList{reduce_ref(in[0], {}, false, [is_max](const Group& v) {
                                   return v[first_extreme(v, is_max)];
                                 })};
                               },
                               .samples = [zero_dim] { return extreme_samples(zero_dim); },
                               .gradgrad = true,
                               .tolerance = 0});
      // Along a dim: (values, indices) per case.
      const std::vector<DimCase> cases = zero_dim ? kDimCases0d : kDimCases3d;
      op_registry().push_back(
          {.name = prefix,
           .fn = [is_max, cases](const TensorList& in) {
             TensorList out;
             for (const DimCase& c : cases) {
               auto [values, indices] = is_max ? max(in[0], c.dim, c.keepdim) : min(in[0], c.dim, c.keepdim);
               out.push_back(values);
               out.push_back(indices);
             }
             return out;
           },
           .reference = [is_max, cases](const TensorList& in) {
             TensorList out;
             for (const DimCase& c : cases) {
               const std::vector<std::int64_t> dims = {c.dim};
               out.push_back(reduce_ref(in[0], dims, c.keepdim, [is_max](const Group& v) { return v[first_extreme(v, is_max)]; }));
               out.push_back(reduce_ref(in[0], dims, c.keepdim, [is_max](const Group& v) {
                 return static_cast<double>(first_extreme(v, is_max));
               }));
             }
             return out;
           },
           .samples = [zero_dim] { return extreme_samples(zero_dim); },
           .gradgrad = true,
           .tolerance = 0});
      // argmax/argmin along each dim, and over the flattened tensor (keepdim both ways).
      op_registry().push_back(
          {.name = "arg" + prefix,
           .fn = [is_max, cases](const TensorList& in) {
             auto arg = [is_max](const Tensor& x, std::optional<std::int64_t> dim, bool keepdim) {
               return is_max ? argmax(x, dim, keepdim) : argmin(x, dim, keepdim);
             };
             TensorList out = {arg(in[0], {}, false), arg(in[0], {}, true)};
             for (const DimCase& c : cases) out.push_back(arg(in[0], c.dim, c.keepdim));
             return out;
           },
           .reference = [is_max, cases](const TensorList& in) {
             auto index = [is_max](const Group& v) { return static_cast<double>(first_extreme(v, is_max)); };
             TensorList out = {reduce_ref(in[0], {}, false, index), reduce_ref(in[0], {}, true, index)};
             for (const DimCase& c : cases) out.push_back(reduce_ref(in[0], {c.dim}, c.keepdim, index));
             return out;
           },
           .samples = [zero_dim] { return extreme_samples(zero_dim); },
           .differentiable = false,
           .tolerance = 0});
    }
  }
  return true;
}();

Tensor leaf(const std::vector<double>& v, const Shape& shape) {
  return from_vector(v, {static_cast<std::int64_t>(v.size())}).reshape(shape).detach().requires_grad_();
}

TEST(ReductionExtremes, TiesShareTheGradientEvenly) {
  const Tensor x = leaf({1, 3, 3, 2, 0, 0}, {2, 3});
  amax(x).backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{0, 0.5, 0.5, 0, 0, 0}));
  x.set_grad(Tensor());
  amin(x, {1}).backward(ones({2}, {.dtype = kFloat64}));
  EXPECT_EQ(values(x.grad()), (std::vector<double>{1, 0, 0, 0, 0.5, 0.5}));
  x.set_grad(Tensor());
  max(x).backward();  // of all elements: split like amax
  EXPECT_EQ(values(x.grad()), (std::vector<double>{0, 0.5, 0.5, 0, 0, 0}));
  x.set_grad(Tensor());
  norm(x, std::numeric_limits<double>::infinity()).backward();  // |3| twice
  EXPECT_EQ(values(x.grad()), (std::vector<double>{0, 0.5, 0.5, 0, 0, 0}));
}

TEST(ReductionExtremes, AlongADimTheFirstIndexTakesTheGradient) {
  const Tensor x = leaf({1, 3, 3, 2, 0, 0}, {2, 3});
  auto [values_, indices] = max(x, 1);
  EXPECT_EQ(values(values_), (std::vector<double>{3, 2}));
  EXPECT_EQ(indices.dtype(), kInt64);
  EXPECT_FALSE(indices.requires_grad());
  EXPECT_EQ(values(indices), (std::vector<double>{1, 0}));
  values_.backward(ones({2}, {.dtype = kFloat64}));
  EXPECT_EQ(values(x.grad()), (std::vector<double>{0, 1, 0, 1, 0, 0}));
  EXPECT_EQ(values(min(x, 1).indices), (std::vector<double>{0, 1}));
  EXPECT_EQ(values(argmax(x)), (std::vector<double>{1}));
  EXPECT_EQ(argmax(x).dim(), 0);
  EXPECT_EQ(argmax(x, {}, true).shape(), (Shape{1, 1}));
  EXPECT_EQ(values(argmin(x, 0)), (std::vector<double>{0, 1, 1}));
}

TEST(ReductionExtremes, NanPropagatesAndWins) {
  const double nan = std::nan("");
  const Tensor x = from_vector<double>({1, nan, 5, nan, -1, 2}).reshape({2, 3});
  EXPECT_TRUE(std::isnan(max(x).item<double>()));
  EXPECT_TRUE(std::isnan(amin(x).item<double>()));
  EXPECT_EQ(values(argmax(x, 1)), (std::vector<double>{1, 0}));  // the first NaN
  EXPECT_EQ(values(argmin(x, 1)), (std::vector<double>{1, 0}));
  const auto [v, i] = min(x, 0);
  EXPECT_TRUE(std::isnan(values(v)[0]) && std::isnan(values(v)[1]) && values(v)[2] == 2);
  EXPECT_EQ(values(i), (std::vector<double>{1, 0, 1}));
  // float32 and float16, through the vectorised lanes of a long row.
  Tensor long_row = zeros({1000});
  {
    NoGradGuard no_grad;
    long_row.select(0, 777).fill_(nan);
  }
  EXPECT_TRUE(std::isnan(amax(long_row).item<double>()));
  EXPECT_EQ(argmax(long_row).item<std::int64_t>(), 777);
  EXPECT_TRUE(std::isnan(amin(long_row.to(kFloat16)).item<double>()));
}

TEST(ReductionExtremes, DTypes) {
  const Tensor i = from_vector<std::int32_t>({4, -7, 9, 9});
  EXPECT_EQ(amax(i).dtype(), kInt32);
  EXPECT_EQ(amax(i).item<std::int64_t>(), 9);
  EXPECT_EQ(argmax(i).item<std::int64_t>(), 2);
  EXPECT_EQ(min(i, 0).values.item<std::int64_t>(), -7);
  const Tensor b = from_vector<bool>({false, true, true});
  EXPECT_EQ(amax(b).dtype(), kBool);
  EXPECT_EQ(argmax(b).item<std::int64_t>(), 1);
  EXPECT_EQ(argmin(b).item<std::int64_t>(), 0);
  const Tensor h = from_vector<float>({0.5f, -2.25f, 3.5f}).to(kBFloat16);
  EXPECT_EQ(amin(h).dtype(), kBFloat16);
  EXPECT_EQ(amin(h).item<double>(), -2.25);
  EXPECT_EQ(max(h, 0).values.item<double>(), 3.5);
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(argmax(from_vector<double>({-inf, -inf})).item<std::int64_t>(), 0);
  EXPECT_EQ(amax(from_vector<double>({-inf, -inf})).item<double>(), -inf);
  EXPECT_EQ(argmin(from_vector<std::int64_t>({std::numeric_limits<std::int64_t>::max(), 3})).item<std::int64_t>(), 1);
}

}  // namespace
}  // namespace infini::test::reduction_extreme_test
