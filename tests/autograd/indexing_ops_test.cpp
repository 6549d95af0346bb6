// Op table entries for gathers and scatters along a dim (index_select, gather,
// take_along_dim, scatter and its reductions, scatter_add, index_add / index_copy /
// index_fill and their in-place forms), with naive float64 loop references.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "indexing_test_util.h"
#include "op_info.h"

namespace infini::test::indexing_ops_test {
namespace {

using namespace indexing_util;

std::int64_t wrap_dim_ref(std::int64_t dim, std::int64_t ndim) { return dim < 0 ? dim + std::max<std::int64_t>(ndim, 1) : dim; }

// ---- references ----

// out[c] = x[c with dim -> idx[c]] over idx's shape.
Tensor gather_ref(const Tensor& x, std::int64_t dim, const Tensor& idx) {
  const std::vector<double> xv = values(x);
  const std::vector<std::int64_t> iv = ints(idx);
  if (x.dim() == 0) return f64({}, {xv[0]});
  dim = wrap_dim_ref(dim, x.dim());
  std::vector<double> out(iv.size());
  for (std::size_t k = 0; k < iv.size(); ++k) {
    Coords c = unravel(static_cast<std::int64_t>(k), idx.shape());
    c[dim] = wrap(iv[k], x.shape()[dim]);
    out[k] = xv[ravel(c, x.shape())];
  }
  return f64(idx.shape(), out);
}

// x's slices along dim at idx (1-d).
Tensor index_select_ref(const Tensor& x, std::int64_t dim, const Tensor& idx) {
  const std::vector<double> xv = values(x);
  const std::vector<std::int64_t> iv = ints(idx);
  if (x.dim() == 0) return f64({}, {xv[0]});
  dim = wrap_dim_ref(dim, x.dim());
  Shape shape = x.shape();
  shape[dim] = static_cast<std::int64_t>(iv.size());
  std::vector<double> out(static_cast<std::size_t>(numel_of(shape)));
  for (std::size_t k = 0; k < out.size(); ++k) {
    Coords c = unravel(static_cast<std::int64_t>(k), shape);
    c[dim] = wrap(iv[c[dim]], x.shape()[dim]);
    out[k] = xv[ravel(c, x.shape())];
  }
  return f64(shape, out);
}

using Combine = std::function<double(double, double)>;
const Combine kCopy = [](double, double v) { return v; };
const Combine kAdd = [](double a, double v) { return a + v; };
const Combine kMul = [](double a, double v) { return a * v; };
const Combine kMax = [](double a, double v) { return std::max(a, v); };
const Combine kMin = [](double a, double v) { return std::min(a, v); };

// self with, over idx's shape in row-major order, self[c with dim -> idx[c]] = combine(., src[c]).
Tensor scatter_ref(const Tensor& self, std::int64_t dim, const Tensor& idx, const Tensor& src, const Combine& combine) {
  std::vector<double> out = values(self);
  const std::vector<double> sv = values(src);
  const std::vector<std::int64_t> iv = ints(idx);
  if (self.dim() == 0) {
    if (!iv.empty()) out[0] = combine(out[0], sv[0]);
    return f64({}, out);
  }
  dim = wrap_dim_ref(dim, self.dim());
  for (std::size_t k = 0; k < iv.size(); ++k) {
    Coords c = unravel(static_cast<std::int64_t>(k), idx.shape());
    const double v = sv[ravel(c, src.shape())];
    c[dim] = wrap(iv[k], self.shape()[dim]);
    double& target = out[ravel(c, self.shape())];
    target = combine(target, v);
  }
  return f64(self.shape(), out);
}

// self with slice idx[i] along dim = combine(., slice i of source), source row-major.
Tensor index_scatter_ref(const Tensor& self, std::int64_t dim, const Tensor& idx, const Tensor& source,
                         const Combine& combine) {
  std::vector<double> out = values(self);
  const std::vector<double> sv = values(source);
  const std::vector<std::int64_t> iv = ints(idx);
  if (self.dim() == 0) {
    for (std::size_t i = 0; i < iv.size(); ++i) out[0] = combine(out[0], sv[0]);
    return f64({}, out);
  }
  dim = wrap_dim_ref(dim, self.dim());
  for (std::size_t k = 0; k < sv.size(); ++k) {
    Coords c = unravel(static_cast<std::int64_t>(k), source.shape());
    c[dim] = wrap(iv[c[dim]], self.shape()[dim]);
    double& target = out[ravel(c, self.shape())];
    target = combine(target, sv[k]);
  }
  return f64(self.shape(), out);
}

// x and idx broadcast outside dim, then gathered along dim.
Tensor take_along_dim_ref(const Tensor& x, const Tensor& idx, std::int64_t dim) {
  const std::vector<double> xv = values(x);
  const std::vector<std::int64_t> iv = ints(idx);
  dim = wrap_dim_ref(dim, x.dim());
  Shape shape(x.shape().size());
  for (std::size_t d = 0; d < shape.size(); ++d)
    shape[d] = static_cast<std::int64_t>(d) == dim ? idx.shape()[d] : std::max(x.shape()[d], idx.shape()[d]);
  std::vector<double> out(static_cast<std::size_t>(numel_of(shape)));
  for (std::size_t k = 0; k < out.size(); ++k) {
    const Coords c = unravel(static_cast<std::int64_t>(k), shape);
    Coords ic = c, xc = c;
    for (std::size_t d = 0; d < c.size(); ++d) {
      if (idx.shape()[d] == 1) ic[d] = 0;
      if (x.shape()[d] == 1) xc[d] = 0;
    }
    xc[dim] = wrap(iv[ravel(ic, idx.shape())], x.shape()[dim]);
    out[k] = xv[ravel(xc, x.shape())];
  }
  return f64(shape, out);
}

// ---- samples ----

const auto transpose_first = [](const TensorList& l) {
  TensorList out = l;
  out[0] = l[0].t();
  return out;
};
const auto slice_first = [](const TensorList& l) {
  TensorList out = l;
  out[0] = l[0].slice(1, 0, 8, 2);
  return out;
};
const auto expand_first = [](const TensorList& l) {
  TensorList out = l;
  out[0] = l[0].expand({3, 4});
  return out;
};

// Samples of (x (3,4)-like, idx 1-d with entries valid for sizes 3 and 4).
std::vector<OpSample> select_samples() {
  const Tensor idx = i64({4}, {2, 0, -1, 2});  // duplicates are fine for gathers
  return {
      {"contiguous (3,4)", {leaf({3, 4}, 1), idx}},
      {"transposed", {leaf({4, 3}, 2), idx}, transpose_first},
      {"sliced with step", {leaf({3, 8}, 3), idx}, slice_first},
      {"expanded", {leaf({1, 4}, 4), idx}, expand_first},
      {"int32 index", {leaf({3, 4}, 5), i64({2}, {1, -2}).to(kInt32)}},
      {"zero-size index", {leaf({3, 4}, 6), i64({0}, {})}},
      {"zero-size input", {leaf({0, 4}, 7), i64({0}, {})}},
      {"0-d", {leaf({}, 8), i64({1}, {0})}},
  };
}

// Samples of (x, idx) for gather along dim 1 (idx no larger than x outside dim 1).
std::vector<OpSample> gather_samples() {
  const Tensor idx = i64({3, 5}, {0, 3, 3, -1, 1, 2, 2, 0, -4, 1, 1, 1, 1, 3, 0});
  return {
      {"contiguous (3,4) idx (3,5)", {leaf({3, 4}, 1), idx}},
      {"transposed", {leaf({4, 3}, 2), idx}, transpose_first},
      {"sliced with step", {leaf({3, 8}, 3), idx}, slice_first},
      {"expanded", {leaf({1, 4}, 4), idx}, expand_first},
      {"index smaller outside dim", {leaf({3, 4}, 5), i64({2, 2}, {3, 0, 1, 1})}},
      {"zero-size index", {leaf({3, 4}, 6), i64({3, 0}, {})}},
      {"0-d", {leaf({}, 7), i64({}, {0})}},
  };
}

// Samples of (self, idx, src) for scatters along dim 1, without duplicate targets in a row
// (the gradient w.r.t. a src element overwritten later is not defined).
std::vector<OpSample> scatter_samples() {
  const Tensor idx = i64({3, 2}, {3, 0, 1, -2, -1, 1});
  return {
      {"contiguous, src larger than index", {leaf({3, 4}, 1), idx, leaf({3, 3}, 2)}},
      {"transposed self", {leaf({4, 3}, 3), idx, leaf({3, 2}, 4)}, transpose_first},
      {"sliced self, transposed src", {leaf({3, 8}, 5), idx, leaf({2, 3}, 6)},
       [](const TensorList& l) { return TensorList{l[0].slice(1, 0, 8, 2), l[1], l[2].t()}; }},
      {"expanded self and src", {leaf({1, 4}, 7), idx, leaf({3, 1}, 8)},
       [](const TensorList& l) { return TensorList{l[0].expand({3, 4}), l[1], l[2].expand({3, 2})}; }},
      {"zero-size index", {leaf({3, 4}, 9), i64({3, 0}, {}), leaf({3, 2}, 10)}},
      {"0-d", {leaf({}, 11), i64({}, {0}), leaf({}, 12)}},
  };
}

// Scatter samples with duplicate targets in a row, for the reductions.
std::vector<OpSample> scatter_reduce_samples(double lo, double hi) {
  const Tensor idx = i64({3, 3}, {1, 1, -3, 0, 2, 0, 3, 3, 3});
  return {
      {"duplicates", {leaf({3, 4}, 1, lo, hi), idx, leaf({3, 3}, 2, lo, hi)}},
      {"transposed self", {leaf({4, 3}, 3, lo, hi), idx, leaf({3, 3}, 4, lo, hi)}, transpose_first},
      {"index smaller than src", {leaf({3, 4}, 5, lo, hi), i64({2, 2}, {0, 0, 2, 1}), leaf({3, 3}, 6, lo, hi)}},
      {"zero-size index", {leaf({3, 4}, 7, lo, hi), i64({3, 0}, {}), leaf({3, 2}, 8, lo, hi)}},
      {"0-d", {leaf({}, 9, lo, hi), i64({}, {0}), leaf({}, 10, lo, hi)}},
  };
}

// Samples of (self (3,4)-like, idx 1-d, source) for index_* along dim 1.
std::vector<OpSample> index_scatter_samples(bool duplicates) {
  const Tensor idx = duplicates ? i64({3}, {3, -1, 0}) : i64({3}, {3, 0, -3});
  return {
      {"contiguous", {leaf({3, 4}, 1), idx, leaf({3, 3}, 2)}},
      {"transposed self and source", {leaf({4, 3}, 3), idx, leaf({3, 3}, 4)},
       [](const TensorList& l) { return TensorList{l[0].t(), l[1], l[2].t()}; }},
      {"sliced self", {leaf({3, 8}, 5), idx, leaf({3, 3}, 6)}, slice_first},
      {"expanded self and source", {leaf({1, 4}, 7), idx, leaf({1, 3}, 8)},
       [](const TensorList& l) { return TensorList{l[0].expand({3, 4}), l[1], l[2].expand({3, 3})}; }},
      {"zero-size index", {leaf({3, 4}, 9), i64({0}, {}), leaf({3, 0}, 10)}},
      {"0-d", {leaf({}, 11), i64({1}, {0}), leaf({}, 12)}},
  };
}

// An in-place op applied to a non-leaf copy of the first argument.
Fn on_copy(std::function<void(Tensor&, const TensorList&)> op) {
  return [op](const TensorList& in) {
    Tensor x = mul(in[0], 1.0);
    op(x, in);
    return TensorList{x};
  };
}

const bool registered = [] {
  op_registry().push_back({.name = "index_select",
                           .fn = [](const TensorList& in) {
                             return TensorList{index_select(in[0], 0, in[1]), index_select(in[0], -1, in[1])};
                           },
                           .reference = [](const TensorList& in) {
                             return TensorList{index_select_ref(in[0], 0, in[1]), index_select_ref(in[0], -1, in[1])};
                           },
                           .samples = select_samples});
  op_registry().push_back({.name = "gather",
                           .fn = [](const TensorList& in) { return TensorList{gather(in[0], -1, in[1])}; },
                           .reference = [](const TensorList& in) { return TensorList{gather_ref(in[0], -1, in[1])}; },
                           .samples = gather_samples});
  op_registry().push_back(
      {.name = "gather",
       .fn = [](const TensorList& in) { return TensorList{gather(in[0], 0, in[1].t())}; },
       .reference = [](const TensorList& in) { return TensorList{gather_ref(in[0], 0, in[1].t())}; },
       .samples = [] {
         return std::vector<OpSample>{{"along dim 0", {leaf({3, 4}, 1), i64({4, 5}, {0, 2, 2, -1, 1, 2, 0, 0, -3, 1,
                                                                                      1, 1, 1, 2, 0, 0, 0, 1, 1, 2})}}};
       }});
  op_registry().push_back(
      {.name = "take_along_dim",
       .fn = [](const TensorList& in) { return TensorList{take_along_dim(in[0], in[1], 1), take_along_dim(in[0], in[1])}; },
       .reference = [](const TensorList& in) {
         return TensorList{take_along_dim_ref(in[0], in[1], 1),
                           gather_ref(in[0].reshape({-1}), 0, in[1].reshape({-1}))};
       },
       .samples = [] {
         return std::vector<OpSample>{
             {"broadcast index (1,5)", {leaf({3, 4}, 1), i64({1, 5}, {3, 0, -1, 1, 1})}},
             {"broadcast input (1,4)", {leaf({1, 4}, 2), i64({3, 2}, {0, 1, 2, 3, -4, 0})}},
             {"transposed", {leaf({4, 3}, 3), i64({3, 2}, {0, 1, 2, 3, -4, 0})}, transpose_first},
             {"zero-size", {leaf({3, 4}, 4), i64({3, 0}, {})}},
         };
       }});

  op_registry().push_back(
      {.name = "scatter",
       .fn = [](const TensorList& in) { return TensorList{scatter(in[0], -1, in[1], in[2])}; },
       .reference = [](const TensorList& in) { return TensorList{scatter_ref(in[0], -1, in[1], in[2], kCopy)}; },
       .samples = scatter_samples});
  op_registry().push_back(
      {.name = "scatter",
       .fn = [](const TensorList& in) { return TensorList{scatter(in[0], -1, in[1], 2.5)}; },
       .reference = [](const TensorList& in) {
         return TensorList{scatter_ref(in[0], -1, in[1], full_like(in[1], 2.5, TensorOptions{.dtype = kFloat64}), kCopy)};
       },
       .samples = [] {
         auto s = scatter_reduce_samples(-2, 2);  // duplicates are fine: every write is the same value
         for (OpSample& e : s) e.leaves.pop_back();
         return s;
       }});
  const std::pair<ScatterReduce, Combine> reductions[] = {{ScatterReduce::Add, kAdd},
                                                          {ScatterReduce::Multiply, kMul},
                                                          {ScatterReduce::Amax, kMax},
                                                          {ScatterReduce::Amin, kMin}};
  for (const auto& [reduce, combine] : reductions) {
    op_registry().push_back(
        {.name = "scatter",
         .fn = [reduce](const TensorList& in) { return TensorList{scatter(in[0], -1, in[1], in[2], reduce)}; },
         .reference = [combine](const TensorList& in) {
           return TensorList{scatter_ref(in[0], -1, in[1], in[2], combine)};
         },
         .samples = [reduce] {
           auto s = scatter_reduce_samples(reduce == ScatterReduce::Multiply ? 0.5 : -2, 2);
           if (reduce == ScatterReduce::Multiply)  // exact zeros: one and two per output element
             s.push_back({"zeros", {f64({2, 3}, {0, 1.5, 2, 0, -1, 3}).requires_grad_(), i64({2, 2}, {0, 1, 0, 0}),
                                    f64({2, 2}, {0.5, -2, 1.5, 0}).requires_grad_()}});
           return s;
         },
         .tolerance = 1e-12});
  }
  op_registry().push_back(
      {.name = "scatter_add",
       .fn = [](const TensorList& in) { return TensorList{scatter_add(in[0], -1, in[1], in[2])}; },
       .reference = [](const TensorList& in) { return TensorList{scatter_ref(in[0], -1, in[1], in[2], kAdd)}; },
       .samples = [] { return scatter_reduce_samples(-2, 2); },
       .gradgrad = true,
       .tolerance = 1e-12});
  op_registry().push_back(
      {.name = "scatter_",
       .fn = on_copy([](Tensor& x, const TensorList& in) { scatter_(x, -1, in[1], in[2]); }),
       .reference = [](const TensorList& in) { return TensorList{scatter_ref(in[0], -1, in[1], in[2], kCopy)}; },
       .samples = scatter_samples});
  op_registry().push_back(
      {.name = "scatter_",
       .fn = on_copy([](Tensor& x, const TensorList& in) { scatter_(x, -1, in[1], in[2], ScatterReduce::Amax); }),
       .reference = [](const TensorList& in) { return TensorList{scatter_ref(in[0], -1, in[1], in[2], kMax)}; },
       .samples = [] { return scatter_reduce_samples(-2, 2); }});
  op_registry().push_back(
      {.name = "scatter_",
       .fn = on_copy([](Tensor& x, const TensorList& in) { scatter_(x, -1, in[1], -0.5); }),
       .reference = [](const TensorList& in) {
         return TensorList{scatter_ref(in[0], -1, in[1], full_like(in[1], -0.5, TensorOptions{.dtype = kFloat64}), kCopy)};
       },
       .samples = [] {
         const Tensor idx = i64({3, 2}, {3, 0, 1, -2, -1, 1});
         return std::vector<OpSample>{{"contiguous", {leaf({3, 4}, 1), idx}},
                                      {"transposed", {leaf({4, 3}, 2), idx}, transpose_first},
                                      {"sliced with step", {leaf({3, 8}, 3), idx}, slice_first},
                                      {"0-d", {leaf({}, 4), i64({}, {0})}}};
       }});
  op_registry().push_back(
      {.name = "scatter_add_",
       .fn = on_copy([](Tensor& x, const TensorList& in) { scatter_add_(x, -1, in[1], in[2]); }),
       .reference = [](const TensorList& in) { return TensorList{scatter_ref(in[0], -1, in[1], in[2], kAdd)}; },
       .samples = [] { return scatter_reduce_samples(-2, 2); }});

  const Combine add_twice = [](double a, double v) { return a + 2 * v; };
  op_registry().push_back(
      {.name = "index_add",
       .fn = [](const TensorList& in) { return TensorList{index_add(in[0], -1, in[1], in[2], 2.0)}; },
       .reference = [add_twice](const TensorList& in) {
         return TensorList{index_scatter_ref(in[0], -1, in[1], in[2], add_twice)};
       },
       .samples = [] { return index_scatter_samples(true); },
       .gradgrad = true,
       .tolerance = 1e-12});
  op_registry().push_back(
      {.name = "index_copy",
       .fn = [](const TensorList& in) { return TensorList{index_copy(in[0], -1, in[1], in[2])}; },
       .reference = [](const TensorList& in) { return TensorList{index_scatter_ref(in[0], -1, in[1], in[2], kCopy)}; },
       .samples = [] { return index_scatter_samples(false); },
       .gradgrad = true});
  op_registry().push_back(
      {.name = "index_fill",
       .fn = [](const TensorList& in) { return TensorList{index_fill(in[0], -1, in[1], -1.5)}; },
       .reference = [](const TensorList& in) {
         Shape shape = in[0].shape();
         if (!shape.empty()) shape.back() = in[1].numel();
         return TensorList{index_scatter_ref(in[0], -1, in[1], full(shape, -1.5, {.dtype = kFloat64}), kCopy)};
       },
       .samples = [] {
         const Tensor idx = i64({3}, {3, -1, 0});
         return std::vector<OpSample>{{"duplicates", {leaf({3, 4}, 1), idx}},
                                      {"transposed", {leaf({4, 3}, 2), idx}, transpose_first},
                                      {"sliced with step", {leaf({3, 8}, 3), idx}, slice_first},
                                      {"expanded", {leaf({1, 4}, 4), idx}, expand_first},
                                      {"zero-size index", {leaf({3, 4}, 5), i64({0}, {})}},
                                      {"0-d", {leaf({}, 6), i64({1}, {0})}}};
       },
       .gradgrad = true});
  op_registry().push_back(
      {.name = "index_add_",
       .fn = on_copy([](Tensor& x, const TensorList& in) { index_add_(x, -1, in[1], in[2]); }),
       .reference = [](const TensorList& in) { return TensorList{index_scatter_ref(in[0], -1, in[1], in[2], kAdd)}; },
       .samples = [] { return index_scatter_samples(true); }});
  op_registry().push_back(
      {.name = "index_copy_",
       .fn = on_copy([](Tensor& x, const TensorList& in) { index_copy_(x, -1, in[1], in[2]); }),
       .reference = [](const TensorList& in) { return TensorList{index_scatter_ref(in[0], -1, in[1], in[2], kCopy)}; },
       .samples = [] { return index_scatter_samples(false); }});
  op_registry().push_back(
      {.name = "index_fill_",
       .fn = on_copy([](Tensor& x, const TensorList& in) { index_fill_(x, 0, in[1], 4.0); }),
       .reference = [](const TensorList& in) {
         Shape shape = in[0].shape();
         if (!shape.empty()) shape.front() = in[1].numel();
         return TensorList{index_scatter_ref(in[0], 0, in[1], full(shape, 4.0, {.dtype = kFloat64}), kCopy)};
       },
       .samples = [] {
         return std::vector<OpSample>{{"duplicates", {leaf({3, 4}, 1), i64({3}, {2, -1, 0})}},
                                      {"transposed", {leaf({4, 3}, 2), i64({2}, {1, 1})}, transpose_first},
                                      {"0-d", {leaf({}, 3), i64({}, {0})}}};
       }});
  return true;
}();

}  // namespace
}  // namespace infini::test::indexing_ops_test
