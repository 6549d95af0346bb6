module;
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <queue>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>
module infini.autograd;

namespace infini {
namespace {

thread_local bool anomaly_mode = false;
// One list of queue_callback()s per backward pass running on this thread (innermost last).
thread_local std::vector<std::vector<std::function<void()>>> pass_callbacks;

// Opens a pass's callback list; finish() runs its callbacks, the destructor drops them (a
// pass that threw runs none).
class PassCallbacks {
 public:
  PassCallbacks() { pass_callbacks.emplace_back(); }
  ~PassCallbacks() { pass_callbacks.pop_back(); }
  PassCallbacks(const PassCallbacks&) = delete;
  PassCallbacks& operator=(const PassCallbacks&) = delete;
  void finish() {
    // A callback may queue more (they run too); index, since the list may grow.
    for (std::size_t i = 0; i < pass_callbacks.back().size(); ++i) {
      std::function<void()> callback = std::move(pass_callbacks.back()[i]);
      callback();
    }
  }
};

// Adds incoming gradients into a leaf's grad(), after the leaf's tensor hooks.
class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(const Tensor& leaf) : Node("AccumulateGrad", {}), leaf_(leaf) {}

  Tensor run_hooks(Tensor grad) const {
    for (const TensorHook& hook : leaf_.autograd_meta().hooks) {
      Tensor replaced = hook(grad);
      if (replaced.defined()) grad = replaced;
    }
    return grad;
  }

  TensorList apply(TensorList grads) override {
    const Tensor& g = grads.at(0);
    if (!g.defined()) return {};
    AutogradMeta& meta = leaf_.autograd_meta();
    const bool create_graph = GradMode::is_enabled();
    if (!meta.grad.defined()) {
      // The incoming gradient itself when nothing else holds it, else a fresh copy: it may be
      // shared with other leaves or views.
      const bool keep = create_graph || (g.is_exclusive() && !g.requires_grad() && g.dtype() == leaf_.dtype());
      meta.grad = keep ? g : g.detach().clone();
    } else if (create_graph || meta.grad.requires_grad()) {
      meta.grad = add(meta.grad, g);
    } else {
      kernels::binary_(BinaryOp::Add, meta.grad, g.detach());
    }
    for (const auto& hook : meta.post_accumulate_hooks) hook(leaf_);
    return {};
  }

 private:
  Tensor leaf_;
};

struct LaterFirst {
  bool operator()(const std::shared_ptr<Node>& a, const std::shared_ptr<Node>& b) const {
    return a->sequence_nr() < b->sequence_nr();
  }
};

void check_finite(const Node& node, const TensorList& grads) {
  for (std::size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined() || !is_floating_point(grads[i].dtype())) continue;
    const bool bad = kernels::reduce(ReduceOp::Any, kernels::unary(UnaryOp::IsNan, grads[i])).item<bool>() ||
                     kernels::reduce(ReduceOp::Any, kernels::unary(UnaryOp::IsInf, grads[i])).item<bool>();
    if (!bad) continue;
    const auto* fn = dynamic_cast<const FunctionNode*>(&node);
    throw Error("backward", concat("function ", node.name(), " returned NaN or Inf values in its output ", i,
                                   fn ? " (forward op '" + fn->op() + "')" : std::string()));
  }
}

// One backward pass. With `targets`, the gradients arriving at those edges are returned
// and no leaf's grad() is touched; without, leaves accumulate.
TensorList run_engine(const std::vector<Edge>& roots, const TensorList& root_grads, bool keep_graph,
                      bool create_graph, const std::vector<Edge>& targets) {
  // How many edges point at each node reachable from the roots.
  std::unordered_map<Node*, int> dependencies;
  std::unordered_set<Node*> seen;
  std::vector<Node*> stack;
  for (const Edge& e : roots)
    if (e.valid() && seen.insert(e.node.get()).second) stack.push_back(e.node.get());
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges()) {
      if (!e.valid()) continue;
      ++dependencies[e.node.get()];
      if (seen.insert(e.node.get()).second) stack.push_back(e.node.get());
    }
  }

  GradMode::set_enabled(create_graph);  // restored by the caller's guard
  std::unordered_map<Node*, TensorList> buffers;
  auto deliver = [&](const Edge& e, const Tensor& g) {
    TensorList& buffer = buffers[e.node.get()];
    buffer.resize(e.node->num_outputs());
    if (!g.defined()) return;
    Tensor& slot = buffer.at(e.input_nr);
    // Without create_graph, a buffer nothing else holds is summed into in place.
    if (slot.defined() && !create_graph && slot.is_exclusive() && slot.shape() == g.shape() &&
        slot.dtype() == g.dtype() && slot.device() == g.device())
      kernels::binary_(BinaryOp::Add, slot, g);
    else
      slot = slot.defined() ? add(slot, g) : g;
  };
  std::priority_queue<std::shared_ptr<Node>, std::vector<std::shared_ptr<Node>>, LaterFirst> ready;
  std::unordered_set<Node*> queued;
  for (std::size_t i = 0; i < roots.size(); ++i) {
    if (!roots[i].valid()) continue;
    deliver(roots[i], root_grads[i]);
    if (dependencies[roots[i].node.get()] == 0 && queued.insert(roots[i].node.get()).second) ready.push(roots[i].node);
  }

  TensorList captured(targets.size());
  const bool capture = !targets.empty();
  PassCallbacks callbacks;
  while (!ready.empty()) {
    std::shared_ptr<Node> node = ready.top();
    ready.pop();
    TensorList grads = std::move(buffers[node.get()]);
    buffers.erase(node.get());
    grads.resize(node->num_outputs());
    for (const auto& hook : node->pre_hooks()) {
      TensorList replaced = hook(grads);
      if (!replaced.empty()) grads = std::move(replaced);
    }
    auto* accumulate = dynamic_cast<AccumulateGrad*>(node.get());
    if (accumulate) grads[0] = accumulate->run_hooks(grads[0]);
    for (std::size_t k = 0; k < targets.size(); ++k)
      if (targets[k].node == node) captured[k] = grads.at(targets[k].input_nr);
    if (accumulate && capture) continue;

    const TensorList grads_in = node->post_hooks().empty() ? TensorList{} : grads;
    TensorList outputs = node->apply(std::move(grads));
    if (anomaly_mode) check_finite(*node, outputs);
    for (const auto& hook : node->post_hooks()) hook(outputs, grads_in);
    if (!keep_graph) node->release_saved();

    const auto& edges = node->next_edges();
    for (std::size_t i = 0; i < edges.size(); ++i) {
      if (!edges[i].valid()) continue;
      deliver(edges[i], i < outputs.size() ? outputs[i] : Tensor());
      if (--dependencies[edges[i].node.get()] == 0) ready.push(edges[i].node);
    }
  }
  callbacks.finish();
  return captured;
}

