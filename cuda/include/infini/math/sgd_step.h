// One element of torch.optim.SGD's single-tensor update (sgd.py _single_tensor_sgd), shared
// by the CPU loop (modules/nn/optim/fused_update.cpp) and the CUDA kernel (cuda/src/optim.cu)
// so both give the same bits. T is the storage type, C = compute_of<T>; every value PyTorch's
// ops store is rounded to T before it is used again, and no operation is fused:
//   g = grad + wd * p                        grad.add(param, alpha=weight_decay)
//   b = first ? g : b * mu + (1 - damp) * g   clone(grad) / buf.mul_(mu).add_(grad, alpha=1-damp)
//   g = nesterov ? g + mu * b : b             grad.add(buf, alpha=mu) / buf
//   p = p + (-lr) * g                        param.add_(grad, alpha=-lr)
#pragma once

#include "infini/math/host_device.h"
#include "infini/math/rounded.h"

namespace infini::math {

// The update's scalars, rounded to the compute type C as a PyTorch kernel rounds its scalar
// arguments.
template <class C>
struct SgdScalars {
  C weight_decay = 0;
  C momentum = 0;
  C keep = 1;  // 1 - dampening
  C neg_lr = 0;
  bool decay = false;         // weight_decay != 0
  bool use_momentum = false;  // momentum != 0
  bool nesterov = false;
  bool first = false;  // the momentum buffer is new: it becomes the (decayed) grad, undampened
};

template <class C>
SgdScalars<C> sgd_scalars(double lr, double momentum, double dampening, double weight_decay, bool nesterov,
                          bool first_momentum_step) {
  return {.weight_decay = static_cast<C>(weight_decay),
          .momentum = static_cast<C>(momentum),
          .keep = static_cast<C>(sub_rn(1.0, dampening)),
          .neg_lr = static_cast<C>(-lr),
          .decay = weight_decay != 0,
          .use_momentum = momentum != 0,
          .nesterov = nesterov,
          .first = first_momentum_step};
}

// Updates one parameter element p with its grad g; buf (the momentum buffer's element) is
// read unless s.first and written when s.use_momentum, untouched otherwise.
template <class T, class C>
INFINI_STEP_INLINE INFINI_HD void sgd_step(T& p, T g, T& buf, const SgdScalars<C>& s) {
  const C param = static_cast<C>(p);
  C d = static_cast<C>(g);
  if (s.decay) d = add_rn(d, mul_rn(s.weight_decay, param));
  if (s.use_momentum) {
    buf = T(s.first ? d : add_rn(static_cast<C>(T(mul_rn(static_cast<C>(buf), s.momentum))), mul_rn(s.keep, d)));
    const C b = static_cast<C>(buf);
    d = s.nesterov ? add_rn(d, mul_rn(s.momentum, b)) : b;
  }
  p = T(add_rn(param, mul_rn(s.neg_lr, d)));
}

}  // namespace infini::math
