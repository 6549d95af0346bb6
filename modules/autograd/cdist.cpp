// cdist (torch.cdist): the p-norm distance between every row of x1 (*, P, M) and every row
// of x2 (*, R, M), batch dims broadcast: norm(x1 (*, P, 1, M) - x2 (*, 1, R, M), p) over M.
// Computed on the differences (no ||a||^2 + ||b||^2 - 2ab shortcut, so no cancellation);
// the gradients are norm's, 0 where a distance is 0.
module;
#include <cstdint>
module infini.autograd;
import infini.std;

namespace infini {

Tensor cdist(const Tensor& x1, const Tensor& x2, double p) {
  if (const AutocastRegion cast(CastPolicy::kFloat32, x1); cast) return cdist(cast(x1), cast(x2), p);
  constexpr std::string_view op = "cdist";
  if (!x1.defined() || !x2.defined()) throw Error(op, "x1 and x2 must be defined tensors");
  if (x1.dim() < 2 || x2.dim() < 2)
    throw ShapeError(op, concat("expected x1 (*, P, M) and x2 (*, R, M) of at least 2 dims, got shapes ", x1.shape(),
                                " and ", x2.shape()));
  if (x1.shape().back() != x2.shape().back())
    throw ShapeError(op, concat("x1 of shape ", x1.shape(), " and x2 of shape ", x2.shape(),
                                " have rows of different sizes (", x1.shape().back(), " and ", x2.shape().back(), ")"));
  if (x1.device() != x2.device())
    throw DeviceError(op, concat("expected x1 and x2 on one device, got ", x1.device(), " and ", x2.device()));
  if (x1.dtype() != x2.dtype() || !is_floating_point(x1.dtype()))
    throw DTypeError(op,
                     concat("expected x1 and x2 of one floating-point dtype, got ", x1.dtype(), " and ", x2.dtype()));
  if (!(p >= 0)) throw Error(op, concat("p must be non-negative, got ", p));
  const Shape b1(x1.shape().begin(), x1.shape().end() - 2), b2(x2.shape().begin(), x2.shape().end() - 2);
  try {
    broadcast_shapes(op, b1, b2);
  } catch (const ShapeError&) {
    throw ShapeError(
        op, concat("the batch dims of x1 of shape ", x1.shape(), " and x2 of shape ", x2.shape(), " do not broadcast"));
  }
  // Rows of M = 0 elements are 0 apart for every p (norm's p = inf alone would refuse them).
  const double q = x1.shape().back() == 0 ? 2 : p;
  return norm(sub(x1.unsqueeze(-2), x2.unsqueeze(-3)), q, {-1});  // (*, P, R, M) -> (*, P, R)
}

}  // namespace infini
