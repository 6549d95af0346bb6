module;
#include <cstdint>
module infini.autograd;
import infini.std;

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

// Adds incoming gradients into a leaf's grad(), after the leaf's tensor hooks. It runs as
// soon as its gradient is ready (as PyTorch's): a leaf's accumulator outlives the graph that
// made it while a later graph uses the leaf too (pipeline micro-batches in flight), and
// ordered by creation it would wait for every node of that later graph, holding each
// incoming weight gradient until the end of the backward pass (and firing DDP's bucket hooks
// only then).
class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(const Tensor& leaf) : Node("AccumulateGrad", {}, 1, kRunsFirst), leaf_(leaf) {}

  Tensor run_hooks(Tensor grad) const {
    for (const TensorHook& hook : leaf_.autograd_meta().hooks) {
      Tensor replaced = hook(grad);
      if (replaced.defined()) grad = replaced;
    }
    return grad;
  }

  // The leaf's grad() when a node's gradient for it may be summed into it in place (see
  // autograd::accumulation_target), else an undefined tensor.
  Tensor fusable_grad() const {
    const AutogradMeta& meta = leaf_.autograd_meta();
    if (!meta.grad.defined() || !meta.hooks.empty() || meta.grad.requires_grad() || !meta.grad.is_exclusive() ||
        meta.grad.dtype() != leaf_.dtype() || meta.grad.shape() != leaf_.shape())
      return {};
    return meta.grad;
  }

  TensorList apply(TensorList grads) override {
    const Tensor& g = grads.at(0);
    if (!g.defined()) return {};
    AutogradMeta& meta = leaf_.autograd_meta();
    const bool create_graph = GradMode::is_enabled();
    if (g.is_same(meta.grad)) {
      // already summed in by the node that computed it (accumulation_target)
    } else if (!meta.grad.defined()) {
      // The incoming gradient itself when nothing else holds it, else a fresh copy: it may be
      // shared with other leaves or views. A contiguous leaf gets a contiguous grad (a view's
      // backward may hand over a permuted gradient), as optimizers and buckets expect.
      const bool laid_out = g.is_contiguous() || !leaf_.is_contiguous();
      if (create_graph) meta.grad = laid_out ? g : g.contiguous();
      else if (g.is_exclusive() && !g.requires_grad() && g.dtype() == leaf_.dtype() && laid_out) meta.grad = g;
      else meta.grad = g.detach().clone();
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
    if (!grads[i].defined() || numerics::all_finite(grads[i])) continue;
    const auto* fn = dynamic_cast<const FunctionNode*>(&node);
    throw Error("backward", concat("function ", node.name(), " returned NaN or Inf values in its output ", i,
                                   fn ? " (forward op '" + fn->op() + "')" : std::string()));
  }
}

// Which outputs of a node a pass computes (empty: all), as seen by input_grad_needed().
// backward_input's pass in progress: where its deferred work goes (null in any other pass).
thread_local std::vector<autograd::DeferredGrads::Pending>* split_pass_deferred = nullptr;

thread_local const std::vector<bool>* wanted_outputs = nullptr;

// The running node's accumulation targets per input (empty: none), as seen by
// accumulation_target().
thread_local const TensorList* accumulation_targets = nullptr;

class WantedOutputsScope {
 public:
  WantedOutputsScope(const std::vector<bool>* wanted, const TensorList* targets)
      : previous_(wanted_outputs), previous_targets_(accumulation_targets) {
    wanted_outputs = wanted;
    accumulation_targets = targets;
  }
  ~WantedOutputsScope() {
    wanted_outputs = previous_;
    accumulation_targets = previous_targets_;
  }
  WantedOutputsScope(const WantedOutputsScope&) = delete;
  WantedOutputsScope& operator=(const WantedOutputsScope&) = delete;

 private:
  const std::vector<bool>* previous_;
  const TensorList* previous_targets_;
};

using Pending = autograd::DeferredGrads::Pending;

struct PassOptions {
  bool keep_graph = false;
  bool create_graph = false;
  // With targets: the gradients arriving at these edges are returned, no leaf's grad() is
  // touched, and only nodes on a path to a target run.
  std::vector<Edge> targets;
  // With targets: what flows towards other leaves is left in here (backward_input).
  std::vector<Pending>* deferred = nullptr;
};

