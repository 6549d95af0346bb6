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

#include "infini/math/adam_step.h"
#include "infini/math/sgd_step.h"
#if INFINI_HAS_CUDA
#include "infini/cuda/optim.h"
#endif
module infini.nn;
import infini.std;

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

// Runs update(dtype's element type, entries, options, device), turning a cuda::CudaError
// into a DeviceError from `op`.
template <class Entry, class Options>
void update_on_cuda(std::string_view op, DataType dtype, Device device,
                    void (*update)(cuda::ElementType, std::span<const Entry>, const Options&, int),
                    std::span<const Entry> entries, const Options& options) {
  try {
    update(element_type(dtype), entries, options, device.index);
  } catch (const cuda::CudaError& e) {
    throw DeviceError(op, concat("on ", device, ": ", e.what()));
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
  update_on_cuda("sgd_update_", p.dtype(), p.device(), &cuda::sgd_update, std::span{&tensor, 1}, options);
}

// The multi-tensor kernel's entry for the contiguous CUDA tensors of one parameter (p may
// be a contiguous copy of it); device_step: a capturable update's step, else undefined.
cuda::AdamTensor adam_entry(const Tensor& p, const Tensor& g, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                            const Tensor& max_exp_avg_sq, const AdamUpdate& u, const Tensor& device_step) {
  return {.param = p.data_ptr(),
          .grad = g.data_ptr(),
          .exp_avg = exp_avg.data_ptr(),
          .exp_avg_sq = exp_avg_sq.data_ptr(),
          .max_exp_avg_sq = u.amsgrad ? max_exp_avg_sq.data_ptr() : nullptr,
          .numel = p.numel(),
          .step = u.step,
          .device_step = device_step.defined() ? device_step.data_ptr<std::int64_t>() : nullptr};
}

// Updates `entries` (parameters of `dtype` on `device`) in shared launches; lr and
// grad_scale: a capturable update's tensors (undefined: u's values).
void adam_cuda(std::span<const cuda::AdamTensor> entries, DataType dtype, Device device, const AdamUpdate& u,
               const Tensor& lr, const Tensor& grad_scale) {
  const bool on_device = lr.defined();
  const cuda::AdamOptions options{.lr = u.lr,
                                  .beta1 = u.beta1,
                                  .beta2 = u.beta2,
                                  .eps = u.eps,
                                  .weight_decay = u.weight_decay,
                                  .decoupled_weight_decay = u.decoupled_weight_decay,
                                  .amsgrad = u.amsgrad,
                                  .grad_scale = u.grad_scale,
                                  .device_lr = on_device ? lr.data_ptr<double>() : nullptr,
                                  .device_grad_scale = on_device ? grad_scale.data_ptr<double>() : nullptr};
  update_on_cuda("adam_update_", dtype, device, &cuda::adam_update, entries, options);
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

// Checks one parameter's tensors and scalars and returns u with the scalars the update
// uses: a capturable update's (scalars.lr defined) on the CPU are read here.
AdamUpdate checked_adam_update(const AdamTensors& t, AdamUpdate u, const AdamScalarTensors& scalars) {
  constexpr std::string_view op = "adam_update_";
  check_param(op, t.param);
  check_operand(op, "grad", t.param, t.grad, false);
  check_operand(op, "exp_avg", t.param, t.exp_avg, true);
  check_operand(op, "exp_avg_sq", t.param, t.exp_avg_sq, true);
  if (u.amsgrad) check_operand(op, "max_exp_avg_sq", t.param, t.max_exp_avg_sq, true);
  const bool from_tensors = scalars.lr.defined();
  if (from_tensors) {
    check_scalar(op, "lr", t.param, scalars.lr, kFloat64);
    check_scalar(op, "step", t.param, scalars.step, kInt64);
    check_scalar(op, "grad_scale", t.param, scalars.grad_scale, kFloat64);
  }
  // On the CPU the tensors' values are the host scalars.
  const bool read_on_host = from_tensors && t.param.device().is_cpu();
  if (read_on_host) {
    u.lr = scalars.lr.item<double>();
    u.step = scalars.step.item<std::int64_t>();
    u.grad_scale = scalars.grad_scale.item<double>();
  }
  if ((!from_tensors || read_on_host) && u.step < 1) throw Error(op, concat("step must be >= 1, got ", u.step));
  return u;
}

void bump_adam_versions(const AdamTensors& t, bool amsgrad) {
  t.exp_avg.storage().bump_version();
  t.exp_avg_sq.storage().bump_version();
  if (amsgrad) t.max_exp_avg_sq.storage().bump_version();
}

// The update of one parameter, u from checked_adam_update; scalars.lr undefined: u's own
// scalars.
void apply_adam_one(const AdamTensors& t, const AdamUpdate& u, [[maybe_unused]] const AdamScalarTensors& scalars) {
  const Tensor g = t.grad.contiguous();
  write_param(t.param, [&](const Tensor& p) {
#if INFINI_HAS_CUDA
    if (p.device().is_cuda()) {
      const Tensor device_step = scalars.lr.defined() ? scalars.step : Tensor();
      const cuda::AdamTensor entry = adam_entry(p, g, t.exp_avg, t.exp_avg_sq, t.max_exp_avg_sq, u, device_step);
      return adam_cuda({&entry, 1}, p.dtype(), p.device(), u, scalars.lr, scalars.grad_scale);
    }
#endif
    dispatch_floating("adam_update_", p.dtype(), [&]<class T>() {
      T* const moments[2] = {t.exp_avg.data_ptr<T>(), t.exp_avg_sq.data_ptr<T>()};
      if (u.amsgrad)
        adam_loop<T, true>(p.data_ptr<T>(), g.data_ptr<T>(), moments[0], moments[1], t.max_exp_avg_sq.data_ptr<T>(),
                           p.numel(), u);
      else
        adam_loop<T, false>(p.data_ptr<T>(), g.data_ptr<T>(), moments[0], moments[1], nullptr, p.numel(), u);
    });
  });
  bump_adam_versions(t, u.amsgrad);
}

void adam_update_one(const AdamTensors& t, const AdamUpdate& update, const AdamScalarTensors& scalars) {
  apply_adam_one(t, checked_adam_update(t, update, scalars), scalars);
}

// The multi-tensor update; lr undefined: host scalars, each parameter's step its own. Every
// parameter is checked before any is updated, so a bad one leaves them all unchanged.
void adam_update_many(std::span<const AdamTensors> params, const AdamUpdate& update, const Tensor& lr,
                      const Tensor& grad_scale) {
#if INFINI_HAS_CUDA
  // Contiguous CUDA parameters share launches, one run per (dtype, device) in order of
  // first appearance; the others go one by one.
  struct Run {
    DataType dtype;
    Device device;
    std::vector<cuda::AdamTensor> entries;
    std::vector<const AdamTensors*> params;
  };
  std::vector<Run> runs;
#endif
  auto scalars_of = [&](const AdamTensors& t) {
    return AdamScalarTensors{.lr = lr, .step = lr.defined() ? t.device_step : Tensor(), .grad_scale = grad_scale};
  };
  std::vector<AdamUpdate> checked;
  checked.reserve(params.size());
  for (const AdamTensors& t : params) {
    AdamUpdate u = update;
    u.step = t.step;
    checked.push_back(checked_adam_update(t, u, scalars_of(t)));
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    const AdamTensors& t = params[i];
    const AdamUpdate& u = checked[i];
#if INFINI_HAS_CUDA
    if (t.param.device().is_cuda() && t.param.is_contiguous() && t.grad.is_contiguous()) {
      auto run = std::find_if(runs.begin(), runs.end(),
                              [&](const Run& r) { return r.dtype == t.param.dtype() && r.device == t.param.device(); });
      if (run == runs.end()) run = runs.insert(runs.end(), Run{t.param.dtype(), t.param.device(), {}, {}});
      run->entries.push_back(
          adam_entry(t.param, t.grad, t.exp_avg, t.exp_avg_sq, t.max_exp_avg_sq, u, scalars_of(t).step));
      run->params.push_back(&t);
      continue;
    }
#endif
    apply_adam_one(t, u, scalars_of(t));
  }
#if INFINI_HAS_CUDA
  NoGradGuard no_grad;
  for (const Run& run : runs) {
    adam_cuda(run.entries, run.dtype, run.device, update, lr, grad_scale);
    for (const AdamTensors* t : run.params) {
      t->param.storage().bump_version();
      bump_adam_versions(*t, update.amsgrad);
    }
  }
#endif
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
  adam_update_one({param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, update.step, Tensor()}, update, {});
}

void adam_update_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                  const Tensor& max_exp_avg_sq, const AdamUpdate& update, const AdamScalarTensors& scalars) {
  if (!scalars.lr.defined()) throw Error("adam_update_", "lr is an undefined tensor");
  adam_update_one({param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, update.step, scalars.step}, update, scalars);
}

void adam_update_(std::span<const AdamTensors> params, const AdamUpdate& update) {
  adam_update_many(params, update, Tensor(), Tensor());
}

void adam_update_(std::span<const AdamTensors> params, const AdamUpdate& update, const Tensor& lr,
                  const Tensor& grad_scale) {
  if (!lr.defined()) throw Error("adam_update_", "lr is an undefined tensor");
  adam_update_many(params, update, lr, grad_scale);
}

}  // namespace infini::optim
