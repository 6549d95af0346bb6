// Elementwise ops: forward through infini.kernels, backward formulas written with these
// same differentiable ops, so create_graph gives higher derivatives.
module;
#include <cmath>
module infini.autograd;
import infini.std;

namespace infini {
namespace {

using UnaryGrad = std::function<Tensor(const Tensor& g, const Tensor& x, const Tensor& y)>;

// What a node keeps for backward: only what its formula reads, so that in-place changes
// to the rest stay legal.
enum class Saves { Input, Output };

// y = op(x); the node saves x or y and maps g to grad(g, x, y) (the unsaved one undefined).
Tensor unary_fn(std::string_view name, UnaryOp op, const Tensor& x, Saves saves, UnaryGrad grad,
                UnaryParams params = {}) {
  Tensor y = kernels::unary(op, x, params);
  const bool input = saves == Saves::Input;
  record(name, {x}, {y}, {input ? x : y}, [grad = std::move(grad), input](const TensorList& g, const TensorList& s) {
    if (!g[0].defined()) return TensorList{Tensor()};
    return TensorList{input ? grad(g[0], s[0], Tensor()) : grad(g[0], Tensor(), s[0])};
  });
  return y;
}

// What backward needs to know of an operand it did not save.
struct OperandInfo {
  Shape shape;
  DataType dtype;
  bool requires_grad;
  explicit OperandInfo(const Tensor& t) : shape(t.shape()), dtype(t.dtype()), requires_grad(t.requires_grad()) {}
};

// The gradient of a broadcast operand: summed down to its shape, in its dtype.
Tensor reduce_grad(const Tensor& g, const OperandInfo& input) {
  Tensor r = sum_to(g, input.shape);
  return r.dtype() == input.dtype ? r : r.to(input.dtype);
}

using BinaryGrad = std::function<std::pair<Tensor, Tensor>(const Tensor& g, const Tensor& a, const Tensor& b,
                                                           const Tensor& y, bool need_a, bool need_b)>;

// Which of a, b and y = op(a, b) a binary op's backward reads.
struct BinarySaves {
  bool a = false, b = false, y = false;
};

// y = op(a, b); the node keeps what `saves` names; grad sees the rest as undefined tensors.
Tensor binary_fn(std::string_view name, BinaryOp op, const Tensor& a, const Tensor& b, BinarySaves saves,
                 BinaryGrad grad) {
  Tensor y = kernels::binary(op, a, b);
  if (!any_needs_grad({a, b})) return unrecorded(name, a, b, y);
  const Tensor none;
  record(name, {a, b}, {y}, {saves.a ? a : none, saves.b ? b : none, saves.y ? y : none},
         [grad = std::move(grad), ia = OperandInfo(a), ib = OperandInfo(b)](const TensorList& g, const TensorList& s) {
           if (!g[0].defined()) return TensorList{Tensor(), Tensor()};
           const bool need_a = ia.requires_grad && autograd::input_grad_needed(0);
           const bool need_b = ib.requires_grad && autograd::input_grad_needed(1);
           auto [ga, gb] = grad(g[0], s[0], s[1], s[2], need_a, need_b);
           return TensorList{need_a ? reduce_grad(ga, ia) : Tensor(), need_b ? reduce_grad(gb, ib) : Tensor()};
         });
  return y;
}

// A Scalar as a tensor operand of `t`'s op (PyTorch's wrapped-number dtype rules).
Tensor wrap(const Scalar& s, const Tensor& t) {
  DataType dtype = t.dtype();
  if (s.is_floating_point() && !is_floating_point(t.dtype())) dtype = kFloat32;
  else if (s.is_integral() && t.dtype() == kBool) dtype = kInt64;
  return scalar_tensor(s, {.dtype = dtype, .device = t.device()});
}

Tensor zero_like_scalar(const Tensor& t) { return scalar_tensor(0, {.dtype = t.dtype(), .device = t.device()}); }

// Replaces this in-place target's history with `node`'s (built from its old value).
void rebase_history(Tensor& x, const std::shared_ptr<Node>& node) {
  if (!node) return;
  AutogradMeta& meta = x.autograd_meta();
  meta.grad_fn = node;
  meta.output_nr = 0;
}

}  // namespace

// ---- arithmetic ----

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  const double s = alpha.to<double>();
  if (s != 1) return add(a, mul(b, alpha));
  return binary_fn("add", BinaryOp::Add, a, b, {}, [](const Tensor& g, const Tensor&, const Tensor&, const Tensor&, bool, bool) {
    return std::pair{g, g};
  });
}
Tensor add(const Tensor& a, const Scalar& b) { return add(a, wrap(b, a)); }

Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  if (alpha.to<double>() != 1) return sub(a, mul(b, alpha));
  return binary_fn("sub", BinaryOp::Sub, a, b, {}, [](const Tensor& g, const Tensor&, const Tensor&, const Tensor&, bool,
                                                  bool need_b) { return std::pair{g, need_b ? neg(g) : Tensor()}; });
}
Tensor sub(const Tensor& a, const Scalar& b) { return sub(a, wrap(b, a)); }
Tensor rsub(const Tensor& a, const Scalar& b) { return sub(wrap(b, a), a); }