// Nodes from which a target is reachable (post-order walk over every valid edge).
std::unordered_set<Node*> nodes_reaching(const std::vector<Pending>& starts, const std::vector<Edge>& targets) {
  std::unordered_set<Node*> target_nodes;
  for (const Edge& e : targets) target_nodes.insert(e.node.get());
  std::unordered_set<Node*> reaching, done;
  std::vector<std::pair<Node*, std::size_t>> stack;  // node, next edge to look at
  for (const Pending& s : starts) {
    if (!done.insert(s.node.get()).second) continue;
    stack.emplace_back(s.node.get(), 0);
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      const auto& edges = node->next_edges();
      if (next < edges.size()) {
        Node* child = edges[next++].node.get();
        if (child && done.insert(child).second) stack.emplace_back(child, 0);
        continue;
      }
      bool reaches = target_nodes.contains(node);
      for (const Edge& e : edges) reaches = reaches || (e.valid() && reaching.contains(e.node.get()));
      if (reaches) reaching.insert(node);
      stack.pop_back();
    }
  }
  return reaching;
}

// One backward pass from `starts` (nodes with the gradients they receive), each node run
// once all of its incoming gradients have arrived, later-created nodes first.
TensorList run_engine(std::vector<Pending> starts, const PassOptions& options) {
  // backward_input with no inputs defers everything.
  const bool targeted = !options.targets.empty() || options.deferred;
  const std::unordered_set<Node*> reaching =
      targeted ? nodes_reaching(starts, options.targets) : std::unordered_set<Node*>{};
  // The outputs each node computes: a start's own mask, else (with targets) the edges
  // towards a target, else all.
  std::unordered_map<Node*, std::vector<bool>> wanted;
  auto mask_of = [&](Node* n) -> const std::vector<bool>& {
    auto [it, fresh] = wanted.try_emplace(n);
    if (fresh && targeted)
      for (const Edge& e : n->next_edges()) it->second.push_back(e.valid() && reaching.contains(e.node.get()));
    return it->second;
  };
  auto is_wanted = [](const std::vector<bool>& mask, const Edge& e, std::size_t i) {
    return e.valid() && (mask.empty() || mask[i]);
  };

  std::unordered_map<Node*, TensorList> buffers;
  std::unordered_set<Node*> hooks_ran;
  std::vector<std::shared_ptr<Node>> start_nodes;
  for (Pending& s : starts) {
    Node* n = s.node.get();
    if (targeted && !reaching.contains(n)) {  // nothing here leads to a target
      if (options.deferred) options.deferred->push_back(std::move(s));
      continue;
    }
    if (!s.wanted.empty()) wanted[n] = std::move(s.wanted);  // backward_weight's re-runs
    if (s.hooks_ran) hooks_ran.insert(n);
    buffers[n] = std::move(s.grads);
    start_nodes.push_back(std::move(s.node));
  }

  // How many wanted edges point at each node reachable from the starts.
  std::unordered_map<Node*, int> dependencies;
  std::unordered_set<Node*> seen;
  std::vector<Node*> stack;
  for (const auto& n : start_nodes)
    if (seen.insert(n.get()).second) stack.push_back(n.get());
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    const std::vector<bool>& mask = mask_of(n);
    const auto& edges = n->next_edges();
    for (std::size_t i = 0; i < edges.size(); ++i) {
      if (!is_wanted(mask, edges[i], i)) continue;
      ++dependencies[edges[i].node.get()];
      if (seen.insert(edges[i].node.get()).second) stack.push_back(edges[i].node.get());
    }
  }

  GradMode::set_enabled(options.create_graph);  // restored by the caller's guard
  auto deliver = [&](const Edge& e, const Tensor& g) {
    TensorList& buffer = buffers[e.node.get()];
    buffer.resize(e.node->num_outputs());
    if (!g.defined()) return;
    Tensor& slot = buffer.at(e.input_nr);
    // Without create_graph, a buffer nothing else holds is summed into in place.
    if (slot.defined() && !options.create_graph && slot.is_exclusive() && slot.shape() == g.shape() &&
        slot.dtype() == g.dtype() && slot.device() == g.device())
      kernels::binary_(BinaryOp::Add, slot, g);
    else
      slot = slot.defined() ? add(slot, g) : g;
  };
  std::priority_queue<std::shared_ptr<Node>, std::vector<std::shared_ptr<Node>>, LaterFirst> ready;
  std::unordered_set<Node*> queued;
  for (const auto& n : start_nodes)
    if (dependencies[n.get()] == 0 && queued.insert(n.get()).second) ready.push(n);

  TensorList captured(options.targets.size());
  PassCallbacks callbacks;
  while (!ready.empty()) {
    std::shared_ptr<Node> node = ready.top();
    ready.pop();
    TensorList grads = std::move(buffers[node.get()]);
    buffers.erase(node.get());
    grads.resize(node->num_outputs());
    auto* accumulate = dynamic_cast<AccumulateGrad*>(node.get());
    if (!hooks_ran.contains(node.get())) {
      for (const auto& hook : node->pre_hooks()) {
        TensorList replaced = hook(grads);
        if (!replaced.empty()) grads = std::move(replaced);
      }
      if (accumulate) grads[0] = accumulate->run_hooks(grads[0]);
    }
    for (std::size_t k = 0; k < options.targets.size(); ++k)
      if (options.targets[k].node == node) captured[k] = grads.at(options.targets[k].input_nr);
    if (accumulate && targeted) continue;

    const std::vector<bool>& mask = mask_of(node.get());
    const auto& edges = node->next_edges();
    // backward_input: the outputs this pass leaves out, for backward_weight.
    std::vector<bool> rest;
    if (options.deferred && !mask.empty())
      for (std::size_t i = 0; i < edges.size(); ++i) rest.push_back(edges[i].valid() && !mask[i]);
    const bool defers = std::ranges::find(rest, true) != rest.end();
    if (defers) options.deferred->push_back({node, grads, rest, true});
    if (targeted && std::ranges::none_of(mask, [](bool w) { return w; })) continue;

    const TensorList grads_in = node->post_hooks().empty() ? TensorList{} : grads;
    // Leaf gradients this node may sum into in place: a leaf whose only gradient in this pass
    // comes from here (nothing delivered to it yet, one edge left).
    TensorList targets;
    if (!options.create_graph && !targeted)
      for (std::size_t i = 0; i < edges.size(); ++i) {
        auto* leaf = is_wanted(mask, edges[i], i) ? dynamic_cast<AccumulateGrad*>(edges[i].node.get()) : nullptr;
        if (!leaf || dependencies[leaf] != 1 || buffers.contains(leaf) || !leaf->pre_hooks().empty()) continue;
        if (Tensor grad = leaf->fusable_grad(); grad.defined()) {
          targets.resize(edges.size());
          targets[i] = std::move(grad);
        }
      }
    TensorList outputs;
    const bool checking = numerics::checking();
    const TensorList incoming = checking ? grads : TensorList{};
    {
      WantedOutputsScope scope(&mask, &targets);
      const trace::Span span(node->name(), "backward");
      std::optional<numerics::BackwardNodeScope> checked_as_a_node;
      if (checking) checked_as_a_node.emplace();
      outputs = node->apply(std::move(grads));
    }
    if (anomaly_mode) check_finite(*node, outputs);
    if (checking) {
      const auto* fn = dynamic_cast<const FunctionNode*>(node.get());
      numerics::check_backward(node->name(), fn ? std::string_view(fn->op()) : std::string_view(),
                               fn ? fn->module : std::string(), incoming, outputs);
    }
    for (const auto& hook : node->post_hooks()) hook(outputs, grads_in);
    if (!options.keep_graph && !defers) node->release_saved();

    for (std::size_t i = 0; i < edges.size(); ++i) {
      if (!is_wanted(mask, edges[i], i)) continue;
      deliver(edges[i], i < outputs.size() ? outputs[i] : Tensor());
      if (--dependencies[edges[i].node.get()] == 0) ready.push(edges[i].node);
    }
  }
  callbacks.finish();
  return captured;
}

