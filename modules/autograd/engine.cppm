// The backward engine: runs the graph behind some roots iteratively (no recursion), each
// node once all of its incoming gradients have arrived, later-created nodes first.
module;
#include <functional>
#include <memory>
#include <optional>
#include <vector>
export module infini.autograd:engine;
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

// From inside a backward pass (a hook or a node): runs `callback` once that pass has run
// every node, before backward() returns, in the order queued (PyTorch's
// Engine::queue_callback; DDP waits for its all-reduces this way). An exception from a
// callback leaves backward(). Error outside a backward pass.
void queue_callback(std::function<void()> callback);

}  // namespace autograd
}  // namespace infini