Tensor mul(const Tensor& a, const Tensor& b) {
  return binary_fn("mul", BinaryOp::Mul, a, b, {.a = true, .b = true},
                   [](const Tensor& g, const Tensor& a, const Tensor& b, const Tensor&, bool need_a, bool need_b) {
                     return std::pair{need_a ? mul(g, b) : Tensor(), need_b ? mul(g, a) : Tensor()};
                   });
}
Tensor mul(const Tensor& a, const Scalar& b) { return mul(a, wrap(b, a)); }

Tensor div(const Tensor& a, const Tensor& b) {
  return binary_fn("div", BinaryOp::Div, a, b, {.b = true, .y = true},
                   [](const Tensor& g, const Tensor&, const Tensor& b, const Tensor& y, bool need_a, bool need_b) {
                     // d(a/b)/db = -a/b^2 = -y/b
                     return std::pair{need_a ? div(g, b) : Tensor(), need_b ? neg(div(mul(g, y), b)) : Tensor()};
                   });
}
Tensor div(const Tensor& a, const Scalar& b) { return div(a, wrap(b, a)); }
Tensor div(const Scalar& a, const Tensor& b) { return div(wrap(a, b), b); }

Tensor floor_divide(const Tensor& a, const Tensor& b) { return kernels::binary(BinaryOp::FloorDiv, a, b); }
Tensor floor_divide(const Tensor& a, const Scalar& b) { return kernels::binary(BinaryOp::FloorDiv, a, b); }

Tensor pow(const Tensor& base, const Tensor& exponent) {
  return binary_fn("pow", BinaryOp::Pow, base, exponent, {.a = true, .b = true, .y = true},
                   [](const Tensor& g, const Tensor& a, const Tensor& b, const Tensor& y, bool need_a, bool need_b) {
                     Tensor ga, gb;
                     // d(a^b)/da = b a^(b-1), taken as 0 where b == 0 (PyTorch's; 0 * 0^-1 would be NaN).
                     if (need_a) ga = where(eq(b, 0), 0.0, mul(g, mul(b, pow(a, sub(b, 1.0)))));
                     // d(a^b)/db = a^b log a, taken as 0 where a == 0 and b >= 0 (PyTorch's convention).
                     if (need_b) gb = where(logical_and(eq(a, 0), ge(b, 0)), 0.0, mul(g, mul(y, log(a))));
                     return std::pair{ga, gb};
                   });
}

Tensor pow(const Tensor& base, const Scalar& exponent) {
  const double e = exponent.to<double>();
  return unary_fn("pow", UnaryOp::PowScalar, base, Saves::Input,
                  [e](const Tensor& g, const Tensor& x, const Tensor&) {
                    return e == 0 ? mul(g, 0.0) : mul(g, mul(pow(x, e - 1), e));
                  },
                  {.a = e});
}

Tensor pow(const Scalar& base, const Tensor& exponent) { return pow(wrap(base, exponent), exponent); }

Tensor maximum(const Tensor& a, const Tensor& b) {
  return binary_fn("maximum", BinaryOp::Maximum, a, b, {.a = true, .b = true},
                   [](const Tensor& g, const Tensor& a, const Tensor& b, const Tensor&, bool need_a, bool need_b) {
                     // Ties give each side half, like PyTorch.
                     const Tensor share_a = add(gt(a, b), mul(eq(a, b), 0.5)).to(g.dtype());
                     return std::pair{need_a ? mul(g, share_a) : Tensor(), need_b ? mul(g, rsub(share_a, 1.0)) : Tensor()};
                   });
}

