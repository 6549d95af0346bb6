// What infini.tensor knows of autograd: the per-tensor record (AutogradMeta), the graph
// node interface (Node, Edge), grad mode, and the hooks through which infini.autograd
// makes Tensor's own methods (views, copy_, fill_, backward) differentiable.
export module infini.tensor:autograd_meta;
import infini.std;
import :tensor;

export namespace infini {

// Whether ops record autograd history on this thread (PyTorch's grad mode), and inference
// mode (no history and no version checks needed; implies grad mode off).
class GradMode {
 public:
  static bool is_enabled() noexcept;
  static void set_enabled(bool enabled) noexcept;
  static bool is_inference() noexcept;
  static void set_inference(bool inference) noexcept;
};

// Scoped switches, restoring the previous state on exit (thread-local).
class NoGradGuard {
 public:
  NoGradGuard() : previous_(GradMode::is_enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

class EnableGradGuard {
 public:
  EnableGradGuard() : previous_(GradMode::is_enabled()) { GradMode::set_enabled(true); }
  ~EnableGradGuard() { GradMode::set_enabled(previous_); }
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool previous_;
};

class InferenceModeGuard {
 public:
  InferenceModeGuard() : grad_(GradMode::is_enabled()), inference_(GradMode::is_inference()) {
    GradMode::set_enabled(false);
    GradMode::set_inference(true);
  }
  ~InferenceModeGuard() {
    GradMode::set_enabled(grad_);
    GradMode::set_inference(inference_);
  }
  InferenceModeGuard(const InferenceModeGuard&) = delete;
  InferenceModeGuard& operator=(const InferenceModeGuard&) = delete;

 private:
  bool grad_, inference_;
};

// Where a gradient flows: input `input_nr` of `node` (null node: nowhere).
struct Edge {
  std::shared_ptr<Node> node;
  std::uint32_t input_nr = 0;
  bool valid() const noexcept { return node != nullptr; }
};

// A backward function in the graph. apply() receives the gradient of each forward output
// (an undefined Tensor stands for zeros) and returns one gradient per next edge.
class Node : public std::enable_shared_from_this<Node> {
 public:
  using PreHook = std::function<std::vector<Tensor>(const std::vector<Tensor>& grad_outputs)>;
  using PostHook = std::function<void(const std::vector<Tensor>& grad_inputs, const std::vector<Tensor>& grad_outputs)>;

  // Numbered in creation order ...
  Node(std::string name, std::vector<Edge> next_edges, std::uint32_t num_outputs = 1);
  // ... or with a given number: kRunsFirst for a node the engine runs as soon as it is ready.
  static constexpr std::uint64_t kRunsFirst = std::numeric_limits<std::uint64_t>::max();
  Node(std::string name, std::vector<Edge> next_edges, std::uint32_t num_outputs, std::uint64_t sequence_nr);
  virtual ~Node() = default;

  // The forward op's name with "Backward" appended, e.g. "MulBackward".
  const std::string& name() const noexcept { return name_; }
  const std::vector<Edge>& next_edges() const noexcept { return next_edges_; }
  std::uint32_t num_outputs() const noexcept { return num_outputs_; }
  // Creation order: the engine runs later nodes first when several are ready.
  std::uint64_t sequence_nr() const noexcept { return sequence_nr_; }

  virtual std::vector<Tensor> apply(std::vector<Tensor> grad_outputs) = 0;
  // Drops what was saved for backward (after a backward without retain_graph).
  virtual void release_saved() {}

  // A pre hook may return replacement grad_outputs (empty: keep them).
  void register_pre_hook(PreHook hook) { pre_hooks_.push_back(std::move(hook)); }
  void register_post_hook(PostHook hook) { post_hooks_.push_back(std::move(hook)); }
  const std::vector<PreHook>& pre_hooks() const noexcept { return pre_hooks_; }
  const std::vector<PostHook>& post_hooks() const noexcept { return post_hooks_; }

 private:
  std::string name_;
  std::vector<Edge> next_edges_;
  std::uint32_t num_outputs_;
  std::uint64_t sequence_nr_;
  std::vector<PreHook> pre_hooks_;
  std::vector<PostHook> post_hooks_;
};

// Autograd state of one tensor handle's impl.
struct AutogradMeta {
  bool requires_grad = false;  // set on leaves by requires_grad_()
  Tensor grad;                 // accumulated gradient (leaves, or retain_grad)
  std::shared_ptr<Node> grad_fn;
  std::uint32_t output_nr = 0;
  std::weak_ptr<Node> grad_accumulator;  // leaves: the node that adds into grad
  bool retains_grad = false;
  std::vector<TensorHook> hooks;
  std::vector<std::function<void(const Tensor&)>> post_accumulate_hooks;
  // Set on views made while their base required grad: in-place writes through such a view
  // would have to rewrite the base's history, which is not supported.
  bool is_view_of_graph = false;
};

// Installed by infini.autograd when the library loads.
struct AutogradHooks {
  // Runs the engine from `root` (see Tensor::backward).
  void (*backward)(const Tensor& root, const Tensor& gradient, bool retain_graph, bool create_graph) = nullptr;
  // Gives `view` (just made from `base` by `replay`) a node whose gradient maps back to base.
  void (*record_view)(const Tensor& base, const Tensor& view, std::function<Tensor(const Tensor&)> replay) = nullptr;
  // Gives `dst`, just overwritten by copy_(src) (src undefined for fill_), its new history.
  void (*record_overwrite)(std::string_view op, const Tensor& dst, const Tensor& src) = nullptr;
};
AutogradHooks& autograd_hooks() noexcept;

// True when an op on `t` must record history: grad mode is on and t requires grad.
inline bool needs_grad(const Tensor& t) { return GradMode::is_enabled() && t.defined() && t.requires_grad(); }

}  // namespace infini
