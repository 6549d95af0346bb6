// The raw matrix product: argument checks, PyTorch's rules for 1-D operands and batch
// dims, the added bias, and the folding of batch dims into rows where that turns a batch
// of GEMMs into one large GEMM (x (B,T,C) @ w (C,D) is one (B*T,C) @ (C,D) product).
module;
#include <cstdint>
module infini.kernels;
import infini.std;

namespace infini {
namespace {
std::atomic<MatmulPrecision> matmul_precision{MatmulPrecision::kHighest};
}  // namespace

void set_float32_matmul_precision(MatmulPrecision precision) { matmul_precision.store(precision); }
MatmulPrecision float32_matmul_precision() { return matmul_precision.load(); }

}  // namespace infini

namespace infini::kernels {
namespace {

void check_operands(const Tensor& a, const Tensor& b, const MatmulOptions& o) {
  if (a.dim() == 0 || b.dim() == 0)
    throw ShapeError(o.op, concat("both operands need at least 1 dimension, got shapes ", a.shape(), " and ",
                                  b.shape()));
  if (a.device() != b.device() || (o.bias.defined() && o.bias.device() != a.device()))
    throw DeviceError(o.op, concat("expected all tensors on one device, got ", a.device(), " and ", b.device(),
                                   o.bias.defined() ? concat(" (bias on ", o.bias.device(), ")") : ""));
  if (a.dtype() != b.dtype())
    throw DTypeError(o.op, concat("expected both operands to have the same dtype, got ", a.dtype(), " and ",
                                  b.dtype()));
  if (!is_floating_point(a.dtype()))
    throw DTypeError(o.op, concat("operands of dtype ", a.dtype(), " are not supported (expected a floating-point "
                                  "dtype)"));
  if (o.bias.defined() && o.bias.dtype() != a.dtype())
    throw DTypeError(o.op, concat("bias of dtype ", o.bias.dtype(), " does not match the operands' ", a.dtype()));
}

std::int64_t product(const Shape& shape) {
  std::int64_t n = 1;
  for (std::int64_t s : shape) n *= s;
  return n;
}


Shape with_matrix(Shape batch, std::int64_t rows, std::int64_t cols) {
  batch.push_back(rows);
  batch.push_back(cols);
  return batch;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, const MatmulOptions& o) {
  NoGradGuard no_grad;
  check_operands(a, b, o);
  // Lift 1-D operands to matrices: a (k) -> (1, k), b (k) -> (k, 1).
  const Tensor am = a.dim() == 1 ? a.unsqueeze(0) : a;
  const Tensor bm = b.dim() == 1 ? b.unsqueeze(1) : b;
  const std::int64_t m = am.shape().end()[-2], k = am.shape().back();
  const std::int64_t n = bm.shape().back();
  if (bm.shape().end()[-2] != k)
    throw ShapeError(o.op, concat("shapes ", a.shape(), " and ", b.shape(), " cannot be multiplied (", k,
                                  " columns vs ", bm.shape().end()[-2], " rows)"));
  const Shape a_batch(am.shape().begin(), am.shape().end() - 2), b_batch(bm.shape().begin(), bm.shape().end() - 2);
  Shape batch;
  try {
    batch = broadcast_shapes(o.op, a_batch, b_batch);
  } catch (const ShapeError&) {
    throw ShapeError(o.op, concat("the batch dims of shapes ", a.shape(), " and ", b.shape(), " cannot be broadcast (",
                                  a_batch, " vs ", b_batch, ")"));
  }
  Shape result_shape = batch;
  if (a.dim() > 1) result_shape.push_back(m);
  if (b.dim() > 1) result_shape.push_back(n);

  if (o.bias.defined() && !broadcasts_to(o.bias.shape(), result_shape))
    throw ShapeError(o.op, concat("the tensor added to the product, of shape ", o.bias.shape(),
                                  ", does not broadcast to the result's shape ", result_shape));

  Tensor out = empty(with_matrix(batch, m, n), {.dtype = a.dtype(), .device = a.device()});
  double beta = 0;
  Tensor row_bias;  // a bias along the result's last dim, added by the GEMM kernel (linear's)
  if (o.bias.defined() && o.beta != 0) {
    if (b.dim() > 1 && o.beta == 1 && o.alpha == 1 && o.bias.numel() == n && o.bias.shape().back() == n) {
      row_bias = o.bias.reshape({n}).contiguous();
    } else {
      out.view(result_shape).copy_(o.bias);
      beta = o.beta;
    }
  }
  if (out.numel() > 0) {
    // b the same for every batch index and a's batch and row dims one strided dim: one GEMM.
    const std::int64_t rows = product(batch) * m;
    if (product(b_batch) == 1 && a_batch.size() > 0 && view_strides(am.shape(), am.strides(), {rows, k})) {
      KernelTable<GemmKernel>::call(a.device(), out.view({rows, n}), am.view({rows, k}), bm.reshape({k, n}), o.alpha,
                                    beta, row_bias);
    } else {
      KernelTable<GemmKernel>::call(a.device(), out, am.expand(with_matrix(batch, m, k)),
                                    bm.expand(with_matrix(batch, k, n)), o.alpha, beta, row_bias);
    }
  }
  return out.view(result_shape);
}

void matmul_accumulate_(const Tensor& out, const Tensor& a, const Tensor& b) {
  NoGradGuard no_grad;
  constexpr std::string_view op = "matmul_accumulate_";
  check_operands(a, b, {.bias = out, .op = op});
  if (a.dim() != 2 || b.dim() != 2 || a.shape()[1] != b.shape()[0] || out.shape() != Shape{a.shape()[0], b.shape()[1]})
    throw ShapeError(op, concat("expected a (m, k), b (k, n) and out (m, n), got shapes ", a.shape(), ", ", b.shape(),
                                " and ", out.shape()));
  if (!out.is_contiguous()) throw ShapeError(op, concat("expected a contiguous out, got strides ", out.strides()));
  if (out.numel() == 0) return;
  KernelTable<GemmKernel>::call(out.device(), out, a, b, 1.0, 1.0, Tensor());
  out.storage().bump_version();
}

namespace {

// The operands of a fused single product: matrices (m, k) and (k, n) of one floating-point
// dtype on one device; `vector` (when defined) of n elements and `matrix` (when defined) of
// (m, n), both of that dtype and device.
void check_fused_operands(std::string_view op, const Tensor& a, const Tensor& b, const Tensor& vector = {},
                          const Tensor& matrix = {}) {
  check_operands(a, b, {.op = op});
  if (a.dim() != 2 || b.dim() != 2 || a.shape()[1] != b.shape()[0])
    throw ShapeError(op, concat("expected matrices (m, k) and (k, n), got shapes ", a.shape(), " and ", b.shape()));
  const Shape out{a.shape()[0], b.shape()[1]};
  auto check_like = [&](const Tensor& t, const Shape& shape, std::string_view what) {
    if (t.device() != a.device())
      throw DeviceError(op, concat("expected the ", what, " on ", a.device(), ", got ", t.device()));
    if (t.dtype() != a.dtype())
      throw DTypeError(op, concat("expected the ", what, " of ", a.dtype(), ", got ", t.dtype()));
    if (t.shape() != shape)
      throw ShapeError(op, concat("expected the ", what, " of shape ", shape, " for a product of shape ", out,
                                  ", got ", t.shape()));
  };
  if (vector.defined()) check_like(vector, Shape{out[1]}, "bias");
  if (matrix.defined()) check_like(matrix, out, "pre-activation");
}

}  // namespace

std::optional<ProductAndRowSums> matmul_and_row_sums(const Tensor& a, const Tensor& b) {
  NoGradGuard no_grad;
  check_fused_operands("matmul", a, b);
  if (a.shape()[1] == 0 || !KernelTable<GemmRowSumsKernel>::has(a.device().type)) return std::nullopt;
  const TensorOptions like{.dtype = a.dtype(), .device = a.device()};
  ProductAndRowSums result{empty({a.shape()[0], b.shape()[1]}, like), empty({a.shape()[0]}, like)};
  if (!KernelTable<GemmRowSumsKernel>::call(a.device(), result.product, result.row_sums, a, b)) return std::nullopt;
  return result;
}

std::optional<ActivationAndInput> matmul_bias_gelu(const Tensor& a, const Tensor& b, const Tensor& bias) {
  NoGradGuard no_grad;
  constexpr std::string_view op = "matmul_bias_gelu";
  if (!bias.defined()) throw Error(op, "expected a bias");
  check_fused_operands(op, a, b, bias);
  if (a.shape()[1] == 0 || !KernelTable<GemmBiasGeluKernel>::has(a.device().type)) return std::nullopt;
  const TensorOptions like{.dtype = a.dtype(), .device = a.device()};
  const Shape shape{a.shape()[0], b.shape()[1]};
  ActivationAndInput result{empty(shape, like), empty(shape, like)};
  if (!KernelTable<GemmBiasGeluKernel>::call(a.device(), result.activation, result.pre, a, b, bias.contiguous()))
    return std::nullopt;
  return result;
}

std::optional<Tensor> matmul_gelu_grad(const Tensor& a, const Tensor& b, const Tensor& pre) {
  NoGradGuard no_grad;
  constexpr std::string_view op = "matmul_gelu_grad";
  if (!pre.defined()) throw Error(op, "expected the pre-activation");
  check_fused_operands(op, a, b, {}, pre);
  if (a.shape()[1] == 0 || !KernelTable<GemmGeluGradKernel>::has(a.device().type)) return std::nullopt;
  Tensor out = empty({a.shape()[0], b.shape()[1]}, {.dtype = a.dtype(), .device = a.device()});
  if (!KernelTable<GemmGeluGradKernel>::call(a.device(), out, a, b, pre.contiguous())) return std::nullopt;
  return out;
}

}  // namespace infini::kernels
