// quantile / nanquantile with PyTorch's algorithm: sort each slice (NaN last), turn q into
// a rank q (n - 1) (quantile: the last rank where the slice has a NaN, so the result is NaN;
// nanquantile: q (non-NaN count - 1), 0 when there is none), round it as the interpolation
// asks, gather the sorted values at the ranks below and above and interpolate. Written with
// differentiable ops: the gradient reaches x through sort and gather, and q through the
// linear interpolation weight.
module;
#include <cstdint>
module infini.autograd;
import infini.std;

namespace infini {
namespace {

// No-gradient rounding of nonnegative ranks.
Tensor floor_of(const Tensor& t) { return kernels::unary(UnaryOp::Floor, t); }
Tensor ceil_of(const Tensor& t) { return neg(floor_of(neg(t))); }
// Round half to even, like torch.round: floor(t + 0.5), less 1 at a tie whose result is odd.
Tensor round_half_even(const Tensor& t) {
  const Tensor r = floor_of(add(t, 0.5));
  const Tensor tie = eq(sub(r, t), 0.5);
  const Tensor odd = ne(sub(r, mul(floor_of(mul(r, 0.5)), 2.0)), 0);
  return where(logical_and(tie, odd), sub(r, 1.0), r);
}

void check(std::string_view name, const Tensor& x, const Tensor& q) {
  if (x.numel() == 0) throw ShapeError(name, concat("expected a non-empty input, got shape ", x.shape()));
  if (q.dim() > 1) throw ShapeError(name, concat("q must be a 0-d or 1-d tensor, got shape ", q.shape()));
  if (x.dtype() != kFloat32 && x.dtype() != kFloat64)
    throw DTypeError(name, concat("expected a float32 or float64 input, got ", x.dtype()));
  if (q.dtype() != x.dtype())
    throw DTypeError(name, concat("q must have the input's dtype ", x.dtype(), ", got ", q.dtype()));
  NoGradGuard no_grad;
  if (!all(logical_and(ge(q, 0), le(q, 1))).item<bool>()) throw Error(name, "q values must be in the range [0, 1]");
}

// x's slices (along dim, or all of x flattened) sorted along a new last dim, the other dims
// as in the result without q: shape (*, n).
Tensor sorted_slices(std::string_view name, const Tensor& x, std::optional<std::int64_t> dim, bool keepdim) {
  if (!dim || x.dim() == 0) {
    if (dim) wrap_dim(name, *dim, x.dim());
    Shape shape = keepdim ? Shape(static_cast<std::size_t>(x.dim()), 1) : Shape{};
    shape.push_back(x.numel());
    return sort(x.reshape({x.numel()})).values.view(shape);
  }
  const std::int64_t d = wrap_dim(name, *dim, x.dim());
  const Tensor sorted = sort(x.unsqueeze(-1).transpose(d, -1), -1).values;  // dim d now of size 1
  return keepdim ? sorted : sorted.squeeze(d);
}

Tensor quantile_of(std::string_view name, const Tensor& x, const Tensor& q, std::optional<std::int64_t> dim,
                   bool keepdim, QuantileInterpolation interpolation, bool ignore_nan) {
  check(name, x, q);
  const Tensor sorted = sorted_slices(name, x, dim, keepdim);  // (*, n)
  const std::int64_t n = sorted.shape().back();
  const Tensor q1 = q.reshape({q.numel()});                     // (Q)
  Tensor ranks;                                                 // (*, Q)
  if (ignore_nan) {
    const Tensor present = sum(logical_not(isnan(sorted)), {-1}, true);
    const Tensor r = mul(q1, sub(present, 1).to(x.dtype()));
    ranks = where(lt(r, 0), 0.0, r);
  } else {
    ranks = where(any(isnan(sorted), {-1}, true), static_cast<double>(n - 1), mul(q1, n - 1));
  }
  Tensor below, above;  // float ranks to gather at (no gradient)
  {
    NoGradGuard no_grad;
    const Tensor r = ranks.detach();
    switch (interpolation) {
      case QuantileInterpolation::Lower: below = above = floor_of(r); break;
      case QuantileInterpolation::Higher: below = above = ceil_of(r); break;
      case QuantileInterpolation::Nearest: below = above = round_half_even(r); break;
      case QuantileInterpolation::Linear:
      case QuantileInterpolation::Midpoint:
        below = floor_of(r);
        above = ceil_of(r);
        break;
    }
  }
  Tensor out = gather(sorted, -1, below.to(kInt64));
  if (interpolation == QuantileInterpolation::Linear)
    out = lerp(out, gather(sorted, -1, above.to(kInt64)), sub(ranks, below));
  else if (interpolation == QuantileInterpolation::Midpoint)
    out = lerp(out, gather(sorted, -1, above.to(kInt64)), 0.5);
  return q.dim() == 0 ? out.squeeze(-1) : movedim(out, -1, 0);  // q's dim first
}

// A double q as a 0-d tensor of x's dtype (float64 when x's dtype is rejected anyway).
Tensor q_tensor(std::string_view name, const Tensor& x, double q) {
  if (!(q >= 0 && q <= 1)) throw Error(name, concat("q must be in the range [0, 1], got ", q));
  return scalar_tensor(q, {.dtype = x.dtype() == kFloat32 ? kFloat32 : kFloat64, .device = x.device()});
}

}  // namespace

Tensor quantile(const Tensor& x, const Tensor& q, std::optional<std::int64_t> dim, bool keepdim,
                QuantileInterpolation interpolation) {
  return quantile_of("quantile", x, q, dim, keepdim, interpolation, false);
}
Tensor quantile(const Tensor& x, double q, std::optional<std::int64_t> dim, bool keepdim,
                QuantileInterpolation interpolation) {
  return quantile_of("quantile", x, q_tensor("quantile", x, q), dim, keepdim, interpolation, false);
}
Tensor nanquantile(const Tensor& x, const Tensor& q, std::optional<std::int64_t> dim, bool keepdim,
                   QuantileInterpolation interpolation) {
  return quantile_of("nanquantile", x, q, dim, keepdim, interpolation, true);
}
Tensor nanquantile(const Tensor& x, double q, std::optional<std::int64_t> dim, bool keepdim,
                   QuantileInterpolation interpolation) {
  return quantile_of("nanquantile", x, q_tensor("nanquantile", x, q), dim, keepdim, interpolation, true);
}

}  // namespace infini
