// Float64 references for the reduction tests, by visiting every element with explicit
// index arithmetic (no library reductions), plus the sample inputs the reduction entries share.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "op_info.h"

namespace infini::test {

// Which dims a reduction over `dims` covers (all when empty; negative dims wrap).
inline std::vector<bool> reduced_mask(std::int64_t ndim, const std::vector<std::int64_t>& dims) {
  std::vector<bool> mask(static_cast<std::size_t>(ndim), dims.empty());
  for (std::int64_t d : dims)
    if (ndim > 0) mask[d < 0 ? d + ndim : d] = true;
  return mask;
}

// The elements each output of a reduction of x over `dims` sees, in row-major order, and
// the result's shape.
struct Groups {
  Shape shape;
  std::vector<std::vector<double>> members;
};

inline Groups group(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  const std::vector<bool> mask = reduced_mask(x.dim(), dims);
  const std::vector<double> v = values(x);
  Groups g;
  std::int64_t outputs = 1;
  for (std::int64_t d = 0; d < x.dim(); ++d) {
    if (!mask[d]) outputs *= x.shape()[d];
    if (!mask[d] || keepdim) g.shape.push_back(mask[d] ? 1 : x.shape()[d]);
  }
  g.members.resize(static_cast<std::size_t>(outputs));
  std::vector<std::int64_t> index(static_cast<std::size_t>(x.dim()), 0);
  for (std::size_t n = 0; n < v.size(); ++n) {
    std::int64_t o = 0;
    for (std::int64_t d = 0; d < x.dim(); ++d)
      if (!mask[d]) o = o * x.shape()[d] + index[d];
    g.members[o].push_back(v[n]);
    for (std::int64_t d = x.dim() - 1; d >= 0; --d) {
      if (++index[d] < x.shape()[d]) break;
      index[d] = 0;
    }
  }
  return g;
}

// f applied to every group of a reduction of x over dims, as a float64 tensor.
inline Tensor reduce_ref(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim,
                         const std::function<double(const std::vector<double>&)>& f) {
  const Groups g = group(x, dims, keepdim);
  std::vector<double> out;
  for (const auto& members : g.members) out.push_back(f(members));
  return from_vector(out, {static_cast<std::int64_t>(out.size())}).reshape(g.shape);
}

inline double sum_of(const std::vector<double>& v) {
  double s = 0;
  for (double e : v) s += e;
  return s;
}

// The dims and keepdim of one reduction an entry applies to each sample.
struct ReduceCase {
  std::vector<std::int64_t> dims;
  bool keepdim;
};

// Reductions of a 3-d input over: all dims, one dim, two dims (kept), the last dim (kept).
inline const std::vector<ReduceCase> kCases3d = {{{}, false}, {{1}, false}, {{0, 2}, true}, {{-1}, true}};
// Of a 0-d input: all dims, and dim -1 kept.
inline const std::vector<ReduceCase> kCases0d = {{{}, false}, {{-1}, true}};

// 24-element samples of shape (2,3,4) in [lo, hi): contiguous, transposed, sliced with
// step, expanded (1,3,4) -> (2,3,4); then the zero-size (2,0,4) one when with_empty.
inline std::vector<OpSample> samples_3d(double lo, double hi, bool with_empty) {
  std::vector<OpSample> s = {
      {"contiguous (2,3,4)", {sample({2, 3, 4}, lo, hi, 11).requires_grad_()}},
      {"transposed", {sample({4, 3, 2}, lo, hi, 12).requires_grad_()},
       [](const TensorList& l) { return TensorList{l[0].permute({2, 1, 0})}; }},
      {"sliced with step", {sample({2, 3, 8}, lo, hi, 13).requires_grad_()},
       [](const TensorList& l) { return TensorList{l[0].slice(2, 1, 8, 2)}; }},
      {"expanded", {sample({1, 3, 4}, lo, hi, 14).requires_grad_()},
       [](const TensorList& l) { return TensorList{l[0].expand({2, 3, 4})}; }},
  };
  if (with_empty) s.push_back({"zero-size (2,0,4)", {sample({2, 0, 4}, lo, hi, 15).requires_grad_()}});
  return s;
}

inline std::vector<OpSample> samples_0d(double lo, double hi) {
  return {{"0-d", {sample({}, lo, hi, 16).requires_grad_()}}};
}

// An op table entry applying op(x, case) for every case of kCases3d to the 3-d samples
// and, when with_0d, a second entry applying the kCases0d ones to a 0-d sample.
struct ReductionEntry {
  std::string name;
  std::function<Tensor(const Tensor&, const ReduceCase&)> op;
  std::function<double(const std::vector<double>&)> ref;  // of one group
  double lo = -2, hi = 2;                                  // sample range
  bool with_empty = true;                                  // add the zero-size sample
  bool with_0d = true;
  bool differentiable = true;
  bool gradgrad = true;
};

inline void register_reduction(const ReductionEntry& e) {
  for (bool zero_dim : {false, true}) {
    if (zero_dim && !e.with_0d) continue;
    const std::vector<ReduceCase> cases = zero_dim ? kCases0d : kCases3d;
    op_registry().push_back(
        {.name = e.name,
         .fn = [op = e.op, cases](const TensorList& in) {
           TensorList out;
           for (const ReduceCase& c : cases) out.push_back(op(in[0], c));
           return out;
         },
         .reference = [ref = e.ref, cases](const TensorList& in) {
           TensorList out;
           for (const ReduceCase& c : cases) out.push_back(reduce_ref(in[0], c.dims, c.keepdim, ref));
           return out;
         },
         .samples = [e, zero_dim] { return zero_dim ? samples_0d(e.lo, e.hi) : samples_3d(e.lo, e.hi, e.with_empty); },
         .differentiable = e.differentiable,
         .gradgrad = e.gradgrad,
         .tolerance = 1e-12});
  }
}

}  // namespace infini::test
