// Fused layer norm over the last C elements of each row: the forward keeps one mean and one
// reciprocal standard deviation per row, the backward reads x, dy and those two once per row
// (and sums dy * x_hat and dy over the rows for the affine parameters), so none of the
// composed form's (N, C) intermediates is stored.
export module infini.kernels:layer_norm;
import infini.std;
import infini.tensor;

export namespace infini {

// x (N, C) contiguous float32/64; weight, bias (C) of x's dtype or undefined. The kernel
// writes y (N, C) = (x - mean) * rstd * weight + bias and, per row, mean (N) and rstd (N) =
// 1 / sqrt(biased variance + eps), both float64 for float64 x and float32 otherwise. y is of
// x's dtype, or for float32 x also float16/bfloat16: the float32 result rounded once (the
// bits of a cast after it). The row statistics are computed in two passes, the sums in
// float64 on the CPU and in a fixed tree of float32 partial sums on CUDA.
struct LayerNormForwardKernel {
  static constexpr std::string_view name = "layer_norm";
  using Fn = void (*)(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& weight,
                      const Tensor& bias, double eps);
};
// dy (N, C) contiguous, of x's dtype or, for float32 x, float16/bfloat16 (read exactly);
// dx (N, C) of x's dtype = rstd * (g - mean(g) - x_hat * mean(g * x_hat)) with
// g = dy * weight (dy without weight) and x_hat = (x - mean) * rstd; dweight (C) =
// sum over rows of dy * x_hat and dbias (C) = sum of dy, each written only when defined. A
// defined dx_add (N, C), contiguous of x's dtype, is added to dx (each sum rounded once, the
// bits of a separate add). The column sums run in a fixed order, so results are reproducible.
struct LayerNormBackwardKernel {
  static constexpr std::string_view name = "layer_norm_backward";
  using Fn = void (*)(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dy,
                      const Tensor& dx_add, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                      const Tensor& weight);
};

namespace kernels {

struct LayerNormRows {
  Tensor y;     // (N, C), x's dtype or y_dtype
  Tensor mean;  // (N)
  Tensor rstd;  // (N)
};
// x (N, C) float32/64 (any strides: made contiguous), weight/bias (C) or undefined; checks
// dtypes and devices (errors name "layer_norm") and runs the forward kernel. y_dtype (x's
// by default) may be float16/bfloat16 for float32 x.
LayerNormRows layer_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                                 std::optional<DataType> y_dtype = std::nullopt);
struct LayerNormGrads {
  Tensor dx, dweight, dbias;  // dweight/dbias undefined unless asked for
};
// dy of any floating dtype: float32 x's kernel reads float16/bfloat16 as it is, other
// dtypes are converted to x's first. dx_add (x's shape, any floating dtype, or undefined) is
// added to dx: the gradient a residual sum sends to the norm's input.
LayerNormGrads layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                                   const Tensor& weight, bool need_weight, bool need_bias,
                                   const Tensor& dx_add = Tensor());

}  // namespace kernels
}  // namespace infini