Tensor minimum(const Tensor& a, const Tensor& b) {
  return binary_fn("minimum", BinaryOp::Minimum, a, b, {.a = true, .b = true},
                   [](const Tensor& g, const Tensor& a, const Tensor& b, const Tensor&, bool need_a, bool need_b) {
                     const Tensor share_a = add(lt(a, b), mul(eq(a, b), 0.5)).to(g.dtype());
                     return std::pair{need_a ? mul(g, share_a) : Tensor(), need_b ? mul(g, rsub(share_a, 1.0)) : Tensor()};
                   });
}

// ---- unary ----

Tensor neg(const Tensor& x) {
  return unary_fn("neg", UnaryOp::Neg, x, Saves::Input, [](const Tensor& g, const Tensor&, const Tensor&) { return neg(g); });
}
Tensor abs(const Tensor& x) {
  return unary_fn("abs", UnaryOp::Abs, x, Saves::Input, [](const Tensor& g, const Tensor& x, const Tensor&) { return mul(g, sign(x)); });
}
Tensor sign(const Tensor& x) {
  return unary_fn("sign", UnaryOp::Sign, x, Saves::Input, [](const Tensor& g, const Tensor&, const Tensor&) { return mul(g, 0.0); });
}
Tensor exp(const Tensor& x) {
  return unary_fn("exp", UnaryOp::Exp, x, Saves::Output, [](const Tensor& g, const Tensor&, const Tensor& y) { return mul(g, y); });
}
Tensor expm1(const Tensor& x) {
  return unary_fn("expm1", UnaryOp::Expm1, x, Saves::Output,
                  [](const Tensor& g, const Tensor&, const Tensor& y) { return mul(g, add(y, 1.0)); });
}
Tensor log(const Tensor& x) {
  return unary_fn("log", UnaryOp::Log, x, Saves::Input, [](const Tensor& g, const Tensor& x, const Tensor&) { return div(g, x); });
}
Tensor log1p(const Tensor& x) {
  return unary_fn("log1p", UnaryOp::Log1p, x, Saves::Input,
                  [](const Tensor& g, const Tensor& x, const Tensor&) { return div(g, add(x, 1.0)); });
}
Tensor log2(const Tensor& x) {
  return unary_fn("log2", UnaryOp::Log2, x, Saves::Input,
                  [](const Tensor& g, const Tensor& x, const Tensor&) { return div(g, mul(x, std::numbers::ln2)); });
}
Tensor sqrt(const Tensor& x) {
  return unary_fn("sqrt", UnaryOp::Sqrt, x, Saves::Output,
                  [](const Tensor& g, const Tensor&, const Tensor& y) { return div(g, mul(y, 2.0)); });
}
Tensor rsqrt(const Tensor& x) {
  return unary_fn("rsqrt", UnaryOp::Rsqrt, x, Saves::Output, [](const Tensor& g, const Tensor&, const Tensor& y) {
    return mul(g, mul(pow(y, 3.0), -0.5));  // d x^-1/2 = -1/2 x^-3/2
  });
}
Tensor reciprocal(const Tensor& x) {
  return unary_fn("reciprocal", UnaryOp::Reciprocal, x, Saves::Output,
                  [](const Tensor& g, const Tensor&, const Tensor& y) { return neg(mul(g, mul(y, y))); });
}
Tensor sin(const Tensor& x) {
  return unary_fn("sin", UnaryOp::Sin, x, Saves::Input, [](const Tensor& g, const Tensor& x, const Tensor&) { return mul(g, cos(x)); });
}
Tensor cos(const Tensor& x) {
  return unary_fn("cos", UnaryOp::Cos, x, Saves::Input,
                  [](const Tensor& g, const Tensor& x, const Tensor&) { return neg(mul(g, sin(x))); });
}
Tensor tanh(const Tensor& x) {
  return unary_fn("tanh", UnaryOp::Tanh, x, Saves::Output,
                  [](const Tensor& g, const Tensor&, const Tensor& y) { return mul(g, rsub(mul(y, y), 1.0)); });
}
Tensor sigmoid(const Tensor& x) {
  return unary_fn("sigmoid", UnaryOp::Sigmoid, x, Saves::Output,
                  [](const Tensor& g, const Tensor&, const Tensor& y) { return mul(g, mul(y, rsub(y, 1.0))); });
}
Tensor erf(const Tensor& x) {
  return unary_fn("erf", UnaryOp::Erf, x, Saves::Input, [](const Tensor& g, const Tensor& x, const Tensor&) {
    return mul(g, mul(exp(neg(mul(x, x))), 2.0 * std::numbers::inv_sqrtpi));
  });
}
Tensor relu(const Tensor& x) {
  return unary_fn("relu", UnaryOp::Relu, x, Saves::Input,
                  [](const Tensor& g, const Tensor& x, const Tensor&) { return mul(g, gt(x, 0).to(g.dtype())); });
}
Tensor leaky_relu(const Tensor& x, double slope) {
  return unary_fn("leaky_relu", UnaryOp::LeakyRelu, x, Saves::Input,
                  [slope](const Tensor& g, const Tensor& x, const Tensor&) { return where(gt(x, 0), g, mul(g, slope)); },
                  {.a = slope});
}
Tensor elu(const Tensor& x, double alpha) {
  return unary_fn("elu", UnaryOp::Elu, x, Saves::Input,
                  [alpha](const Tensor& g, const Tensor& x, const Tensor&) {
                    // exp of min(x, 0): the branch where() drops must not overflow, or its
                    // 0 * inf would make the second derivative NaN.
                    return where(gt(x, 0), g, mul(g, mul(exp(clamp(x, std::nullopt, 0.0)), alpha)));
                  },
                  {.a = alpha});
}

