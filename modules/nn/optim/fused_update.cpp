// Fused SGD and Adam(W) updates (see fused_update.cppm): one OpenMP loop over contiguous
// data per tensor, computing in the parameter's dtype (float32 for float16/bfloat16).
//
// The per-element arithmetic is that of torch.optim.SGD / torch.optim.Adam with
// foreach=False, fused=False (torch/optim/sgd.py _single_tensor_sgd, adam.py
// _single_tensor_adam), in the same order, with scalars rounded to the compute type as a
// PyTorch kernel rounds its scalar arguments:
//   SGD:   g = grad + wd * p                       grad.add(param, alpha=weight_decay)
//          b = first ? g : b * mu + (1 - damp) * g  clone(grad) / buf.mul_(mu).add_(grad, alpha=1-damp)
//          g = nesterov ? g + mu * b : b            grad.add(buf, alpha=mu) / buf
//          p = p + (-lr) * g                       param.add_(grad, alpha=-lr)
//   Adam:  g = grad * s                            (scaled_step) grad.mul_(s), clip_grad_norm_'s coefficient
//          g = g + wd * p                          (Adam, L2)   grad.add(param, alpha=weight_decay)
//          p = p * (1 - lr * wd)                   (AdamW)      param.mul_(1 - lr * weight_decay)
//          m = lerp(m, g, 1 - beta1)               exp_avg.lerp_(grad, 1 - beta1), PyTorch's two-branch lerp
//          v = v * beta2 + ((1 - beta2) * g) * g   exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1-beta2)
//          vmax = maximum(vmax, v)                 (amsgrad)    torch.maximum(max_exp_avg_sq, exp_avg_sq)
//          d = sqrt(v or vmax) / sqrt(bc2) + eps   (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
//          p = p + ((-lr / bc1) * m) / d           param.addcdiv_(exp_avg, denom, value=-step_size)
// with bc1 = 1 - beta1^step, bc2 = 1 - beta2^step computed in double from the integer step.
// Every value one of those PyTorch ops stores (b * mu, b, v * beta2, v, m, vmax, p * (1 - lr * wd),
// p) is rounded to the storage type before it is used again, and every operation rounds
// (no fused multiply-add: contraction is off below), so float32 and float64 round as
// PyTorch's scalar CPU kernels do (its vectorized ones may fuse some multiply-adds, a
// last-bit difference); float16/bfloat16 compute in float32 between those roundings.
module;
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>
module infini.nn;

#pragma clang fp contract(off)

