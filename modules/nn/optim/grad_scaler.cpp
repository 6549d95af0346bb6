// GradScaler (see grad_scaler.cppm). unscale_ multiplies CPU grads in an OpenMP loop per grad
// and the CUDA grads of each device in one multi-tensor kernel (infini/cuda/optim.h) with the
// same arithmetic, reading its Inf/NaN flag back once per device.
module;
#include <cmath>
#include <cstdint>

#if INFINI_HAS_CUDA
#include "infini/cuda/optim.h"
#endif
module infini.nn;
import infini.std;

namespace infini::optim {
namespace {

void check_scaler_options(std::string_view op, double scale, double growth_factor, double backoff_factor,
                          std::int64_t growth_interval) {
  if (!(scale > 0) || !std::isfinite(scale)) throw Error(op, concat("the scale must be finite and > 0, got ", scale));
  if (!(growth_factor > 1) || !std::isfinite(growth_factor))
    throw Error(op, concat("growth_factor must be finite and > 1, got ", growth_factor));
  if (!(backoff_factor > 0 && backoff_factor < 1))
    throw Error(op, concat("backoff_factor must be in (0, 1), got ", backoff_factor));
  if (growth_interval < 1) throw Error(op, concat("growth_interval must be >= 1, got ", growth_interval));
}

// Publishes an in-place write of `work`, grad itself or a contiguous copy of it, to grad.
void publish(const Tensor& grad, const Tensor& work) {
  if (work.is_same(grad)) {
    work.storage().bump_version();
  } else {
    Tensor target = grad;
    target.copy_(work);
  }
}

// grad *= inv_scale in the grad's compute type (PyTorch's
// _amp_foreach_non_finite_check_and_unscale_); true when an element was Inf or NaN.
bool unscale_grad(const Tensor& grad, float inv_scale) {
  NoGradGuard no_grad;
  Tensor work = grad.contiguous();
  bool found = false;
  dispatch(work.dtype(), [&]<class T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, BFloat16>) {
      using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
      T* x = work.data_ptr<T>();
      const std::int64_t n = work.numel();
      const C factor = static_cast<C>(inv_scale);
#pragma omp parallel for schedule(static) reduction(|| : found) if (n >= 32768)
      for (std::int64_t i = 0; i < n; ++i) {
        const C value = static_cast<C>(x[i]);
        if (!std::isfinite(value)) found = true;
        x[i] = T(value * factor);
      }
    }
  });
  publish(grad, work);
  return found;
}

#if INFINI_HAS_CUDA
// unscale_grad for every CUDA grad of `params`: one call per device over all its grads.
bool unscale_cuda_grads(std::string_view op, const std::vector<Tensor>& params, float inv_scale) {
  NoGradGuard no_grad;
  std::vector<Device> devices;  // in order of first appearance
  for (const Tensor& param : params) {
    const Tensor& grad = param.grad();
    if (!grad.defined() || !grad.device().is_cuda()) continue;
    if (std::find(devices.begin(), devices.end(), grad.device()) == devices.end()) devices.push_back(grad.device());
  }
  bool found = false;
  for (Device device : devices) {
    std::vector<Tensor> grads, work;  // grads on `device` gathered for one call, their contiguous versions
    std::vector<cuda::UnscaleTensor> tensors;
    const Tensor flag = empty({1}, {.dtype = kInt32, .device = device});
    auto call = [&] {
      try {
        found = cuda::unscale_grads(tensors, inv_scale, flag.data_ptr<std::int32_t>(), device.index) || found;
      } catch (const cuda::CudaError& e) {
        throw DeviceError(op, concat("on ", device, ": ", e.what()));
      }
      for (std::size_t k = 0; k < grads.size(); ++k) publish(grads[k], work[k]);
      grads.clear();
      work.clear();
      tensors.clear();
    };
    for (const Tensor& param : params) {
      const Tensor& grad = param.grad();
      if (!grad.defined() || grad.device() != device) continue;
      // A grad sharing memory with a gathered one is scaled after it, as on the CPU, in the next call.
      if (std::any_of(grads.begin(), grads.end(),
                      [&](const Tensor& other) { return other.storage().data() == grad.storage().data(); }))
        call();
      grads.push_back(grad);
      const Tensor& w = work.emplace_back(grad.contiguous());
      // As on the CPU, only these dtypes are scaled (float16 was refused by unscale_).
      if (w.dtype() == kFloat32 || w.dtype() == kFloat64 || w.dtype() == kBFloat16)
        tensors.push_back(
            {.data = w.data_ptr(), .type = static_cast<cuda::ElementType>(w.dtype()), .numel = w.numel()});
    }
    call();
  }
  return found;
}
#endif

}  // namespace

GradScaler::GradScaler(GradScalerOptions options)
    : scale_(options.init_scale),
      growth_factor_(options.growth_factor),
      backoff_factor_(options.backoff_factor),
      growth_interval_(options.growth_interval),
      enabled_(options.enabled) {
  check_scaler_options("GradScaler", scale_, growth_factor_, backoff_factor_, growth_interval_);
}

