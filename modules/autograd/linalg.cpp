// Matrix products: forward through kernels::matmul, backward written with these same
// differentiable ops (matmul, views, sum_to), so create_graph gives second derivatives.
module;
#include <cstdint>
#include <optional>
#include <string_view>
module infini.autograd;

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
  if (!any_needs_grad(inputs)) return y;
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

// y = x @ weight^T + bias. Backward: dx = g @ weight, dweight = g^T @ x over all rows of
// x (one (out, rows) @ (rows, in) product), dbias = g summed to bias's shape. Outside
// create_graph, dweight and dbias come from one pass where the device fuses them
// (kernels::matmul_and_row_sums: dbias is the row sums of g^T).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (const AutocastRegion cast(CastPolicy::kLowerPrecision, x); cast) return linear(cast(x), cast(weight), cast(bias));
  if (weight.dim() != 2 || x.dim() == 0 || x.shape().back() != weight.shape()[1])
    throw ShapeError("linear", concat("input of shape ", x.shape(), " does not fit weight of shape ", weight.shape(),
                                      " (expected weight (out_features, in_features), input (*, in_features))"));
  Tensor y = kernels::matmul(x, weight.detach().t(), {.bias = bias, .op = "linear"});
  const TensorList inputs = bias.defined() ? TensorList{x, weight, bias} : TensorList{x, weight};
  if (!any_needs_grad(inputs)) return y;
  const Operand ix(x), iw(weight), ibias(bias);
  record("linear", inputs, {y}, {iw.requires_grad ? x : Tensor(), ix.requires_grad ? weight : Tensor()},
         [ix, iw, ibias, count = inputs.size()](const TensorList& g, const TensorList& s) {
           TensorList grads(count);
           if (!g[0].defined()) return grads;
           if (ix.requires_grad && autograd::input_grad_needed(0)) grads[0] = matmul(g[0], s[1]);  // (*, out) @ (out, in)
           const bool bias_grad = ibias.requires_grad && autograd::input_grad_needed(2);
           if (iw.requires_grad && autograd::input_grad_needed(1)) {
             const std::int64_t rows = rows_of(ix.shape), in = ix.shape.back(), out = iw.shape[0];
             const Tensor g2 = g[0].reshape({rows, out}), x2 = s[0].reshape({rows, in});
             const bool fusable = bias_grad && !GradMode::is_enabled() && ibias.shape.size() == 1 &&
                                  ibias.shape[0] == out && g2.dtype() == x2.dtype();
             if (const auto fused = fusable ? kernels::matmul_and_row_sums(g2.transpose(0, 1), x2) : std::nullopt) {
               grads[1] = fused->product;
               grads[2] = fused->row_sums;
               return grads;
             }
             grads[1] = matmul(g2.transpose(0, 1), x2);  // (out, rows) @ (rows, in)
           }
           if (bias_grad) grads[2] = sum_to(g[0], ibias.shape);
           return grads;
         });
  return y;
}

}  // namespace infini