// Roots and their gradients, checked; a missing gradient of a one-element root is 1.
void prepare_roots(std::string_view op, const TensorList& roots, const TensorList& grad_roots,
                   std::vector<Edge>& edges, TensorList& grads) {
  if (!grad_roots.empty() && grad_roots.size() != roots.size())
    throw Error(op, concat("got ", grad_roots.size(), " gradients for ", roots.size(), " roots"));
  for (std::size_t i = 0; i < roots.size(); ++i) {
    const Tensor& root = roots[i];
    if (!root.requires_grad())
      throw Error(op, concat("root ", i, " does not require grad and has no grad_fn"));
    Tensor g = grad_roots.empty() ? Tensor() : grad_roots[i];
    if (!g.defined()) {
      if (root.numel() != 1)
        throw Error(op, concat("a gradient can be implied only for a one-element root; root ", i, " has shape ",
                               root.shape()));
      g = ones_like(root);
    } else if (g.shape() != root.shape()) {
      throw ShapeError(op, concat("gradient of shape ", g.shape(), " for root ", i, " of shape ", root.shape()));
    }
    edges.push_back(gradient_edge(root));
    grads.push_back(g);
  }
}

void backward_hook(const Tensor& root, const Tensor& gradient, bool retain_graph, bool create_graph) {
  autograd::backward({root}, {gradient}, retain_graph, create_graph);
}

}  // namespace

std::shared_ptr<Node> grad_accumulator(const Tensor& leaf) {
  AutogradMeta& meta = leaf.autograd_meta();
  if (auto existing = meta.grad_accumulator.lock()) return existing;
  auto node = std::make_shared<AccumulateGrad>(leaf);
  meta.grad_accumulator = node;
  return node;
}

bool AnomalyMode::is_enabled() noexcept { return anomaly_mode; }
void AnomalyMode::set_enabled(bool enabled) noexcept { anomaly_mode = enabled; }

namespace autograd {

void backward(const TensorList& roots, const TensorList& grad_roots, bool retain_graph, bool create_graph) {
  std::vector<Edge> edges;
  TensorList grads;
  prepare_roots("backward", roots, grad_roots, edges, grads);
  const bool previous = GradMode::is_enabled();
  try {
    run_engine(edges, grads, retain_graph || create_graph, create_graph, {});
  } catch (...) {
    GradMode::set_enabled(previous);
    throw;
  }
  GradMode::set_enabled(previous);
}

TensorList grad(const TensorList& outputs, const TensorList& inputs, const TensorList& grad_outputs,
                std::optional<bool> retain_graph, bool create_graph, bool allow_unused) {
  std::vector<Edge> edges;
  TensorList grads;
  prepare_roots("grad", outputs, grad_outputs, edges, grads);
  std::vector<Edge> targets;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].requires_grad()) throw Error("grad", concat("input ", i, " does not require grad"));
    targets.push_back(gradient_edge(inputs[i]));
  }
  const bool previous = GradMode::is_enabled();
  TensorList result;
  try {
    result = run_engine(edges, grads, retain_graph.value_or(create_graph), create_graph, targets);
  } catch (...) {
    GradMode::set_enabled(previous);
    throw;
  }
  GradMode::set_enabled(previous);
  for (std::size_t i = 0; i < result.size(); ++i)
    if (!result[i].defined() && !allow_unused)
      throw Error("grad", concat("input ", i, " was not used to compute the outputs (pass allow_unused=true)"));
  return result;
}

void queue_callback(std::function<void()> callback) {
  if (pass_callbacks.empty()) throw Error("queue_callback", "expected to be called during a backward pass");
  if (!callback) throw Error("queue_callback", "expected a callable callback, got an empty function");
  pass_callbacks.back().push_back(std::move(callback));
}

}  // namespace autograd

const bool engine_installed = [] {
  autograd_hooks().backward = &backward_hook;
  return true;
}();

}  // namespace infini
