// Activation checkpointing (see checkpoint.cppm).
module infini.autograd;
import infini.std;

namespace infini::autograd {

namespace {

// Autocast's state on the device types it covers, to run a recomputation as the forward ran.
struct AutocastState {
  static constexpr std::array<DeviceType, 2> kDevices = {DeviceType::CPU, DeviceType::CUDA};
  std::array<bool, 2> enabled{};
  std::array<DataType, 2> dtype{};

  static AutocastState current() {
    AutocastState state;
    for (std::size_t i = 0; i < kDevices.size(); ++i) {
      state.enabled[i] = is_autocast_enabled(kDevices[i]);
      state.dtype[i] = autocast_dtype(kDevices[i]);
    }
    return state;
  }
};

// fn(inputs) again with grad mode on, the generator at `rng` (restored after) and `autocast`.
TensorList recompute(const std::function<TensorList(const TensorList&)>& fn, const TensorList& inputs,
                     PhiloxState rng, const AutocastState& autocast) {
  Generator& generator = default_generator();
  const PhiloxState after_forward = generator.state();
  generator.set_state(rng);
  TensorList outputs;
  try {
    const AutocastGuard cpu(DeviceType::CPU, autocast.dtype[0], autocast.enabled[0]);
    const AutocastGuard cuda(DeviceType::CUDA, autocast.dtype[1], autocast.enabled[1]);
    const EnableGradGuard grad_mode;
    outputs = fn(inputs);
  } catch (...) {
    generator.set_state(after_forward);
    throw;
  }
  generator.set_state(after_forward);
  return outputs;
}

}  // namespace

TensorList checkpoint(const std::function<TensorList(const TensorList& inputs)>& fn, const TensorList& inputs) {
  if (!any_needs_grad(inputs)) return fn(inputs);  // no gradient flows back through it
  const PhiloxState rng = default_generator().state();
  const AutocastState autocast = AutocastState::current();
  TensorList outputs;
  {
    const NoGradGuard no_grad;
    outputs = fn(inputs);
  }
  for (Tensor& out : outputs)  // an input passed through gets its own node's output
    for (const Tensor& in : inputs)
      if (out.defined() && out.is_same(in)) out = out.clone();
  record("checkpoint", inputs, outputs, inputs,
         [fn, rng, autocast](const TensorList& grad_outputs, const TensorList& saved) -> TensorList {
           if (GradMode::is_enabled())
             throw Error("checkpoint", "create_graph through a checkpointed function is not supported (its backward "
                                       "runs a backward pass of its own)");
           TensorList inputs;  // detached leaves, so the recomputed graph ends at them
           for (const Tensor& t : saved) inputs.push_back(t.defined() ? t.detach().requires_grad_(t.requires_grad()) : t);
           const TensorList outputs = recompute(fn, inputs, rng, autocast);
           if (outputs.size() != grad_outputs.size())
             throw Error("checkpoint", concat("the recomputed function returned ", outputs.size(), " outputs, the first ",
                                              "run ", grad_outputs.size()));
           TensorList roots, grads;
           for (std::size_t i = 0; i < outputs.size(); ++i)
             if (grad_outputs[i].defined() && outputs[i].defined() && outputs[i].requires_grad()) {
               roots.push_back(outputs[i]);
               grads.push_back(grad_outputs[i]);
             }
           TensorList input_grads;
           if (in_backward_input()) {
             // A split backward's input pass: the inputs' gradients now, the parameters' in the
             // pass's backward_weight.
             TensorList wanted;
             for (const Tensor& t : inputs)
               if (t.defined() && t.requires_grad()) wanted.push_back(t);
             DeferredGrads deferred;
             const TensorList got =
                 roots.empty() ? TensorList(wanted.size()) : backward_input(roots, wanted, grads, deferred);
             defer_to_backward_weight(std::move(deferred));
             std::size_t next = 0;
             for (const Tensor& t : inputs) input_grads.push_back(t.defined() && t.requires_grad() ? got[next++] : Tensor());
             return input_grads;
           }
           if (!roots.empty()) backward(roots, grads);
           for (const Tensor& t : inputs) input_grads.push_back(t.defined() && t.requires_grad() ? t.grad() : Tensor());
           return input_grads;
         });
  return outputs;
}

Tensor checkpoint(const std::function<Tensor(const Tensor& input)>& fn, const Tensor& input) {
  return checkpoint([fn](const TensorList& inputs) { return TensorList{fn(inputs[0])}; }, TensorList{input})[0];
}

}  // namespace infini::autograd
