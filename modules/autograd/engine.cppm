// The backward engine: runs the graph behind some roots iteratively (no recursion), each
// node once all of its incoming gradients have arrived, later-created nodes first.
export module infini.autograd:engine;
import infini.std;
import infini.kernels;
import :function;

export namespace infini {

// The node that adds incoming gradients into a leaf's grad(), created on first use.
std::shared_ptr<Node> grad_accumulator(const Tensor& leaf);

// When on (thread-local), the first backward node returning NaN or Inf raises an Error
// naming that node and the forward op that created it.
class AnomalyMode {
 public:
  static bool is_enabled() noexcept;
  static void set_enabled(bool enabled) noexcept;
};

class DetectAnomalyGuard {
 public:
  DetectAnomalyGuard() : previous_(AnomalyMode::is_enabled()) { AnomalyMode::set_enabled(true); }
  ~DetectAnomalyGuard() { AnomalyMode::set_enabled(previous_); }
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool previous_;
};

namespace autograd {

// Accumulates d(roots)/d(leaf) into every leaf's grad(). A root with one element may omit
// its gradient (ones); others need one of the root's shape.
void backward(const TensorList& roots, const TensorList& grad_roots = {}, bool retain_graph = false,
              bool create_graph = false);

// The gradients of `outputs` w.r.t. `inputs` (without touching any grad()). An input the
// outputs do not depend on is an Error unless allow_unused, which gives an undefined tensor.
// retain_graph defaults to create_graph.
TensorList grad(const TensorList& outputs, const TensorList& inputs, const TensorList& grad_outputs = {},
                std::optional<bool> retain_graph = {}, bool create_graph = false, bool allow_unused = false);

// Weight gradients a split backward left for later: the nodes that still owe gradients
// towards parameters, with the gradients they received (zero-bubble pipelines' W step).
class DeferredGrads {
 public:
  bool empty() const noexcept { return pending_.empty(); }

  // One node to run again: with `grads` (its pre hooks already applied when hooks_ran),
  // computing only the outputs `wanted` marks (empty: all).
  struct Pending {
    std::shared_ptr<Node> node;
    TensorList grads;
    std::vector<bool> wanted;
    bool hooks_ran = false;
  };

 private:
  friend TensorList backward_input(const TensorList&, const TensorList&, const TensorList&, DeferredGrads&, bool);
  friend void backward_weight(DeferredGrads&, bool);
  friend void defer_to_backward_weight(DeferredGrads&& nested);
  std::vector<Pending> pending_;
};

// The first half of a split backward: the gradients of `outputs` w.r.t. `inputs`, like
// grad(), computing only what they need. A node whose gradient also flows towards other
// leaves (the parameters) computes just its input-side outputs now; it and the gradients it
// received go into `deferred`, which must be empty. With no inputs all of it is deferred.
// What backward_weight will not run again is freed unless retain_graph.
TensorList backward_input(const TensorList& outputs, const TensorList& inputs, const TensorList& grad_outputs,
                          DeferredGrads& deferred, bool retain_graph = false);

// The second half: runs what backward_input deferred, accumulating into the leaves'
// grad() what backward() would have, then empties `deferred` (and frees the graph unless
// retain_graph).
void backward_weight(DeferredGrads& deferred, bool retain_graph = false);

// Inside a backward closure: whether the running pass is backward_input's (its weight
// gradients wait for backward_weight). A closure that runs a backward of its own (activation
// checkpointing's recomputation) splits it the same way.
bool in_backward_input();
// Inside a backward closure of backward_input's pass: what `nested` (left by a backward_input
// the closure ran itself) owes runs in that pass's backward_weight. Error outside such a pass.
void defer_to_backward_weight(DeferredGrads&& nested);

// Inside a backward closure: whether the running pass uses the gradient of forward input
// `input` (grad() and backward_input skip what their inputs do not depend on). Costly
// closures skip computing unused gradients; an unused one that is computed is dropped.
bool input_grad_needed(std::size_t input);

// Inside a backward closure: the leaf gradient that forward input `input`'s gradient may be
// summed into in place, or an undefined tensor. Defined when the input is a leaf whose grad()
// is already defined, held by nothing else and laid out as the leaf, has no tensor hooks, and
// this node is the only one giving it a gradient in this pass (without create_graph). A
// closure that adds its gradient into it returns that very tensor for the input: the leaf's
// accumulation then only runs its post-accumulate hooks. This saves a gradient-sized
// temporary per accumulation (Megatron's gradient-accumulation fusion), e.g. the dense
// embedding gradient of every micro-batch after the first.
Tensor accumulation_target(std::size_t input);

// From inside a backward pass (a hook or a node): runs `callback` once that pass has run
// every node, before backward() returns, in the order queued (PyTorch's
// Engine::queue_callback; DDP waits for its all-reduces this way). A pass run inside a node
// (checkpoint's recomputation) counts as part of the outermost one. An exception from a
// callback leaves backward(). Error outside a backward pass.
void queue_callback(std::function<void()> callback);

}  // namespace autograd
}  // namespace infini
