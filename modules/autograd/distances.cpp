// Distances between broadcast pairs of vectors: cosine_similarity and pairwise_distance,
// compositions of differentiable ops with PyTorch's forms (and so its gradients).
module;
#include <cstdint>
module infini.autograd;
import infini.std;

namespace infini {
namespace {

// max(s, floor) whose gradient passes to s unchanged, as PyTorch's cosine_similarity gets
// by clamping in place under no_grad.
Tensor clamp_min_passing_gradient(const Tensor& s, double floor) {
  Tensor y;
  {
    NoGradGuard no_grad;
    y = clamp(s, floor, std::nullopt);
  }
  record("cosine_similarity", {s}, {y}, {}, [](const TensorList& g, const TensorList&) { return TensorList{g[0]}; });
  return y;
}

}  // namespace

// sum((x1 / n1) (x2 / n2)) along dim, each n = sqrt(max(sum(x^2), eps^2)) over dim: the
// inputs are normalised first, so |result| <= 1 (PyTorch 1.13's form; below eps its
// gradient flows through the unclamped sum of squares, as PyTorch's does).
Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, std::int64_t dim, double eps) {
  const DataType dtype = promote_types(x1.dtype(), x2.dtype());
  if (!is_floating_point(dtype))
    throw DTypeError("cosine_similarity", concat("expected a floating-point input, got ", x1.dtype(), " and ",
                                                 x2.dtype()));
  if (!(eps >= 0)) throw Error("cosine_similarity", concat("eps must be >= 0, got ", eps));
  const Shape shape = broadcast_shapes("cosine_similarity", x1.shape(), x2.shape());
  const std::int64_t d = wrap_dim("cosine_similarity", dim, static_cast<std::int64_t>(shape.size()));
  // Integer inputs take the common floating type; floating ones keep theirs, like PyTorch.
  const auto unit = [&](const Tensor& x) {
    const Tensor v = (is_floating_point(x.dtype()) ? x : x.to(dtype)).expand(shape);
    return div(v, sqrt(clamp_min_passing_gradient(sum(mul(v, v), {d}, true), eps * eps)));
  };
  return sum(mul(unit(x1), unit(x2)), {d});
}

// norm(x1 - x2 + eps, p) over the last dim of the broadcast (dim -1 of 0-d inputs too).
Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p, double eps, bool keepdim) {
  broadcast_shapes("pairwise_distance", x1.shape(), x2.shape());
  const std::int64_t last = std::max(x1.dim(), x2.dim()) - 1;
  return norm(add(sub(x1, x2), eps), p, {last}, keepdim);
}

}  // namespace infini