namespace {

// gelu''(x) of differentiable ops: phi(x) (2 - x^2) for the erf form; for the tanh form,
// with t = tanh(u), u = k (x + c x^3): (1 - t^2) (u' - x t u'^2 + x u'' / 2).
Tensor gelu_second_derivative(const Tensor& x, GeluApproximation approximate) {
  const Tensor x2 = mul(x, x);
  if (approximate == GeluApproximation::None) {
    const Tensor pdf = mul(exp(mul(x2, -0.5)), 0.5 * std::numbers::sqrt2 * std::numbers::inv_sqrtpi);
    return mul(pdf, rsub(x2, 2.0));
  }
  constexpr double k = std::numbers::sqrt2 * std::numbers::inv_sqrtpi, c = 0.044715;
  const Tensor t = tanh(mul(mul(x, add(mul(x2, c), 1.0)), k));
  const Tensor du = mul(add(mul(x2, 3 * c), 1.0), k), d2u = mul(x, 6 * c * k);
  const Tensor inner = add(sub(du, mul(mul(x, t), mul(du, du))), mul(mul(x, d2u), 0.5));
  return mul(rsub(mul(t, t), 1.0), inner);
}

}  // namespace

// One fused kernel for the value; the gradients (d/dg = upstream gelu'(x), d/dx = upstream g
// gelu''(x)) are differentiable ops, so gelu's derivatives of any order exist.
Tensor gelu_backward(const Tensor& g, const Tensor& x, GeluApproximation approximate) {
  if (!is_floating_point(g.dtype()) || !is_floating_point(x.dtype()))
    throw DTypeError("gelu_backward", concat("expected floating-point gradient and input, got ", g.dtype(), " and ",
                                             x.dtype()));
  const BinaryOp op = approximate == GeluApproximation::Tanh ? BinaryOp::GeluTanhBackward : BinaryOp::GeluBackward;
  return binary_fn("gelu_backward", op, g, x, {.a = true, .b = true},
                   [approximate](const Tensor& up, const Tensor& g, const Tensor& x, const Tensor&, bool need_g,
                                 bool need_x) {
                     return std::pair{need_g ? gelu_backward(up, x, approximate) : Tensor(),
                                      need_x ? mul(mul(up, g), gelu_second_derivative(x, approximate)) : Tensor()};
                   });
}