namespace infini::optim {
namespace {

constexpr std::int64_t kParallelThreshold = 32768;

// double for float64, float for float32/float16/bfloat16.
template <class T>
using compute_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// fn.template operator()<T>() for the floating-point storage type T of `dtype`.
template <class Fn>
void dispatch_floating(std::string_view op, DataType dtype, Fn&& fn) {
  switch (dtype) {
    case kFloat16: return fn.template operator()<Half>();
    case kBFloat16: return fn.template operator()<BFloat16>();
    case kFloat32: return fn.template operator()<float>();
    case kFloat64: return fn.template operator()<double>();
    default: throw DTypeError(op, concat("expected a floating-point parameter, got ", dtype));
  }
}

void check_operand(std::string_view op, std::string_view what, const Tensor& param, const Tensor& t,
                   bool must_be_contiguous) {
  if (!t.defined()) throw Error(op, concat(what, " is an undefined tensor"));
  if (t.shape() != param.shape())
    throw ShapeError(op, concat(what, " has shape ", t.shape(), ", expected the parameter's ", param.shape()));
  if (t.dtype() != param.dtype())
    throw DTypeError(op, concat(what, " is ", t.dtype(), ", expected the parameter's ", param.dtype()));
  if (!t.device().is_cpu()) throw DeviceError(op, concat(what, " is on ", t.device(), ", expected the CPU"));
  if (must_be_contiguous && !t.is_contiguous())
    throw Error(op, concat(what, " of shape ", t.shape(), " and strides ", t.strides(), " is not contiguous"));
}

void check_param(std::string_view op, const Tensor& param) {
  if (!param.defined()) throw Error(op, "the parameter is an undefined tensor");
  if (!is_floating_point(param.dtype()))
    throw DTypeError(op, concat("expected a floating-point parameter, got ", param.dtype()));
  if (!param.device().is_cpu()) throw DeviceError(op, concat("the parameter is on ", param.device(), ", expected the CPU"));
}

// Runs update(data) on param's elements as one contiguous array, then publishes the write:
// a contiguous param is written in place, any other through a contiguous copy.
template <class Update>
void write_param(const Tensor& param, Update&& update) {
  NoGradGuard no_grad;
  if (param.is_contiguous()) {
    update(param);
    param.storage().bump_version();
  } else {
    Tensor work = param.contiguous();
    update(work);
    Tensor target = param;
    target.copy_(work);  // bumps the version
  }
}

template <class T>
void sgd_loop(T* p, const T* g, T* buf, std::int64_t n, const SGDUpdate& u) {
  using C = compute_t<T>;
  const C wd = static_cast<C>(u.weight_decay), mu = static_cast<C>(u.momentum);
  const C keep = static_cast<C>(1 - u.dampening), neg_lr = static_cast<C>(-u.lr);
  const bool decay = u.weight_decay != 0, momentum = u.momentum != 0, nesterov = u.nesterov;
  const bool first = u.first_momentum_step;
#pragma omp parallel for schedule(static) if (n >= kParallelThreshold)
  for (std::int64_t i = 0; i < n; ++i) {
    const C param = static_cast<C>(p[i]);
    C d = static_cast<C>(g[i]);
    if (decay) d = d + wd * param;
    if (momentum) {
      buf[i] = T(first ? d : static_cast<C>(T(static_cast<C>(buf[i]) * mu)) + keep * d);
      const C b = static_cast<C>(buf[i]);
      d = nesterov ? d + mu * b : b;
    }
    p[i] = T(param + neg_lr * d);
  }
}

// kAmsgrad is a template argument: a conditional store to vmax would keep the loop scalar.
template <class T, bool kAmsgrad>
void adam_loop(T* p, const T* g, T* m, T* v, T* vmax, std::int64_t n, const AdamUpdate& u) {
  using C = compute_t<T>;
  const double step = static_cast<double>(u.step);
  const double bias_correction1 = 1 - std::pow(u.beta1, step);
  const double bias_correction2 = 1 - std::pow(u.beta2, step);
  const C neg_step_size = static_cast<C>(-(u.lr / bias_correction1));
  const C bias_correction2_sqrt = static_cast<C>(std::sqrt(bias_correction2));
  const C eps = static_cast<C>(u.eps);
  const C wd = static_cast<C>(u.weight_decay), decay = static_cast<C>(1 - u.lr * u.weight_decay);
  const C weight1 = static_cast<C>(1 - u.beta1), beta2 = static_cast<C>(u.beta2), weight2 = static_cast<C>(1 - u.beta2);
  const bool small_weight = std::abs(weight1) < C(0.5);  // PyTorch's lerp: which end to interpolate from
  const bool l2 = u.weight_decay != 0 && !u.decoupled_weight_decay;
  const bool decoupled = u.weight_decay != 0 && u.decoupled_weight_decay;
  const bool scaled = u.grad_scale != 1;
  const C grad_scale = static_cast<C>(u.grad_scale);
#pragma omp parallel for schedule(static) if (n >= kParallelThreshold)
  for (std::int64_t i = 0; i < n; ++i) {
    C param = static_cast<C>(p[i]);
    C grad = static_cast<C>(g[i]);
    if (scaled) grad = static_cast<C>(T(grad * grad_scale));
    if (l2) grad = grad + wd * param;
    if (decoupled) param = static_cast<C>(T(param * decay));
    const C m_old = static_cast<C>(m[i]);
    m[i] = T(small_weight ? m_old + weight1 * (grad - m_old) : grad - (grad - m_old) * (C(1) - weight1));
    v[i] = T(static_cast<C>(T(static_cast<C>(v[i]) * beta2)) + weight2 * grad * grad);
    C second = static_cast<C>(v[i]);
    if constexpr (kAmsgrad) {
      const C previous = static_cast<C>(vmax[i]);
      if (!(second > previous || std::isnan(second))) second = previous;  // maximum; NaN wins
      vmax[i] = T(second);
      second = static_cast<C>(vmax[i]);
    }
    // The builtin does not set errno (std::sqrt may), so the loop vectorizes; same result.
    const C denom = __builtin_elementwise_sqrt(second) / bias_correction2_sqrt + eps;
    p[i] = T(param + neg_step_size * static_cast<C>(m[i]) / denom);
  }
}

}  // namespace

void sgd_update_(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SGDUpdate& update) {
  constexpr std::string_view op = "sgd_update_";
  check_param(op, param);
  check_operand(op, "grad", param, grad, false);
  const bool momentum = update.momentum != 0;
  if (momentum) check_operand(op, "momentum_buffer", param, momentum_buffer, true);
  const Tensor g = grad.contiguous();
  write_param(param, [&](const Tensor& p) {
    dispatch_floating(op, p.dtype(), [&]<class T>() {
      sgd_loop(p.data_ptr<T>(), g.data_ptr<T>(), momentum ? momentum_buffer.data_ptr<T>() : nullptr, p.numel(), update);
    });
  });
  if (momentum) momentum_buffer.storage().bump_version();
}

void adam_update_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                  const Tensor& max_exp_avg_sq, const AdamUpdate& update) {
  constexpr std::string_view op = "adam_update_";
  check_param(op, param);
  check_operand(op, "grad", param, grad, false);
  check_operand(op, "exp_avg", param, exp_avg, true);
  check_operand(op, "exp_avg_sq", param, exp_avg_sq, true);
  if (update.amsgrad) check_operand(op, "max_exp_avg_sq", param, max_exp_avg_sq, true);
  if (update.step < 1) throw Error(op, concat("step must be >= 1, got ", update.step));
  const Tensor g = grad.contiguous();
  write_param(param, [&](const Tensor& p) {
    dispatch_floating(op, p.dtype(), [&]<class T>() {
      T* const moments[2] = {exp_avg.data_ptr<T>(), exp_avg_sq.data_ptr<T>()};
      if (update.amsgrad)
        adam_loop<T, true>(p.data_ptr<T>(), g.data_ptr<T>(), moments[0], moments[1], max_exp_avg_sq.data_ptr<T>(),
                           p.numel(), update);
      else
        adam_loop<T, false>(p.data_ptr<T>(), g.data_ptr<T>(), moments[0], moments[1], nullptr, p.numel(), update);
    });
  });
  exp_avg.storage().bump_version();
  exp_avg_sq.storage().bump_version();
  if (update.amsgrad) max_exp_avg_sq.storage().bump_version();
}

}  // namespace infini::optim
