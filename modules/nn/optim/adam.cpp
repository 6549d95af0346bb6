// Adam and AdamW (see adam.cppm); the arithmetic is adam_update_ in fused_update.cpp.
module;
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>
module infini.nn;

namespace infini::optim {

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
  out.integer("step", state.step);
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
    adam_update_(param, grad, state->exp_avg, state->exp_avg_sq, state->max_exp_avg_sq,
                 {.lr = o.lr,
                  .beta1 = o.betas[0],
                  .beta2 = o.betas[1],
                  .eps = o.eps,
                  .weight_decay = o.weight_decay,
                  .decoupled_weight_decay = kDecoupled,
                  .amsgrad = o.amsgrad,
                  .step = state->step,
                  .grad_scale = grad_scale});
  });
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
