// Adam and AdamW (see adam.cppm); the arithmetic is adam_update_ in fused_update.cpp.
module;
#include <cmath>
#include <cstddef>
#include <cstdint>
module infini.nn;
import infini.std;

namespace infini::optim {
namespace {

// The groups' learning rates as a float64 [groups] CPU tensor.
template <class Options>
Tensor learning_rates(const std::vector<Options>& options) {
  std::vector<double> lrs;
  for (const Options& o : options) lrs.push_back(o.lr);
  return from_vector(lrs, {static_cast<std::int64_t>(lrs.size())});
}

}  // namespace

template <class Options, bool kDecoupled>
void AdamBase<Options, kDecoupled>::check_options(const Options& o, const std::string& op) const {
  if (!(o.lr >= 0) || !std::isfinite(o.lr)) throw Error(op, concat("invalid learning rate ", o.lr, " (expected >= 0)"));
  if (!(o.eps >= 0) || !std::isfinite(o.eps)) throw Error(op, concat("invalid epsilon value ", o.eps, " (expected >= 0)"));
  for (std::size_t k = 0; k < 2; ++k)
    if (!(o.betas[k] >= 0 && o.betas[k] < 1))
      throw Error(op, concat("invalid beta parameter at index ", k, ": ", o.betas[k], " (expected 0 <= beta < 1)"));
  if (!(o.weight_decay >= 0) || !std::isfinite(o.weight_decay))
    throw Error(op, concat("invalid weight_decay value ", o.weight_decay, " (expected >= 0)"));
}

template <class Options, bool kDecoupled>
void AdamBase<Options, kDecoupled>::write_options(const Options& o, StateWriter& out) const {
  out.real("lr", o.lr);
  out.reals("betas", {o.betas[0], o.betas[1]});
  out.real("eps", o.eps);
  out.real("weight_decay", o.weight_decay);
  out.flag("amsgrad", o.amsgrad);
}

template <class Options, bool kDecoupled>
Options AdamBase<Options, kDecoupled>::read_options(StateReader& in) const {
  const std::vector<double> betas = in.reals("betas", 2);
  return {.lr = in.real("lr"),
          .betas = {betas[0], betas[1]},
          .eps = in.real("eps"),
          .weight_decay = in.real("weight_decay"),
          .amsgrad = in.flag("amsgrad")};
}

template <class Options, bool kDecoupled>
void AdamBase<Options, kDecoupled>::write_state(const AdamState& state, StateWriter& out) const {
  out.integer("step", state.device_step.defined() ? state.device_step.template item<std::int64_t>() : state.step);
  out.tensor("exp_avg", state.exp_avg);
  out.tensor("exp_avg_sq", state.exp_avg_sq);
  if (state.max_exp_avg_sq.defined()) out.tensor("max_exp_avg_sq", state.max_exp_avg_sq);
}

template <class Options, bool kDecoupled>
AdamState AdamBase<Options, kDecoupled>::read_state(StateReader& in, const Tensor& param, const Options& o) const {
  AdamState state;
  state.step = in.integer("step");
  if (state.step < 0) throw Error(this->name() + ".load_state_dict", concat("\"", in.prefix(), "step\" is ", state.step,
                                                                            ", expected >= 0"));
  state.exp_avg = in.tensor_like("exp_avg", param);
  state.exp_avg_sq = in.tensor_like("exp_avg_sq", param);
  // amsgrad needs the running maximum; without amsgrad a saved one is kept for a later switch.
  if (o.amsgrad || in.contains("max_exp_avg_sq")) state.max_exp_avg_sq = in.tensor_like("max_exp_avg_sq", param);
  return state;
}

template <class Options, bool kDecoupled>
void AdamBase<Options, kDecoupled>::step() {
  scaled_step(1.0);
}

template <class Options, bool kDecoupled>
void AdamBase<Options, kDecoupled>::scaled_step(double grad_scale) {
  if (capturable_) {
    // A constant of this call: under a capture it becomes one of the graph's.
    return capturable_step(full({}, grad_scale, {.dtype = kFloat64, .device = steps_.device()}));
  }
  this->refuse_capture("step", "call set_capturable(true) before capturing its step");
  // Each group's parameters in one multi-tensor update.
  std::vector<std::vector<AdamTensors>> groups(this->num_param_groups());
  this->for_each_grad([&](std::size_t group, std::size_t index, const Tensor& param, const Tensor& grad) {
    const Options& o = this->options_[group];
    std::optional<AdamState>& state = this->state_[index];
    if (!state) {
      state.emplace();
      state->exp_avg = zeros(param.shape(), {.dtype = param.dtype(), .device = param.device()});
      state->exp_avg_sq = zeros(param.shape(), {.dtype = param.dtype(), .device = param.device()});
    }
    // A group switched to amsgrad after its first steps starts its maximum from zeros.
    if (o.amsgrad && !state->max_exp_avg_sq.defined())
      state->max_exp_avg_sq = zeros(param.shape(), {.dtype = param.dtype(), .device = param.device()});
    ++state->step;
    groups[group].push_back(
        {param, grad, state->exp_avg, state->exp_avg_sq, state->max_exp_avg_sq, state->step, Tensor()});
  });
  for (std::size_t group = 0; group < groups.size(); ++group) {
    const Options& o = this->options_[group];
    adam_update_(groups[group], {.lr = o.lr,
                                 .beta1 = o.betas[0],
                                 .beta2 = o.betas[1],
                                 .eps = o.eps,
                                 .weight_decay = o.weight_decay,
                                 .decoupled_weight_decay = kDecoupled,
                                 .amsgrad = o.amsgrad,
                                 .grad_scale = grad_scale});
  }
}

template <class Options, bool kDecoupled>
void AdamBase<Options, kDecoupled>::scaled_step(const Tensor& grad_scale) {
  if (capturable_) return capturable_step(grad_scale);
  this->refuse_capture("scaled_step", "call set_capturable(true) before capturing its step");
  Optimizer::scaled_step(grad_scale);  // its value, read back
}

template <class Options, bool kDecoupled>
void AdamBase<Options, kDecoupled>::capturable_step(const Tensor& grad_scale) {
  const std::string op = this->name() + ".step";
  this->check_grad_scale(grad_scale, steps_.device());  // before anything is counted
  const bool capturing = is_capturing_cuda_graph();
  if (static_cast<std::size_t>(lrs_.numel()) != this->num_param_groups() ||
      static_cast<std::size_t>(steps_.numel()) != this->num_params()) {  // groups were added
    if (capturing) throw Error(op, "parameter groups were added since the last step; make one outside the capture");
    pull_steps();
    push_scalars();
  } else if (!capturing) {  // set_options and load_state_dict change the learning rates on the host
    lrs_.copy_(learning_rates(this->options_));
  }
  struct Update {
    std::size_t group, index;
    Tensor param, grad;
  };
  std::vector<Update> updates;
  this->for_each_grad([&](std::size_t group, std::size_t index, const Tensor& param, const Tensor& grad) {
    updates.push_back({group, index, param, grad});
  });
  // New state made inside a capture would be zeroed again by every replay.
  for (const Update& u : updates) {
    std::optional<AdamState>& state = this->state_[u.index];
    const bool amsgrad = this->options_[u.group].amsgrad;
    if ((!state || (amsgrad && !state->max_exp_avg_sq.defined())) && capturing)
      throw Error(op, concat("parameter ", u.index, " has no optimizer state yet: make one step outside the CUDA "
                             "graph capture first"));
    const TensorOptions like{.dtype = u.param.dtype(), .device = u.param.device()};
    if (!state) {
      state.emplace();
      state->exp_avg = zeros(u.param.shape(), like);
      state->exp_avg_sq = zeros(u.param.shape(), like);
      state->device_step = steps_.select(0, static_cast<std::int64_t>(u.index));
    }
    if (amsgrad && !state->max_exp_avg_sq.defined()) state->max_exp_avg_sq = zeros(u.param.shape(), like);
  }
  NoGradGuard no_grad;
  // The counts first, as PyTorch does: each update reads its own number.
  if (updates.size() == this->num_params()) {
    add_(steps_, 1);
  } else {
    for (const Update& u : updates) add_(this->state_[u.index]->device_step, 1);
  }
  std::vector<std::vector<AdamTensors>> groups(this->num_param_groups());
  for (const Update& u : updates) {
    const AdamState& state = *this->state_[u.index];
    groups[u.group].push_back(
        {u.param, u.grad, state.exp_avg, state.exp_avg_sq, state.max_exp_avg_sq, 1, state.device_step});
  }
  for (std::size_t group = 0; group < groups.size(); ++group) {
    const Options& o = this->options_[group];
    adam_update_(groups[group],
                 {.beta1 = o.betas[0],
                  .beta2 = o.betas[1],
                  .eps = o.eps,
                  .weight_decay = o.weight_decay,
                  .decoupled_weight_decay = kDecoupled,
                  .amsgrad = o.amsgrad},
                 lrs_.select(0, static_cast<std::int64_t>(group)), grad_scale);
  }
}

template <class Options, bool kDecoupled>
void AdamBase<Options, kDecoupled>::set_capturable(bool capturable) {
  const std::string op = this->name() + ".set_capturable";
  if (is_capturing_cuda_graph()) throw Error(op, "not inside a CUDA graph capture");
  if (capturable == capturable_) return;
  if (capturable) {
    push_scalars();
  } else {
    pull_steps();
    lrs_ = Tensor();
    steps_ = Tensor();
  }
  capturable_ = capturable;
}

template <class Options, bool kDecoupled>
void AdamBase<Options, kDecoupled>::push_scalars() {
  const std::vector<Tensor> params = this->all_params();
  const Device device = params.front().device();
  for (const Tensor& param : params)
    if (param.device() != device)
      throw DeviceError(this->name() + ".set_capturable", concat("parameters on ", device, " and ", param.device(),
                                                                  ": capturable mode needs them on one device"));
  std::vector<std::int64_t> steps;
  for (const std::optional<AdamState>& state : this->state_) steps.push_back(state ? state->step : 0);
  lrs_ = learning_rates(this->options_).to(device);
  steps_ = from_vector(steps, {static_cast<std::int64_t>(steps.size())}).to(device);
  for (std::size_t i = 0; i < this->state_.size(); ++i)
    if (this->state_[i]) this->state_[i]->device_step = steps_.select(0, static_cast<std::int64_t>(i));
}

template <class Options, bool kDecoupled>
void AdamBase<Options, kDecoupled>::pull_steps() {
  if (!steps_.defined()) return;
  const Tensor steps = steps_.to(Device::cpu());
  for (std::size_t i = 0; i < this->state_.size() && i < static_cast<std::size_t>(steps.numel()); ++i)
    if (std::optional<AdamState>& state = this->state_[i]; state && state->device_step.defined()) {
      state->step = steps.template data_ptr<std::int64_t>()[i];
      state->device_step = Tensor();
    }
}

template <class Options, bool kDecoupled>
void AdamBase<Options, kDecoupled>::set_group_lr(std::size_t group, double lr) {
  if (capturable_ && is_capturing_cuda_graph())
    throw Error(this->name() + ".set_lr", "not inside a CUDA graph capture: the replays would all use this value");
  TypedOptimizer<Options, AdamState>::set_group_lr(group, lr);
  if (capturable_ && static_cast<std::size_t>(lrs_.numel()) == this->num_param_groups()) {
    NoGradGuard no_grad;
    lrs_.select(0, static_cast<std::int64_t>(group)).fill_(lr);
  }
}

template <class Options, bool kDecoupled>
void AdamBase<Options, kDecoupled>::load_state_dict(const StateDict& state) {
  if (capturable_ && is_capturing_cuda_graph())
    throw Error(this->name() + ".load_state_dict", "not inside a CUDA graph capture");
  Optimizer::load_state_dict(state);
  if (capturable_) push_scalars();  // the loaded states have host step counts
}

template class AdamBase<AdamOptions, false>;
template class AdamBase<AdamWOptions, true>;

Adam::Adam(std::vector<Tensor> params, AdamOptions options)
    : Adam(std::vector<ParamGroup<AdamOptions>>{ParamGroup<AdamOptions>{std::move(params), std::nullopt}}, options) {}

Adam::Adam(std::vector<ParamGroup<AdamOptions>> groups, AdamOptions defaults) : AdamBase("Adam", defaults) {
  init(std::move(groups));
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options)
    : AdamW(std::vector<ParamGroup<AdamWOptions>>{ParamGroup<AdamWOptions>{std::move(params), std::nullopt}}, options) {}

AdamW::AdamW(std::vector<ParamGroup<AdamWOptions>> groups, AdamWOptions defaults) : AdamBase("AdamW", defaults) {
  init(std::move(groups));
}

}  // namespace infini::optim
