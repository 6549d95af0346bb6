// Raw sliding-window ops behind convolution and pooling (no autograd history): im2col
// copies every window of a zero-padded input into columns, col2im sums columns back into
// the input's shape (its adjoint), and max_pool_indices finds each window's maximum.
// Inputs are (N, C, *spatial) with 1 to 3 spatial dims.
export module infini.kernels:conv;
import infini.std;
import infini.tensor;

export namespace infini {

// Windows along each spatial dim d: output position o_d reads input positions
// o_d stride_d - padding_d + k_d dilation_d for k_d in [0, kernel_d); positions outside
// the input are padding.
struct WindowGeometry {
  std::vector<std::int64_t> kernel, stride, padding, dilation;
  std::vector<std::int64_t> out;  // number of windows per spatial dim
};

// columns (N, C, *kernel, *out), contiguous, = x (N, C, *in) at each window position, 0 in
// the padding. x contiguous, of columns' dtype.
struct Im2colKernel {
  static constexpr std::string_view name = "im2col";
  using Fn = void (*)(const Tensor& columns, const Tensor& x, const WindowGeometry& g);
};
// x (N, C, *in), contiguous = the sum of the columns (N, C, *kernel, *out, contiguous, of
// x's dtype) at the input positions they were taken from (padding dropped).
struct Col2imKernel {
  static constexpr std::string_view name = "col2im";
  using Fn = void (*)(const Tensor& x, const Tensor& columns, const WindowGeometry& g);
};
// indices (N, C, *out), int64, contiguous: the row-major position in x's (*in) plane of
// the first maximum (or first NaN) among each window's elements inside x (contiguous);
// -1 for a window without one.
struct MaxPoolIndicesKernel {
  static constexpr std::string_view name = "max_pool_indices";
  using Fn = void (*)(const Tensor& indices, const Tensor& x, const WindowGeometry& g);
};

namespace kernels {

// x (N, C, *in) -> (N, C, *kernel, *out); any strides and dtype.
Tensor im2col(const Tensor& x, const WindowGeometry& g);
// columns (N, C, *kernel, *out) (any shape with that many elements, read row-major) ->
// (N, C, *in) where in = in_size.
Tensor col2im(const Tensor& columns, const WindowGeometry& g, std::int64_t batch, std::int64_t channels,
              const std::vector<std::int64_t>& in_size);
// x (N, C, *in), not bool -> int64 (N, C, *out).
Tensor max_pool_indices(const Tensor& x, const WindowGeometry& g);

}  // namespace kernels
}  // namespace infini
