// Max and average pooling: windows of the padded input (spatial::windows, an as_strided
// view whose backward sums overlapping windows) reduced over the window dims.
module;
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>
#include <vector>
module infini.autograd;

namespace infini {
namespace {

using Ints = std::vector<std::int64_t>;

// Where the windows of a pooling op lie along each spatial dim.
struct PoolGeometry {
  Ints kernel, stride, padding, dilation;
  Ints out;    // output size
  Ints right;  // padding after the input: `padding`, or more where ceil_mode's last window needs it
};

std::int64_t floor_div(std::int64_t a, std::int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }

// PyTorch's pooling_output_shape per spatial dim of xb (N, C, *spatial), after checking the
// arguments (unset stride: kernel).
PoolGeometry pool_geometry(std::string_view op, const Tensor& xb, const Ints& kernel, const Ints& stride,
                           const Ints& padding, const Ints& dilation, bool ceil_mode) {
  spatial::check_at_least(op, "kernel_size", kernel, 1);
  spatial::check_at_least(op, "stride", stride, 1);
  spatial::check_at_least(op, "padding", padding, 0);
  spatial::check_at_least(op, "dilation", dilation, 1);
  PoolGeometry g{kernel, stride, padding, dilation, {}, {}};
  for (std::size_t d = 0; d < kernel.size(); ++d) {
    if (padding[d] > kernel[d] / 2)
      throw ShapeError(op, concat("padding ", padding, " must be at most half of kernel_size ", kernel));
    const std::int64_t in = xb.size(2 + static_cast<std::int64_t>(d)), span = dilation[d] * (kernel[d] - 1) + 1;
    std::int64_t out = floor_div(in + 2 * padding[d] - span + (ceil_mode ? stride[d] - 1 : 0), stride[d]) + 1;
    if (ceil_mode && (out - 1) * stride[d] >= in + padding[d]) --out;  // the last window starts inside
    if (out < 1)
      throw ShapeError(op, concat("input of shape ", xb.shape(), " is too small for kernel_size ", kernel,
                                  " (dilation ", dilation, ", padding ", padding, "): output size ", out,
                                  " along spatial dim ", d));
    g.out.push_back(out);
    g.right.push_back(std::max(padding[d], (out - 1) * stride[d] + span - in - padding[d]));
  }
  return g;
}

// xb padded with `value` as the geometry says (xb itself when nothing is added), unaliased.
Tensor padded(const Tensor& xb, const PoolGeometry& g, const Scalar& value) {
  std::vector<std::int64_t> pads;  // pad()'s order: last dim first
  bool any = false;
  for (std::size_t d = g.padding.size(); d-- > 0;) {
    pads.push_back(g.padding[d]);
    pads.push_back(g.right[d]);
    any = any || g.padding[d] != 0 || g.right[d] != 0;
  }
  return any ? pad(xb, pads, PadMode::Constant, value) : spatial::unaliased(xb);
}

Tensor restore_batch(const Tensor& y, bool unbatched) { return unbatched ? y.squeeze(0) : y; }

MaxPoolResult max_pool(std::string_view op, const Tensor& x, const Ints& kernel, const Ints& stride,
                       const Ints& padding, const Ints& dilation, bool ceil_mode) {
  if (x.dtype() == kBool) throw DTypeError(op, "expected a numeric input, got bool");
  bool unbatched = false;
  const Tensor xb = spatial::batched(op, x, 2, unbatched);
  const PoolGeometry g = pool_geometry(op, xb, kernel, stride, padding, dilation, ceil_mode);
  const std::int64_t n = xb.size(0), c = xb.size(1), oh = g.out[0], ow = g.out[1], kw = kernel[1];
  const std::int64_t window = kernel[0] * kw;
  // -inf becomes the lowest value of an integer dtype.
  const Tensor win = spatial::windows(padded(xb, g, -std::numeric_limits<double>::infinity()), kernel, stride,
                                      dilation, g.out)
                         .reshape({n, c, window, oh, ow});
  Tensor position;  // (N, C, 1, oH, oW): the first maximal element of each window inside the input (row-major)
  {
    NoGradGuard no_grad;
    // Padding may equal the maximum (an integer input holding the dtype's lowest value, or
    // -inf), so the elements inside the input are marked and only those can win.
    const Tensor plane = ones({1, 1, xb.size(2), xb.size(3)}, {.dtype = kBool, .device = x.device()});
    const Tensor inside = spatial::windows(padded(plane, g, false), kernel, stride, dilation, g.out)
                              .reshape({1, 1, window, oh, ow});
    const Tensor is_max = logical_or(eq(win, amax(win, {2}, true)), isnan(win));
    position = argmax(logical_and(is_max, inside).to(kUInt8), 2, true);
  }
  const Tensor values = gather(win, 2, position).squeeze(2);  // the gradient goes to `position` only
  Tensor indices;
  {
    // ih * W + iw with ih = oh stride_h - padding_h + (position / kW) dilation_h, iw likewise.
    NoGradGuard no_grad;
    const Tensor at = position.squeeze(2);
    const Tensor kh_at = floor_divide(at, kw), kw_at = sub(at, mul(kh_at, kw));
    const Tensor row = sub(mul(arange(oh, {.device = x.device()}), stride[0]), padding[0]).view({oh, 1});
    const Tensor col = sub(mul(arange(ow, {.device = x.device()}), stride[1]), padding[1]);
    indices = add(mul(add(row, mul(kh_at, dilation[0])), xb.size(3)), add(col, mul(kw_at, dilation[1])));
  }
  return {restore_batch(values, unbatched), restore_batch(indices, unbatched)};
}

// PyTorch's divisor of each output of an average pool along one dim: the window clipped to
// the padded input (count_include_pad) or to the input.
std::vector<double> window_sizes(std::int64_t in, std::int64_t out, std::int64_t kernel, std::int64_t stride,
                                 std::int64_t padding, bool count_include_pad) {
  std::vector<double> sizes;
  for (std::int64_t o = 0; o < out; ++o) {
    const std::int64_t start = o * stride - padding, end = std::min(start + kernel, in + padding);
    sizes.push_back(static_cast<double>(count_include_pad ? end - start
                                                          : std::min(end, in) - std::max<std::int64_t>(start, 0)));
  }
  return sizes;
}

Tensor avg_pool(std::string_view op, const Tensor& x, const Ints& kernel, const Ints& stride, const Ints& padding,
                bool ceil_mode, bool count_include_pad, std::optional<std::int64_t> divisor_override) {
  const std::size_t dims = kernel.size();
  if (!is_floating_point(x.dtype())) throw DTypeError(op, concat("expected a floating-point input, got ", x.dtype()));
  if (divisor_override && *divisor_override == 0) throw ShapeError(op, "divisor_override must be non-zero");
  bool unbatched = false;
  const Tensor xb = spatial::batched(op, x, dims, unbatched);
  const PoolGeometry g = pool_geometry(op, xb, kernel, stride, padding, Ints(dims, 1), ceil_mode);
  const Tensor win = spatial::windows(padded(spatial::upcast(xb), g, 0), kernel, stride, g.dilation, g.out);
  Ints window_dims;
  for (std::size_t d = 0; d < dims; ++d) window_dims.push_back(2 + static_cast<std::int64_t>(d));
  const Tensor total = sum(win, window_dims);  // (N, C, *out)
  // The divisor of output (o_1, ..., o_D): the product of its per-dim window sizes, or the override.
  std::vector<double> divisor{1.0};
  for (std::size_t d = 0; d < dims; ++d) {
    const std::vector<double> sizes = window_sizes(xb.size(2 + static_cast<std::int64_t>(d)), g.out[d], kernel[d],
                                                   g.stride[d], padding[d], count_include_pad);
    std::vector<double> next;
    for (double outer : divisor)
      for (double size : sizes) next.push_back(outer * size);
    divisor = std::move(next);
  }
  if (divisor_override) std::ranges::fill(divisor, static_cast<double>(*divisor_override));
  const Tensor divisor_t = from_vector(divisor, g.out, {.dtype = total.dtype(), .device = x.device()});
  return spatial::downcast(restore_batch(div(total, divisor_t), unbatched), x.dtype());
}

}  // namespace

MaxPoolResult max_pool2d_with_indices(const Tensor& x, ExpandingArray<2> kernel_size, ExpandingArray<2> stride,
                                      ExpandingArray<2> padding, ExpandingArray<2> dilation, bool ceil_mode) {
  const Ints kernel = kernel_size.value_or(0);
  return max_pool("max_pool2d_with_indices", x, kernel, stride.value_or(kernel), padding.value_or(0),
                  dilation.value_or(1), ceil_mode);
}

Tensor max_pool2d(const Tensor& x, ExpandingArray<2> kernel_size, ExpandingArray<2> stride, ExpandingArray<2> padding,
                  ExpandingArray<2> dilation, bool ceil_mode) {
  const Ints kernel = kernel_size.value_or(0);
  return max_pool("max_pool2d", x, kernel, stride.value_or(kernel), padding.value_or(0), dilation.value_or(1),
                  ceil_mode)
      .values;
}

Tensor avg_pool2d(const Tensor& x, ExpandingArray<2> kernel_size, ExpandingArray<2> stride, ExpandingArray<2> padding,
                  bool ceil_mode, bool count_include_pad, std::optional<std::int64_t> divisor_override) {
  const Ints kernel = kernel_size.value_or(0);
  return avg_pool("avg_pool2d", x, kernel, stride.value_or(kernel), padding.value_or(0), ceil_mode,
                  count_include_pad, divisor_override);
}

Tensor avg_pool3d(const Tensor& x, ExpandingArray<3> kernel_size, ExpandingArray<3> stride, ExpandingArray<3> padding,
                  bool ceil_mode, bool count_include_pad, std::optional<std::int64_t> divisor_override) {
  const Ints kernel = kernel_size.value_or(0);
  return avg_pool("avg_pool3d", x, kernel, stride.value_or(kernel), padding.value_or(0), ceil_mode,
                  count_include_pad, divisor_override);
}

}  // namespace infini
