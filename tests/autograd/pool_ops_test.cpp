// Op table entries for max_pool2d(_with_indices), avg_pool2d/3d, adaptive_avg_pool2d and
// interpolate against naive float64 loops over each window (PyTorch's output-size formula
// with its ceil_mode rule, its divisors, its source-index formulas); plus errors and dtypes.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "op_info.h"
#include "spatial_test_util.h"

namespace infini::test::pool_ops_test {
namespace {

using Triple = std::array<std::int64_t, 3>;

// ---- max pooling ----

struct MaxPoolArgs {
  std::array<std::int64_t, 2> kernel, stride, padding{0, 0}, dilation{1, 1};
  bool ceil = false;
};

// Values and indices (ih * W + iw, as float64) of the first maximum of each window's
// elements inside the input, windows scanned row-major.
TensorList max_pool2d_loops(const Tensor& x, const MaxPoolArgs& a) {
  const Shape& xs = x.shape();
  const std::int64_t n = xs[0], c = xs[1], h = xs[2], w = xs[3];
  const std::int64_t oh = pool_out(h, a.kernel[0], a.stride[0], a.padding[0], a.dilation[0], a.ceil);
  const std::int64_t ow = pool_out(w, a.kernel[1], a.stride[1], a.padding[1], a.dilation[1], a.ceil);
  const std::vector<double> xv = values(x);
  const Shape ys{n, c, oh, ow};
  std::vector<double> y, idx;
  for (std::int64_t b = 0; b < n * c; ++b)
    for (std::int64_t i = 0; i < oh; ++i)
      for (std::int64_t j = 0; j < ow; ++j) {
        double best = -std::numeric_limits<double>::infinity();
        std::int64_t at = -1;
        for (std::int64_t p = 0; p < a.kernel[0]; ++p)
          for (std::int64_t q = 0; q < a.kernel[1]; ++q) {
            const std::int64_t r = i * a.stride[0] - a.padding[0] + p * a.dilation[0];
            const std::int64_t s = j * a.stride[1] - a.padding[1] + q * a.dilation[1];
            if (r < 0 || r >= h || s < 0 || s >= w) continue;
            const double v = xv[b * h * w + r * w + s];
            if (at < 0 || v > best) best = v, at = r * w + s;
          }
        y.push_back(best);
        idx.push_back(static_cast<double>(at));
      }
  return {make(ys, y), make(ys, idx)};
}

void add_max_pool(const MaxPoolArgs& a, std::function<std::vector<OpSample>()> samples) {
  auto reference = [a](const TensorList& in) {
    TensorList out = max_pool2d_loops(batch_of(in[0].detach(), 2), a);
    for (Tensor& t : out) t = unbatch_like(t, in[0], 2);
    return out;
  };
  const ExpandingArray<2> kernel{a.kernel[0], a.kernel[1]}, stride{a.stride[0], a.stride[1]},
      padding{a.padding[0], a.padding[1]}, dilation{a.dilation[0], a.dilation[1]};
  op_registry().push_back({.name = "max_pool2d",
                           .fn = [=](const TensorList& in) {
                             return TensorList{max_pool2d(in[0], kernel, stride, padding, dilation, a.ceil)};
                           },
                           .reference = [reference](const TensorList& in) { return TensorList{reference(in)[0]}; },
                           .samples = samples});
  op_registry().push_back({.name = "max_pool2d_with_indices",
                           .fn = [=](const TensorList& in) {
                             auto [values, indices] =
                                 max_pool2d_with_indices(in[0], kernel, stride, padding, dilation, a.ceil);
                             return TensorList{values, indices};
                           },
                           .reference = reference,
                           .samples = samples});
}

// ---- average pooling ----

// Per spatial dim; avg_pool2d entries use the first two entries of each.
struct AvgPoolArgs {
  Triple kernel, stride, padding{0, 0, 0};
  bool ceil = false;
  bool count_include_pad = true;
  std::optional<std::int64_t> divisor_override{};
};

// x (N, C, D, H, W): each output is the sum of its window's input elements divided by
// PyTorch's divisor: the override, or the window clipped to the padded input
// (count_include_pad) or to the input.
Tensor avg_pool3d_loops(const Tensor& x, const AvgPoolArgs& a) {
  const Shape& xs = x.shape();
  Triple in{xs[2], xs[3], xs[4]}, out{};
  for (int d = 0; d < 3; ++d) out[d] = pool_out(in[d], a.kernel[d], a.stride[d], a.padding[d], 1, a.ceil);
  const std::vector<double> xv = values(x);
  const Shape ys{xs[0], xs[1], out[0], out[1], out[2]};
  std::vector<double> y;
  for (std::int64_t b = 0; b < xs[0] * xs[1]; ++b)
    for (std::int64_t i = 0; i < out[0]; ++i)
      for (std::int64_t j = 0; j < out[1]; ++j)
        for (std::int64_t k = 0; k < out[2]; ++k) {
          const Triple o{i, j, k};
          Triple start{}, end{};
          std::int64_t padded_size = 1, inside = 1;
          for (int d = 0; d < 3; ++d) {
            start[d] = o[d] * a.stride[d] - a.padding[d];
            end[d] = std::min(start[d] + a.kernel[d], in[d] + a.padding[d]);
            padded_size *= end[d] - start[d];
            start[d] = std::max<std::int64_t>(start[d], 0);
            end[d] = std::min(end[d], in[d]);
            inside *= end[d] - start[d];
          }
          double sum = 0;
          for (std::int64_t r = start[0]; r < end[0]; ++r)
            for (std::int64_t s = start[1]; s < end[1]; ++s)
              for (std::int64_t t = start[2]; t < end[2]; ++t) sum += xv[((b * in[0] + r) * in[1] + s) * in[2] + t];
          const double divisor = a.divisor_override ? static_cast<double>(*a.divisor_override)
                                 : a.count_include_pad ? static_cast<double>(padded_size)
                                                       : static_cast<double>(inside);
          y.push_back(sum / divisor);
        }
  return make(ys, y);
}

void add_avg_pool2d(const AvgPoolArgs& a, std::function<std::vector<OpSample>()> samples) {
  // avg_pool2d's reference: a 3-d pool over a depth of 1 with a window depth of 1.
  const AvgPoolArgs a3{{1, a.kernel[0], a.kernel[1]}, {1, a.stride[0], a.stride[1]}, {0, a.padding[0], a.padding[1]},
                       a.ceil, a.count_include_pad, a.divisor_override};
  op_registry().push_back(
      {.name = "avg_pool2d",
       .fn = [a](const TensorList& in) {
         return TensorList{avg_pool2d(in[0], {a.kernel[0], a.kernel[1]}, {a.stride[0], a.stride[1]},
                                      {a.padding[0], a.padding[1]}, a.ceil, a.count_include_pad, a.divisor_override)};
       },
       .reference = [a3](const TensorList& in) {
         const Tensor x = batch_of(in[0].detach(), 2).unsqueeze(2);
         return TensorList{unbatch_like(avg_pool3d_loops(x, a3).squeeze(2), in[0], 2)};
       },
       .samples = std::move(samples)});
}

void add_avg_pool3d(const AvgPoolArgs& a, std::function<std::vector<OpSample>()> samples) {
  op_registry().push_back(
      {.name = "avg_pool3d",
       .fn = [a](const TensorList& in) {
         return TensorList{avg_pool3d(in[0], {a.kernel[0], a.kernel[1], a.kernel[2]},
                                      {a.stride[0], a.stride[1], a.stride[2]},
                                      {a.padding[0], a.padding[1], a.padding[2]}, a.ceil, a.count_include_pad,
                                      a.divisor_override)};
       },
       .reference = [a](const TensorList& in) {
         return TensorList{unbatch_like(avg_pool3d_loops(batch_of(in[0].detach(), 3), a), in[0], 3)};
       },
       .samples = std::move(samples)});
}

// ---- adaptive pooling and interpolation ----

// x (N, C, H, W): output (i, j) averages rows [floor(i H / oH), ceil((i + 1) H / oH)) and
// the columns likewise.
Tensor adaptive_loops(const Tensor& x, std::int64_t oh, std::int64_t ow) {
  const Shape& xs = x.shape();
  const std::int64_t h = xs[2], w = xs[3];
  const std::vector<double> xv = values(x);
  std::vector<double> y;
  for (std::int64_t b = 0; b < xs[0] * xs[1]; ++b)
    for (std::int64_t i = 0; i < oh; ++i)
      for (std::int64_t j = 0; j < ow; ++j) {
        const auto r0 = static_cast<std::int64_t>(std::floor(static_cast<double>(i * h) / static_cast<double>(oh)));
        const auto r1 = static_cast<std::int64_t>(std::ceil(static_cast<double>((i + 1) * h) / static_cast<double>(oh)));
        const auto c0 = static_cast<std::int64_t>(std::floor(static_cast<double>(j * w) / static_cast<double>(ow)));
        const auto c1 = static_cast<std::int64_t>(std::ceil(static_cast<double>((j + 1) * w) / static_cast<double>(ow)));
        double sum = 0;
        for (std::int64_t r = r0; r < r1; ++r)
          for (std::int64_t c = c0; c < c1; ++c) sum += xv[(b * h + r) * w + c];
        y.push_back(sum / static_cast<double>((r1 - r0) * (c1 - c0)));
      }
  return make({xs[0], xs[1], oh, ow}, y);
}

void add_adaptive(std::int64_t oh, std::int64_t ow, std::function<std::vector<OpSample>()> samples) {
  op_registry().push_back(
      {.name = "adaptive_avg_pool2d",
       .fn = [oh, ow](const TensorList& in) { return TensorList{adaptive_avg_pool2d(in[0], {oh, ow})}; },
       .reference = [oh, ow](const TensorList& in) {
         return TensorList{unbatch_like(adaptive_loops(batch_of(in[0].detach(), 2), oh, ow), in[0], 2)};
       },
       .samples = std::move(samples)});
}

// PyTorch's legacy nearest source index (nearest_idx): copies when the size is unchanged,
// halves when doubled, else min(floor(o * scale), in - 1) in float with scale 1 / factor
// (when a scale factor was given) or in / out.
std::int64_t nearest_source(std::int64_t o, std::int64_t in, std::int64_t out, double factor) {
  if (out == in) return o;
  if (out == 2 * in) return o / 2;
  const float scale = factor > 0 ? static_cast<float>(1.0 / factor) : static_cast<float>(in) / static_cast<float>(out);
  return std::min(static_cast<std::int64_t>(std::floor(static_cast<float>(o) * scale)), in - 1);
}

// Output sizes of interpolate for x's spatial dims.
std::vector<std::int64_t> output_size(const Tensor& x, const InterpolateOptions& o) {
  std::vector<std::int64_t> out;
  for (std::int64_t d = 2; d < x.dim(); ++d) {
    const std::size_t k = static_cast<std::size_t>(d - 2);
    if (!o.size.empty()) out.push_back(o.size.size() == 1 ? o.size[0] : o.size[k]);
    else out.push_back(static_cast<std::int64_t>(
        std::floor(static_cast<double>(x.size(d)) * (o.scale_factor.size() == 1 ? o.scale_factor[0] : o.scale_factor[k]))));
  }
  return out;
}

double factor_of(const InterpolateOptions& o, std::size_t d) {
  if (o.scale_factor.empty()) return 0;
  return o.scale_factor.size() == 1 ? o.scale_factor[0] : o.scale_factor[d];
}

// Nearest over any number of spatial dims: y[n, c, o...] = x[n, c, source(o)...].
Tensor nearest_loops(const Tensor& x, const InterpolateOptions& o) {
  const Shape& xs = x.shape();
  const std::vector<std::int64_t> out = output_size(x, o);
  Shape ys{xs[0], xs[1]};
  ys.insert(ys.end(), out.begin(), out.end());
  const std::vector<double> xv = values(x);
  std::vector<double> y(static_cast<std::size_t>(numel_of(ys)));
  for (std::int64_t i = 0; i < numel_of(ys); ++i) {
    std::vector<std::int64_t> index(ys.size());
    for (std::int64_t d = static_cast<std::int64_t>(ys.size()) - 1, rest = i; d >= 0; --d) {
      index[d] = rest % ys[d];
      rest /= ys[d];
    }
    for (std::size_t d = 2; d < ys.size(); ++d) index[d] = nearest_source(index[d], xs[d], ys[d], factor_of(o, d - 2));
    y[i] = xv[offset_of(xs, index)];
  }
  return make(ys, y);
}

// PyTorch's linear source coordinate of output o: o (in - 1) / (out - 1) with
// align_corners, else max(0, (o + 0.5) scale - 0.5) with scale 1 / factor or in / out.
double linear_source(std::int64_t o, std::int64_t in, std::int64_t out, bool align, double factor) {
  if (align) return out > 1 ? static_cast<double>(o) * static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0;
  const double scale = factor > 0 ? 1.0 / factor : static_cast<double>(in) / static_cast<double>(out);
  return std::max(0.0, (static_cast<double>(o) + 0.5) * scale - 0.5);
}

// Bilinear: each output blends the 4 inputs around its source point.
Tensor bilinear_loops(const Tensor& x, const InterpolateOptions& o) {
  const Shape& xs = x.shape();
  const std::vector<std::int64_t> out = output_size(x, o);
  const bool align = o.align_corners.value_or(false);
  const std::int64_t h = xs[2], w = xs[3];
  const std::vector<double> xv = values(x);
  std::vector<double> y;
  for (std::int64_t b = 0; b < xs[0] * xs[1]; ++b)
    for (std::int64_t i = 0; i < out[0]; ++i)
      for (std::int64_t j = 0; j < out[1]; ++j) {
        const double sr = linear_source(i, h, out[0], align, factor_of(o, 0));
        const double sc = linear_source(j, w, out[1], align, factor_of(o, 1));
        const auto r0 = static_cast<std::int64_t>(sr), c0 = static_cast<std::int64_t>(sc);
        const std::int64_t r1 = std::min(r0 + 1, h - 1), c1 = std::min(c0 + 1, w - 1);
        const double lr = sr - static_cast<double>(r0), lc = sc - static_cast<double>(c0);
        auto at = [&](std::int64_t r, std::int64_t c) { return xv[(b * h + r) * w + c]; };
        y.push_back((1 - lr) * ((1 - lc) * at(r0, c0) + lc * at(r0, c1)) + lr * ((1 - lc) * at(r1, c0) + lc * at(r1, c1)));
      }
  return make({xs[0], xs[1], out[0], out[1]}, y);
}

void add_interpolate(const InterpolateOptions& o, std::function<std::vector<OpSample>()> samples) {
  op_registry().push_back(
      {.name = "interpolate",
       .fn = [o](const TensorList& in) { return TensorList{interpolate(in[0], o)}; },
       .reference = [o](const TensorList& in) {
         return TensorList{o.mode == InterpolateMode::Bilinear ? bilinear_loops(in[0].detach(), o)
                                                               : nearest_loops(in[0].detach(), o)};
       },
       .samples = std::move(samples)});
}

// ---- samples ----

const bool registered = [] {
  add_max_pool({.kernel = {2, 2}, .stride = {2, 2}}, [] {
    return std::vector<OpSample>{
        distinct("2x2, batch of 2", {2, 2, 4, 4}, 1),
        distinct("channels-last input", {1, 4, 4, 3}, 2, channels_last_2d),
        distinct("transposed, last column unused", {1, 2, 5, 4}, 3, transposed_hw),
        distinct("unbatched (C, H, W)", {2, 4, 6}, 4),
        distinct("zero-size batch", {0, 2, 4, 4}, 5),
    };
  });
  add_max_pool({.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}, [] {
    return std::vector<OpSample>{distinct("3x3, stride 2, padding 1", {1, 2, 5, 5}, 11),
                                 distinct("even size", {2, 1, 6, 6}, 12)};
  });
  add_max_pool({.kernel = {2, 2}, .stride = {1, 1}, .dilation = {2, 2}}, [] {
    return std::vector<OpSample>{distinct("dilation 2", {1, 1, 5, 5}, 21), distinct("4x5", {1, 2, 4, 5}, 22)};
  });
  add_max_pool({.kernel = {2, 2}, .stride = {2, 2}, .ceil = true}, [] {
    return std::vector<OpSample>{distinct("ceil_mode, partial last window", {1, 1, 5, 5}, 31),
                                 distinct("ceil_mode, 5x4", {1, 2, 5, 4}, 32)};
  });
  add_max_pool({.kernel = {2, 2}, .stride = {2, 2}, .padding = {1, 1}, .ceil = true}, [] {
    return std::vector<OpSample>{distinct("ceil_mode drops a window starting in the right padding", {1, 1, 5, 5}, 41),
                                 distinct("ceil_mode keeps one ending in it", {1, 2, 6, 6}, 42)};
  });
  add_max_pool({.kernel = {2, 3}, .stride = {1, 2}, .padding = {1, 1}, .dilation = {1, 2}}, [] {
    return std::vector<OpSample>{distinct("kernel (2, 3), stride (1, 2), dilation (1, 2)", {1, 2, 4, 7}, 51)};
  });
  add_max_pool({.kernel = {3, 3}, .stride = {3, 3}, .padding = {1, 1}, .dilation = {2, 2}, .ceil = true}, [] {
    return std::vector<OpSample>{distinct("ceil_mode window past the right padding", {1, 1, 7, 7}, 61)};
  });

  add_avg_pool2d({.kernel = {2, 2, 0}, .stride = {2, 2, 0}}, [] {
    return std::vector<OpSample>{
        random("2x2, batch of 2", {2, 2, 4, 4}, 1),
        random("channels-last input", {1, 4, 4, 3}, 2, channels_last_2d),
        random("expanded input", {1, 2, 1, 4}, 3,
               [](const TensorList& l) { return TensorList{l[0].expand({2, 2, 4, 4})}; }),
        random("unbatched (C, H, W)", {2, 4, 6}, 4),
        random("zero-size batch", {0, 2, 4, 4}, 5),
    };
  });
  add_avg_pool2d({.kernel = {3, 3, 0}, .stride = {2, 2, 0}, .padding = {1, 1, 0}}, [] {
    return std::vector<OpSample>{random("3x3, stride 2, padding 1, count_include_pad", {1, 2, 5, 5}, 11),
                                 random("6x4", {2, 1, 6, 4}, 12)};
  });
  add_avg_pool2d({.kernel = {3, 3, 0}, .stride = {2, 2, 0}, .padding = {1, 1, 0}, .count_include_pad = false}, [] {
    return std::vector<OpSample>{random("3x3, stride 2, padding 1, without pad", {1, 2, 5, 5}, 21),
                                 random("transposed", {1, 1, 6, 4}, 22, transposed_hw)};
  });
  add_avg_pool2d({.kernel = {3, 3, 0}, .stride = {2, 2, 0}, .padding = {1, 1, 0}, .ceil = true}, [] {
    return std::vector<OpSample>{random("ceil_mode, count_include_pad", {1, 1, 6, 6}, 31),
                                 random("ceil_mode, 5x7", {1, 2, 5, 7}, 32)};
  });
  add_avg_pool2d(
      {.kernel = {3, 3, 0}, .stride = {2, 2, 0}, .padding = {1, 1, 0}, .ceil = true, .count_include_pad = false}, [] {
        return std::vector<OpSample>{random("ceil_mode, without pad", {1, 1, 6, 6}, 41)};
      });
  add_avg_pool2d({.kernel = {2, 2, 0}, .stride = {1, 1, 0}, .divisor_override = 3}, [] {
    return std::vector<OpSample>{random("divisor_override 3", {1, 2, 3, 4}, 51)};
  });
  add_avg_pool2d(
      {.kernel = {2, 3, 0}, .stride = {2, 1, 0}, .padding = {1, 1, 0}, .ceil = true, .count_include_pad = false}, [] {
        return std::vector<OpSample>{random("kernel (2, 3), stride (2, 1), ceil_mode", {1, 1, 5, 5}, 61)};
      });

  add_avg_pool3d({.kernel = {2, 2, 2}, .stride = {2, 2, 2}}, [] {
    return std::vector<OpSample>{
        random("2x2x2", {1, 2, 4, 4, 4}, 1),
        random("channels-last input", {1, 4, 2, 4, 2}, 2, channels_last_3d),
        random("unbatched (C, D, H, W)", {2, 2, 4, 4}, 3),
        random("zero-size batch", {0, 2, 4, 4, 4}, 4),
    };
  });
  add_avg_pool3d(
      {.kernel = {3, 3, 3}, .stride = {2, 2, 2}, .padding = {1, 1, 1}, .ceil = true, .count_include_pad = false}, [] {
        return std::vector<OpSample>{random("3x3x3, stride 2, padding 1, ceil_mode, without pad", {1, 1, 4, 5, 4}, 11)};
      });
  add_avg_pool3d({.kernel = {2, 3, 2}, .stride = {1, 2, 2}, .padding = {1, 1, 0}, .divisor_override = 5}, [] {
    return std::vector<OpSample>{random("divisor_override 5, mixed kernel", {1, 1, 3, 4, 4}, 21)};
  });

  add_adaptive(3, 4, [] {
    return std::vector<OpSample>{
        random("5x7 -> 3x4, batch of 2", {2, 2, 5, 7}, 1),
        random("channels-last input", {1, 5, 7, 2}, 2, channels_last_2d),
        random("unbatched (C, H, W)", {2, 5, 7}, 3),
        random("zero-size batch", {0, 2, 5, 7}, 4),
    };
  });
  add_adaptive(2, 2, [] { return std::vector<OpSample>{random("4x4 -> 2x2", {1, 2, 4, 4}, 11)}; });
  add_adaptive(5, 5, [] { return std::vector<OpSample>{random("3x3 -> 5x5 (upsampling)", {1, 1, 3, 3}, 21)}; });
  add_adaptive(1, 1, [] { return std::vector<OpSample>{random("global", {2, 3, 4, 4}, 31, transposed_hw)}; });

  add_interpolate({.size = {6, 7}}, [] {
    return std::vector<OpSample>{
        random("nearest 4x4 -> 6x7", {1, 2, 4, 4}, 1),
        random("channels-last input", {1, 4, 4, 2}, 2, channels_last_2d),
        random("zero-size batch", {0, 2, 4, 4}, 3),
    };
  });
  add_interpolate({.scale_factor = {2}}, [] {
    return std::vector<OpSample>{random("nearest scale 2", {1, 1, 3, 3}, 11)};
  });
  add_interpolate({.scale_factor = {1.5, 0.6}}, [] {
    return std::vector<OpSample>{random("nearest scales (1.5, 0.6)", {1, 2, 3, 5}, 21)};
  });
  add_interpolate({.scale_factor = {1.3}}, [] {
    return std::vector<OpSample>{random("nearest scale 1.3 keeps size 3", {1, 1, 3, 4}, 31)};
  });
  add_interpolate({.size = {5}}, [] { return std::vector<OpSample>{random("nearest 1-d", {2, 2, 3}, 41)}; });
  add_interpolate({.size = {2, 3, 4}}, [] {
    return std::vector<OpSample>{random("nearest 3-d", {1, 1, 3, 2, 2}, 51)};
  });
  add_interpolate({.size = {5, 7}, .mode = InterpolateMode::Bilinear}, [] {
    return std::vector<OpSample>{
        random("bilinear 3x4 -> 5x7", {1, 2, 3, 4}, 61),
        random("channels-last input", {1, 3, 4, 2}, 62, channels_last_2d),
        random("zero-size batch", {0, 1, 3, 4}, 63),
    };
  });
  add_interpolate({.size = {5, 7}, .mode = InterpolateMode::Bilinear, .align_corners = true}, [] {
    return std::vector<OpSample>{random("bilinear align_corners", {2, 1, 3, 4}, 71),
                                 random("transposed", {1, 1, 4, 3}, 72, transposed_hw)};
  });
  add_interpolate({.size = {1, 3}, .mode = InterpolateMode::Bilinear, .align_corners = true}, [] {
    return std::vector<OpSample>{random("bilinear align_corners to one row", {1, 1, 3, 5}, 81)};
  });
  add_interpolate({.size = {2, 3}, .mode = InterpolateMode::Bilinear}, [] {
    return std::vector<OpSample>{random("bilinear downsampling 5x6 -> 2x3", {1, 1, 5, 6}, 91)};
  });
  add_interpolate({.scale_factor = {1.7}, .mode = InterpolateMode::Bilinear}, [] {
    return std::vector<OpSample>{random("bilinear scale 1.7", {1, 1, 3, 4}, 101)};
  });
  add_interpolate({.scale_factor = {0.5}, .mode = InterpolateMode::Bilinear, .align_corners = false}, [] {
    return std::vector<OpSample>{random("bilinear scale 0.5", {1, 2, 4, 6}, 111)};
  });
  return true;
}();

// ---- errors ----

TEST(Pool, ShapeErrors) {
  const Tensor x = zeros({1, 2, 5, 5});
  expect_error<ShapeError>([&] { max_pool2d(x, 3, 1, 2); }, "max_pool2d", {"padding", "[2, 2]", "[3, 3]"});
  expect_error<ShapeError>([&] { max_pool2d(x, 6); }, "max_pool2d", {"[1, 2, 5, 5]", "[6, 6]"});
  expect_error<ShapeError>([&] { max_pool2d(x, 3, 1, 0, 3); }, "max_pool2d", {"[1, 2, 5, 5]", "dilation"});
  expect_error<ShapeError>([&] { max_pool2d(x, 0); }, "max_pool2d", {"kernel_size", "[0, 0]"});
  expect_error<ShapeError>([&] { max_pool2d(x, 2, {2, 0}); }, "max_pool2d", {"stride", "[2, 0]"});
  expect_error<ShapeError>([&] { max_pool2d(zeros({5, 5}), 2); }, "max_pool2d", {"[5, 5]"});
  expect_error<ShapeError>([&] { max_pool2d_with_indices(zeros({1, 0, 4, 4}), 2); }, "max_pool2d_with_indices",
                           {"[1, 0, 4, 4]"});
  expect_error<ShapeError>([&] { max_pool2d(zeros({1, 1, 2, 2}), 2, 1, 1, 3); }, "max_pool2d",
                           {"entirely in the padding", "[1, 1, 2, 2]"});
  expect_error<ShapeError>([&] { avg_pool2d(x, 2, 2, 2); }, "avg_pool2d", {"padding", "[2, 2]"});
  expect_error<ShapeError>([&] { avg_pool2d(zeros({1, 2, 3, 5, 5}), 2); }, "avg_pool2d", {"[1, 2, 3, 5, 5]"});
  expect_error<ShapeError>([&] { avg_pool3d(zeros({2, 5, 5}), 2); }, "avg_pool3d", {"[2, 5, 5]"});
  expect_error<ShapeError>([&] { avg_pool3d(zeros({1, 1, 2, 5, 5}), 3); }, "avg_pool3d", {"[1, 1, 2, 5, 5]"});
  expect_error<Error>([&] { avg_pool2d(x, 2, {}, 0, false, true, 0); }, "avg_pool2d", {"divisor_override"});
}

TEST(Pool, AdaptiveAndInterpolateErrors) {
  const Tensor x = zeros({1, 2, 5, 5});
  expect_error<ShapeError>([&] { adaptive_avg_pool2d(x, {-1, 2}); }, "adaptive_avg_pool2d", {"output_size", "[-1, 2]"});
  expect_error<ShapeError>([&] { adaptive_avg_pool2d(x, {}); }, "adaptive_avg_pool2d", {"output_size"});
  expect_error<ShapeError>([&] { adaptive_avg_pool2d(zeros({5, 5}), 2); }, "adaptive_avg_pool2d", {"[5, 5]"});
  expect_error<DTypeError>([&] { adaptive_avg_pool2d(x.to(kInt64), 2); }, "adaptive_avg_pool2d", {"int64"});
  expect_error<Error>([&] { interpolate(x, {}); }, "interpolate", {"size", "scale_factor"});
  expect_error<Error>([&] { interpolate(x, {.size = {4, 4}, .scale_factor = {2}}); }, "interpolate",
                      {"size", "scale_factor"});
  expect_error<ShapeError>([&] { interpolate(x, {.size = {4, 4, 4}}); }, "interpolate", {"size", "[1, 2, 5, 5]"});
  expect_error<ShapeError>([&] { interpolate(x, {.size = {0, 4}}); }, "interpolate", {"size", "[0, 4]"});
  expect_error<ShapeError>([&] { interpolate(x, {.scale_factor = {0.1}}); }, "interpolate", {"scale_factor", "0.1"});
  expect_error<ShapeError>([&] { interpolate(zeros({2, 5}), {.size = {4}}); }, "interpolate", {"[2, 5]"});
  expect_error<Error>([&] { interpolate(x, {.size = {4, 4}, .align_corners = true}); }, "interpolate",
                      {"align_corners"});
  expect_error<ShapeError>([&] { interpolate(zeros({1, 2, 5}), {.size = {4}, .mode = InterpolateMode::Bilinear}); },
                           "interpolate", {"bilinear", "[1, 2, 5]"});
  expect_error<DTypeError>(
      [&] { interpolate(x.to(kInt32), {.size = {4, 4}, .mode = InterpolateMode::Bilinear}); }, "interpolate",
      {"int32"});
}

TEST(Pool, DTypeErrors) {
  const Tensor x = zeros({1, 2, 4, 4});
  expect_error<DTypeError>([&] { max_pool2d(x.to(kBool), 2); }, "max_pool2d", {"bool"});
  expect_error<DTypeError>([&] { avg_pool2d(x.to(kInt64), 2); }, "avg_pool2d", {"int64"});
  expect_error<DTypeError>([&] { avg_pool3d(x.unsqueeze(0).to(kInt32), 2); }, "avg_pool3d", {"int32"});
}

// ---- dtypes ----

TEST(Pool, MaxPoolOfIntegersNeverPicksThePadding) {
  for (DataType t : {kInt64, kInt32, kInt8, kUInt8}) {
    const bool is_unsigned = t == kUInt8;
    std::vector<double> v;
    for (int i = 0; i < 16; ++i) v.push_back(is_unsigned ? i : -100 + 3 * i);
    const Tensor x = make({1, 1, 4, 4}, v).to(t);
    auto [values, indices] = max_pool2d_with_indices(x, 3, 2, 1);
    EXPECT_EQ(values.dtype(), t);
    EXPECT_EQ(indices.dtype(), kInt64);
    const TensorList ref = max_pool2d_loops(make({1, 1, 4, 4}, v), {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}});
    EXPECT_EQ(test::values(values), test::values(ref[0])) << t;
    EXPECT_EQ(test::values(indices), test::values(ref[1])) << t;
  }
}

TEST(Pool, HalfPrecisionAndFloat32) {
  const Tensor x = sample({2, 3, 6, 6});
  for (DataType t : {kFloat32, kFloat16, kBFloat16}) {
    const Tensor xt = x.to(t), x64 = xt.to(kFloat64);
    expect_near_in(max_pool2d(xt, 2), max_pool2d_loops(x64, {.kernel = {2, 2}, .stride = {2, 2}})[0], t);
    expect_near_in(avg_pool2d(xt, 3, 2, 1),
                   avg_pool3d_loops(x64.unsqueeze(2), {.kernel = {1, 3, 3}, .stride = {1, 2, 2}, .padding = {0, 1, 1}})
                       .squeeze(2),
                   t);
    expect_near_in(adaptive_avg_pool2d(xt, {4, 5}), adaptive_loops(x64, 4, 5), t);
    const InterpolateOptions bilinear{.size = {9, 4}, .mode = InterpolateMode::Bilinear};
    expect_near_in(interpolate(xt, bilinear), bilinear_loops(x64, bilinear), t);
  }
}

TEST(Pool, NearestInterpolationOfIntegers) {
  const Tensor x = arange(12, {.dtype = kInt64}).view({1, 1, 3, 4});
  const Tensor y = interpolate(x, {.scale_factor = {2}});
  EXPECT_EQ(y.dtype(), kInt64);
  EXPECT_EQ(values(y), values(nearest_loops(x.to(kFloat64), {.scale_factor = {2}})));
}

TEST(Pool, MaxPoolPropagatesNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = make({1, 1, 2, 4}, {1, nan, 5, 2, 3, 4, 0, nan});
  auto [values, indices] = max_pool2d_with_indices(x, 2);
  const std::vector<double> v = test::values(values);
  EXPECT_TRUE(std::isnan(v[0]) && std::isnan(v[1]));
  EXPECT_EQ(test::values(indices), (std::vector<double>{1, 7}));
}

TEST(Pool, MaxPoolGradientGoesToTheFirstMaximum) {
  // Ties: every window of a constant input has its maximum at its first element.
  const Tensor x = ones({1, 1, 4, 4}, {.dtype = kFloat64}).requires_grad_();
  auto [values, indices] = max_pool2d_with_indices(x, 2, 1);
  sum(values).backward();
  EXPECT_EQ(test::values(indices), (std::vector<double>{0, 1, 2, 4, 5, 6, 8, 9, 10}));
  EXPECT_EQ(test::values(x.grad()), (std::vector<double>{1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0, 0, 0, 0, 0}));
}

}  // namespace
}  // namespace infini::test::pool_ops_test
