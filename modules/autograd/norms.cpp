// Vector and matrix norms: norm / vector_norm for any p over any dims, matrix_norm over
// two dims ("nuc" and +-2 through svdvals, svd.cpp). float16/bfloat16 are computed in
// float32 and rounded back (except for the singular values, as PyTorch). Gradients follow
// PyTorch's norm_backward: 0 where the norm is 0, split among ties for p = +-inf.
module;
#include <cmath>
#include <cstdint>
module infini.autograd;
import infini.std;

namespace infini {

using namespace reductions;

namespace {

// sqrt(sum(x^2)); the gradient x / norm is taken as 0 where the norm is 0.
Tensor l2_norm(std::string_view name, const Tensor& x, const std::vector<std::int64_t>& dims, const Mask& mask,
               bool keepdim) {
  Tensor y = kernels::unary(UnaryOp::Sqrt, kernels::reduce(ReduceOp::Sum, kernels::binary(BinaryOp::Mul, x, x),
                                                           dims, keepdim));
  record(name, {x}, {y}, {x, y}, [mask, keepdim](const TensorList& g, const TensorList& s) {
    if (!g[0].defined()) return TensorList{Tensor()};
    const Tensor y = unsqueeze_reduced(s[1], mask, keepdim);
    const Tensor zero = eq(y, 0);
    const Tensor unit = div(s[0], where(zero, 1.0, y));
    return TensorList{where(zero, 0.0, mul(unsqueeze_reduced(g[0], mask, keepdim), unit))};
  });
  return y;
}

// The number of nonzero elements (p = 0): a gradient of 0, as PyTorch's norm_backward.
Tensor count_norm(std::string_view name, const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  Tensor y = kernels::reduce(ReduceOp::Sum, ne(x, 0), dims, keepdim).to(x.dtype());
  record(name, {x}, {y}, {x}, [](const TensorList& g, const TensorList& s) {
    if (!g[0].defined()) return TensorList{Tensor()};
    return TensorList{zeros_like(s[0])};
  });
  return y;
}

// (sum |x|^p)^(1/p) for p not in {0, 1, 2, +-inf}. Gradient g sgn(x) |x|^(p-1) / norm^(p-1):
// for p < 1 written as g sgn(x) |x|^(p-1) norm^(1-p) with 0 at the zeros of x (where
// |x|^(p-1) is inf); for p > 1 as 0 where the norm is 0.
Tensor power_norm(std::string_view name, const Tensor& x, double p, const std::vector<std::int64_t>& dims,
                  const Mask& mask, bool keepdim) {
  Tensor y;
  {
    NoGradGuard no_grad;
    y = pow(sum(pow(abs(x), p), dims, keepdim), 1 / p);
  }
  record(name, {x}, {y}, {x, y}, [p, mask, keepdim](const TensorList& g, const TensorList& s) {
    if (!g[0].defined()) return TensorList{Tensor()};
    const Tensor& x = s[0];
    const Tensor y = unsqueeze_reduced(s[1], mask, keepdim);
    const Tensor grad = unsqueeze_reduced(g[0], mask, keepdim);
    if (p < 1) {
      const Tensor zero = eq(x, 0);
      const Tensor scaled = where(zero, 0.0, mul(sign(x), pow(where(zero, 1.0, abs(x)), p - 1)));
      return TensorList{mul(mul(scaled, grad), pow(y, 1 - p))};
    }
    const Tensor zero = eq(y, 0);
    const Tensor scaled = p < 2 ? mul(sign(x), pow(abs(x), p - 1)) : mul(x, pow(abs(x), p - 2));
    const Tensor scale = where(zero, 0.0, div(grad, pow(where(zero, 1.0, y), p - 1)));
    return TensorList{mul(scaled, scale)};
  });
  return y;
}

// The vector p-norm of x over dims, named `name` in errors.
Tensor vector_p_norm(std::string_view name, const Tensor& x, double p, const std::vector<std::int64_t>& dims,
                     bool keepdim) {
  require_floating(name, x);
  const Mask mask = kernels::reduction_mask(name, dims, x.dim());
  if (std::isnan(p)) throw Error(name, "p is NaN");
  // min |x|, max |x| and negative powers have no identity
  if (p < 0 || std::isinf(p)) require_nonempty(name, x, mask);
  const Tensor xf = upcast(x);
  Tensor y;
  if (p == 0) y = count_norm(name, xf, dims, keepdim);
  else if (p == 1) y = sum(abs(xf), dims, keepdim);
  else if (p == 2) y = l2_norm(name, xf, dims, mask, keepdim);
  else if (std::isinf(p)) y = p > 0 ? amax(abs(xf), dims, keepdim) : amin(abs(xf), dims, keepdim);
  else y = power_norm(name, xf, p, dims, mask, keepdim);
  return downcast(y, x.dtype());
}

// The two dims of a matrix norm, wrapped; x must have at least two dims.
std::pair<std::int64_t, std::int64_t> matrix_dims(const Tensor& x, const std::vector<std::int64_t>& dims) {
  require_floating("matrix_norm", x);
  if (x.dim() < 2)
    throw ShapeError("matrix_norm", concat("expected a tensor of shape (*, m, n) with at least 2 dims, got shape ",
                                           x.shape()));
  if (dims.size() != 2) throw IndexError("matrix_norm", concat("expected 2 dims, got ", dims.size()));
  const std::int64_t d0 = wrap_dim("matrix_norm", dims[0], x.dim()), d1 = wrap_dim("matrix_norm", dims[1], x.dim());
  if (d0 == d1) throw IndexError("matrix_norm", concat("the two dims must differ, got ", dims[0], " and ", dims[1]));
  return {d0, d1};
}

// "nuc" (ord = 0 here) and ord = +-2: the sum, max or min of the singular values of the
// matrices over (d0, d1), moved to the end. float32 / float64 only, as PyTorch.
Tensor singular_value_norm(const Tensor& x, std::string_view ord_name, double ord, std::int64_t d0, std::int64_t d1,
                           bool keepdim) {
  if (x.dtype() != kFloat32 && x.dtype() != kFloat64)
    throw DTypeError("matrix_norm", concat("ord ", ord_name, " needs singular values, computed in float32 and float64 "
                                           "only (as PyTorch), got ", x.dtype()));
  if (ord != 0) {  // a max / min over the singular values, of which an empty matrix has none
    Mask over(static_cast<std::size_t>(x.dim()), false);
    over[d0] = over[d1] = true;
    require_nonempty("matrix_norm", x, over);
  }
  std::vector<std::int64_t> order;
  for (std::int64_t d = 0; d < x.dim(); ++d)
    if (d != d0 && d != d1) order.push_back(d);
  order.push_back(d0);
  order.push_back(d1);
  const Tensor sv = svdvals(x.permute(order));  // (*, k)
  Tensor y = ord == 0 ? sum(sv, {-1}) : ord > 0 ? amax(sv, {-1}) : amin(sv, {-1});
  if (keepdim) y = y.unsqueeze(std::min(d0, d1)).unsqueeze(std::max(d0, d1));
  return y;
}

}  // namespace

Tensor norm(const Tensor& x, double p, const std::vector<std::int64_t>& dims, bool keepdim) {
  return vector_p_norm("norm", x, p, dims, keepdim);
}

Tensor vector_norm(const Tensor& x, double ord, const std::vector<std::int64_t>& dims, bool keepdim) {
  return vector_p_norm("vector_norm", x, ord, dims, keepdim);
}

Tensor matrix_norm(const Tensor& x, std::string_view ord, const std::vector<std::int64_t>& dims, bool keepdim) {
  const auto [d0, d1] = matrix_dims(x, dims);
  if (ord == "fro") return vector_p_norm("matrix_norm", x, 2, {d0, d1}, keepdim);
  if (ord == "nuc") return singular_value_norm(x, "\"nuc\"", 0, d0, d1, keepdim);
  throw Error("matrix_norm", concat("ord must be \"fro\" or \"nuc\", got \"", ord, "\""));
}

// ord = 1 / -1: max / min over dims[1] of the absolute sums over dims[0] (column sums);
// ord = inf / -inf: the same with the dims swapped (row sums); ord = 2 / -2: the largest /
// smallest singular value.
Tensor matrix_norm(const Tensor& x, double ord, const std::vector<std::int64_t>& dims, bool keepdim) {
  auto [d0, d1] = matrix_dims(x, dims);
  if (std::abs(ord) == 2) return singular_value_norm(x, concat(ord), ord, d0, d1, keepdim);
  if (std::abs(ord) != 1 && !std::isinf(ord))
    throw Error("matrix_norm", concat("ord must be 1, -1, 2, -2, inf or -inf (or \"fro\", \"nuc\"), got ", ord));
  if (std::isinf(ord)) std::swap(d0, d1);
  Mask over(static_cast<std::size_t>(x.dim()), false);
  over[d1] = true;
  require_nonempty("matrix_norm", x, over);
  const Tensor sums = sum(abs(upcast(x)), {d0}, true);
  Tensor y = ord > 0 ? amax(sums, {d1}, true) : amin(sums, {d1}, true);
  if (!keepdim) y = y.squeeze(std::max(d0, d1)).squeeze(std::min(d0, d1));
  return downcast(y, x.dtype());
}

}  // namespace infini
