// Op table entries for sort, argsort, topk, unique, nonzero, one_hot and multinomial, with
// naive references: insertion sorts, repeated best-of scans, linear searches.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "indexing_test_util.h"
#include "op_info.h"

namespace infini::test::indexing_sort_test {
namespace {

using namespace indexing_util;

// a before b in ascending order, NaN above every number.
bool less(double a, double b) { return a < b || (std::isnan(b) && !std::isnan(a)); }

// Each slice of x along dim through `pick(keys) -> positions`; returns (values, indices).
template <class Pick>
TensorList per_slice(const Tensor& x, std::int64_t dim, std::int64_t out_len, Pick pick) {
  const Tensor v = x.dim() == 0 ? x.reshape({1}) : x;
  dim = dim < 0 ? dim + v.dim() : dim;
  const std::vector<double> xv = values(v);
  Shape shape = v.shape();
  const std::int64_t n = shape[dim];
  shape[dim] = out_len;
  std::vector<double> vals(static_cast<std::size_t>(numel_of(shape))), idx(vals.size());
  for (std::size_t k = 0; k < vals.size(); ++k) {
    Coords c = unravel(static_cast<std::int64_t>(k), shape);
    if (c[dim] != 0) continue;  // visit each slice once, from its first output element
    std::vector<double> keys;
    for (std::int64_t i = 0; i < n; ++i) {
      Coords xc = c;
      xc[dim] = i;
      keys.push_back(xv[ravel(xc, v.shape())]);
    }
    const std::vector<std::int64_t> chosen = pick(keys);
    for (std::int64_t i = 0; i < out_len; ++i) {
      Coords oc = c;
      oc[dim] = i;
      vals[ravel(oc, shape)] = keys[chosen[i]];
      idx[ravel(oc, shape)] = static_cast<double>(chosen[i]);
    }
  }
  if (x.dim() == 0 && out_len == 1) shape = {};
  return {f64(shape, vals).to(x.dtype()), f64(shape, idx)};
}

// Stable insertion sort of positions.
std::vector<std::int64_t> insertion_order(const std::vector<double>& keys, bool descending) {
  std::vector<std::int64_t> order;
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(keys.size()); ++i) {
    auto at = order.end();
    while (at != order.begin() && (descending ? less(keys[*(at - 1)], keys[i]) : less(keys[i], keys[*(at - 1)]))) --at;
    order.insert(at, i);
  }
  return order;
}

TensorList sort_ref(const Tensor& x, std::int64_t dim, bool descending) {
  const std::int64_t n = x.dim() == 0 ? 1 : x.shape()[dim < 0 ? dim + x.dim() : dim];
  return per_slice(x, dim, n, [descending](const std::vector<double>& keys) { return insertion_order(keys, descending); });
}

// k rounds of "the best element not taken yet", ties to the lower index.
TensorList topk_ref(const Tensor& x, std::int64_t k, std::int64_t dim, bool largest, bool sorted) {
  return per_slice(x, dim, k, [&](const std::vector<double>& keys) {
    std::vector<std::int64_t> chosen;
    std::vector<bool> taken(keys.size(), false);
    for (std::int64_t round = 0; round < k; ++round) {
      std::int64_t best = -1;
      for (std::int64_t i = 0; i < static_cast<std::int64_t>(keys.size()); ++i) {
        if (taken[i]) continue;
        if (best < 0 || (largest ? less(keys[best], keys[i]) : less(keys[i], keys[best]))) best = i;
      }
      taken[best] = true;
      chosen.push_back(best);
    }
    if (!sorted) std::sort(chosen.begin(), chosen.end());
    return chosen;
  });
}

std::vector<OpSample> sort_samples() {
  const double nan = std::nan("");
  return {
      {"contiguous (3,4)", {leaf({3, 4}, 1)}},
      {"transposed", {leaf({4, 3}, 2)}, [](const TensorList& l) { return TensorList{l[0].t()}; }},
      {"sliced with step", {leaf({3, 8}, 3)}, [](const TensorList& l) { return TensorList{l[0].slice(1, 0, 8, 2)}; }},
      {"expanded (ties along dim 0)", {leaf({1, 4}, 4)}, [](const TensorList& l) { return TensorList{l[0].expand({3, 4})}; }},
      {"ties and NaN", {f64({3, 4}, {1, nan, 1, 0, 2, 2, 2, 2, -1, nan, 3, -1})}},
      {"int64 with ties", {i64({3, 4}, {5, 1, 5, 1, 0, 0, 7, 0, 3, 2, 2, 3})}},
      {"zero-size", {leaf({0, 4}, 5)}},
  };
}

TensorList ints_as_f64(const TensorList& l) {
  TensorList out;
  for (const Tensor& t : l) out.push_back(t.to(kFloat64));
  return out;
}

// (values, counts-of-distinct) of x, ascending or by first occurrence; NaNs all distinct.
TensorList unique_ref(const Tensor& x, bool sorted) {
  const std::vector<double> v = values(x);
  std::vector<double> distinct;
  std::vector<std::int64_t> first;
  for (std::size_t k = 0; k < v.size(); ++k) {
    bool seen = false;
    for (double d : distinct) seen = seen || d == v[k];
    if (!seen) {
      distinct.push_back(v[k]);
      first.push_back(static_cast<std::int64_t>(k));
    }
  }
  std::vector<std::int64_t> order(distinct.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int64_t>(i);
  if (sorted) order = insertion_order(distinct, false);
  std::vector<double> vals, counts(order.size(), 0), inverse(v.size());
  for (std::int64_t o : order) vals.push_back(distinct[o]);
  for (std::size_t k = 0; k < v.size(); ++k)
    for (std::size_t r = 0; r < vals.size(); ++r)
      if (vals[r] == v[k] || (std::isnan(v[k]) && first[order[r]] == static_cast<std::int64_t>(k))) {
        inverse[k] = static_cast<double>(r);
        counts[r] += 1;
        break;
      }
  const auto g = static_cast<std::int64_t>(vals.size());
  return {f64({g}, vals), f64(x.shape(), inverse), f64({g}, counts)};
}

const bool registered = [] {
  op_registry().push_back({.name = "sort",
                           .fn = [](const TensorList& in) {
                             const auto [v0, i0] = sort(in[0]);
                             const auto [v1, i1] = sort(in[0], 0, true, true);
                             return TensorList{v0, i0, v1, i1};
                           },
                           .reference = [](const TensorList& in) {
                             TensorList out = sort_ref(in[0], -1, false), b = sort_ref(in[0], 0, true);
                             out.insert(out.end(), b.begin(), b.end());
                             return out;
                           },
                           .samples = [] {
                             auto s = sort_samples();
                             s.push_back({"0-d", {leaf({}, 9)}});
                             return s;
                           },
                           .tolerance = 0});
  op_registry().push_back({.name = "argsort",
                           .fn = [](const TensorList& in) {
                             return TensorList{argsort(in[0]), argsort(in[0], 0, true)};
                           },
                           .reference = [](const TensorList& in) {
                             return TensorList{sort_ref(in[0], -1, false)[1], sort_ref(in[0], 0, true)[1]};
                           },
                           .samples = sort_samples,
                           .differentiable = false});
  op_registry().push_back(
      {.name = "topk",
       .fn = [](const TensorList& in) {
         const auto [v0, i0] = topk(in[0], 2);
         const auto [v1, i1] = topk(in[0], 2, 0, false, false);
         const auto [v2, i2] = topk(in[0], 0, 1);
         return TensorList{v0, i0, v1, i1, v2, i2};
       },
       .reference = [](const TensorList& in) {
         TensorList out = topk_ref(in[0], 2, -1, true, true), b = topk_ref(in[0], 2, 0, false, false),
                    c = topk_ref(in[0], 0, 1, true, true);
         out.insert(out.end(), b.begin(), b.end());
         out.insert(out.end(), c.begin(), c.end());
         return out;
       },
       .samples = [] {
         auto s = sort_samples();
         s.pop_back();  // k = 2 needs two elements along each dim
         return s;
       },
       .tolerance = 0});
  op_registry().push_back(
      {.name = "topk",
       .fn = [](const TensorList& in) {
         const auto [v, i] = topk(in[0], 1, 0);
         return TensorList{v, i};
       },
       .reference = [](const TensorList& in) { return topk_ref(in[0], 1, 0, true, true); },
       .samples = [] { return std::vector<OpSample>{{"0-d", {leaf({}, 1)}}, {"1-d", {leaf({5}, 2)}}}; },
       .tolerance = 0});
  op_registry().push_back(
      {.name = "unique",
       .fn = [](const TensorList& in) {
         const UniqueResult a = unique(in[0], true, true, true), b = unique(in[0], false, true, true);
         return ints_as_f64({a.values, a.inverse, a.counts, b.values, b.inverse, b.counts});
       },
       .reference = [](const TensorList& in) {
         TensorList out = unique_ref(in[0], true), b = unique_ref(in[0], false);
         out.insert(out.end(), b.begin(), b.end());
         return out;
       },
       .samples = [] {
         const double nan = std::nan("");
         return std::vector<OpSample>{
             {"repeats (2,3)", {f64({2, 3}, {2, 1, 2, -3, 1, 1})}},
             {"transposed", {f64({3, 2}, {2, 1, 2, -3, 1, 1})}, [](const TensorList& l) { return TensorList{l[0].t()}; }},
             {"int64", {i64({5}, {7, 7, -1, 3, -1})}},
             {"bool", {from_vector<bool>({true, false, true})}},
             {"NaNs are distinct", {f64({4}, {nan, 1, nan, 1})}},
             {"0-d", {f64({}, {4})}},
             {"zero-size", {f64({0, 3}, {})}},
         };
       },
       .differentiable = false,
       .tolerance = 0});
  op_registry().push_back(
      {.name = "nonzero",
       .fn = [](const TensorList& in) { return TensorList{nonzero(in[0])}; },
       .reference = [](const TensorList& in) {
         const std::vector<double> v = values(in[0]);
         std::vector<double> coords;
         std::int64_t rows = 0;
         for (std::size_t k = 0; k < v.size(); ++k) {
           if (v[k] == 0) continue;
           for (std::int64_t c : unravel(static_cast<std::int64_t>(k), in[0].shape())) coords.push_back(static_cast<double>(c));
           ++rows;
         }
         return TensorList{f64({rows, in[0].dim()}, coords)};
       },
       .samples = [] {
         return std::vector<OpSample>{
             {"float (2,3)", {f64({2, 3}, {0, 1.5, 0, -2, 0, std::nan("")})}},
             {"transposed bool", {from_vector<bool>({true, false, false, true, true, false}).reshape({3, 2})},
              [](const TensorList& l) { return TensorList{l[0].t()}; }},
             {"int (2,2,2)", {i64({2, 2, 2}, {0, 0, 3, 0, 0, 0, 0, 9})}},
             {"0-d true", {f64({}, {2})}},
             {"0-d false", {f64({}, {0})}},
             {"zero-size", {f64({2, 0}, {})}},
         };
       },
       .differentiable = false,
       .tolerance = 0});
  op_registry().push_back(
      {.name = "one_hot",
       .fn = [](const TensorList& in) { return TensorList{one_hot(in[0], 5), one_hot(in[0])}; },
       .reference = [](const TensorList& in) {
         const std::vector<std::int64_t> v = ints(in[0]);
         std::int64_t inferred = 0;
         for (std::int64_t x : v) inferred = std::max(inferred, x + 1);
         TensorList out;
         for (std::int64_t classes : {std::int64_t{5}, inferred}) {
           std::vector<double> o(v.size() * static_cast<std::size_t>(classes), 0);
           for (std::size_t k = 0; k < v.size(); ++k) o[k * classes + v[k]] = 1;
           Shape shape = in[0].shape();
           shape.push_back(classes);
           out.push_back(f64(shape, o));
         }
         return out;
       },
       .samples = [] {
         return std::vector<OpSample>{
             {"(2,3)", {i64({2, 3}, {0, 4, 2, 2, 1, 0})}},
             {"transposed", {i64({3, 2}, {0, 4, 2, 2, 1, 0})}, [](const TensorList& l) { return TensorList{l[0].t()}; }},
             {"int32", {i64({3}, {1, 3, 1}).to(kInt32)}},
             {"0-d", {i64({}, {3})}},
         };
       },
       .differentiable = false,
       .tolerance = 0});
  op_registry().push_back(
      {.name = "multinomial",
       .fn = [](const TensorList& in) {
         // One-hot rows allow one outcome; without replacement all categories come out.
         return TensorList{multinomial(in[0], 3, true), sort(multinomial(add(in[0], 0.5), 4, false), -1).values};
       },
       .reference = [](const TensorList& in) {
         const std::vector<double> p = values(in[0]);
         std::vector<double> draws, all;
         for (std::int64_t r = 0; r < in[0].shape()[0]; ++r) {
           std::int64_t hot = 0;
           for (std::int64_t c = 0; c < 4; ++c)
             if (p[r * 4 + c] > 0) hot = c;
           for (int s = 0; s < 3; ++s) draws.push_back(static_cast<double>(hot));
           for (double c : {0.0, 1.0, 2.0, 3.0}) all.push_back(c);
         }
         return TensorList{f64({in[0].shape()[0], 3}, draws), f64({in[0].shape()[0], 4}, all)};
       },
       .samples = [] {
         return std::vector<OpSample>{{"one-hot rows", {f64({2, 4}, {0, 0, 2.5, 0, 1, 0, 0, 0})}}};
       },
       .differentiable = false,
       .tolerance = 0});
  return true;
}();

}  // namespace
}  // namespace infini::test::indexing_sort_test
