// Helpers shared by the convolution and pooling tests (conv*_ops_test.cpp, *pool*_ops_test.cpp):
// float64 tensors from values, distinct-valued leaves, index arithmetic, batching, PyTorch's
// pooling output size and direct-sum references of (transposed) convolution over any number
// of spatial dims. Leaves, numel_of and expect_error are op_info.h's.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "op_info.h"

namespace infini::test {

// A float64 tensor of `shape` holding `v` (row-major).
inline Tensor make(const Shape& shape, const std::vector<double>& v) {
  return from_vector(v, {static_cast<std::int64_t>(v.size())}).reshape(shape);
}



// A float64 leaf holding a shuffled 0.1 * (0, 1, ..., n - 1), shifted to be centred on 0:
// all values distinct and 0.1 apart, so a max is unique and stays so under gradcheck's steps.
inline Tensor distinct_leaf(const Shape& shape, std::uint64_t seed) {
  const std::int64_t n = numel_of(shape);
  const std::vector<double> keys = values(sample({n}, 0, 1, seed));
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::ranges::sort(order, [&](std::int64_t a, std::int64_t b) { return keys[a] < keys[b]; });
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t rank = 0; rank < n; ++rank) v[order[rank]] = 0.1 * static_cast<double>(rank) - 0.05 * n;
  return make(shape, v).requires_grad_();
}

// Row-major offset of `index` in `shape`.
inline std::int64_t offset_of(const Shape& shape, const std::vector<std::int64_t>& index) {
  std::int64_t at = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) at = at * shape[d] + index[d];
  return at;
}

