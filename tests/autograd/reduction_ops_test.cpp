// Op table entries for the arithmetic reductions (sum, mean, sum_to, var, std, prod,
// logsumexp, norm, all, any), with float64 references over explicit groups of elements.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "reduction_reference.h"

namespace infini::test::reduction_ops_test {
namespace {

using Group = std::vector<double>;

double mean_of(const Group& v) { return sum_of(v) / static_cast<double>(v.size()); }

double var_of(const Group& v, double correction) {
  const double m = mean_of(v);
  double s = 0;
  for (double e : v) s += (e - m) * (e - m);
  return s / std::max(0.0, static_cast<double>(v.size()) - correction);
}

double prod_of(const Group& v) {
  double p = 1;
  for (double e : v) p *= e;
  return p;
}

// log(sum(exp(v))) directly: the samples are small enough not to overflow.
double logsumexp_of(const Group& v) {
  double s = 0;
  for (double e : v) s += std::exp(e);
  return std::log(s);
}

double norm_of(const Group& v, double p) {
  double r = 0;
  for (double e : v) {
    if (std::isinf(p)) r = std::max(r, std::abs(e));
    else r += std::pow(std::abs(e), p);
  }
  return std::isinf(p) ? r : std::pow(r, 1 / p);
}

// (2,3,4) with zeros: two in the line x[0, :, 0], one in x[1, :, 3]; three in all.
Tensor with_zeros() {
  Tensor x = sample({2, 3, 4}, 0.5, 1.5, 21);
  NoGradGuard no_grad;
  for (auto [i, j, k] : {std::array<std::int64_t, 3>{0, 0, 0}, {0, 1, 0}, {1, 2, 3}}) x.select(0, i).select(0, j).select(0, k).fill_(0);
  return x;
}

const bool registered = [] {
  register_reduction({.name = "sum",
                      .op = [](const Tensor& x, const ReduceCase& c) { return sum(x, c.dims, c.keepdim); },
                      .ref = sum_of});
  register_reduction({.name = "mean",
                      .op = [](const Tensor& x, const ReduceCase& c) { return mean(x, c.dims, c.keepdim); },
                      .ref = mean_of});
  op_registry().push_back({.name = "sum_to",
                           .fn = [](const TensorList& in) { return TensorList{sum_to(in[0], {3, 1})}; },
                           .reference = [](const TensorList& in) {
                             return TensorList{reduce_ref(in[0], {0, 2}, true, sum_of).reshape({3, 1})};
                           },
                           .samples = [] { return samples_3d(-2, 2, false); },
                           .gradgrad = true,
                           .tolerance = 1e-12});
  for (double correction : {1.0, 0.0}) {
    // A single element has no unbiased variance (NaN), and std has no derivative at 0.
    register_reduction({.name = "var",
                        .op = [correction](const Tensor& x, const ReduceCase& c) {
                          return var(x, c.dims, correction, c.keepdim);
                        },
                        .ref = [correction](const Group& v) { return var_of(v, correction); },
                        .with_0d = false});
    register_reduction({.name = "std",
                        .op = [correction](const Tensor& x, const ReduceCase& c) {
                          return std(x, c.dims, correction, c.keepdim);
                        },
                        .ref = [correction](const Group& v) { return std::sqrt(var_of(v, correction)); },
                        .with_0d = false});
  }
  register_reduction({.name = "prod",
                      .op = [](const Tensor& x, const ReduceCase& c) { return prod(x, c.dims, c.keepdim); },
                      .ref = prod_of,
                      .lo = -1.5,
                      .hi = 1.5});
  // Zeros: one, two and three per group; gradients (first and second) stay exact.
  op_registry().push_back({.name = "prod",
                           .fn = [](const TensorList& in) {
                             TensorList out;
                             for (const ReduceCase& c : kCases3d) out.push_back(prod(in[0], c.dims, c.keepdim));
                             return out;
                           },
                           .reference = [](const TensorList& in) {
                             TensorList out;
                             for (const ReduceCase& c : kCases3d) out.push_back(reduce_ref(in[0], c.dims, c.keepdim, prod_of));
                             return out;
                           },
                           .samples = [] {
                             return std::vector<OpSample>{
                                 {"zeros", {with_zeros().requires_grad_()}},
                                 {"zeros, transposed", {with_zeros().permute({2, 1, 0}).contiguous().requires_grad_()},
                                  [](const TensorList& l) { return TensorList{l[0].permute({2, 1, 0})}; }}};
                           },
                           .gradgrad = true,
                           .tolerance = 1e-12});
  // Over an empty set logsumexp is -inf (checked in ReductionValues below).
  register_reduction({.name = "logsumexp",
                      .op = [](const Tensor& x, const ReduceCase& c) { return logsumexp(x, c.dims, c.keepdim); },
                      .ref = logsumexp_of,
                      .with_empty = false});
  for (double p : {1.0, 2.0}) {
    register_reduction({.name = "norm",
                        .op = [p](const Tensor& x, const ReduceCase& c) { return norm(x, p, c.dims, c.keepdim); },
                        .ref = [p](const Group& v) { return norm_of(v, p); }});
  }
  const double inf = std::numeric_limits<double>::infinity();
  register_reduction({.name = "norm",
                      .op = [inf](const Tensor& x, const ReduceCase& c) { return norm(x, inf, c.dims, c.keepdim); },
                      .ref = [inf](const Group& v) { return norm_of(v, inf); },
                      .with_empty = false});
  // all/any of x > 0 (bool input); over an empty set all is true and any false.
  register_reduction({.name = "all",
                      .op = [](const Tensor& x, const ReduceCase& c) { return all(gt(x, 0), c.dims, c.keepdim); },
                      .ref = [](const Group& v) { return double(std::ranges::all_of(v, [](double e) { return e > 0; })); },
                      .lo = -0.5,
                      .differentiable = false,
                      .gradgrad = false});
  register_reduction({.name = "any",
                      .op = [](const Tensor& x, const ReduceCase& c) { return any(gt(x, 0), c.dims, c.keepdim); },
                      .ref = [](const Group& v) { return double(std::ranges::any_of(v, [](double e) { return e > 0; })); },
                      .hi = 0.3,
                      .differentiable = false,
                      .gradgrad = false});
  return true;
}();

}  // namespace
}  // namespace infini::test::reduction_ops_test