Tensor gelu(const Tensor& x, GeluApproximation approximate) {
  const bool tanh_form = approximate == GeluApproximation::Tanh;
  return unary_fn("gelu", tanh_form ? UnaryOp::GeluTanh : UnaryOp::GeluErf, x, Saves::Input,
                  [approximate](const Tensor& g, const Tensor& x, const Tensor&) {
                    return gelu_backward(g, x, approximate);
                  });
}
Tensor silu(const Tensor& x) {
  return unary_fn("silu", UnaryOp::Silu, x, Saves::Input, [](const Tensor& g, const Tensor& x, const Tensor&) {
    const Tensor s = sigmoid(x);
    return mul(g, mul(s, add(mul(x, rsub(s, 1.0)), 1.0)));
  });
}
Tensor softplus(const Tensor& x, double beta, double threshold) {
  return unary_fn("softplus", UnaryOp::Softplus, x, Saves::Input,
                  [beta, threshold](const Tensor& g, const Tensor& x, const Tensor&) {
                    return where(gt(mul(x, beta), threshold), g, mul(g, sigmoid(mul(x, beta))));
                  },
                  {.a = beta, .b = threshold});
}
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max) {
  const double lo = min.value_or(std::nan("")), hi = max.value_or(std::nan(""));
  return unary_fn("clamp", UnaryOp::Clamp, x, Saves::Input,
                  [min, max](const Tensor& g, const Tensor& x, const Tensor&) {
                    Tensor pass = ones_like(x, TensorOptions{.dtype = kBool, .device = x.device()});
                    if (min) pass = logical_and(pass, ge(x, *min));
                    if (max) pass = logical_and(pass, le(x, *max));
                    return mul(g, pass.to(g.dtype()));
                  },
                  {.a = lo, .b = hi});
}

// ---- selection ----

Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) {
  Tensor y = kernels::where(condition, a, b);
  if (!any_needs_grad({a, b})) return unrecorded("where", a, b, y);
  record("where", {a, b}, {y}, {condition},
         [ia = OperandInfo(a), ib = OperandInfo(b)](const TensorList& g, const TensorList& s) {
           if (!g[0].defined()) return TensorList{Tensor(), Tensor()};
           const Tensor zero = zero_like_scalar(g[0]);
           return TensorList{ia.requires_grad ? reduce_grad(where(s[0], g[0], zero), ia) : Tensor(),
                             ib.requires_grad ? reduce_grad(where(s[0], zero, g[0]), ib) : Tensor()};
         });
  return y;
}
Tensor where(const Tensor& condition, const Tensor& a, const Scalar& b) { return where(condition, a, wrap(b, a)); }
Tensor where(const Tensor& condition, const Scalar& a, const Tensor& b) { return where(condition, wrap(a, b), b); }

Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight) {
  return add(start, mul(weight, sub(end, start)));
}
Tensor lerp(const Tensor& start, const Tensor& end, const Scalar& weight) {
  return add(start, mul(sub(end, start), weight));
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value) {
  if (mask.dtype() != kBool) throw DTypeError("masked_fill", concat("mask must be bool, got ", mask.dtype()));
  if (broadcast_shapes("masked_fill", mask.shape(), x.shape()) != x.shape())  // the mask may not grow x
    throw ShapeError("masked_fill", concat("mask of shape ", mask.shape(), " does not broadcast to ", x.shape()));
  return where(mask, wrap(value, x).to(x.dtype()), x);
}

// ---- comparisons and logic (no gradient) ----

