// The singular value decomposition (torch.linalg.svd, svdvals): forward through SvdKernel
// (one-sided Jacobi, every device), whose per-matrix status is read back and raised;
// backward as PyTorch's svd_backward (torch/csrc/autograd/FunctionsManual.cpp), real case,
// written with differentiable ops on the saved U, S, Vh so that create_graph gives second
// derivatives.
module;
#include <cstdint>
module infini.autograd;
import infini.std;

namespace infini {
namespace {

Tensor mT(const Tensor& t) { return t.transpose(-1, -2); }

// diag(d) for d (*, k) -> (*, k, k), differentiable in d.
Tensor diag_embed(const Tensor& d) {
  const std::int64_t k = d.shape().back();
  return mul(d.unsqueeze(-1), eye(k, {.dtype = d.dtype(), .device = d.device()}));
}

// PyTorch's svd_backward for A (*, m, n) = U (*, m, k) diag(S (*, k)) Vh (*, k, n), the
// reduced factors, from the gradients of the three (any may be undefined). With
// E_ij = S_j^2 - S_i^2 (1 on the diagonal), skew(X) = X - X^T:
//   inner = (skew(U^T gU) S_j + S_i skew(Vh gVh^T)) / E + diag(gS)
//   gA = U inner Vh + (I - U U^T) gU S^-1 Vh      (m > n: U is not square)
//                   + U S^-1 gVh (I - Vh^T Vh)    (m < n: Vh is not square)
// where a term with an undefined gradient drops out; only gS: gA = U diag(gS) Vh.
Tensor svd_backward(const Tensor& gU, const Tensor& gS, const Tensor& gVh, const Tensor& U, const Tensor& S,
                    const Tensor& Vh) {
  const std::int64_t m = U.shape().end()[-2], n = Vh.shape().back();
  if (!gU.defined() && !gVh.defined()) {
    return m >= n ? matmul(U, mul(gS.unsqueeze(-1), Vh)) : matmul(mul(U, gS.unsqueeze(-2)), Vh);
  }
  const Tensor UhgU = gU.defined() ? matmul(mT(U), gU) : Tensor();
  const Tensor skew_u = gU.defined() ? sub(UhgU, mT(UhgU)) : Tensor();  // (*, k, k)
  const Tensor VhgV = gVh.defined() ? matmul(Vh, mT(gVh)) : Tensor();
  const Tensor skew_v = gVh.defined() ? sub(VhgV, mT(VhgV)) : Tensor();
  const Tensor S2 = mul(S, S);
  const std::int64_t k = S.shape().back();
  // S_j^2 - S_i^2 is exactly 0 on the diagonal, where the skew parts are 0 too: 0 / 1 there.
  const Tensor E = add(sub(S2.unsqueeze(-2), S2.unsqueeze(-1)), eye(k, {.dtype = S.dtype(), .device = S.device()}));
  const Tensor S_col = S.unsqueeze(-2), S_row = S.unsqueeze(-1);  // S_j along columns, S_i along rows
  Tensor inner;
  if (gU.defined() && gVh.defined()) inner = div(add(mul(skew_u, S_col), mul(S_row, skew_v)), E);
  else if (gU.defined()) inner = mul(div(skew_u, E), S_col);
  else inner = mul(S_row, div(skew_v, E));
  if (gS.defined()) inner = add(inner, diag_embed(gS));

  if (m > n && gU.defined()) {
    const Tensor gUSinv = div(gU, S_col);  // (*, m, k)
    const Tensor left = sub(add(matmul(U, inner), gUSinv), matmul(U, matmul(mT(U), gUSinv)));
    return matmul(left, Vh);
  }
  if (m < n && gVh.defined()) {
    const Tensor SinvgVh = div(gVh, S_row);  // (*, k, n)
    const Tensor right = sub(add(matmul(inner, Vh), SinvgVh), matmul(matmul(SinvgVh, mT(Vh)), Vh));
    return matmul(U, right);
  }
  return m >= n ? matmul(U, matmul(inner, Vh)) : matmul(matmul(U, inner), Vh);
}

// Raises what SvdKernel's status reports for the first matrix that failed.
void check_status(std::string_view op, const Tensor& status, const Shape& shape) {
  const Tensor host = status.to(Device::cpu());
  const std::int32_t* s = host.data_ptr<std::int32_t>();
  for (std::int64_t b = 0; b < host.numel(); ++b) {
    if (s[b] == 1)
      throw Error(op, concat("the input of shape ", shape, " contains non-finite values (Inf or NaN) in matrix ", b,
                             " of ", host.numel(), "; its SVD is not defined"));
    if (s[b] == 2)
      throw Error(op, concat("the Jacobi SVD did not converge for matrix ", b, " of ", host.numel(),
                             " of the input of shape ", shape));
  }
}

// The SVD of x (*, m, n), recorded as `op`.
SvdResult decompose(std::string_view op, const Tensor& x, bool full_matrices) {
  if (x.dtype() != kFloat32 && x.dtype() != kFloat64)
    throw DTypeError(op, concat("expected a float32 or float64 tensor, got ", x.dtype()));
  if (x.dim() < 2)
    throw ShapeError(op, concat("expected a tensor of shape (*, m, n) with at least 2 dims, got shape ", x.shape()));
  const std::int64_t m = x.shape().end()[-2], n = x.shape().back(), k = std::min(m, n);
  const Shape batch(x.shape().begin(), x.shape().end() - 2);
  std::int64_t count = 1;
  for (std::int64_t b : batch) count *= b;
  const std::int64_t u_cols = full_matrices ? m : k, vh_rows = full_matrices ? n : k;
  const TensorOptions options{.dtype = x.dtype(), .device = x.device()};
  Tensor U = empty({count, m, u_cols}, options), S = empty({count, k}, options),
         Vh = empty({count, vh_rows, n}, options);
  if (count > 0) {
    NoGradGuard no_grad;
    const Tensor a = x.detach().contiguous().reshape({count, m, n});
    const Tensor status = empty({count}, {.dtype = kInt32, .device = x.device()});
    KernelTable<SvdKernel>::call(x.device(), U, S, Vh, status, a);
    check_status(op, status, x.shape());
  }
  auto with = [&batch](std::initializer_list<std::int64_t> dims) {
    Shape shape = batch;
    shape.insert(shape.end(), dims);
    return shape;
  };
  U = U.view(with({m, u_cols}));
  S = S.view(with({k}));
  Vh = Vh.view(with({vh_rows, n}));
  record(op, {x}, {U, S, Vh}, {U, S, Vh}, [full_matrices, k, shape = x.shape()](const TensorList& g,
                                                                                 const TensorList& s) {
    if (!g[0].defined() && !g[1].defined() && !g[2].defined()) return TensorList{Tensor()};
    if (k == 0) return TensorList{zeros(shape, {.dtype = s[1].dtype(), .device = s[1].device()})};
    // Full matrices: only the first k columns of U and rows of Vh enter A (as PyTorch).
    auto narrow_u = [&](const Tensor& t) { return full_matrices && t.defined() ? t.narrow(-1, 0, k) : t; };
    auto narrow_vh = [&](const Tensor& t) { return full_matrices && t.defined() ? t.narrow(-2, 0, k) : t; };
    return TensorList{svd_backward(narrow_u(g[0]), g[1], narrow_vh(g[2]), narrow_u(s[0]), s[1], narrow_vh(s[2]))};
  });
  return {U, S, Vh};
}

}  // namespace

SvdResult linalg_svd(const Tensor& x, bool full_matrices) { return decompose("linalg_svd", x, full_matrices); }

Tensor svdvals(const Tensor& x) { return decompose("svdvals", x, false).S; }

}  // namespace infini
