// Matrix products: forward through kernels::matmul, backward written with these same
// differentiable ops (matmul, views, sum_to), so create_graph gives second derivatives.
module;
#include <cstdint>
module infini.autograd;
import infini.std;

namespace infini {
namespace {

// The matrices kernels::matmul multiplies: a 1-D a is a row (1, k), a 1-D b a column (k, 1).
Tensor as_row(const Tensor& a) { return a.dim() == 1 ? a.unsqueeze(0) : a; }
Tensor as_column(const Tensor& b) { return b.dim() == 1 ? b.unsqueeze(1) : b; }
Shape row_shape(const Shape& a) { return a.size() == 1 ? Shape{1, a[0]} : a; }
Shape column_shape(const Shape& b) { return b.size() == 1 ? Shape{b[0], 1} : b; }

Tensor scaled(const Tensor& t, double s) { return s == 1 ? t : mul(t, s); }

std::int64_t rows_of(const Shape& shape) {  // the product of all dims but the last
  std::int64_t rows = 1;
  for (std::size_t d = 0; d + 1 < shape.size(); ++d) rows *= shape[d];
  return rows;
}

// What backward knows of an operand it may not have saved.
struct Operand {
  Shape shape;
  bool requires_grad;
  explicit Operand(const Tensor& t)
      : shape(t.defined() ? t.shape() : Shape{}), requires_grad(t.defined() && t.requires_grad()) {}
};

// y = alpha * (a @ b) + beta * bias with kernels::matmul's rules, recorded as op.
// Backward, on the matrices (1-D operands lifted, g lifted to batch + (m, n)):
//   da = alpha * g @ b^T, db = alpha * a^T @ g, each summed over the batch dims its
//   operand was broadcast along; dbias = beta * g summed to bias's shape.
Tensor product(const Tensor& a, const Tensor& b, const kernels::MatmulOptions& o) {
  if (const AutocastRegion cast(CastPolicy::kLowerPrecision, a); cast) {
    kernels::MatmulOptions lowered = o;
    lowered.bias = cast(o.bias);
    return product(cast(a), cast(b), lowered);
  }
  Tensor y = kernels::matmul(a, b, o);
  const TensorList inputs = o.bias.defined() ? TensorList{a, b, o.bias} : TensorList{a, b};
  if (!any_needs_grad(inputs)) return unrecorded(o.op, inputs, y);
  const Operand ia(a), ib(b), ibias(o.bias);
  record(o.op, inputs, {y}, {ib.requires_grad ? a : Tensor(), ia.requires_grad ? b : Tensor()},
         [ia, ib, ibias, alpha = o.alpha, beta = o.beta, count = inputs.size()](const TensorList& g,
                                                                             const TensorList& s) {
           TensorList grads(count);
           if (!g[0].defined()) return grads;
           Tensor gl = g[0];  // batch + (m, n)
           if (ib.shape.size() == 1) gl = gl.unsqueeze(-1);
           if (ia.shape.size() == 1) gl = gl.unsqueeze(-2);
           if (ia.requires_grad && autograd::input_grad_needed(0)) {
             const Tensor da = matmul(gl, as_column(s[1]).transpose(-1, -2));  // batch + (m, k)
             grads[0] = scaled(sum_to(da, row_shape(ia.shape)), alpha).reshape(ia.shape);
           }
           if (ib.requires_grad && autograd::input_grad_needed(1)) {
             const Tensor al = as_row(s[0]);
             const Shape bl = column_shape(ib.shape);
             Tensor db;
             if (bl.size() == 2 && al.dim() > 2) {
               // One b for the whole batch: a single (k, rows) @ (rows, n) product.
               const std::int64_t rows = rows_of(al.shape()), k = bl[0], n = bl[1];
               db = matmul(al.reshape({rows, k}).transpose(0, 1), gl.reshape({rows, n}));
             } else {
               db = sum_to(matmul(al.transpose(-1, -2), gl), bl);  // batch + (k, n), summed
             }
             grads[1] = scaled(db, alpha).reshape(ib.shape);
           }
           if (ibias.requires_grad && autograd::input_grad_needed(2)) grads[2] = sum_to(scaled(g[0], beta), ibias.shape);
           return grads;
         });
  return y;
}

void expect_dims(std::string_view op, const Tensor& a, std::int64_t da, const Tensor& b, std::int64_t db) {
  if (a.dim() != da || b.dim() != db)
    throw ShapeError(op, concat("expected ", da, "-D and ", db, "-D operands, got shapes ", a.shape(), " and ",
                                b.shape()));
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) { return product(a, b, {.op = "matmul"}); }

Tensor mm(const Tensor& a, const Tensor& b) {
  expect_dims("mm", a, 2, b, 2);
  return product(a, b, {.op = "mm"});
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  expect_dims("bmm", a, 3, b, 3);
  if (a.shape()[0] != b.shape()[0])
    throw ShapeError("bmm", concat("batch sizes differ: shapes ", a.shape(), " and ", b.shape()));
  return product(a, b, {.op = "bmm"});
}

Tensor mv(const Tensor& a, const Tensor& x) {
  expect_dims("mv", a, 2, x, 1);
  return product(a, x, {.op = "mv"});
}

Tensor dot(const Tensor& a, const Tensor& b) {
  expect_dims("dot", a, 1, b, 1);
  if (a.shape()[0] != b.shape()[0])
    throw ShapeError("dot", concat("expected operands of one size, got shapes ", a.shape(), " and ", b.shape()));
  return product(a, b, {.op = "dot"});
}

Tensor outer(const Tensor& a, const Tensor& b) {
  expect_dims("outer", a, 1, b, 1);
  return product(a.unsqueeze(1), b.unsqueeze(0), {.op = "outer"});
}

Tensor baddbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2, const Scalar& beta,
               const Scalar& alpha) {
  if (const AutocastRegion cast(CastPolicy::kLowerPrecision, batch1); cast)
    return baddbmm(cast(input), cast(batch1), cast(batch2), beta, alpha);
  expect_dims("baddbmm", batch1, 3, batch2, 3);
  if (batch1.shape()[0] != batch2.shape()[0])
    throw ShapeError("baddbmm", concat("batch sizes differ: shapes ", batch1.shape(), " and ", batch2.shape()));
  return product(batch1, batch2,
                 {.bias = input, .beta = beta.to<double>(), .alpha = alpha.to<double>(), .op = "baddbmm"});
}

namespace {

// A linear layer's parameter gradients from its output gradient g (*, out) and input x
// (*, in): dW = g^T @ x over the rows (when weight_grad) and db = g summed to the bias's
// shape (when bias_grad). Outside create_graph both come from one product where the device
// fuses them (kernels::matmul_and_row_sums: db is the row sums of g^T). When the weight's
// existing grad may take it (autograd::accumulation_target), dW is summed into it by the GEMM
// itself and that grad returned (a weight gradient accumulated over micro-batches: no
// weight-sized temporary).
std::pair<Tensor, Tensor> linear_parameter_grads(const Tensor& g, const Tensor& x, bool weight_grad,
                                                 const Operand& bias, bool bias_grad, const Tensor& weight_target) {
  Tensor dw, db;
  if (weight_grad) {
    const std::int64_t rows = rows_of(g.shape()), out = g.shape().back();
    const Tensor g2 = g.reshape({rows, out}), x2 = x.reshape({rows, x.shape().back()});
    if (weight_target.defined() && weight_target.dtype() == g2.dtype() && g2.dtype() == x2.dtype() &&
        weight_target.device() == g2.device()) {
      kernels::matmul_accumulate_(weight_target, g2.transpose(0, 1), x2);  // (out, rows) @ (rows, in)
      return {weight_target, bias_grad ? sum_to(g, bias.shape) : Tensor()};
    }
    const bool fusable = bias_grad && !GradMode::is_enabled() && bias.shape.size() == 1 && bias.shape[0] == out &&
                         g2.dtype() == x2.dtype();
    if (const auto fused = fusable ? kernels::matmul_and_row_sums(g2.transpose(0, 1), x2) : std::nullopt)
      return {fused->product, fused->row_sums};
    dw = matmul(g2.transpose(0, 1), x2);  // (out, rows) @ (rows, in)
  }
  if (bias_grad) db = sum_to(g, bias.shape);
  return {dw, db};
}

}  // namespace

// y = x @ weight^T + bias. Backward: dx = g @ weight, and dweight, dbias from
// linear_parameter_grads.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (const AutocastRegion cast(CastPolicy::kLowerPrecision, x); cast) return linear(cast(x), cast(weight), cast(bias));
  if (weight.dim() != 2 || x.dim() == 0 || x.shape().back() != weight.shape()[1])
    throw ShapeError("linear", concat("input of shape ", x.shape(), " does not fit weight of shape ", weight.shape(),
                                      " (expected weight (out_features, in_features), input (*, in_features))"));
  Tensor y = kernels::matmul(x, weight.detach().t(), {.bias = bias, .op = "linear"});
  const TensorList inputs = bias.defined() ? TensorList{x, weight, bias} : TensorList{x, weight};
  if (!any_needs_grad(inputs)) return unrecorded("linear", inputs, y);
  const Operand ix(x), iw(weight), ibias(bias);
  record("linear", inputs, {y}, {iw.requires_grad ? x : Tensor(), ix.requires_grad ? weight : Tensor()},
         [ix, iw, ibias, count = inputs.size()](const TensorList& g, const TensorList& s) {
           TensorList grads(count);
           if (!g[0].defined()) return grads;
           if (ix.requires_grad && autograd::input_grad_needed(0)) grads[0] = matmul(g[0], s[1]);  // (*, out) @ (out, in)
           const bool weight_grad = iw.requires_grad && autograd::input_grad_needed(1);
           const bool bias_grad = ibias.requires_grad && autograd::input_grad_needed(2);
           auto [dw, db] = linear_parameter_grads(g[0], s[0], weight_grad, ibias, bias_grad,
                                                  weight_grad ? autograd::accumulation_target(1) : Tensor());
           grads[1] = dw;
           if (bias_grad) grads[2] = db;
           return grads;
         });
  return y;
}

