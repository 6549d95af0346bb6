// Raw sliding-window ops: argument checks and result allocation around the device kernels.
module;
#include <cstdint>
module infini.kernels;
import infini.std;

namespace infini::kernels {
namespace {

// ShapeError (from op) unless g describes windows over x's spatial dims (1 to 3 of them).
void check_geometry(std::string_view op, const Tensor& x, const WindowGeometry& g) {
  const std::size_t dims = g.kernel.size();
  if (dims < 1 || dims > 3 || g.stride.size() != dims || g.padding.size() != dims || g.dilation.size() != dims ||
      g.out.size() != dims)
    throw ShapeError(op, concat("expected kernel, stride, padding, dilation and out for 1 to 3 spatial dims, got ",
                                g.kernel, ", ", g.stride, ", ", g.padding, ", ", g.dilation, ", ", g.out));
  if (x.dim() != static_cast<std::int64_t>(dims) + 2)
    throw ShapeError(op, concat("expected a ", dims + 2, "-d input (N, C, *spatial), got shape ", x.shape()));
  for (std::size_t d = 0; d < dims; ++d)
    if (g.kernel[d] < 1 || g.stride[d] < 1 || g.dilation[d] < 1 || g.padding[d] < 0 || g.out[d] < 0)
      throw ShapeError(op, concat("invalid window geometry: kernel ", g.kernel, ", stride ", g.stride, ", padding ",
                                  g.padding, ", dilation ", g.dilation, ", out ", g.out));
}

Shape concat_shapes(Shape a, const std::vector<std::int64_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

Tensor im2col(const Tensor& x, const WindowGeometry& g) {
  NoGradGuard no_grad;
  check_geometry("im2col", x, g);
  Tensor columns = empty(concat_shapes(concat_shapes({x.size(0), x.size(1)}, g.kernel), g.out),
                         {.dtype = x.dtype(), .device = x.device()});
  if (columns.numel() > 0) KernelTable<Im2colKernel>::call(x.device(), columns, x.contiguous(), g);
  return columns;
}

Tensor col2im(const Tensor& columns, const WindowGeometry& g, std::int64_t batch, std::int64_t channels,
              const std::vector<std::int64_t>& in_size) {
  NoGradGuard no_grad;
  Tensor x = empty(concat_shapes({batch, channels}, in_size), {.dtype = columns.dtype(), .device = columns.device()});
  check_geometry("col2im", x, g);
  std::int64_t expected = batch * channels;
  for (std::size_t d = 0; d < g.kernel.size(); ++d) expected *= g.kernel[d] * g.out[d];
  if (columns.numel() != expected)
    throw ShapeError("col2im", concat("columns of shape ", columns.shape(), " do not hold the ", expected,
                                      " window elements of kernel ", g.kernel, " over ", g.out, " windows of input ",
                                      x.shape()));
  if (x.numel() > 0) KernelTable<Col2imKernel>::call(x.device(), x, columns.contiguous(), g);
  return x;
}

Tensor max_pool_indices(const Tensor& x, const WindowGeometry& g) {
  NoGradGuard no_grad;
  check_geometry("max_pool_indices", x, g);
  if (x.dtype() == kBool) throw DTypeError("max_pool_indices", "expected a numeric input, got bool");
  Tensor indices = empty(concat_shapes({x.size(0), x.size(1)}, g.out), {.dtype = kInt64, .device = x.device()});
  if (indices.numel() > 0) KernelTable<MaxPoolIndicesKernel>::call(x.device(), indices, x.contiguous(), g);
  return indices;
}

}  // namespace infini::kernels
