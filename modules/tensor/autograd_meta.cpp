// Tensor's autograd accessors, grad mode, and the hook table infini.autograd fills.
module;
#include <cstdint>
module infini.tensor;
import infini.std;

namespace infini {
namespace {
thread_local bool grad_enabled = true;
thread_local bool inference_mode = false;
std::atomic<std::uint64_t> next_sequence_nr{0};
}  // namespace

bool GradMode::is_enabled() noexcept { return grad_enabled; }
void GradMode::set_enabled(bool enabled) noexcept { grad_enabled = enabled; }
bool GradMode::is_inference() noexcept { return inference_mode; }
void GradMode::set_inference(bool inference) noexcept { inference_mode = inference; }

Node::Node(std::string name, std::vector<Edge> next_edges, std::uint32_t num_outputs)
    : name_(std::move(name)),
      next_edges_(std::move(next_edges)),
      num_outputs_(num_outputs),
      sequence_nr_(next_sequence_nr.fetch_add(1, std::memory_order_relaxed)) {}

Node::Node(std::string name, std::vector<Edge> next_edges, std::uint32_t num_outputs, std::uint64_t sequence_nr)
    : name_(std::move(name)), next_edges_(std::move(next_edges)), num_outputs_(num_outputs), sequence_nr_(sequence_nr) {}

AutogradHooks& autograd_hooks() noexcept {
  static AutogradHooks hooks;
  return hooks;
}

AutogradMeta& Tensor::autograd_meta() const {
  impl();  // throws on an undefined tensor
  auto& meta = impl_->autograd;
  if (!meta) meta = std::make_shared<AutogradMeta>();
  return *meta;
}

bool Tensor::requires_grad() const {
  const auto& meta = impl().autograd;
  return meta && (meta->requires_grad || meta->grad_fn);
}

Tensor& Tensor::requires_grad_(bool requires_grad) {
  if (!is_leaf())
    throw Error("requires_grad_", "only leaf tensors can change requires_grad (use detach() for a new leaf)");
  if (requires_grad && !is_floating_point(dtype()))
    throw DTypeError("requires_grad_", concat("only floating-point tensors can require gradients, got ", dtype()));
  if (requires_grad || has_autograd_meta()) autograd_meta().requires_grad = requires_grad;
  return *this;
}

const Tensor& Tensor::grad() const {
  static const Tensor undefined;
  const auto& meta = impl().autograd;
  return meta ? meta->grad : undefined;
}

void Tensor::set_grad(const Tensor& grad) const {
  if (grad.defined() && (grad.shape() != shape() || grad.device() != device()))
    throw ShapeError("set_grad", concat("gradient of shape ", grad.shape(), " on ", grad.device(),
                                        " does not match the tensor's ", shape(), " on ", device()));
  autograd_meta().grad = grad;
}

std::shared_ptr<Node> Tensor::grad_fn() const {
  const auto& meta = impl().autograd;
  return meta ? meta->grad_fn : nullptr;
}

std::uint32_t Tensor::output_nr() const {
  const auto& meta = impl().autograd;
  return meta ? meta->output_nr : 0;
}

Tensor Tensor::detach() const {
  return Tensor(storage(), shape(), strides(), storage_offset(), dtype());
}

void Tensor::set_data(const Tensor& data) const {
  if (!is_leaf()) throw Error("set_data", "only a leaf's data can be replaced");
  if (!data.defined()) throw Error("set_data", "the new data is an undefined tensor");
  if (requires_grad() && !is_floating_point(data.dtype()))
    throw DTypeError("set_data", concat("a tensor that requires grad cannot hold ", data.dtype(), " data"));
  const Impl& from = data.impl();
  const bool grad_fits = from.shape == shape() && from.dtype == dtype() && data.device() == device();
  impl_->storage = from.storage;
  impl_->shape = from.shape;
  impl_->strides = from.strides;
  impl_->offset = from.offset;
  impl_->numel = from.numel;
  impl_->dtype = from.dtype;
  if (!grad_fits && impl_->autograd) impl_->autograd->grad = Tensor();
}

void Tensor::retain_grad() const {
  if (!requires_grad()) throw Error("retain_grad", "the tensor does not require grad");
  if (is_leaf() || autograd_meta().retains_grad) return;
  autograd_meta().retains_grad = true;
  // The gradient of this tensor is input output_nr() of its grad_fn: copy it from there.
  std::weak_ptr<AutogradMeta> meta = impl_->autograd;
  grad_fn()->register_pre_hook([meta, nr = output_nr()](const std::vector<Tensor>& grads) {
    auto m = meta.lock();
    if (m && nr < grads.size() && grads[nr].defined()) m->grad = grads[nr].detach().clone();
    return std::vector<Tensor>{};
  });
}

void Tensor::register_hook(TensorHook hook) const {
  if (!requires_grad()) throw Error("register_hook", "cannot register a hook on a tensor that does not require grad");
  if (is_leaf()) {  // run by the leaf's gradient accumulator
    autograd_meta().hooks.push_back(std::move(hook));
    return;
  }
  grad_fn()->register_pre_hook([hook = std::move(hook), nr = output_nr()](const std::vector<Tensor>& grads) {
    if (nr >= grads.size() || !grads[nr].defined()) return std::vector<Tensor>{};
    const Tensor replaced = hook(grads[nr]);
    if (!replaced.defined()) return std::vector<Tensor>{};
    std::vector<Tensor> out = grads;
    out[nr] = replaced;
    return out;
  });
}

void Tensor::register_post_accumulate_grad_hook(std::function<void(const Tensor&)> hook) const {
  if (!is_leaf() || !requires_grad())
    throw Error("register_post_accumulate_grad_hook", "only leaf tensors that require grad accumulate gradients");
  autograd_meta().post_accumulate_hooks.push_back(std::move(hook));
}

void Tensor::backward(const Tensor& gradient, bool retain_graph, bool create_graph) const {
  if (!autograd_hooks().backward)
    throw Error("backward", "the autograd engine is not loaded (link infini.autograd)");
  autograd_hooks().backward(*this, gradient, retain_graph, create_graph);
}

}  // namespace infini
