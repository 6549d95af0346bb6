// conv1d/2d/3d and conv_transpose1d/2d/3d as compositions of differentiable ops (see conv.cppm),
// and the spatial:: helpers the family shares (batching, checks, unfold / fold).
module;
#include <cstddef>
#include <cstdint>
module infini.autograd;
import infini.std;

namespace infini {
namespace spatial {

Tensor upcast(const Tensor& x) { return x.dtype() == kFloat16 || x.dtype() == kBFloat16 ? x.to(kFloat32) : x; }
Tensor downcast(const Tensor& y, DataType dtype) { return y.dtype() == dtype ? y : y.to(dtype); }

Tensor unfold(const Tensor& x, const WindowGeometry& g, const Shape& shape) {
  Tensor columns = kernels::im2col(x, g).view(shape);
  record("unfold", {x}, {columns}, {}, [g, in_shape = x.shape()](const TensorList& grad, const TensorList&) {
    return TensorList{grad[0].defined() ? fold(grad[0], g, in_shape) : Tensor()};
  });
  return columns;
}

Tensor fold(const Tensor& columns, const WindowGeometry& g, const Shape& in_shape) {
  Tensor x = kernels::col2im(columns, g, in_shape[0], in_shape[1], Shape(in_shape.begin() + 2, in_shape.end()));
  record("fold", {columns}, {x}, {}, [g, shape = columns.shape()](const TensorList& grad, const TensorList&) {
    return TensorList{grad[0].defined() ? unfold(grad[0], g, shape) : Tensor()};
  });
  return x;
}

Tensor batched(std::string_view op, const Tensor& x, std::size_t dims, bool& unbatched) {
  const auto rank = static_cast<std::int64_t>(dims);
  if (x.dim() != rank + 1 && x.dim() != rank + 2)
    throw ShapeError(op, concat("expected a ", rank + 1, "-d (unbatched) or ", rank + 2, "-d (batched) input, got shape ",
                                x.shape()));
  unbatched = x.dim() == rank + 1;
  const Tensor xb = unbatched ? x.unsqueeze(0) : x;
  for (std::int64_t d = 1; d < xb.dim(); ++d)
    if (xb.size(d) == 0)
      throw ShapeError(op, concat("expected non-empty channel and spatial dims, got input of shape ", x.shape()));
  return xb;
}

void check_at_least(std::string_view op, std::string_view what, const std::vector<std::int64_t>& values,
                    std::int64_t min) {
  for (std::int64_t v : values)
    if (v < min) throw ShapeError(op, concat(what, " must be >= ", min, ", got ", values));
}

}  // namespace spatial

namespace {

using Ints = std::vector<std::int64_t>;

std::int64_t product(const Ints& v) { return std::accumulate(v.begin(), v.end(), std::int64_t{1}, std::multiplies<>()); }

void check_operands(std::string_view op, const Tensor& x, const Tensor& weight, const Tensor& bias,
                    std::size_t dims) {
  if (!is_floating_point(x.dtype()))
    throw DTypeError(op, concat("expected a floating-point input, got ", x.dtype()));
  if (weight.dtype() != x.dtype() || (bias.defined() && bias.dtype() != x.dtype()))
    throw DTypeError(op, concat("input (", x.dtype(), "), weight (", weight.dtype(), ")",
                                bias.defined() ? concat(" and bias (", bias.dtype(), ")") : "",
                                " must have the same dtype"));
  if (weight.device() != x.device() || (bias.defined() && bias.device() != x.device()))
    throw DeviceError(op, concat("input (", x.device(), "), weight (", weight.device(), ")",
                                 bias.defined() ? concat(" and bias (", bias.device(), ")") : "",
                                 " must be on one device"));
  if (weight.dim() != static_cast<std::int64_t>(dims) + 2)
    throw ShapeError(op, concat("expected a ", dims + 2, "-d weight, got shape ", weight.shape()));
  for (std::int64_t d = 2; d < weight.dim(); ++d)
    if (weight.size(d) == 0) throw ShapeError(op, concat("expected a non-empty kernel, got weight of shape ",
                                                         weight.shape()));
}

void check_bias(std::string_view op, const Tensor& bias, std::int64_t channels) {
  if (bias.defined() && (bias.dim() != 1 || bias.size(0) != channels))
    throw ShapeError(op, concat("expected a bias of shape [", channels, "] (one per output channel), got ", bias.shape()));
}

// y (N, C_out, *out) = conv of xb (N, C_in, *in), batched, zero-padded by before[d] and
// after[d] along spatial dim d, with weight (C_out, C_in / groups, *kernel): the windows as
// columns (N, g, C_in / g * K, L) times the weight as (g, C_out / g, C_in / g * K).
// Operands of one dtype (float32 or float64, checked by check_operands); the geometry is
// checked here, errors name op.
Tensor convolve(std::string_view op, const Tensor& xb, const Tensor& weight, const Tensor& bias, const Ints& stride,
                const Ints& before, const Ints& after, const Ints& dilation, std::int64_t groups) {
  const std::size_t dims = stride.size();
  const std::int64_t n = xb.size(0), c_in = xb.size(1), c_out = weight.size(0);
  if (groups < 1) throw ShapeError(op, concat("groups must be positive, got ", groups));
  if (c_out % groups != 0)
    throw ShapeError(op, concat("groups=", groups, " must divide the ", c_out,
                                " output channels (dim 0 of weight of shape ", weight.shape(), ")"));
  if (weight.size(1) * groups != c_in)
    throw ShapeError(op, concat("given groups=", groups, ", weight of shape ", weight.shape(), " expects ",
                                weight.size(1) * groups, " input channels, got input of shape ", xb.shape(),
                                " with ", c_in));
  check_bias(op, bias, c_out);
  spatial::check_at_least(op, "stride", stride, 1);
  spatial::check_at_least(op, "padding", before, 0);
  spatial::check_at_least(op, "dilation", dilation, 1);
  WindowGeometry g{.kernel = {}, .stride = stride, .padding = before, .dilation = dilation, .out = {}};
  for (std::size_t d = 0; d < dims; ++d) {
    const std::int64_t k = weight.size(2 + static_cast<std::int64_t>(d));
    const std::int64_t padded = xb.size(2 + static_cast<std::int64_t>(d)) + before[d] + after[d];
    const std::int64_t span = dilation[d] * (k - 1) + 1;
    if (padded < span)
      throw ShapeError(op, concat("the padded input of shape ", xb.shape(), " (padding ", before,
                                  ") is smaller than the kernel of weight ", weight.shape(), " (dilation ", dilation,
                                  ") along spatial dim ", d, ": ", padded, " < ", span));
    g.kernel.push_back(k);
    g.out.push_back((padded - span) / stride[d] + 1);
  }
  const std::int64_t per_group = c_in / groups * product(g.kernel), length = product(g.out);
  const Tensor columns = spatial::unfold(xb, g, {n, groups, per_group, length});
  const Tensor w = weight.reshape({groups, c_out / groups, per_group});
  Shape y_shape{n, c_out};
  y_shape.insert(y_shape.end(), g.out.begin(), g.out.end());
  Tensor y = matmul(w, columns).view(y_shape);  // (N, g, C_out / g, L) -> (N, C_out, *out)
  if (bias.defined()) {
    Shape channel(dims + 1, 1);  // (C_out, 1, ...)
    channel[0] = c_out;
    y = add(y, bias.view(channel));
  }
  return y;
}

Tensor convolution(std::string_view op, const Tensor& x, const Tensor& weight, const Tensor& bias, const Ints& stride,
                   const Ints& padding, const Ints& dilation, std::int64_t groups) {
  if (const AutocastRegion cast(CastPolicy::kLowerPrecision, x); cast)
    return convolution(op, cast(x), cast(weight), cast(bias), stride, padding, dilation, groups);
  const std::size_t dims = stride.size();
  check_operands(op, x, weight, bias, dims);
  bool unbatched = false;
  const Tensor xb = spatial::batched(op, x, dims, unbatched);
  const Tensor y = convolve(op, spatial::upcast(xb), spatial::upcast(weight),
                            bias.defined() ? spatial::upcast(bias) : bias, stride, padding, padding, dilation, groups);
  return spatial::downcast(unbatched ? y.squeeze(0) : y, x.dtype());
}

// x with stride - 1 zeros inserted between neighbours along dim: size n -> (n - 1) stride + 1.
Tensor spread(const Tensor& x, std::int64_t dim, std::int64_t stride) {
  if (stride == 1) return x;
  const std::int64_t n = x.size(dim);
  Shape gap = x.shape();
  gap.insert(gap.begin() + dim + 1, stride - 1);
  gap[dim] = n;
  const Tensor zero = zeros(gap, {.dtype = x.dtype(), .device = x.device()});
  Shape merged = x.shape();
  merged[dim] = n * stride;
  return cat({x.unsqueeze(dim + 1), zero}, dim + 1).view(merged).narrow(dim, 0, (n - 1) * stride + 1);
}

// conv_transpose{1,2,3}d with stride.size() spatial dims: a stride-1 convolution of the
// spread input, zero-padded by dilation (k - 1) - padding before and that plus
// output_padding after (negative padding crops), with the kernel flipped along every
// spatial dim and its in/out channels swapped within each group: weight
// (C_in, C_out / g, *kernel) -> (C_out, C_in / g, *kernel).
Tensor transposed_convolution(std::string_view op, const Tensor& x, const Tensor& weight, const Tensor& bias,
                              const Ints& stride, const Ints& padding, const Ints& output_padding, std::int64_t groups,
                              const Ints& dilation) {
  if (const AutocastRegion cast(CastPolicy::kLowerPrecision, x); cast)
    return transposed_convolution(op, cast(x), cast(weight), cast(bias), stride, padding, output_padding, groups,
                                  dilation);
  const std::size_t dims = stride.size();
  check_operands(op, x, weight, bias, dims);
  bool unbatched = false;
  const Tensor xb = spatial::batched(op, x, dims, unbatched);
  spatial::check_at_least(op, "stride", stride, 1);
  spatial::check_at_least(op, "padding", padding, 0);
  spatial::check_at_least(op, "output_padding", output_padding, 0);
  spatial::check_at_least(op, "dilation", dilation, 1);
  const std::int64_t c_in = xb.size(1);
  if (groups < 1) throw ShapeError(op, concat("groups must be positive, got ", groups));
  if (weight.size(0) != c_in)
    throw ShapeError(op, concat("weight of shape ", weight.shape(), " expects ", weight.size(0),
                                " input channels, got input of shape ", xb.shape(), " with ", c_in));
  if (c_in % groups != 0)
    throw ShapeError(op, concat("groups=", groups, " must divide the ", c_in, " input channels"));
  const std::int64_t c_out = weight.size(1) * groups;
  check_bias(op, bias, c_out);
  Tensor spread_x = spatial::upcast(xb);
  Ints before, after;
  for (std::size_t d = 0; d < dims; ++d) {
    const auto dim = 2 + static_cast<std::int64_t>(d);
    const std::int64_t k = weight.size(dim), in = xb.size(dim);
    if (output_padding[d] >= std::max(stride[d], dilation[d]))
      throw ShapeError(op, concat("output_padding ", output_padding, " must be smaller than stride ", stride,
                                  " or dilation ", dilation, " along spatial dim ", d));
    const std::int64_t size = (in - 1) * stride[d] - 2 * padding[d] + dilation[d] * (k - 1) + output_padding[d] + 1;
    if (size < 1)
      throw ShapeError(op, concat("input of shape ", xb.shape(), " with weight ", weight.shape(), ", stride ", stride,
                                  ", padding ", padding, " gives an output size of ", size, " along spatial dim ", d));
    spread_x = spread(spread_x, dim, stride[d]);
    // In the padded dim [0, total) the spread input lies at [pad_before, pad_before + length);
    // the part of it inside is kept (a view), the rest of the dim is zero padding.
    const std::int64_t pad_before = dilation[d] * (k - 1) - padding[d], pad_after = pad_before + output_padding[d];
    const std::int64_t length = spread_x.size(dim), total = length + pad_before + pad_after;
    const std::int64_t first = std::clamp<std::int64_t>(pad_before, 0, total);
    const std::int64_t last = std::clamp<std::int64_t>(pad_before + length, first, total);
    spread_x = spread_x.narrow(dim, std::min(first - pad_before, length), last - first);
    before.push_back(first);
    after.push_back(total - last);
  }
  const Shape kernel(weight.shape().begin() + 2, weight.shape().end());
  Shape grouped{groups, c_in / groups, weight.size(1)}, swapped{c_out, c_in / groups};
  grouped.insert(grouped.end(), kernel.begin(), kernel.end());
  swapped.insert(swapped.end(), kernel.begin(), kernel.end());
  Ints spatial_dims;
  for (std::size_t d = 0; d < dims; ++d) spatial_dims.push_back(2 + static_cast<std::int64_t>(d));
  const Tensor w = flip(spatial::upcast(weight).reshape(grouped).transpose(1, 2).reshape(swapped), spatial_dims);
  const Tensor y = convolve(op, spread_x, w, bias.defined() ? spatial::upcast(bias) : bias, Ints(dims, 1), before,
                            after, dilation, groups);
  return spatial::downcast(unbatched ? y.squeeze(0) : y, x.dtype());
}

}  // namespace

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, ExpandingArray<1> stride,
              ExpandingArray<1> padding, ExpandingArray<1> dilation, std::int64_t groups) {
  return convolution("conv1d", x, weight, bias, stride.value_or(1), padding.value_or(0), dilation.value_or(1), groups);
}

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, ExpandingArray<2> stride,
              ExpandingArray<2> padding, ExpandingArray<2> dilation, std::int64_t groups) {
  return convolution("conv2d", x, weight, bias, stride.value_or(1), padding.value_or(0), dilation.value_or(1), groups);
}

Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias, ExpandingArray<3> stride,
              ExpandingArray<3> padding, ExpandingArray<3> dilation, std::int64_t groups) {
  return convolution("conv3d", x, weight, bias, stride.value_or(1), padding.value_or(0), dilation.value_or(1), groups);
}

Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor& bias, ExpandingArray<1> stride,
                        ExpandingArray<1> padding, ExpandingArray<1> output_padding, std::int64_t groups,
                        ExpandingArray<1> dilation) {
  return transposed_convolution("conv_transpose1d", x, weight, bias, stride.value_or(1), padding.value_or(0),
                                output_padding.value_or(0), groups, dilation.value_or(1));
}

Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias, ExpandingArray<2> stride,
                        ExpandingArray<2> padding, ExpandingArray<2> output_padding, std::int64_t groups,
                        ExpandingArray<2> dilation) {
  return transposed_convolution("conv_transpose2d", x, weight, bias, stride.value_or(1), padding.value_or(0),
                                output_padding.value_or(0), groups, dilation.value_or(1));
}

Tensor conv_transpose3d(const Tensor& x, const Tensor& weight, const Tensor& bias, ExpandingArray<3> stride,
                        ExpandingArray<3> padding, ExpandingArray<3> output_padding, std::int64_t groups,
                        ExpandingArray<3> dilation) {
  return transposed_convolution("conv_transpose3d", x, weight, bias, stride.value_or(1), padding.value_or(0),
                                output_padding.value_or(0), groups, dilation.value_or(1));
}

}  // namespace infini
