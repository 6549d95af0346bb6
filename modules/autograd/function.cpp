module;
#include <cstdint>
module infini.autograd;
import infini.std;

namespace infini {
namespace {

std::string backward_name(std::string_view op) {
  std::string name(op);
  bool upper = true;
  std::string out;
  for (char c : name) {  // "log_softmax" -> "LogSoftmaxBackward"
    if (c == '_') {
      upper = true;
      continue;
    }
    out += upper && c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
    upper = false;
  }
  return out + "Backward";
}

}  // namespace

SavedTensor::SavedTensor(const Tensor& t, bool is_output) : is_output_(is_output) {
  if (!t.defined()) return;
  version_ = t.version();
  requires_grad_ = t.requires_grad();
  output_nr_ = t.output_nr();
  data_ = is_output ? t.detach() : t;
}

Tensor SavedTensor::unpack(const std::shared_ptr<Node>& owner) const {
  if (released_)
    throw Error("backward", "trying to backward through the graph a second time, or to use saved tensors after they "
                            "were freed (use retain_graph=true on the first backward)");
  if (!data_.defined()) return data_;
  if (data_.version() != version_)
    throw Error("backward", concat("a tensor saved for backward by ", owner ? owner->name() : "a node",
                                   " was modified by an in-place operation (its version is ", data_.version(),
                                   ", expected ", version_, ")"));
  if (!is_output_ || !requires_grad_) return data_;
  // Give the output back its history, so that create_graph can differentiate through it.
  Tensor t = data_.detach();
  AutogradMeta& meta = t.autograd_meta();
  meta.grad_fn = owner;
  meta.output_nr = output_nr_;
  return t;
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return {};
  if (auto fn = t.grad_fn()) return {fn, t.output_nr()};
  return {grad_accumulator(t), 0};
}

FunctionNode::FunctionNode(std::string_view op, std::vector<Edge> next_edges, std::uint32_t num_outputs,
                           BackwardFn backward)
    : Node(backward_name(op), std::move(next_edges), num_outputs), op_(op), backward_(std::move(backward)) {}

TensorList FunctionNode::apply(TensorList grad_outputs) {
  if (released_)
    throw Error("backward", concat("trying to backward through ", name(), " a second time (its saved tensors were "
                                   "freed; use retain_graph=true on the first backward)"));
  TensorList unpacked;
  unpacked.reserve(saved.size());
  const auto self = shared_from_this();
  for (const SavedTensor& s : saved) unpacked.push_back(s.unpack(self));
  TensorList grads = backward_(grad_outputs, unpacked);
  if (grads.size() != next_edges().size())
    throw Error("backward", concat(name(), " returned ", grads.size(), " gradients for ", next_edges().size(),
                                   " inputs"));
  for (std::size_t i = 0; i < grads.size(); ++i) {
    if (grads[i].defined() && next_edges()[i].valid() && grads[i].shape() != input_shapes[i])
      throw ShapeError("backward", concat(name(), " returned a gradient of shape ", grads[i].shape(),
                                          " for input ", i, " of shape ", input_shapes[i]));
  }
  return grads;
}

void FunctionNode::release_saved() {
  for (SavedTensor& s : saved) s.release();
  released_ = !saved.empty();
}

bool any_needs_grad(const TensorList& inputs) {
  if (!GradMode::is_enabled()) return false;
  return std::ranges::any_of(inputs, [](const Tensor& t) { return t.defined() && t.requires_grad(); });
}

std::shared_ptr<FunctionNode> record(std::string_view op, const TensorList& inputs, const TensorList& outputs,
                                     const TensorList& saved, BackwardFn backward) {
  const bool checking = numerics::checking();
  if (checking) numerics::check_forward(op, inputs, outputs);
  if (!any_needs_grad(inputs)) return nullptr;
  std::vector<Edge> edges;
  edges.reserve(inputs.size());
  for (const Tensor& t : inputs) edges.push_back(gradient_edge(t));
  auto node = std::make_shared<FunctionNode>(op, std::move(edges), static_cast<std::uint32_t>(outputs.size()),
                                             std::move(backward));
  for (const Tensor& t : inputs) node->input_shapes.push_back(t.defined() ? t.shape() : Shape{});
  if (checking) node->module = numerics::current_module();
  for (std::uint32_t i = 0; i < outputs.size(); ++i) {
    AutogradMeta& meta = outputs[i].autograd_meta();
    meta.grad_fn = node;
    meta.output_nr = i;
  }
  for (const Tensor& s : saved) {
    const bool is_output = std::ranges::any_of(outputs, [&](const Tensor& o) { return o.is_same(s); });
    node->saved.emplace_back(s, is_output);
  }
  return node;
}

}  // namespace infini
