// Raw ops: argument checks, broadcasting, type promotion and result allocation around
// the device kernels. They never record autograd history.
module;
#include <cstdint>
module infini.kernels;
import infini.std;

namespace infini::kernels {
namespace {

std::string_view op_name(UnaryOp op) {
  constexpr std::string_view names[kUnaryOpCount] = {
      "neg",  "abs",   "sign",  "relu",    "clamp",      "floor",   "exp",        "expm1",  "log",  "log1p",
      "log2", "sqrt",  "rsqrt", "reciprocal", "sin",     "cos",     "tanh",       "sigmoid", "erf",  "leaky_relu",
      "elu",  "gelu",  "gelu",  "silu",    "softplus",   "pow",     "isnan",      "isinf",  "logical_not"};
  return names[static_cast<int>(op)];
}

std::string_view op_name(BinaryOp op) {
  constexpr std::string_view names[kBinaryOpCount] = {"add", "sub", "mul", "div", "floor_divide", "pow",
                                                      "maximum", "minimum", "gelu_backward", "gelu_backward", "eq", "ne", "lt", "le", "gt", "ge",
                                                      "logical_and", "logical_or", "logical_xor"};
  return names[static_cast<int>(op)];
}

bool returns_bool(BinaryOp op) { return op >= BinaryOp::Eq; }

void check_same_device(std::string_view op, const Tensor& a, const Tensor& b) {
  if (a.device() != b.device())
    throw DeviceError(op, concat("expected all tensors on one device, got ", a.device(), " and ", b.device()));
}

// PyTorch's rule for elementwise ops: a 0-d CPU tensor meets a tensor on another device as
// a number would, so it is copied to that device. Other tensors stay where they are.
Tensor scalar_to(const Tensor& t, Device device) {
  return t.dim() == 0 && t.device().is_cpu() && device != t.device() ? t.to(device) : t;
}

}  // namespace

DataType unary_result_type(UnaryOp op, DataType t) {
  if (op >= UnaryOp::IsNan) return kBool;
  if (op >= UnaryOp::Exp) return is_floating_point(t) ? t : kFloat32;
  if (t == kBool && op != UnaryOp::Abs && op != UnaryOp::Relu)
    throw DTypeError(op_name(op), "bool tensors are not supported (use logical_not for negation)");
  return t;
}

Tensor unary(UnaryOp op, const Tensor& x, UnaryParams params) {
  NoGradGuard no_grad;
  DataType result = unary_result_type(op, x.dtype());
  // An integer base with a non-negative integral exponent stays integral, like PyTorch.
  if (op == UnaryOp::PowScalar && is_integral(x.dtype(), true) && params.a >= 0 && params.a == static_cast<std::int64_t>(params.a))
    result = x.dtype() == kBool ? kInt64 : x.dtype();
  const Tensor in = result == kBool ? x : x.to(result);
  Tensor out = empty(x.shape(), {.dtype = result, .device = x.device()});
  KernelTable<UnaryKernel>::call(x.device(), out, in, op, params);
  return out;
}

DataType binary_compute_type(BinaryOp op, DataType a, DataType b) {
  const DataType t = promote_types(a, b);
  const bool float_result = op == BinaryOp::Div || op == BinaryOp::GeluBackward || op == BinaryOp::GeluTanhBackward;
  if (float_result && !is_floating_point(t)) return kFloat32;
  if (t == kBool && (op == BinaryOp::Sub || op == BinaryOp::Div || op == BinaryOp::FloorDiv || op == BinaryOp::Pow))
    throw DTypeError(op_name(op), "bool tensors are not supported (use logical ops)");
  return t;
}

bool reads_widened(BinaryOp op, DataType compute, DataType t, DataType other) {
  const bool arithmetic = op == BinaryOp::Add || op == BinaryOp::Sub || op == BinaryOp::Mul;
  return arithmetic && compute == kFloat32 && other == kFloat32 && (t == kFloat16 || t == kBFloat16);
}

void check_binary_operand_dtypes(BinaryOp op, DataType out, DataType a, DataType b) {
  if (a == b || (out == kFloat32 && (reads_widened(op, out, a, b) || reads_widened(op, out, b, a)))) return;
  throw DTypeError("binary", concat("operands of ", a, " and ", b, " into ", out,
                                    " (expected one dtype, or float32 and a 16-bit float into float32)"));
}

namespace {

// t as the kernel reads it when the other operand is of dtype `other`: as it is if the
// kernel widens it, else converted to `compute`.
Tensor kernel_operand(BinaryOp op, DataType compute, const Tensor& t, DataType other) {
  return reads_widened(op, compute, t.dtype(), other) ? t : t.to(compute);
}

}  // namespace

Tensor binary(BinaryOp op, const Tensor& a_in, const Tensor& b_in) {
  NoGradGuard no_grad;
  const Tensor a = scalar_to(a_in, b_in.device()), b = scalar_to(b_in, a.device());
  check_same_device(op_name(op), a, b);
  const Shape shape = broadcast_shapes(op_name(op), a.shape(), b.shape());
  const DataType compute = binary_compute_type(op, a.dtype(), b.dtype());
  Tensor out = empty(shape, {.dtype = returns_bool(op) ? kBool : compute, .device = a.device()});
  KernelTable<BinaryKernel>::call(a.device(), out, kernel_operand(op, compute, a, b.dtype()).expand(shape),
                                  kernel_operand(op, compute, b, a.dtype()).expand(shape), op);
  return out;
}

namespace {

// The dtype a Scalar takes when it meets a tensor of dtype t (PyTorch's wrapped numbers).
DataType wrapped_type(const Scalar& s, DataType t) {
  if (s.is_floating_point()) return is_floating_point(t) ? t : kFloat32;
  if (s.is_integral()) return t == kBool ? kInt64 : t;
  return t;
}

}  // namespace

Tensor binary(BinaryOp op, const Tensor& a, const Scalar& b) {
  return binary(op, a, scalar_tensor(b, {.dtype = wrapped_type(b, a.dtype()), .device = a.device()}));
}

Tensor binary(BinaryOp op, const Scalar& a, const Tensor& b) {
  return binary(op, scalar_tensor(a, {.dtype = wrapped_type(a, b.dtype()), .device = b.device()}), b);
}

void binary_(BinaryOp op, const Tensor& out, const Tensor& b_in) {
  NoGradGuard no_grad;
  const Tensor b = scalar_to(b_in, out.device());
  check_same_device(op_name(op), out, b);
  const DataType compute = binary_compute_type(op, out.dtype(), b.dtype());
  const DataType result = returns_bool(op) ? kBool : compute;
  if (result != out.dtype())
    throw DTypeError(op_name(op), concat("in-place result of type ", result, " cannot be stored in a ", out.dtype(),
                                         " tensor"));
  const Shape shape = broadcast_shapes(op_name(op), out.shape(), b.shape());
  if (shape != out.shape())
    throw ShapeError(op_name(op), concat("in-place operand of shape ", b.shape(), " does not broadcast to ",
                                         out.shape()));
  KernelTable<BinaryKernel>::call(out.device(), out, out, kernel_operand(op, compute, b, out.dtype()).expand(shape),
                                  op);
  out.storage().bump_version();
}

Tensor where(const Tensor& cond_in, const Tensor& a_in, const Tensor& b_in) {
  NoGradGuard no_grad;
  Device device = Device::cpu();  // the operands' device other than the CPU, if any
  for (const Tensor* t : {&cond_in, &a_in, &b_in})
    if (!t->device().is_cpu()) device = t->device();
  const Tensor cond = scalar_to(cond_in, device), a = scalar_to(a_in, device), b = scalar_to(b_in, device);
  check_same_device("where", cond, a);
  check_same_device("where", a, b);
  if (cond.dtype() != kBool) throw DTypeError("where", concat("condition must be bool, got ", cond.dtype()));
  const Shape shape = broadcast_shapes("where", broadcast_shapes("where", cond.shape(), a.shape()), b.shape());
  const DataType t = promote_types(a.dtype(), b.dtype());
  Tensor out = empty(shape, {.dtype = t, .device = a.device()});
  KernelTable<WhereKernel>::call(a.device(), out, cond.expand(shape), a.to(t).expand(shape), b.to(t).expand(shape));
  return out;
}

void accumulate_(const Tensor& dst, const Tensor& src) {
  NoGradGuard no_grad;
  check_same_device("accumulate_", dst, src);
  KernelTable<AccumulateKernel>::call(dst.device(), dst, src.to(dst.dtype()).expand(dst.shape()));
  dst.storage().bump_version();
}

bool may_have_internal_overlap(const Tensor& t) {
  // Dims sorted by stride must each step past everything the smaller ones reach.
  std::vector<std::pair<std::int64_t, std::int64_t>> dims;  // (stride, size)
  for (std::int64_t d = 0; d < t.dim(); ++d)
    if (t.shape()[d] > 1) dims.emplace_back(t.strides()[d], t.shape()[d]);
  std::ranges::sort(dims);
  std::int64_t reach = 1;
  for (const auto& [stride, size] : dims) {
    if (stride < reach) return true;
    reach = stride * (size - 1) + reach;
  }
  return false;
}

std::vector<bool> reduction_mask(std::string_view op, const std::vector<std::int64_t>& dims, std::int64_t ndim) {
  std::vector<bool> mask(static_cast<std::size_t>(ndim), dims.empty());
  for (std::int64_t d : dims) {
    const std::int64_t w = wrap_dim(op, d, ndim);
    if (ndim == 0) continue;
    if (mask[w]) throw IndexError(op, concat("dimension ", d, " appears more than once in ", dims));
    mask[w] = true;
  }
  return mask;
}

Tensor reduce(ReduceOp op, const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  NoGradGuard no_grad;
  constexpr std::string_view names[kReduceOpCount] = {"sum", "prod", "max", "min", "any", "all", "logsumexp"};
  const std::string_view name = names[static_cast<int>(op)];
  const std::vector<bool> mask = reduction_mask(name, dims, x.dim());
  Shape kept = x.shape(), squeezed;
  for (std::int64_t d = 0; d < x.dim(); ++d) {
    if (mask[d]) kept[d] = 1;
    else squeezed.push_back(x.shape()[d]);
  }
  if ((op == ReduceOp::Max || op == ReduceOp::Min) && x.numel() == 0 && x.dim() > 0) {
    for (std::int64_t d = 0; d < x.dim(); ++d)
      if (mask[d] && x.shape()[d] == 0)
        throw IndexError(name, concat("cannot reduce over dimension ", d, " of size 0 (shape ", x.shape(),
                                      "): the operation has no identity"));
  }
  DataType result = x.dtype();
  if (op == ReduceOp::Any || op == ReduceOp::All) result = kBool;
  else if ((op == ReduceOp::Sum || op == ReduceOp::Prod) && !is_floating_point(x.dtype())) result = kInt64;
  else if (op == ReduceOp::LogSumExp && !is_floating_point(x.dtype())) result = kFloat32;
  Tensor out = empty(kept, {.dtype = result, .device = x.device()});
  KernelTable<ReduceKernel>::call(x.device(), out, op == ReduceOp::LogSumExp ? x.to(result) : x, op);
  return keepdim ? out : out.view(squeezed);
}

std::vector<std::int64_t> sum_to_dims(const Shape& from, const Shape& to) {
  const std::int64_t lead = static_cast<std::int64_t>(from.size()) - static_cast<std::int64_t>(to.size());
  auto mismatch = [&] { return ShapeError("sum_to", concat("shape ", to, " does not broadcast to ", from)); };
  if (lead < 0) throw mismatch();
  std::vector<std::int64_t> dims;
  for (std::int64_t d = 0; d < static_cast<std::int64_t>(from.size()); ++d) {
    if (d < lead || (to[d - lead] == 1 && from[d] != 1)) dims.push_back(d);
    else if (to[d - lead] != from[d]) throw mismatch();
  }
  return dims;
}

}  // namespace infini::kernels
