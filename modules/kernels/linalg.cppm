// Matrix products: the batched GEMM kernel signature and the raw (non-differentiable)
// product behind infini.autograd's matmul, mm, bmm, mv, dot, outer, baddbmm and linear;
// the batched SVD kernel signature behind linalg_svd.
export module infini.kernels:linalg;
import infini.std;
import infini.tensor;

export namespace infini {

// out = alpha * a @ b + beta * out for every batch index: out (*, m, n), a (*, m, k),
// b (*, k, n) with the same batch dims (a and b may be expanded along any dim, batch or
// not) and one dtype: float64, float32, or float16/bfloat16, whose products and sums are
// float32 and each result rounded once. out is contiguous and overlaps neither a nor b.
// beta == 0 ignores out's old values; k == 0 leaves beta * out. A defined `bias` (n),
// contiguous and of out's dtype, comes with alpha == 1 and beta == 0: out = a @ b + bias
// (added to every row before the rounding; CUDA fuses it into the product's epilogue).
struct GemmKernel {
  static constexpr std::string_view name = "matmul";
  using Fn = void (*)(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta,
                      const Tensor& bias);
};

// out = a @ b and row_sums[r] = sum over k of a[r, k], for a (m, k) and b (k, n) of one
// floating-point dtype with k > 0, out (m, n) and row_sums (m) contiguous of it (16-bit
// types summed in float32 and rounded once), in one pass: linear's weight gradient g^T @ x
// with its bias gradient, g's column sums. Only devices that fuse the two have an entry
// (CUDA: cuBLASLt's bias-gradient epilogue); it returns false, having written nothing, when
// it cannot fuse this problem.
struct GemmRowSumsKernel {
  static constexpr std::string_view name = "matmul_row_sums";
  using Fn = bool (*)(const Tensor& out, const Tensor& row_sums, const Tensor& a, const Tensor& b);
};

// pre = a @ b + bias and out = gelu(pre) with GELU's tanh approximation, for a (m, k), b
// (k, n) and bias (n) of one floating-point dtype with k > 0, out and pre (m, n) contiguous
// of it: a linear layer and its GELU in one pass (CUDA: cuBLASLt's GELU_AUX_BIAS epilogue,
// GELU taken in float32 on the unrounded sum). Only devices that fuse them have an entry; it
// returns false, having written nothing, when it cannot fuse this problem.
struct GemmBiasGeluKernel {
  static constexpr std::string_view name = "matmul_bias_gelu";
  using Fn = bool (*)(const Tensor& out, const Tensor& pre, const Tensor& a, const Tensor& b, const Tensor& bias);
};

// out = (a @ b) * gelu'(pre) elementwise (the derivative of GELU's tanh approximation), for
// a (m, k), b (k, n) and pre (m, n) of one floating-point dtype with k > 0, out (m, n)
// contiguous of it: a GELU's input gradient from the gradient of the linear layer it fed
// (CUDA: cuBLASLt's DGELU epilogue, applied before the product's rounding). Fused-only, as
// GemmBiasGeluKernel.
struct GemmGeluGradKernel {
  static constexpr std::string_view name = "matmul_gelu_grad";
  using Fn = bool (*)(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& pre);
};

// The singular value decomposition a = U diag(S) Vh of every matrix of a (batch, m, n),
// contiguous float32 or float64, k = min(m, n): S (batch, k) descending and >= 0; U and Vh
// have orthonormal columns / rows, reduced (U (batch, m, k), Vh (batch, k, n)) or full
// (U (batch, m, m), Vh (batch, n, n)), the columns for zero (and missing) singular values
// completed to an orthonormal set. One-sided Jacobi in float64 (infini/math/jacobi_svd.h),
// the same code on every device. U, S, Vh contiguous of a's dtype; status (batch) int32:
// 0 done, 1 the matrix holds Inf or NaN (its outputs are NaN), 2 no convergence. The
// caller reads status and raises.
struct SvdKernel {
  static constexpr std::string_view name = "linalg_svd";
  using Fn = void (*)(const Tensor& u, const Tensor& s, const Tensor& vh, const Tensor& status, const Tensor& a);
};

// How float32 matrix products may compute, as torch.set_float32_matmul_precision:
// kHighest (the default) in float32; kMedium with each operand rounded to bfloat16 and the
// products summed in float32, where this CPU has a unit that does that faster (AMX-BF16),
// in float32 elsewhere, and on CUDA on TF32 tensor cores (operands with a 10-bit mantissa,
// float32 sums). Process-wide; float64 products are never affected.
enum class MatmulPrecision { kHighest, kMedium };
void set_float32_matmul_precision(MatmulPrecision precision);
MatmulPrecision float32_matmul_precision();
// True when kMedium float32 products do run on bfloat16 operands in this process.
bool has_bfloat16_matmul();

namespace kernels {

struct MatmulOptions {
  Tensor bias = {};   // when defined: beta * bias (broadcast to the result) is added
  double beta = 1;    // beta == 0 ignores bias, NaNs included
  double alpha = 1;   // scales the product
  std::string_view op = "matmul";  // the op that errors name
};

// alpha * (a @ b) + beta * bias with PyTorch's matmul rules: a 1-D a is a row (1, k) and
// a 1-D b a column (k, 1), the dim so added is removed from the result; the dims before
// the last two are batch dims and broadcast. Floating-point operands of one dtype (and
// bias of it too); float16/bfloat16 are summed in float32 and rounded once (on CUDA by
// cuBLASLt on tensor cores). ShapeError names both shapes.
Tensor matmul(const Tensor& a, const Tensor& b, const MatmulOptions& options = {});

// out += a @ b in place for matrices a (m, k), b (k, n) and a contiguous out (m, n) of their
// dtype and device: one GEMM with beta = 1, no product-sized temporary (a gradient summed
// into a weight's existing one). ShapeError / DTypeError / DeviceError name the operands.
void matmul_accumulate_(const Tensor& out, const Tensor& a, const Tensor& b);

// a @ b and the row sums of a (sum over k, a's dtype) for 2-D a (m, k) and b (k, n) of one
// floating-point dtype on one device, from one fused pass (GemmRowSumsKernel), or nullopt
// where the device has none for this problem: the caller then computes them apart.
struct ProductAndRowSums {
  Tensor product, row_sums;
};
std::optional<ProductAndRowSums> matmul_and_row_sums(const Tensor& a, const Tensor& b);

// gelu(a @ b + bias) (GELU's tanh approximation) and the pre-activation a @ b + bias, for 2-D
// a (m, k), b (k, n) and bias (n) of one floating-point dtype on one device, from one fused
// pass (GemmBiasGeluKernel), or nullopt where the device has none for this problem.
struct ActivationAndInput {
  Tensor activation, pre;
};
std::optional<ActivationAndInput> matmul_bias_gelu(const Tensor& a, const Tensor& b, const Tensor& bias);

// (a @ b) * gelu'(pre) (GELU's tanh approximation) for 2-D a (m, k), b (k, n) and pre (m, n)
// of one floating-point dtype on one device, from one fused pass (GemmGeluGradKernel), or
// nullopt where the device has none for this problem.
std::optional<Tensor> matmul_gelu_grad(const Tensor& a, const Tensor& b, const Tensor& pre);

}  // namespace kernels
}  // namespace infini