// Saved: x, w1, b1, w2, and the forward's pre-activation (rows, hidden) and activation. With
// create_graph the backward recomputes both from x, w1 and b1 with history, so every
// gradient it returns is differentiable.
Tensor dense_gelu_dense(const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2, const Tensor& b2,
                        GeluApproximation approximate) {
  if (const AutocastRegion cast(CastPolicy::kLowerPrecision, x); cast)
    return dense_gelu_dense(cast(x), cast(w1), cast(b1), cast(w2), cast(b2), approximate);
  constexpr std::string_view op = "dense_gelu_dense";
  if (w1.dim() != 2 || w2.dim() != 2 || x.dim() == 0 || x.shape().back() != w1.shape()[1] ||
      w2.shape()[1] != w1.shape()[0])
    throw ShapeError(op, concat("input of shape ", x.shape(), " does not fit weights of shapes ", w1.shape(), " and ",
                                w2.shape(), " (expected input (*, in), w1 (hidden, in), w2 (out, hidden))"));
  const std::int64_t rows = rows_of(x.shape()), in = w1.shape()[1], hidden = w1.shape()[0], out = w2.shape()[0];
  for (const auto& [bias, size, name] : {std::tuple{b1, hidden, "b1"}, std::tuple{b2, out, "b2"}})
    if (bias.defined() && bias.shape() != Shape{size})
      throw ShapeError(op, concat("expected ", name, " of shape ", Shape{size}, ", got ", bias.shape()));
  const bool tanh_form = approximate == GeluApproximation::Tanh;
  const Tensor x2 = x.detach().reshape({rows, in});

  // pre = x w1^T + b1 and act = gelu(pre) (rows, hidden), from one product where the device
  // fuses them, then y = act w2^T + b2.
  const bool one_kind = b1.defined() && w1.dtype() == x.dtype() && b1.dtype() == x.dtype() &&
                        w1.device() == x.device() && b1.device() == x.device();
  const auto fused = tanh_form && one_kind ? kernels::matmul_bias_gelu(x2, w1.detach().t(), b1.detach()) : std::nullopt;
  const Tensor pre = fused ? fused->pre : kernels::matmul(x2, w1.detach().t(), {.bias = b1, .op = op});
  const Tensor act = fused ? fused->activation : kernels::unary(tanh_form ? UnaryOp::GeluTanh : UnaryOp::GeluErf, pre);
  Shape y_shape = x.shape();
  y_shape.back() = out;
  const Tensor y = kernels::matmul(act, w2.detach().t(), {.bias = b2, .op = op}).view(y_shape);

  TensorList inputs{x, w1};
  if (b1.defined()) inputs.push_back(b1);
  inputs.push_back(w2);
  if (b2.defined()) inputs.push_back(b2);
  if (!any_needs_grad(inputs)) return unrecorded(op, inputs, y);
  // Where each parameter's gradient goes in the node's inputs (-1: no such input).
  const int at_b1 = b1.defined() ? 2 : -1, at_w2 = b1.defined() ? 3 : 2, at_b2 = b2.defined() ? at_w2 + 1 : -1;
  const Operand ix(x), iw1(w1), ib1(b1), iw2(w2), ib2(b2);
  record(op, inputs, {y}, {x, w1, b1, w2, pre, act},
         [=, count = inputs.size()](const TensorList& g, const TensorList& s) {
           TensorList grads(count);
           if (!g[0].defined()) return grads;
           auto needed = [](const Operand& o, int at) {
             return at >= 0 && o.requires_grad && autograd::input_grad_needed(static_cast<std::size_t>(at));
           };
           const Tensor &sx = s[0], &sw1 = s[1], &sb1 = s[2], &sw2 = s[3];
           Tensor h = s[4], a = s[5];
           if (GradMode::is_enabled()) {
             h = linear(sx.reshape({rows, in}), sw1, sb1);
             a = gelu(h, approximate);
           }
           Shape hidden_shape = ix.shape;
           hidden_shape.back() = hidden;
           // c_proj: dw2, db2 from g and act; the GELU's input gradient dh = (g @ w2) gelu'(pre).
           const bool w2_grad = needed(iw2, at_w2);
           auto [dw2, db2] = linear_parameter_grads(
               g[0], a.view(hidden_shape), w2_grad, ib2, needed(ib2, at_b2),
               w2_grad ? autograd::accumulation_target(static_cast<std::size_t>(at_w2)) : Tensor());
           if (w2_grad) grads[static_cast<std::size_t>(at_w2)] = dw2;
           if (needed(ib2, at_b2)) grads[static_cast<std::size_t>(at_b2)] = db2;
           const bool w1_grad = needed(iw1, 1), b1_grad = needed(ib1, at_b1), x_grad = needed(ix, 0);
           if (!w1_grad && !b1_grad && !x_grad) return grads;
           const Tensor g2 = g[0].reshape({rows, out});
           std::optional<Tensor> dh;
           if (tanh_form && !GradMode::is_enabled() && g2.dtype() == h.dtype())
             dh = kernels::matmul_gelu_grad(g2, sw2.detach(), h);
           if (!dh) dh = gelu_backward(matmul(g2, sw2), h, approximate);  // (rows, out) @ (out, hidden)
           auto [dw1, db1] = linear_parameter_grads(dh->view(hidden_shape), sx, w1_grad, ib1, b1_grad,
                                                    w1_grad ? autograd::accumulation_target(1) : Tensor());
           if (w1_grad) grads[1] = dw1;
           if (b1_grad) grads[static_cast<std::size_t>(at_b1)] = db1;
           if (x_grad) grads[0] = matmul(*dh, sw1).view(ix.shape);  // (rows, hidden) @ (hidden, in)
           return grads;
         });
  return y;
}

}  // namespace infini