// The pass's starts from root edges and their gradients (roots sharing a node summed).
std::vector<Pending> starts_of(const std::vector<Edge>& roots, const TensorList& root_grads) {
  std::vector<Pending> starts;
  for (std::size_t i = 0; i < roots.size(); ++i) {
    if (!roots[i].valid()) continue;
    auto it = std::ranges::find_if(starts, [&](const Pending& s) { return s.node == roots[i].node; });
    if (it == starts.end()) {
      starts.push_back({roots[i].node, TensorList(roots[i].node->num_outputs()), {}, false});
      it = starts.end() - 1;
    }
    Tensor& slot = it->grads.at(roots[i].input_nr);
    slot = slot.defined() ? add(slot, root_grads[i]) : root_grads[i];
  }
  return starts;
}

// Runs a pass with grad mode restored afterwards, also when it throws, and autocast off
// (each backward computes in the dtypes its forward saw).
// backward_weight's work of a backward_input that a node's closure ran inside another
// backward_input's pass: run in that pass's backward_weight.
class NestedWeightPass final : public Node {
 public:
  explicit NestedWeightPass(autograd::DeferredGrads&& nested)
      : Node("NestedWeightPass", {}, 0), nested_(std::move(nested)) {}
  std::vector<Tensor> apply(std::vector<Tensor>) override {
    autograd::backward_weight(nested_);
    return {};
  }

