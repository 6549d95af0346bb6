// SGD (see sgd.cppm); the arithmetic is sgd_update_ in fused_update.cpp.
module;
#include <cmath>
#include <cstddef>
module infini.nn;
import infini.std;

namespace infini::optim {

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : SGD(std::vector<ParamGroup<SGDOptions>>{ParamGroup<SGDOptions>{std::move(params), std::nullopt}}, options) {}

SGD::SGD(std::vector<ParamGroup<SGDOptions>> groups, SGDOptions defaults) : TypedOptimizer("SGD", defaults) {
  init(std::move(groups));
}

void SGD::check_options(const SGDOptions& o, const std::string& op) const {
  if (!(o.lr >= 0) || !std::isfinite(o.lr)) throw Error(op, concat("invalid learning rate ", o.lr, " (expected >= 0)"));
  if (!(o.momentum >= 0) || !std::isfinite(o.momentum))
    throw Error(op, concat("invalid momentum ", o.momentum, " (expected >= 0)"));
  if (!std::isfinite(o.dampening)) throw Error(op, concat("invalid dampening ", o.dampening));
  if (!(o.weight_decay >= 0) || !std::isfinite(o.weight_decay))
    throw Error(op, concat("invalid weight_decay ", o.weight_decay, " (expected >= 0)"));
  if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
    throw Error(op, concat("Nesterov momentum requires a momentum > 0 and zero dampening (got momentum ",
                           o.momentum, ", dampening ", o.dampening, ")"));
}

void SGD::write_options(const SGDOptions& o, StateWriter& out) const {
  out.real("lr", o.lr);
  out.real("momentum", o.momentum);
  out.real("dampening", o.dampening);
  out.real("weight_decay", o.weight_decay);
  out.flag("nesterov", o.nesterov);
}

SGDOptions SGD::read_options(StateReader& in) const {
  return {.lr = in.real("lr"),
          .momentum = in.real("momentum"),
          .dampening = in.real("dampening"),
          .weight_decay = in.real("weight_decay"),
          .nesterov = in.flag("nesterov")};
}

void SGD::write_state(const SGDState& state, StateWriter& out) const {
  out.tensor("momentum_buffer", state.momentum_buffer);
}

SGDState SGD::read_state(StateReader& in, const Tensor& param, const SGDOptions&) const {
  return {.momentum_buffer = in.tensor_like("momentum_buffer", param)};
}

void SGD::step() {
  refuse_capture("step", "step it outside the capture");
  for_each_grad([&](std::size_t group, std::size_t index, const Tensor& param, const Tensor& grad) {
    const SGDOptions& o = options_[group];
    std::optional<SGDState>& state = state_[index];
    const bool momentum = o.momentum != 0;
    const bool first = momentum && !state;
    if (first) state = SGDState{.momentum_buffer = empty(param.shape(), {.dtype = param.dtype(), .device = param.device()})};
    sgd_update_(param, grad, momentum ? state->momentum_buffer : Tensor(),
                {.lr = o.lr,
                 .momentum = o.momentum,
                 .dampening = o.dampening,
                 .weight_decay = o.weight_decay,
                 .nesterov = o.nesterov,
                 .first_momentum_step = first});
  });
}

}  // namespace infini::optim
