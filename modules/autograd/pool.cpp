// Max pooling (a gather of each window's argmax) over 1 or 2 spatial dims and average
// pooling (unfolded windows summed and divided by PyTorch's divisor) over 1 to 3.
module;
#include <cstddef>
#include <cstdint>
module infini.autograd;
import infini.std;

namespace infini {
namespace {

using Ints = std::vector<std::int64_t>;

std::int64_t floor_div(std::int64_t a, std::int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }

// PyTorch's pooling_output_shape per spatial dim of xb (N, C, *spatial), after checking the
// arguments. Every window must hold an element of the input.
WindowGeometry pool_geometry(std::string_view op, const Tensor& xb, const Ints& kernel, const Ints& stride,
                             const Ints& padding, const Ints& dilation, bool ceil_mode) {
  spatial::check_at_least(op, "kernel_size", kernel, 1);
  spatial::check_at_least(op, "stride", stride, 1);
  spatial::check_at_least(op, "padding", padding, 0);
  spatial::check_at_least(op, "dilation", dilation, 1);
  WindowGeometry g{.kernel = kernel, .stride = stride, .padding = padding, .dilation = dilation, .out = {}};
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
    for (std::int64_t o = 0; o < out; ++o) {
      bool hits = false;  // a tap of window o inside the input
      for (std::int64_t k = 0; k < kernel[d] && !hits; ++k) {
        const std::int64_t i = o * stride[d] - padding[d] + k * dilation[d];
        hits = i >= 0 && i < in;
      }
      if (!hits)
        throw ShapeError(op, concat("window ", o, " along spatial dim ", d, " of input of shape ", xb.shape(),
                                    " lies entirely in the padding (kernel_size ", kernel, ", dilation ", dilation,
                                    ", padding ", padding, ")"));
    }
    g.out.push_back(out);
  }
  return g;
}

Tensor restore_batch(const Tensor& y, bool unbatched) { return unbatched ? y.squeeze(0) : y; }

// The input element of each window's argmax: a gather of x's flattened (*spatial) planes,
// whose gradient goes to that element only. One or two spatial dims (kernel.size()).
MaxPoolResult max_pool(std::string_view op, const Tensor& x, const Ints& kernel, const Ints& stride,
                       const Ints& padding, const Ints& dilation, bool ceil_mode) {
  if (x.dtype() == kBool) throw DTypeError(op, "expected a numeric input, got bool");
  bool unbatched = false;
  const Tensor xb = spatial::batched(op, x, kernel.size(), unbatched);
  const WindowGeometry g = pool_geometry(op, xb, kernel, stride, padding, dilation, ceil_mode);
  const Tensor indices = kernels::max_pool_indices(xb, g);  // (N, C, *out): il, or ih * W + iw
  const Tensor values = gather(xb.flatten(2), 2, indices.flatten(2)).view(indices.shape());
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
  const WindowGeometry g = pool_geometry(op, xb, kernel, stride, padding, Ints(dims, 1), ceil_mode);
  Shape columns_shape{xb.size(0), xb.size(1)};  // (N, C, *kernel, *out)
  columns_shape.insert(columns_shape.end(), kernel.begin(), kernel.end());
  columns_shape.insert(columns_shape.end(), g.out.begin(), g.out.end());
  const Tensor columns = spatial::unfold(spatial::upcast(xb), g, columns_shape);
  Ints window_dims;
  for (std::size_t d = 0; d < dims; ++d) window_dims.push_back(2 + static_cast<std::int64_t>(d));
  const Tensor total = sum(columns, window_dims);  // (N, C, *out)
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

// The public ops' ExpandingArray arguments with PyTorch's defaults filled in: stride the
// kernel size, padding 0, dilation 1.
template <std::size_t D>
MaxPoolResult max_pool_nd(std::string_view op, const Tensor& x, ExpandingArray<D> kernel_size,
                          ExpandingArray<D> stride, ExpandingArray<D> padding, ExpandingArray<D> dilation,
                          bool ceil_mode) {
  const Ints kernel = kernel_size.value_or(0);
  return max_pool(op, x, kernel, stride.value_or(kernel), padding.value_or(0), dilation.value_or(1), ceil_mode);
}

template <std::size_t D>
Tensor avg_pool_nd(std::string_view op, const Tensor& x, ExpandingArray<D> kernel_size, ExpandingArray<D> stride,
                   ExpandingArray<D> padding, bool ceil_mode, bool count_include_pad,
                   std::optional<std::int64_t> divisor_override) {
  const Ints kernel = kernel_size.value_or(0);
  return avg_pool(op, x, kernel, stride.value_or(kernel), padding.value_or(0), ceil_mode, count_include_pad,
                  divisor_override);
}

}  // namespace

MaxPoolResult max_pool1d_with_indices(const Tensor& x, ExpandingArray<1> kernel_size, ExpandingArray<1> stride,
                                      ExpandingArray<1> padding, ExpandingArray<1> dilation, bool ceil_mode) {
  return max_pool_nd("max_pool1d_with_indices", x, kernel_size, stride, padding, dilation, ceil_mode);
}

Tensor max_pool1d(const Tensor& x, ExpandingArray<1> kernel_size, ExpandingArray<1> stride, ExpandingArray<1> padding,
                  ExpandingArray<1> dilation, bool ceil_mode) {
  return max_pool_nd("max_pool1d", x, kernel_size, stride, padding, dilation, ceil_mode).values;
}

MaxPoolResult max_pool2d_with_indices(const Tensor& x, ExpandingArray<2> kernel_size, ExpandingArray<2> stride,
                                      ExpandingArray<2> padding, ExpandingArray<2> dilation, bool ceil_mode) {
  return max_pool_nd("max_pool2d_with_indices", x, kernel_size, stride, padding, dilation, ceil_mode);
}

Tensor max_pool2d(const Tensor& x, ExpandingArray<2> kernel_size, ExpandingArray<2> stride, ExpandingArray<2> padding,
                  ExpandingArray<2> dilation, bool ceil_mode) {
  return max_pool_nd("max_pool2d", x, kernel_size, stride, padding, dilation, ceil_mode).values;
}

Tensor avg_pool1d(const Tensor& x, ExpandingArray<1> kernel_size, ExpandingArray<1> stride, ExpandingArray<1> padding,
                  bool ceil_mode, bool count_include_pad) {
  return avg_pool_nd("avg_pool1d", x, kernel_size, stride, padding, ceil_mode, count_include_pad, std::nullopt);
}

Tensor avg_pool2d(const Tensor& x, ExpandingArray<2> kernel_size, ExpandingArray<2> stride, ExpandingArray<2> padding,
                  bool ceil_mode, bool count_include_pad, std::optional<std::int64_t> divisor_override) {
  return avg_pool_nd("avg_pool2d", x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override);
}

Tensor avg_pool3d(const Tensor& x, ExpandingArray<3> kernel_size, ExpandingArray<3> stride, ExpandingArray<3> padding,
                  bool ceil_mode, bool count_include_pad, std::optional<std::int64_t> divisor_override) {
  return avg_pool_nd("avg_pool3d", x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override);
}

}  // namespace infini