 private:
  autograd::DeferredGrads nested_;
};

TensorList run_guarded(std::vector<Pending> starts, const PassOptions& options) {
  const AutocastSuspension no_autocast;
  const bool previous = GradMode::is_enabled();
  std::vector<Pending>* const previous_split = split_pass_deferred;
  split_pass_deferred = options.deferred;  // the pass's own, for the closures it runs
  TensorList result;
  try {
    result = run_engine(std::move(starts), options);
  } catch (...) {
    GradMode::set_enabled(previous);
    split_pass_deferred = previous_split;
    throw;
  }
  GradMode::set_enabled(previous);
  split_pass_deferred = previous_split;
  return result;
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
  run_guarded(starts_of(edges, grads),
              {.keep_graph = retain_graph || create_graph, .create_graph = create_graph, .targets = {}});
}

namespace {

std::vector<Edge> input_edges(std::string_view op, const TensorList& inputs) {
  std::vector<Edge> targets;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].requires_grad()) throw Error(op, concat("input ", i, " does not require grad"));
    targets.push_back(gradient_edge(inputs[i]));
  }
  return targets;
}

}  // namespace

TensorList grad(const TensorList& outputs, const TensorList& inputs, const TensorList& grad_outputs,
                std::optional<bool> retain_graph, bool create_graph, bool allow_unused) {
  std::vector<Edge> edges;
  TensorList grads;
  prepare_roots("grad", outputs, grad_outputs, edges, grads);
  TensorList result = run_guarded(starts_of(edges, grads), {.keep_graph = retain_graph.value_or(create_graph),
                                                            .create_graph = create_graph,
                                                            .targets = input_edges("grad", inputs)});
  for (std::size_t i = 0; i < result.size(); ++i)
    if (!result[i].defined() && !allow_unused)
      throw Error("grad", concat("input ", i, " was not used to compute the outputs (pass allow_unused=true)"));
  return result;
}

TensorList backward_input(const TensorList& outputs, const TensorList& inputs, const TensorList& grad_outputs,
                          DeferredGrads& deferred, bool retain_graph) {
  if (!deferred.empty())
    throw Error("backward_input", "expected an empty DeferredGrads (run backward_weight on the previous one first)");
  std::vector<Edge> edges;
  TensorList grads;
  prepare_roots("backward_input", outputs, grad_outputs, edges, grads);
  return run_guarded(starts_of(edges, grads), {.keep_graph = retain_graph,
                                               .targets = input_edges("backward_input", inputs),
                                               .deferred = &deferred.pending_});
}

void backward_weight(DeferredGrads& deferred, bool retain_graph) {
  std::vector<Pending> starts = std::move(deferred.pending_);
  deferred.pending_.clear();
  run_guarded(std::move(starts), {.keep_graph = retain_graph, .create_graph = false, .targets = {}});
}

Tensor accumulation_target(std::size_t input) {
  if (!accumulation_targets || input >= accumulation_targets->size()) return {};
  return (*accumulation_targets)[input];
}

bool in_backward_input() { return split_pass_deferred != nullptr; }

void defer_to_backward_weight(DeferredGrads&& nested) {
  if (!split_pass_deferred)
    throw Error("defer_to_backward_weight", "expected to be called by a node of a backward_input pass");
  if (nested.empty()) return;
  split_pass_deferred->push_back({std::make_shared<NestedWeightPass>(std::move(nested)), {}, {}, true});
}

bool input_grad_needed(std::size_t input) {
  if (!wanted_outputs || wanted_outputs->empty()) return true;
  return input < wanted_outputs->size() && (*wanted_outputs)[input];
}

void queue_callback(std::function<void()> callback) {
  if (pass_callbacks.empty()) throw Error("queue_callback", "expected to be called during a backward pass");
  if (!callback) throw Error("queue_callback", "expected a callable callback, got an empty function");
  // The outermost pass: a backward run inside a node (activation checkpointing's
  // recomputation) is part of the pass that called it, which the callback waits for.
  pass_callbacks.front().push_back(std::move(callback));
}

}  // namespace autograd

const bool engine_installed = [] {
  autograd_hooks().backward = &backward_hook;
  return true;
}();

}  // namespace infini