Tensor GradScaler::scale(const Tensor& loss) const {
  if (!enabled_) return loss;
  if (!loss.defined()) throw Error("GradScaler.scale", "the loss is an undefined tensor");
  return mul(loss, scale_);
}

void GradScaler::unscale_(Optimizer& optimizer) {
  constexpr std::string_view op = "GradScaler.unscale_";
  if (!enabled_) return;
  const auto it = per_optimizer_.find(&optimizer);
  if (it != per_optimizer_.end() && it->second.stage == Stage::Unscaled)
    throw Error(op, "unscale_() has already been called on this optimizer since the last update()");
  if (it != per_optimizer_.end() && it->second.stage == Stage::Stepped)
    throw Error(op, "unscale_() is being called after step()");
  const std::vector<Tensor> params = optimizer.all_params();
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Tensor& grad = params[i].grad();
    if (grad.defined() && grad.dtype() == kFloat16)
      throw DTypeError(op, concat("attempting to unscale float16 gradients (parameter ", i,
                                  "); keep float32 master parameters"));
  }
  const float inv_scale = static_cast<float>(1.0 / scale_);
  bool found_inf = false;
  for (const Tensor& param : params)
    if (param.grad().defined() && param.grad().device().is_cpu())
      found_inf = unscale_grad(param.grad(), inv_scale) || found_inf;
#if INFINI_HAS_CUDA
  found_inf = unscale_cuda_grads(op, params, inv_scale) || found_inf;
#endif
  per_optimizer_[&optimizer] = {.stage = Stage::Unscaled, .found_inf = found_inf};
}

bool GradScaler::step(Optimizer& optimizer) {
  if (!enabled_) {
    optimizer.step();
    return true;
  }
  const auto it = per_optimizer_.find(&optimizer);
  if (it != per_optimizer_.end() && it->second.stage == Stage::Stepped)
    throw Error("GradScaler.step", "step() has already been called since the last update()");
  if (it == per_optimizer_.end()) unscale_(optimizer);
  OptimizerState& state = per_optimizer_.at(&optimizer);
  const bool run = !state.found_inf;
  if (run) optimizer.step();
  state.stage = Stage::Stepped;
  return run;
}

void GradScaler::update() {
  if (!enabled_) return;
  if (per_optimizer_.empty())
    throw Error("GradScaler.update", "no inf checks were recorded before update() (call unscale_() or step() first)");
  bool found_inf = false;
  for (const auto& [optimizer, state] : per_optimizer_) found_inf = found_inf || state.found_inf;
  // PyTorch's _amp_update_scale_.
  if (found_inf) {
    scale_ *= backoff_factor_;
    growth_tracker_ = 0;
  } else if (growth_tracker_ + 1 == growth_interval_) {
    const double grown = scale_ * growth_factor_;
    if (std::isfinite(grown)) scale_ = grown;
    growth_tracker_ = 0;
  } else {
    ++growth_tracker_;
  }
  per_optimizer_.clear();
}

void GradScaler::update(double new_scale) {
  if (!enabled_) return;
  if (!(new_scale > 0) || !std::isfinite(new_scale))
    throw Error("GradScaler.update", concat("new_scale must be finite and > 0, got ", new_scale));
  scale_ = new_scale;
  per_optimizer_.clear();
}

StateDict GradScaler::state_dict() const {
  StateDict out;
  if (!enabled_) return out;
  StateWriter w(out, "");
  w.real("scale", scale_);
  w.real("growth_factor", growth_factor_);
  w.real("backoff_factor", backoff_factor_);
  w.integer("growth_interval", growth_interval_);
  w.integer("_growth_tracker", growth_tracker_);
  return out;
}

void GradScaler::load_state_dict(const StateDict& state) {
  const std::string op = "GradScaler.load_state_dict";
  if (!enabled_) return;
  if (state.empty())
    throw Error(op, "the state dict is empty, possibly because it was saved from a disabled GradScaler");
  StateReader in(op, "", state);
  const double scale = in.real("scale");
  const double growth_factor = in.real("growth_factor");
  const double backoff_factor = in.real("backoff_factor");
  const std::int64_t growth_interval = in.integer("growth_interval");
  const std::int64_t growth_tracker = in.integer("_growth_tracker");
  in.finish();
  check_scaler_options(op, scale, growth_factor, backoff_factor, growth_interval);
  if (growth_tracker < 0 || growth_tracker >= growth_interval)
    throw Error(op, concat("_growth_tracker ", growth_tracker, " is outside [0, growth_interval = ", growth_interval, ")"));
  scale_ = scale;
  growth_factor_ = growth_factor;
  backoff_factor_ = backoff_factor;
  growth_interval_ = growth_interval;
  growth_tracker_ = growth_tracker;
}

}  // namespace infini::optim
