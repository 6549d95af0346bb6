// Resampling of the spatial dims: adaptive average pooling and bilinear interpolation as
// A_h @ x @ A_w^T (1-d: x @ A^T) with small (out, in) weight matrices, nearest
// interpolation as an index_select of source rows and columns.
module;
#include <cmath>
#include <cstddef>
#include <cstdint>
module infini.autograd;
import infini.std;

namespace infini {
namespace {

using Ints = std::vector<std::int64_t>;

// Row o of an (out, in) resampling matrix: weight[i] for the input entries i it reads.
using Matrix = std::vector<std::vector<double>>;

// Output o averages inputs [floor(o in / out), ceil((o + 1) in / out)).
Matrix averaging(std::int64_t in, std::int64_t out) {
  Matrix a(static_cast<std::size_t>(out), std::vector<double>(static_cast<std::size_t>(in), 0.0));
  for (std::int64_t o = 0; o < out; ++o) {
    const std::int64_t start = o * in / out, end = ((o + 1) * in + out - 1) / out;
    for (std::int64_t i = start; i < end; ++i) a[o][i] = 1.0 / static_cast<double>(end - start);
  }
  return a;
}

// PyTorch's linear interpolation weights (area_pixel_compute_source_index): output o reads
// inputs floor(src) and the next one (clamped) at src = o * scale (align_corners) or
// max(0, (o + 0.5) * scale - 0.5). scale_factor <= 0 means none was given.
Matrix linear_weights(std::int64_t in, std::int64_t out, bool align_corners, double scale_factor) {
  double scale;
  if (align_corners) scale = out > 1 ? static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0.0;
  else scale = scale_factor > 0 ? 1.0 / scale_factor : static_cast<double>(in) / static_cast<double>(out);
  Matrix a(static_cast<std::size_t>(out), std::vector<double>(static_cast<std::size_t>(in), 0.0));
  for (std::int64_t o = 0; o < out; ++o) {
    const double o_d = static_cast<double>(o);
    const double src = align_corners ? scale * o_d : std::max(scale * (o_d + 0.5) - 0.5, 0.0);
    const auto i0 = static_cast<std::int64_t>(src);
    const std::int64_t i1 = i0 < in - 1 ? i0 + 1 : i0;
    const double lambda = src - static_cast<double>(i0);
    a[o][i0] += 1.0 - lambda;
    a[o][i1] += lambda;
  }
  return a;
}

Tensor to_tensor(const Matrix& a, std::int64_t in, const Tensor& like) {
  std::vector<double> flat;
  for (const auto& row : a) flat.insert(flat.end(), row.begin(), row.end());
  return from_vector(flat, {static_cast<std::int64_t>(a.size()), in}, {.dtype = like.dtype(), .device = like.device()});
}

// a_h (oH, H) @ x (N, C, H, W) @ a_w (oW, W)^T, x floating point (half precision in float32).
Tensor resample(const Tensor& x, const Matrix& a_h, const Matrix& a_w) {
  const Tensor xc = spatial::upcast(x).contiguous();
  const Tensor y = matmul(matmul(to_tensor(a_h, x.size(2), xc), xc), to_tensor(a_w, x.size(3), xc).t());
  return spatial::downcast(y, x.dtype());
}

// x checked for adaptive average pooling (floating point, output_size given and >= 0) and
// batched (N, C, *spatial) with `dims` spatial dims.
Tensor adaptive_input(std::string_view op, const Tensor& x, bool has_output_size, const Ints& out, std::size_t dims,
                      bool& unbatched) {
  if (!is_floating_point(x.dtype())) throw DTypeError(op, concat("expected a floating-point input, got ", x.dtype()));
  if (!has_output_size) throw ShapeError(op, "output_size must be given");
  spatial::check_at_least(op, "output_size", out, 0);
  return spatial::batched(op, x, dims, unbatched);
}

// PyTorch's legacy "nearest" source index of output o (nearest_idx), in float arithmetic.
Tensor nearest_index(std::int64_t in, std::int64_t out, double scale_factor, Device device) {
  Ints index;
  const float scale = scale_factor > 0 ? static_cast<float>(1.0 / scale_factor)
                                       : static_cast<float>(in) / static_cast<float>(out);
  for (std::int64_t o = 0; o < out; ++o) {
    if (out == in) index.push_back(o);
    else if (out == 2 * in) index.push_back(o >> 1);
    else index.push_back(std::min(static_cast<std::int64_t>(std::floor(static_cast<float>(o) * scale)), in - 1));
  }
  return from_vector(index, {}, {.dtype = kInt64, .device = device});
}

// The option as one value per spatial dim (a single value applies to all).
template <class T>
std::vector<T> per_dim(std::string_view what, const std::vector<T>& values, std::size_t dims, const Tensor& x) {
  if (values.size() == 1) return std::vector<T>(dims, values[0]);
  if (values.size() != dims)
    throw ShapeError("interpolate", concat(what, " needs 1 or ", dims, " values for an input of shape ", x.shape(),
                                           ", got ", values.size()));
  return values;
}

}  // namespace

Tensor adaptive_avg_pool2d(const Tensor& x, ExpandingArray<2> output_size) {
  bool unbatched = false;
  const Tensor xb = adaptive_input("adaptive_avg_pool2d", x, output_size.has_value(), output_size.value_or(0), 2,
                                   unbatched);
  const Ints out = output_size.value_or(0);
  const Tensor y = resample(xb, averaging(xb.size(2), out[0]), averaging(xb.size(3), out[1]));
  return unbatched ? y.squeeze(0) : y;
}

// x (N, C, L) @ A (oL, L)^T.
Tensor adaptive_avg_pool1d(const Tensor& x, ExpandingArray<1> output_size) {
  bool unbatched = false;
  const Tensor xb = adaptive_input("adaptive_avg_pool1d", x, output_size.has_value(), output_size.value_or(0), 1,
                                   unbatched);
  const Tensor xc = spatial::upcast(xb).contiguous();
  const std::int64_t in = xb.size(2);
  const Tensor y = matmul(xc, to_tensor(averaging(in, output_size.value_or(0)[0]), in, xc).t());
  return spatial::downcast(unbatched ? y.squeeze(0) : y, x.dtype());
}

Tensor interpolate(const Tensor& x, const InterpolateOptions& options) {
  constexpr std::string_view op = "interpolate";
  if (x.dim() < 3 || x.dim() > 5)
    throw ShapeError(op, concat("expected a 3-d, 4-d or 5-d input (N, C, *spatial), got shape ", x.shape()));
  const auto dims = static_cast<std::size_t>(x.dim() - 2);
  for (std::int64_t d = 1; d < x.dim(); ++d)
    if (x.size(d) == 0)
      throw ShapeError(op, concat("expected non-empty channel and spatial dims, got input of shape ", x.shape()));
  if (options.size.empty() == options.scale_factor.empty())
    throw Error(op, "exactly one of size and scale_factor must be given");
  const bool bilinear = options.mode == InterpolateMode::Bilinear;
  if (!bilinear && options.align_corners)
    throw Error(op, "align_corners can only be set with the bilinear mode");
  Ints out;
  std::vector<double> scales(dims, 0.0);  // 0: no scale_factor
  if (!options.size.empty()) {
    out = per_dim("size", options.size, dims, x);
    spatial::check_at_least(op, "size", out, 1);
  } else {
    scales = per_dim("scale_factor", options.scale_factor, dims, x);
    for (std::size_t d = 0; d < dims; ++d) {
      const double size = std::floor(static_cast<double>(x.size(2 + static_cast<std::int64_t>(d))) * scales[d]);
      if (!(scales[d] > 0) || !(size >= 1) || !std::isfinite(size))
        throw ShapeError(op, concat("scale_factor ", scales[d], " gives an output size of ", size,
                                    " for input of shape ", x.shape(), " (expected >= 1)"));
      out.push_back(static_cast<std::int64_t>(size));
    }
  }
  if (bilinear) {
    if (x.dim() != 4)
      throw ShapeError(op, concat("bilinear mode needs a 4-d input (N, C, H, W), got shape ", x.shape()));
    if (!is_floating_point(x.dtype()))
      throw DTypeError(op, concat("bilinear mode needs a floating-point input, got ", x.dtype()));
    const bool align = options.align_corners.value_or(false);
    return resample(x, linear_weights(x.size(2), out[0], align, scales[0]),
                    linear_weights(x.size(3), out[1], align, scales[1]));
  }
  Tensor y = x;
  for (std::size_t d = 0; d < dims; ++d) {
    const std::int64_t dim = 2 + static_cast<std::int64_t>(d);
    y = index_select(y, dim, nearest_index(x.size(dim), out[d], scales[d], x.device()));
  }
  return y;
}

}  // namespace infini
