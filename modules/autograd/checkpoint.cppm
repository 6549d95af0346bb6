// Activation checkpointing (torch.utils.checkpoint, its reentrant form): fn runs without
// keeping the activations its ops would save for backward; only its inputs are kept. Backward
// runs fn again from them, with the default generator's state and the autocast state of the
// first run (so dropout draws the same mask and products run in the same precision), and
// backpropagates through that recomputed graph: the inputs get their gradients, and the
// parameters fn uses accumulate theirs as they would without checkpointing.
//
//   x = autograd::checkpoint([&](const Tensor& t) { return (*block)(t); }, x);  // a transformer block
//
// Memory: a block keeps its input (B, T, C) instead of every intermediate; its forward runs
// twice. Like PyTorch's reentrant checkpoint, recomputation needs an input that requires grad
// (fn then runs as usual, keeping its activations, when none does), and a checkpointed graph is
// differentiable once (create_graph through it is an Error). Gradients of tensors fn captures
// (parameters) accumulate into their .grad: autograd::grad sees only the inputs' gradients.
// In backward_input's pass (a zero-bubble split backward) the recomputed backward is split too:
// the inputs' gradients come at once, the captured parameters' in that pass's backward_weight.
export module infini.autograd:checkpoint;
import infini.std;
import infini.kernels;
import :function;

export namespace infini::autograd {

TensorList checkpoint(const std::function<TensorList(const TensorList& inputs)>& fn, const TensorList& inputs);
Tensor checkpoint(const std::function<Tensor(const Tensor& input)>& fn, const Tensor& input);

}  // namespace infini::autograd
