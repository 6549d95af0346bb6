// Differentiable convolution, pooling and resampling (torch.nn.functional semantics and
// argument order). Inputs are batched (N, C, *spatial) or unbatched (C, *spatial); every
// non-batch dim must be non-empty, the batch may be. All ops are compositions of
// differentiable ops (unfold/fold below, matmul, reductions, gather, index_select), so
// their derivatives of every order follow from those.
//
//   conv1d / 2d / 3d     the windows of the zero-padded input as columns (N, g, C/g*K, L)
//                        (unfold: im2col, whose backward is col2im and vice versa), times
//                        the (g, O/g, C/g*K) weight, plus bias.
//   conv_transpose1d/2d/3d  zeros inserted between input pixels (stride), padded by
//                        dilation*(k-1) - padding (+ output_padding), convolved with the
//                        flipped, in/out-transposed weight.
//   avg pooling          unfolded windows summed over the window dims, divided.
//   max pooling          each window's argmax (a raw kernel), then a gather of the input:
//                        the gradient goes to the argmax.
//   adaptive_avg_pool1d/2d  x @ A^T and A_h @ x @ A_w^T with averaging matrices, like
//                        bilinear interpolate;
//   adaptive_max_pool2d  each output's window rows and columns gathered (index_select, the
//                        shorter windows padded by repeating their last row / column),
//                        then max over the window with the index of its first maximum.
//   interpolate nearest  index_select of the source rows and columns.
//
// Convolution and averaging need floating-point inputs (float16/bfloat16 are computed in
// float32); max pooling and nearest interpolation also take integers.
export module infini.autograd:conv;
import infini.std;
import infini.kernels;

export namespace infini {

// Every op of this family by name, for the op table test.
inline constexpr std::array<std::string_view, 18> kConvOps = {
    "conv1d",     "conv2d",     "conv3d",     "conv_transpose1d",        "conv_transpose2d",
    "conv_transpose3d", "max_pool1d", "max_pool1d_with_indices", "max_pool2d", "max_pool2d_with_indices",
    "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d", "adaptive_avg_pool2d",
    "adaptive_max_pool2d", "adaptive_max_pool2d_with_indices", "interpolate"};

// PyTorch's `int or tuple` arguments (libtorch's ExpandingArray): one value for every
// spatial dim, or one per dim: conv2d(x, w, b, 2) or conv2d(x, w, b, {2, 1}). A
// default-constructed one ({}) is unset and stands for the op's default.
template <std::size_t D>
class ExpandingArray {
 public:
  ExpandingArray() = default;
  ExpandingArray(std::int64_t value) : set_(true) { values_.fill(value); }
  template <std::convertible_to<std::int64_t>... Ints>
    requires(sizeof...(Ints) == D && D > 1)
  ExpandingArray(Ints... values) : values_{static_cast<std::int64_t>(values)...}, set_(true) {}

  bool has_value() const { return set_; }
  // The values, or `fallback` when unset.
  std::vector<std::int64_t> value_or(const std::vector<std::int64_t>& fallback) const {
    return set_ ? std::vector<std::int64_t>(values_.begin(), values_.end()) : fallback;
  }
  std::vector<std::int64_t> value_or(std::int64_t fallback) const {
    return value_or(std::vector<std::int64_t>(D, fallback));
  }

 private:
  std::array<std::int64_t, D> values_{};
  bool set_ = false;
};

// ---- convolution ----

// x (N, C_in, L) or (C_in, L), weight (C_out, C_in / groups, K), bias (C_out) or undefined
// -> (N, C_out, L_out), L_out = (L + 2 padding - dilation (K - 1) - 1) / stride + 1.
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, ExpandingArray<1> stride = 1,
              ExpandingArray<1> padding = 0, ExpandingArray<1> dilation = 1, std::int64_t groups = 1);
// x (N, C_in, H, W) or (C_in, H, W), weight (C_out, C_in / groups, kH, kW), bias (C_out)
// -> (N, C_out, H_out, W_out), sizes as for conv1d per spatial dim.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, ExpandingArray<2> stride = 1,
              ExpandingArray<2> padding = 0, ExpandingArray<2> dilation = 1, std::int64_t groups = 1);
// x (N, C_in, D, H, W) or (C_in, D, H, W), weight (C_out, C_in / groups, kD, kH, kW), bias
// (C_out) -> (N, C_out, D_out, H_out, W_out), sizes as for conv1d per spatial dim.
Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, ExpandingArray<3> stride = 1,
              ExpandingArray<3> padding = 0, ExpandingArray<3> dilation = 1, std::int64_t groups = 1);
// The adjoint of conv2d w.r.t. its input: x (N, C_in, H, W), weight (C_in, C_out / groups,
// kH, kW), bias (C_out) -> (N, C_out, H_out, W_out) with H_out = (H - 1) stride - 2 padding
// + dilation (kH - 1) + output_padding + 1. output_padding < max(stride, dilation) per dim.
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
                        ExpandingArray<2> stride = 1, ExpandingArray<2> padding = 0,
                        ExpandingArray<2> output_padding = 0, std::int64_t groups = 1,
                        ExpandingArray<2> dilation = 1);
// The same for one spatial dim, x (N, C_in, L), weight (C_in, C_out / groups, K), and three,
// x (N, C_in, D, H, W), weight (C_in, C_out / groups, kD, kH, kW).
Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
                        ExpandingArray<1> stride = 1, ExpandingArray<1> padding = 0,
                        ExpandingArray<1> output_padding = 0, std::int64_t groups = 1,
                        ExpandingArray<1> dilation = 1);
Tensor conv_transpose3d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
                        ExpandingArray<3> stride = 1, ExpandingArray<3> padding = 0,
                        ExpandingArray<3> output_padding = 0, std::int64_t groups = 1,
                        ExpandingArray<3> dilation = 1);

