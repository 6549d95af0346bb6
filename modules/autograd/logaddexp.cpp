// logaddexp: log(exp(a) + exp(b)) without overflow, a and b broadcast, floating point only
// (integer pairs are a DTypeError, as PyTorch's). One node: the gradient w.r.t. a is
// sigmoid(a - b) (0.5 each at a == b; NaN where a == b == +-inf, as PyTorch's).
module infini.autograd;
import infini.std;

namespace infini {

Tensor logaddexp(const Tensor& a, const Tensor& b) {
  const DataType dtype = promote_types(a.dtype(), b.dtype());
  if (!is_floating_point(dtype))
    throw DTypeError("logaddexp", concat("expected floating-point inputs, got ", a.dtype(), " and ", b.dtype()));
  broadcast_shapes("logaddexp", a.shape(), b.shape());
  Tensor y;
  {
    NoGradGuard no_grad;
    const Tensor fa = a.to(dtype), fb = b.to(dtype);
    // max(a, b) + log1p(exp(-|a - b|)); equal infinities are their own result (their
    // difference would make it NaN). NaN propagates.
    const Tensor stable = add(maximum(fa, fb), log1p(exp(neg(abs(sub(fa, fb))))));
    y = where(logical_and(isinf(fa), eq(fa, fb)), fa, stable);
  }
  record("logaddexp", {a, b}, {y}, {a, b},
         [a_shape = a.shape(), b_shape = b.shape(), a_dtype = a.dtype(), b_dtype = b.dtype(),
          a_needs = a.requires_grad(), b_needs = b.requires_grad()](const TensorList& g, const TensorList& s) {
           if (!g[0].defined()) return TensorList{Tensor(), Tensor()};
           const Tensor d = sub(s[0], s[1]);  // broadcast shape
           Tensor ga, gb;
           if (a_needs && autograd::input_grad_needed(0)) ga = sum_to(mul(g[0], sigmoid(d)), a_shape).to(a_dtype);
           if (b_needs && autograd::input_grad_needed(1)) gb = sum_to(mul(g[0], sigmoid(neg(d))), b_shape).to(b_dtype);
           return TensorList{ga, gb};
         });
  return y;
}

}  // namespace infini