// Calls f(index) for every index of `shape`, row-major.
template <class F>
void for_each_index(const Shape& shape, F&& f) {
  std::vector<std::int64_t> index(shape.size(), 0);
  for (std::int64_t i = 0, n = numel_of(shape); i < n; ++i) {
    f(index);
    for (std::size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
}

// An unbatched (C, *spatial) input is computed as a batch of one.
inline Tensor batch_of(const Tensor& x, std::int64_t dims) { return x.dim() == dims + 1 ? x.unsqueeze(0) : x; }
inline Tensor unbatch_like(const Tensor& y, const Tensor& x, std::int64_t dims) {
  return x.dim() == dims + 1 ? y.squeeze(0) : y;
}

// PyTorch's pooling_output_shape: floor or ceil of (in + 2p - d (k - 1) - 1) / s, plus 1;
// with ceil_mode the last window must start inside the input or the left padding.
inline std::int64_t pool_out(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t p, std::int64_t d,
                             bool ceil) {
  const std::int64_t span = in + 2 * p - d * (k - 1) - 1;
  std::int64_t out = (ceil ? (span + s - 1) / s : span / s) + 1;
  if (ceil && (out - 1) * s >= in + p) --out;
  return out;
}

// The arguments of a convolution with D = stride.size() spatial dims, one value per dim.
struct ConvNdArgs {
  std::vector<std::int64_t> stride, padding, dilation;
  std::int64_t groups = 1;
  std::vector<std::int64_t> output_padding{};  // transposed convolutions only; empty: zeros
};

// y (N, O, *out) = b[o] + the sum over c < C/G and kernel offsets k of
// x[n, g C/G + c, pos s - p + k d] w[o, c, k] (x zero outside), x (N, C, *in), batched,
// w (O, C/G, *kernel), g = o / (O/G), out = (in + 2p - d (kernel - 1) - 1) / s + 1.
inline Tensor conv_nd_sums(const Tensor& x, const Tensor& w, const Tensor& b, const ConvNdArgs& a) {
  const Shape& xs = x.shape();
  const Shape& ws = w.shape();
  const std::size_t dims = a.stride.size();
  const std::int64_t cg = ws[1], og = ws[0] / a.groups;
  const Shape kernel(ws.begin() + 2, ws.end());
  Shape ys{xs[0], ws[0]};
  for (std::size_t d = 0; d < dims; ++d)
    ys.push_back((xs[2 + d] + 2 * a.padding[d] - a.dilation[d] * (kernel[d] - 1) - 1) / a.stride[d] + 1);
  const std::vector<double> xv = values(x), wv = values(w), bv = b.defined() ? values(b) : std::vector<double>{};
  std::vector<double> y(static_cast<std::size_t>(numel_of(ys)), 0.0);
  for_each_index(ys, [&](const std::vector<std::int64_t>& at) {
    const std::int64_t o = at[1];
    double sum = bv.empty() ? 0.0 : bv[o];
    for (std::int64_t c = 0; c < cg; ++c)
      for_each_index(kernel, [&](const std::vector<std::int64_t>& k) {
        std::vector<std::int64_t> xi{at[0], o / og * cg + c}, wi{o, c};
        for (std::size_t d = 0; d < dims; ++d) {
          const std::int64_t r = at[2 + d] * a.stride[d] - a.padding[d] + k[d] * a.dilation[d];
          if (r < 0 || r >= xs[2 + d]) return;
          xi.push_back(r);
          wi.push_back(k[d]);
        }
        sum += xv[offset_of(xs, xi)] * wv[offset_of(ws, wi)];
      });
    y[offset_of(ys, at)] = sum;
  });
  return make(ys, y);
}

// The transposed convolution by its definition: every input element x[n, c, pos] adds
// x w[c, o, k] to y[n, c / (C/G) O/G + o, pos s - p + k d] where that lies inside the
// output; x (N, C, *in), batched, w (C, O/G, *kernel), y starts at the bias, and
// out = (in - 1) s - 2p + d (kernel - 1) + output_padding + 1.
inline Tensor conv_transpose_nd_sums(const Tensor& x, const Tensor& w, const Tensor& b, const ConvNdArgs& a) {
  const Shape& xs = x.shape();
  const Shape& ws = w.shape();
  const std::size_t dims = a.stride.size();
  const std::int64_t og = ws[1], cg = xs[1] / a.groups;
  const Shape kernel(ws.begin() + 2, ws.end());
  Shape ys{xs[0], og * a.groups};
  for (std::size_t d = 0; d < dims; ++d)
    ys.push_back((xs[2 + d] - 1) * a.stride[d] - 2 * a.padding[d] + a.dilation[d] * (kernel[d] - 1) +
                 (a.output_padding.empty() ? 0 : a.output_padding[d]) + 1);
  const std::vector<double> xv = values(x), wv = values(w), bv = b.defined() ? values(b) : std::vector<double>{};
  std::vector<double> y(static_cast<std::size_t>(numel_of(ys)), 0.0);
  if (!bv.empty()) for_each_index(ys, [&](const std::vector<std::int64_t>& at) { y[offset_of(ys, at)] = bv[at[1]]; });
  for_each_index(xs, [&](const std::vector<std::int64_t>& at) {
    for (std::int64_t o = 0; o < og; ++o)
      for_each_index(kernel, [&](const std::vector<std::int64_t>& k) {
        std::vector<std::int64_t> yi{at[0], at[1] / cg * og + o}, wi{at[1], o};
        for (std::size_t d = 0; d < dims; ++d) {
          const std::int64_t r = at[2 + d] * a.stride[d] - a.padding[d] + k[d] * a.dilation[d];
          if (r < 0 || r >= ys[2 + d]) return;
          yi.push_back(r);
          wi.push_back(k[d]);
        }
        y[offset_of(ys, yi)] += xv[offset_of(xs, at)] * wv[offset_of(ws, wi)];
      });
  });
  return make(ys, y);
}

// `got`, computed in dtype t, matches the float64 reference `ref` to t's precision: within
// 1e-6 (float32), 2e-3 (float16) or 1e-2 (bfloat16) times 1 + |ref|.
inline void expect_near_in(const Tensor& got, const Tensor& ref, DataType t) {
  EXPECT_EQ(got.dtype(), t);
  const double tolerance = t == kFloat32 ? 1e-6 : t == kFloat16 ? 2e-3 : 1e-2;
  const std::vector<double> a = values(got), b = values(ref);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    EXPECT_NEAR(a[i], b[i], tolerance * (1 + std::abs(b[i]))) << t << " at " << i;
}

// Views of (N, *spatial, C) leaves as channels-last (N, C, *spatial) inputs, and of
// (N, C, H, W) leaves with H and W swapped.
inline const Fn channels_last_1d = [](const TensorList& l) { return TensorList{l[0].transpose(1, 2)}; };
inline const Fn channels_last_2d = [](const TensorList& l) { return TensorList{l[0].permute({0, 3, 1, 2})}; };
inline const Fn channels_last_3d = [](const TensorList& l) { return TensorList{l[0].permute({0, 4, 1, 2, 3})}; };
inline const Fn transposed_hw = [](const TensorList& l) { return TensorList{l[0].transpose(2, 3)}; };

// A sample of one leaf: distinct_leaf (unique maxima, for max pooling) or leaf (random).
inline OpSample distinct(std::string label, const Shape& shape, std::uint64_t seed, Fn view = nullptr) {
  return {std::move(label), {distinct_leaf(shape, seed)}, std::move(view)};
}
inline OpSample random(std::string label, const Shape& shape, std::uint64_t seed, Fn view = nullptr) {
  return {std::move(label), {leaf(shape, seed)}, std::move(view)};
}

}  // namespace infini::test
