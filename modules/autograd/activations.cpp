// torch.nn.functional's activations beyond the elementwise family: hardtanh, relu6,
// hardsigmoid, hardswish, logsigmoid (piecewise or overflow-prone: a node of their own whose
// backward, written with differentiable ops, gives PyTorch's gradient at the kinks), and
// selu, celu, mish, glu, prelu (compositions of differentiable ops).
module;
#include <cmath>
#include <cstdint>
module infini.autograd;
import infini.std;

namespace infini {
namespace {

// SELU's constants, as PyTorch's.
constexpr double kSeluAlpha = 1.6732632423543772848170429916717;
constexpr double kSeluScale = 1.0507009873554804934193349852946;

void check_floating(std::string_view op, const Tensor& x) {
  if (!is_floating_point(x.dtype())) throw DTypeError(op, concat("expected a floating-point input, got ", x.dtype()));
}

// y = forward(x), computed without a graph, recorded as one node `op` whose backward is
// g * slope(x); slope is built of differentiable ops, so higher derivatives follow.
template <class Forward, class Slope>
Tensor with_slope(std::string_view op, const Tensor& x, Forward forward, Slope slope) {
  Tensor y;
  {
    NoGradGuard no_grad;
    y = forward(x);
  }
  record(op, {x}, {y}, {x}, [slope](const TensorList& g, const TensorList& s) {
    if (!g[0].defined()) return TensorList{Tensor()};
    return TensorList{mul(g[0], slope(s[0]))};
  });
  return y;
}

// clamp(x, lo, hi) whose gradient passes only strictly inside (lo, hi) (and at NaN), as
// PyTorch's hardtanh_backward. Integer inputs clamp to the bounds truncated to integers.
Tensor hardtanh_named(std::string_view op, const Tensor& x, double lo, double hi) {
  if (x.dtype() == kBool) throw DTypeError(op, "bool inputs are not supported");
  if (!is_floating_point(x.dtype())) {
    lo = std::trunc(lo);
    hi = std::trunc(hi);
    if (x.dtype() == kUInt8 && (lo < 0 || hi < 0))
      throw Error(op, concat("cannot clamp a uint8 input to negative bounds (", lo, ", ", hi, ")"));
  }
  return with_slope(op, x, [lo, hi](const Tensor& v) { return clamp(v, lo, hi); },
                    [lo, hi](const Tensor& v) { return logical_not(logical_or(le(v, lo), ge(v, hi))).to(v.dtype()); });
}

}  // namespace

Tensor hardtanh(const Tensor& x, double min_val, double max_val) {
  return hardtanh_named("hardtanh", x, min_val, max_val);
}

Tensor relu6(const Tensor& x) { return hardtanh_named("relu6", x, 0.0, 6.0); }

// relu6(x + 3) / 6; the gradient 1/6 strictly inside (-3, 3), else 0.
Tensor hardsigmoid(const Tensor& x) {
  check_floating("hardsigmoid", x);
  return with_slope("hardsigmoid", x, [](const Tensor& v) { return div(clamp(add(v, 3.0), 0.0, 6.0), 6.0); },
                    [](const Tensor& v) { return mul(logical_and(gt(v, -3.0), lt(v, 3.0)).to(v.dtype()), 1.0 / 6); });
}

// x relu6(x + 3) / 6; the gradient (PyTorch's hardswish_backward) is 0 below -3,
// x / 3 + 1/2 on [-3, 3] and 1 above (or at NaN).
Tensor hardswish(const Tensor& x) {
  check_floating("hardswish", x);
  return with_slope("hardswish", x, [](const Tensor& v) { return div(mul(v, clamp(add(v, 3.0), 0.0, 6.0)), 6.0); },
                    [](const Tensor& v) {
                      return where(lt(v, -3.0), 0.0, where(le(v, 3.0), add(div(v, 3.0), 0.5), 1.0));
                    });
}

// min(x, 0) - log1p(exp(-|x|)): no exp overflows. Its derivative sigmoid(-x) is the node's
// (the composition's abs and min would be exact at 0 only to first order).
Tensor logsigmoid(const Tensor& x) {
  check_floating("logsigmoid", x);
  return with_slope("logsigmoid", x,
                    [](const Tensor& v) { return sub(clamp(v, std::nullopt, 0.0), log1p(exp(neg(abs(v))))); },
                    [](const Tensor& v) { return sigmoid(neg(v)); });
}

Tensor selu(const Tensor& x) {
  check_floating("selu", x);
  return mul(elu(x, kSeluAlpha), kSeluScale);
}

// x where x > 0, else alpha * expm1(x / alpha) (PyTorch's elu with input scale 1/alpha: the
// gradient at 0 is 1). The exps read min(x, 0), so the branch where() drops cannot overflow
// into a 0 * inf gradient. The slope exp(x / alpha) is computed as such, as elu's is: from
// expm1's result + 1 it would lose its relative precision for x / alpha << 0.
Tensor celu(const Tensor& x, double alpha) {
  check_floating("celu", x);
  if (alpha == 0) throw Error("celu", "alpha cannot be 0");
  return with_slope(
      "celu", x,
      [alpha](const Tensor& v) { return where(gt(v, 0.0), v, mul(expm1(div(clamp(v, std::nullopt, 0.0), alpha)), alpha)); },
      [alpha](const Tensor& v) { return where(gt(v, 0.0), 1.0, exp(div(clamp(v, std::nullopt, 0.0), alpha))); });
}

// softplus returns x above its threshold, and tanh of it is then 1: finite for any x.
Tensor mish(const Tensor& x) {
  check_floating("mish", x);
  return mul(x, tanh(softplus(x)));
}

Tensor glu(const Tensor& x, std::int64_t dim) {
  check_floating("glu", x);
  if (x.dim() == 0) throw ShapeError("glu", "a 0-d input cannot be halved; expected at least one dim");
  const std::int64_t d = wrap_dim("glu", dim, x.dim());
  const std::int64_t size = x.shape()[d];
  if (size % 2 != 0)
    throw ShapeError("glu", concat("dim ", dim, " of input of shape ", x.shape(), " has size ", size,
                                   ", which must be even to halve"));
  const std::int64_t half = size / 2;
  return mul(x.narrow(d, 0, half), sigmoid(x.narrow(d, half, half)));
}

Tensor prelu(const Tensor& x, const Tensor& weight) {
  if (const AutocastRegion cast(CastPolicy::kLowerPrecision, x); cast) return prelu(cast(x), cast(weight));
  check_floating("prelu", x);
  if (weight.dtype() != x.dtype())
    throw DTypeError("prelu", concat("weight of type ", weight.dtype(), " must have the input's type ", x.dtype()));
  if (weight.dim() > 1)
    throw ShapeError("prelu", concat("weight must be a 0-d or 1-d tensor, got shape ", weight.shape()));
  // weight as (1, C, 1, ...) against x (N, C, ...), (C) against a 1-d x, or one value.
  Shape weight_shape(static_cast<std::size_t>(x.dim()), 1);
  const std::int64_t n = weight.numel();
  if (n != 1) {
    if (x.dim() == 0) throw ShapeError("prelu", concat("a 0-d input takes a single weight, got ", n));
    const std::int64_t channel_dim = x.dim() == 1 ? 0 : 1;
    const std::int64_t channels = x.shape()[channel_dim];
    if (n != channels)
      throw ShapeError("prelu", concat("weight of ", n, " elements does not match the ", channels,
                                       " channels (dim ", channel_dim, ") of input of shape ", x.shape()));
    weight_shape[channel_dim] = channels;
  }
  return where(gt(x, 0.0), x, mul(weight.reshape(weight_shape), x));
}

}  // namespace infini
