// Fused SGD and Adam(W) updates (see fused_update.cppm). On the CPU one OpenMP loop over
// contiguous data per tensor; on CUDA the multi-tensor kernels of infini/cuda/optim.h. Both
// compute each element with infini::math::sgd_step / adam_step (cuda/include/infini/math/
// sgd_step.h, adam_step.h: torch.optim.SGD / Adam with foreach=False, fused=False, step for
// step, every stored value rounded to the storage type, no fused multiply-adds), in the
// parameter's dtype (float32 for float16/bfloat16), so the two devices give the same bits.
// float32 and float64 round as PyTorch's scalar CPU kernels do (its vectorized ones may fuse
// some multiply-adds, a last-bit difference).
module;
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "infini/math/adam_step.h"
#include "infini/math/sgd_step.h"
#if INFINI_HAS_CUDA
#include "infini/cuda/optim.h"
#endif
module infini.nn;

namespace infini::optim {
namespace {

constexpr std::int64_t kParallelThreshold = 32768;

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
  if (t.device() != param.device())
    throw DeviceError(op, concat(what, " is on ", t.device(), ", expected the parameter's device ", param.device()));
  if (must_be_contiguous && !t.is_contiguous())
    throw Error(op, concat(what, " of shape ", t.shape(), " and strides ", t.strides(), " is not contiguous"));
}

void check_param(std::string_view op, const Tensor& param) {
  if (!param.defined()) throw Error(op, "the parameter is an undefined tensor");
  if (!is_floating_point(param.dtype()))
    throw DTypeError(op, concat("expected a floating-point parameter, got ", param.dtype()));
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
  const auto s = math::sgd_scalars<math::compute_of<T>>(u.lr, u.momentum, u.dampening, u.weight_decay, u.nesterov,
                                                        u.first_momentum_step);
  // firstprivate: each thread's own copy of the scalars, which no store can alias, so the
  // loop vectorizes.
#pragma omp parallel for schedule(static) firstprivate(s) if (n >= kParallelThreshold)
  for (std::int64_t i = 0; i < n; ++i) {
    T unused{};
    math::sgd_step(p[i], g[i], s.use_momentum ? buf[i] : unused, s);
  }
}

// kAmsgrad is a template argument: a conditional store to vmax would keep the loop scalar.
template <class T, bool kAmsgrad>
void adam_loop(T* p, const T* g, T* m, T* v, T* vmax, std::int64_t n, const AdamUpdate& u) {
  const auto s = math::adam_scalars<math::compute_of<T>>(u.lr, u.beta1, u.beta2, u.eps, u.weight_decay,
                                                         u.decoupled_weight_decay, u.step, u.grad_scale);
#pragma omp parallel for schedule(static) firstprivate(s) if (n >= kParallelThreshold)
  for (std::int64_t i = 0; i < n; ++i) {
    T unused{};
    math::adam_step<kAmsgrad>(p[i], g[i], m[i], v[i], kAmsgrad ? vmax[i] : unused, s);
  }
}

#if INFINI_HAS_CUDA
cuda::ElementType element_type(DataType dtype) { return static_cast<cuda::ElementType>(dtype); }

// Runs update(p's element type, {tensor}, options, p's device), turning a cuda::CudaError into
// a DeviceError from `op`.
template <class Entry, class Options>
void update_on_cuda(std::string_view op, const Tensor& p,
                    void (*update)(cuda::ElementType, std::span<const Entry>, const Options&, int), const Entry& tensor,
                    const Options& options) {
  try {
    update(element_type(p.dtype()), {&tensor, 1}, options, p.device().index);
  } catch (const cuda::CudaError& e) {
    throw DeviceError(op, concat("on ", p.device(), ": ", e.what()));
  }
}

// The update of the contiguous CUDA tensors p (param), g (grad) and the momentum buffer.
void sgd_cuda(const Tensor& p, const Tensor& g, const Tensor& buffer, const SGDUpdate& u) {
  const cuda::SgdTensor tensor{.param = p.data_ptr(),
                               .grad = g.data_ptr(),
                               .momentum_buffer = u.momentum != 0 ? buffer.data_ptr() : nullptr,
                               .numel = p.numel()};
  const cuda::SgdOptions options{.lr = u.lr,
                                 .momentum = u.momentum,
                                 .dampening = u.dampening,
                                 .weight_decay = u.weight_decay,
                                 .nesterov = u.nesterov,
                                 .first_momentum_step = u.first_momentum_step};
  update_on_cuda("sgd_update_", p, &cuda::sgd_update, tensor, options);
}

// scalars: the capturable update's (undefined tensors: u's values).
void adam_cuda(const Tensor& p, const Tensor& g, const Tensor& exp_avg, const Tensor& exp_avg_sq,
               const Tensor& max_exp_avg_sq, const AdamUpdate& u, const AdamScalarTensors& scalars) {
  const bool on_device = scalars.lr.defined();
  const cuda::AdamTensor tensor{.param = p.data_ptr(),
                                .grad = g.data_ptr(),
                                .exp_avg = exp_avg.data_ptr(),
                                .exp_avg_sq = exp_avg_sq.data_ptr(),
                                .max_exp_avg_sq = u.amsgrad ? max_exp_avg_sq.data_ptr() : nullptr,
                                .numel = p.numel(),
                                .step = u.step,
                                .device_step = on_device ? scalars.step.data_ptr<std::int64_t>() : nullptr};
  const cuda::AdamOptions options{.lr = u.lr,
                                  .beta1 = u.beta1,
                                  .beta2 = u.beta2,
                                  .eps = u.eps,
                                  .weight_decay = u.weight_decay,
                                  .decoupled_weight_decay = u.decoupled_weight_decay,
                                  .amsgrad = u.amsgrad,
                                  .grad_scale = u.grad_scale,
                                  .device_lr = on_device ? scalars.lr.data_ptr<double>() : nullptr,
                                  .device_grad_scale = on_device ? scalars.grad_scale.data_ptr<double>() : nullptr};
  update_on_cuda("adam_update_", p, &cuda::adam_update, tensor, options);
}
#endif

// Error unless `t` is a one-element `dtype` tensor on the parameter's device.
void check_scalar(std::string_view op, std::string_view what, const Tensor& param, const Tensor& t, DataType dtype) {
  if (!t.defined()) throw Error(op, concat(what, " is an undefined tensor"));
  if (t.numel() != 1 || t.dtype() != dtype)
    throw Error(op, concat(what, " is ", t.dtype(), t.shape(), ", expected one ", dtype, " element"));
  if (t.device() != param.device())
    throw DeviceError(op, concat(what, " is on ", t.device(), ", expected the parameter's device ", param.device()));
}

// The update shared by both adam_update_ overloads; scalars.lr undefined: u's own scalars.
void adam_update_impl(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                      const Tensor& max_exp_avg_sq, AdamUpdate u, const AdamScalarTensors& scalars) {
  constexpr std::string_view op = "adam_update_";
  check_param(op, param);
  check_operand(op, "grad", param, grad, false);
  check_operand(op, "exp_avg", param, exp_avg, true);
  check_operand(op, "exp_avg_sq", param, exp_avg_sq, true);
  if (u.amsgrad) check_operand(op, "max_exp_avg_sq", param, max_exp_avg_sq, true);
  const bool from_tensors = scalars.lr.defined();
  if (from_tensors) {
    check_scalar(op, "lr", param, scalars.lr, kFloat64);
    check_scalar(op, "step", param, scalars.step, kInt64);
    check_scalar(op, "grad_scale", param, scalars.grad_scale, kFloat64);
  }
  // On the CPU the tensors' values are the host scalars.
  const bool read_on_host = from_tensors && param.device().is_cpu();
  if (read_on_host) {
    u.lr = scalars.lr.item<double>();
    u.step = scalars.step.item<std::int64_t>();
    u.grad_scale = scalars.grad_scale.item<double>();
  }
  if ((!from_tensors || read_on_host) && u.step < 1) throw Error(op, concat("step must be >= 1, got ", u.step));
  const Tensor g = grad.contiguous();
  write_param(param, [&](const Tensor& p) {
#if INFINI_HAS_CUDA
    if (p.device().is_cuda()) return adam_cuda(p, g, exp_avg, exp_avg_sq, max_exp_avg_sq, u, scalars);
#endif
    dispatch_floating(op, p.dtype(), [&]<class T>() {
      T* const moments[2] = {exp_avg.data_ptr<T>(), exp_avg_sq.data_ptr<T>()};
      if (u.amsgrad)
        adam_loop<T, true>(p.data_ptr<T>(), g.data_ptr<T>(), moments[0], moments[1], max_exp_avg_sq.data_ptr<T>(),
                           p.numel(), u);
      else
        adam_loop<T, false>(p.data_ptr<T>(), g.data_ptr<T>(), moments[0], moments[1], nullptr, p.numel(), u);
    });
  });
  exp_avg.storage().bump_version();
  exp_avg_sq.storage().bump_version();
  if (u.amsgrad) max_exp_avg_sq.storage().bump_version();
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
#if INFINI_HAS_CUDA
    if (p.device().is_cuda()) return sgd_cuda(p, g, momentum_buffer, update);
#endif
    dispatch_floating(op, p.dtype(), [&]<class T>() {
      sgd_loop(p.data_ptr<T>(), g.data_ptr<T>(), momentum ? momentum_buffer.data_ptr<T>() : nullptr, p.numel(), update);
    });
  });
  if (momentum) momentum_buffer.storage().bump_version();
}

void adam_update_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                  const Tensor& max_exp_avg_sq, const AdamUpdate& update) {
  adam_update_impl(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, update, {});
}

void adam_update_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                  const Tensor& max_exp_avg_sq, const AdamUpdate& update, const AdamScalarTensors& scalars) {
  if (!scalars.lr.defined()) throw Error("adam_update_", "lr is an undefined tensor");
  adam_update_impl(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, update, scalars);
}

}  // namespace infini::optim