// ---- pooling ----
// Output sizes: (in + 2 padding - dilation (k - 1) - 1) / stride + 1, rounded down, or up
// with ceil_mode, where the last window must then start inside the input or the left
// padding. padding <= kernel_size / 2. An unset stride is kernel_size.

struct MaxPoolResult {
  Tensor values;
  Tensor indices;  // int64: position ih * W + iw of each maximum in its input (H, W) plane
};
// The max of each window (padding never wins); the gradient goes to the first maximal
// element of the window (row-major), NaN counting as the maximum.
MaxPoolResult max_pool2d_with_indices(const Tensor& x, ExpandingArray<2> kernel_size, ExpandingArray<2> stride = {},
                                      ExpandingArray<2> padding = 0, ExpandingArray<2> dilation = 1,
                                      bool ceil_mode = false);
Tensor max_pool2d(const Tensor& x, ExpandingArray<2> kernel_size, ExpandingArray<2> stride = {},
                  ExpandingArray<2> padding = 0, ExpandingArray<2> dilation = 1, bool ceil_mode = false);
// Over one spatial dim: x (N, C, L) or (C, L); indices are positions in L.
MaxPoolResult max_pool1d_with_indices(const Tensor& x, ExpandingArray<1> kernel_size, ExpandingArray<1> stride = {},
                                      ExpandingArray<1> padding = 0, ExpandingArray<1> dilation = 1,
                                      bool ceil_mode = false);
Tensor max_pool1d(const Tensor& x, ExpandingArray<1> kernel_size, ExpandingArray<1> stride = {},
                  ExpandingArray<1> padding = 0, ExpandingArray<1> dilation = 1, bool ceil_mode = false);

// The mean of each window. The divisor is divisor_override when given, else the window's
// size clipped to the padded input (count_include_pad) or to the input itself.
Tensor avg_pool2d(const Tensor& x, ExpandingArray<2> kernel_size, ExpandingArray<2> stride = {},
                  ExpandingArray<2> padding = 0, bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<std::int64_t> divisor_override = {});
Tensor avg_pool1d(const Tensor& x, ExpandingArray<1> kernel_size, ExpandingArray<1> stride = {},
                  ExpandingArray<1> padding = 0, bool ceil_mode = false, bool count_include_pad = true);
Tensor avg_pool3d(const Tensor& x, ExpandingArray<3> kernel_size, ExpandingArray<3> stride = {},
                  ExpandingArray<3> padding = 0, bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<std::int64_t> divisor_override = {});

// x (N, C, H, W) or (C, H, W) -> (..., oH, oW): output (i, j) averages input rows
// [floor(i H / oH), ceil((i + 1) H / oH)) and the columns likewise.
Tensor adaptive_avg_pool2d(const Tensor& x, ExpandingArray<2> output_size);
// The same over one spatial dim: x (N, C, L) or (C, L) -> (..., oL).
Tensor adaptive_avg_pool1d(const Tensor& x, ExpandingArray<1> output_size);
// The max of the same windows as adaptive_avg_pool2d; the gradient goes to the first maximal
// element of each window (row-major, NaN counting as the maximum); indices as for max_pool2d.
MaxPoolResult adaptive_max_pool2d_with_indices(const Tensor& x, ExpandingArray<2> output_size);
Tensor adaptive_max_pool2d(const Tensor& x, ExpandingArray<2> output_size);

// ---- resampling ----

enum class InterpolateMode { Nearest, Bilinear };
struct InterpolateOptions {
  std::vector<std::int64_t> size{};    // output spatial size (one value per spatial dim, or one for all) ...
  std::vector<double> scale_factor{};  // ... or multipliers: size = floor(in * scale_factor)
  InterpolateMode mode = InterpolateMode::Nearest;
  std::optional<bool> align_corners{};  // bilinear only (default false)
};
// x (N, C, *spatial). Nearest (PyTorch's legacy "nearest", any number of spatial dims,
// any dtype): source index min(floor(dst * scale), in - 1) with scale = 1 / scale_factor
// when given, else in / out. Bilinear (4-d input, floating point): source coordinate
// dst * (in - 1) / (out - 1) with align_corners, else max(0, (dst + 0.5) * scale - 0.5).
Tensor interpolate(const Tensor& x, const InterpolateOptions& options);

}  // namespace infini

// Shared by the family's implementation units (not exported).
namespace infini::spatial {

// x with float16/bfloat16 converted to float32, and back.
Tensor upcast(const Tensor& x);
Tensor downcast(const Tensor& y, DataType dtype);

// columns (N, C, *kernel, *out) of x (N, C, *in) at every window position (zeros in the
// padding; see kernels::im2col), viewed as `shape` (of as many elements). Differentiable:
// its backward is fold (col2im), whose backward is unfold, so derivatives of every order
// follow.
Tensor unfold(const Tensor& x, const WindowGeometry& g, const Shape& shape);
// The adjoint of unfold: columns summed back into an input of in_shape (N, C, *in).
Tensor fold(const Tensor& columns, const WindowGeometry& g, const Shape& in_shape);

// x as batched (N, C, *spatial) with `dims` spatial dims: unbatched (C, *spatial) gets a
// batch of 1 (reported by `unbatched`). ShapeError for other ranks or an empty non-batch dim.
Tensor batched(std::string_view op, const Tensor& x, std::size_t dims, bool& unbatched);

// ShapeError unless every entry of values (the op's argument `what`) is >= min.
void check_at_least(std::string_view op, std::string_view what, const std::vector<std::int64_t>& values,
                    std::int64_t min);

}  // namespace infini::spatial
