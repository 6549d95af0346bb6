// One element of torch.optim.Adam / AdamW's single-tensor update (adam.py _single_tensor_adam),
// shared by the CPU loop (modules/nn/optim/fused_update.cpp) and the CUDA kernel
// (cuda/src/optim.cu) so both give the same bits. T is the storage type, C = compute_of<T>;
// every value PyTorch's ops store (g * s, p * (1 - lr * wd), m, v * beta2, v, vmax, p) is
// rounded to T before it is used again, and no operation is fused:
//   g = grad * s                            (scaled_step) grad.mul_(s)
//   g = g + wd * p                          (Adam, L2)    grad.add(param, alpha=weight_decay)
//   p = p * (1 - lr * wd)                   (AdamW)       param.mul_(1 - lr * weight_decay)
//   m = lerp(m, g, 1 - beta1)               exp_avg.lerp_(grad, 1 - beta1), PyTorch's two-branch lerp
//   v = v * beta2 + ((1 - beta2) * g) * g   exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1-beta2)
//   vmax = maximum(vmax, v)                 (amsgrad)     torch.maximum(max_exp_avg_sq, exp_avg_sq)
//   d = sqrt(v or vmax) / sqrt(bc2) + eps   (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
//   p = p + ((-lr / bc1) * m) / d           param.addcdiv_(exp_avg, denom, value=-step_size)
// with bc1 = 1 - beta1^step, bc2 = 1 - beta2^step computed in double from the integer step.
#pragma once

#include <cmath>
#include <cstdint>

#include "infini/math/host_device.h"
#include "infini/math/rounded.h"

namespace infini::math {

// The update's scalars, rounded to the compute type C as a PyTorch kernel rounds its scalar
// arguments.
template <class C>
struct AdamScalars {
  C neg_step_size = 0;          // -lr / bc1
  C bias_correction2_sqrt = 1;  // sqrt(bc2)
  C eps = 0;
  C weight_decay = 0;
  C decay = 1;    // 1 - lr * weight_decay
  C weight1 = 0;  // 1 - beta1
  C one_minus_weight1 = 1;  // 1 - weight1, in C
  C beta2 = 0;
  C weight2 = 0;  // 1 - beta2
  C grad_scale = 1;
  bool small_weight = false;  // |weight1| < 0.5: PyTorch's lerp interpolates from m
  bool l2 = false;            // Adam's weight decay, added to the grad
  bool decoupled = false;     // AdamW's weight decay, applied to the parameter
  bool scaled = false;        // grad_scale != 1
};

// step >= 1: this update's number. Host and device (a capturable update computes them in
// its kernel from the learning rate, step and grad scale in device memory).
template <class C>
INFINI_HD AdamScalars<C> adam_scalars(double lr, double beta1, double beta2, double eps, double weight_decay,
                            bool decoupled_weight_decay, std::int64_t step, double grad_scale) {
  const double bias_correction1 = sub_rn(1.0, std::pow(beta1, static_cast<double>(step)));
  const double bias_correction2 = sub_rn(1.0, std::pow(beta2, static_cast<double>(step)));
  const C weight1 = static_cast<C>(sub_rn(1.0, beta1));
  return {.neg_step_size = static_cast<C>(-div_rn(lr, bias_correction1)),
          .bias_correction2_sqrt = static_cast<C>(std::sqrt(bias_correction2)),
          .eps = static_cast<C>(eps),
          .weight_decay = static_cast<C>(weight_decay),
          .decay = static_cast<C>(sub_rn(1.0, mul_rn(lr, weight_decay))),
          .weight1 = weight1,
          .one_minus_weight1 = sub_rn(C(1), weight1),
          .beta2 = static_cast<C>(beta2),
          .weight2 = static_cast<C>(sub_rn(1.0, beta2)),
          .grad_scale = static_cast<C>(grad_scale),
          .small_weight = std::abs(weight1) < C(0.5),
          .l2 = weight_decay != 0 && !decoupled_weight_decay,
          .decoupled = weight_decay != 0 && decoupled_weight_decay,
          .scaled = grad_scale != 1};
}

// Updates one parameter element p with its grad g and its moments m, v; vmax (the running
// maximum of v) is read and written only when kAmsgrad (a template argument, so a loop
// without it has no conditional store and vectorizes).
template <bool kAmsgrad, class T, class C>
INFINI_STEP_INLINE INFINI_HD void adam_step(T& p, T g, T& m, T& v, T& vmax, const AdamScalars<C>& s) {
  C param = static_cast<C>(p);
  C grad = static_cast<C>(g);
  if (s.scaled) grad = static_cast<C>(T(mul_rn(grad, s.grad_scale)));
  if (s.l2) grad = add_rn(grad, mul_rn(s.weight_decay, param));
  if (s.decoupled) param = static_cast<C>(T(mul_rn(param, s.decay)));
  const C m_old = static_cast<C>(m);
  m = T(s.small_weight ? add_rn(m_old, mul_rn(s.weight1, sub_rn(grad, m_old)))
                       : sub_rn(grad, mul_rn(sub_rn(grad, m_old), s.one_minus_weight1)));
  v = T(add_rn(static_cast<C>(T(mul_rn(static_cast<C>(v), s.beta2))), mul_rn(mul_rn(s.weight2, grad), grad)));
  C second = static_cast<C>(v);
  if constexpr (kAmsgrad) {
    const C previous = static_cast<C>(vmax);
    if (!(second > previous || second != second)) second = previous;  // maximum; NaN wins
    vmax = T(second);
    second = static_cast<C>(vmax);
  }
  const C denom = add_rn(div_rn(sqrt_rn(second), s.bias_correction2_sqrt), s.eps);
  p = T(add_rn(param, div_rn(mul_rn(s.neg_step_size, static_cast<C>(m)), denom)));
}

}  // namespace infini::math