Tensor eq(const Tensor& a, const Tensor& b) { return kernels::binary(BinaryOp::Eq, a, b); }
Tensor eq(const Tensor& a, const Scalar& b) { return kernels::binary(BinaryOp::Eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return kernels::binary(BinaryOp::Ne, a, b); }
Tensor ne(const Tensor& a, const Scalar& b) { return kernels::binary(BinaryOp::Ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return kernels::binary(BinaryOp::Lt, a, b); }
Tensor lt(const Tensor& a, const Scalar& b) { return kernels::binary(BinaryOp::Lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return kernels::binary(BinaryOp::Le, a, b); }
Tensor le(const Tensor& a, const Scalar& b) { return kernels::binary(BinaryOp::Le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return kernels::binary(BinaryOp::Gt, a, b); }
Tensor gt(const Tensor& a, const Scalar& b) { return kernels::binary(BinaryOp::Gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return kernels::binary(BinaryOp::Ge, a, b); }
Tensor ge(const Tensor& a, const Scalar& b) { return kernels::binary(BinaryOp::Ge, a, b); }
Tensor logical_and(const Tensor& a, const Tensor& b) { return kernels::binary(BinaryOp::LogicalAnd, a, b); }
Tensor logical_or(const Tensor& a, const Tensor& b) { return kernels::binary(BinaryOp::LogicalOr, a, b); }
Tensor logical_xor(const Tensor& a, const Tensor& b) { return kernels::binary(BinaryOp::LogicalXor, a, b); }
Tensor logical_not(const Tensor& x) { return kernels::unary(UnaryOp::LogicalNot, x); }
Tensor isnan(const Tensor& x) { return kernels::unary(UnaryOp::IsNan, x); }
Tensor isinf(const Tensor& x) { return kernels::unary(UnaryOp::IsInf, x); }

// ---- in place ----
// Without autograd the kernel writes into x directly. With it, the new value is computed
// out of place from a copy of x's old value (which the op's node may save), written into
// x, and x takes over the node as its history.

namespace {

template <class Compute>
Tensor& inplace(std::string_view op, Tensor& x, const Tensor& other, Compute compute) {
  const bool tracked = GradMode::is_enabled() && (x.requires_grad() || (other.defined() && other.requires_grad()));
  if (tracked) {
    if (x.is_leaf() && x.requires_grad())
      throw Error(op, "a leaf tensor that requires grad is used in an in-place operation (wrap it in NoGradGuard)");
    if (x.has_autograd_meta() && x.autograd_meta().is_view_of_graph)
      throw Error(op, "in-place write into a view of a tensor that requires grad is not supported (clone() the view)");
  }
  const Tensor value = compute(tracked ? x.clone() : x);
  if (value.shape() != x.shape())
    throw ShapeError(op, concat("in-place result of shape ", value.shape(), " does not fit the tensor's ", x.shape()));
  if (value.dtype() != x.dtype())
    throw DTypeError(op, concat("in-place result of type ", value.dtype(), " cannot be stored in a ", x.dtype(),
                                " tensor"));
  {
    NoGradGuard no_grad;
    x.copy_(value.detach());  // checks writability and bumps the version
  }
  if (tracked) rebase_history(x, value.grad_fn());
  return x;
}

// x op= b through the raw in-place kernel when nothing needs recording.
template <class Compute>
Tensor& inplace_binary(std::string_view op, BinaryOp kernel_op, Tensor& x, const Tensor& b, Compute compute) {
  if (GradMode::is_enabled() && (x.requires_grad() || b.requires_grad())) return inplace(op, x, b, compute);
  kernels::binary_(kernel_op, x, b);
  return x;
}

}  // namespace

Tensor& add_(Tensor& x, const Tensor& b, const Scalar& alpha) {
  if (alpha.to<double>() != 1) return add_(x, mul(b, alpha));
  return inplace_binary("add_", BinaryOp::Add, x, b, [&](const Tensor& old) { return add(old, b); });
}
Tensor& add_(Tensor& x, const Scalar& b) { return add_(x, wrap(b, x)); }
Tensor& sub_(Tensor& x, const Tensor& b, const Scalar& alpha) {
  if (alpha.to<double>() != 1) return sub_(x, mul(b, alpha));
  return inplace_binary("sub_", BinaryOp::Sub, x, b, [&](const Tensor& old) { return sub(old, b); });
}
Tensor& mul_(Tensor& x, const Tensor& b) {
  return inplace_binary("mul_", BinaryOp::Mul, x, b, [&](const Tensor& old) { return mul(old, b); });
}
Tensor& mul_(Tensor& x, const Scalar& b) { return mul_(x, wrap(b, x)); }
Tensor& div_(Tensor& x, const Tensor& b) {
  return inplace_binary("div_", BinaryOp::Div, x, b, [&](const Tensor& old) { return div(old, b); });
}
Tensor& div_(Tensor& x, const Scalar& b) { return div_(x, wrap(b, x)); }
Tensor& masked_fill_(Tensor& x, const Tensor& mask, const Scalar& value) {
  return inplace("masked_fill_", x, Tensor(), [&](const Tensor& old) { return masked_fill(old, mask, value); });
}

}  // namespace infini
