// Tensor: a cheap value handle (shared impl) to a strided view of a Storage:
// shape, strides (in elements), storage offset, dtype and device.
// Copying a Tensor copies the handle; views share the storage and never copy data.
export module infini.tensor:tensor;
import infini.std;
import :error;
import :dtype;
import :device;
import :scalar;
import :shape;
import :storage;

export namespace infini {

class Tensor;
struct AutogradMeta;  // defined in :autograd_meta
class Node;
using TensorHook = std::function<Tensor(const Tensor&)>;

// Where and of what type a new tensor is made. An unset dtype means the factory's
// default (float32 for most; see each factory).
struct TensorOptions {
  std::optional<DataType> dtype;
  Device device = Device::cpu();
};

class Tensor {
 public:
  Tensor() = default;  // undefined: only defined() and assignment are allowed
  // A view of `storage`. Checks that every element lies inside the storage.
  Tensor(Storage storage, Shape shape, Strides strides, std::int64_t storage_offset, DataType dtype);

  // ---- metadata ----
  bool defined() const noexcept { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Strides& strides() const { return impl().strides; }
  std::int64_t size(std::int64_t dim) const;
  std::int64_t stride(std::int64_t dim) const;
  std::int64_t dim() const { return static_cast<std::int64_t>(impl().shape.size()); }
  std::int64_t numel() const { return impl().numel; }
  std::int64_t storage_offset() const { return impl().offset; }
  DataType dtype() const { return impl().dtype; }
  Device device() const { return impl().storage.device(); }
  const Storage& storage() const { return impl().storage; }
  std::size_t itemsize() const { return infini::itemsize(impl().dtype); }
  std::int64_t nbytes() const { return numel() * static_cast<std::int64_t>(itemsize()); }
  bool is_contiguous() const;
  // True when both handles refer to the same tensor (not merely equal values).
  bool is_same(const Tensor& other) const noexcept { return impl_ == other.impl_; }
  // True when this handle is the only one to its tensor, which alone holds its storage and
  // fills it exactly: no other tensor or view can observe a write to it (autograd's engine
  // then reuses a gradient buffer instead of copying it).
  bool is_exclusive() const {
    return impl_ && impl_.use_count() == 1 && impl_->storage.use_count() == 1 && impl_->offset == 0 &&
           impl_->storage.nbytes() == nbytes() && is_contiguous();
  }

  // Address of element [0, ..., 0] (a device pointer for CUDA tensors).
  void* data_ptr() const;
  // Typed address; DTypeError unless T is this tensor's element type.
  template <class T>
  T* data_ptr() const {
    if (data_type_of<T>() != dtype())
      throw DTypeError("data_ptr", concat("requested ", data_type_of<T>(), " from a ", dtype(), " tensor"));
    return static_cast<T*>(data_ptr());
  }

  // ---- copies and conversions ----
  // Return *this when nothing changes, else a new contiguous tensor.
  Tensor to(DataType dtype) const;
  Tensor to(Device device) const;
  Tensor to(Device device, DataType dtype) const;
  Tensor contiguous() const;
  // A new contiguous tensor with the same values, dtype and device.
  Tensor clone() const;
  // Copies src (broadcast to this shape, any strides, dtype and device) into this tensor.
  Tensor& copy_(const Tensor& src);
  Tensor& fill_(const Scalar& value);
  Tensor& zero_() { return fill_(0); }
  // The value of a one-element tensor.
  Scalar item() const;
  template <class T>
  T item() const { return item().to<T>(); }

  // ---- views (share storage; never copy) ----
  Tensor as_strided(Shape shape, Strides strides, std::optional<std::int64_t> storage_offset = {}) const;
  Tensor view(Shape shape) const;  // one size may be -1; ShapeError when the strides do not allow it
  Tensor permute(const std::vector<std::int64_t>& dims) const;
  Tensor transpose(std::int64_t dim0, std::int64_t dim1) const;
  Tensor t() const;  // transpose of a tensor with <= 2 dims
  Tensor narrow(std::int64_t dim, std::int64_t start, std::int64_t length) const;
  // Python slicing [start:end:step] along dim: negative indices count from the end, bounds clamp, step > 0.
  Tensor slice(std::int64_t dim, std::optional<std::int64_t> start = {}, std::optional<std::int64_t> end = {},
               std::int64_t step = 1) const;
  Tensor select(std::int64_t dim, std::int64_t index) const;
  Tensor squeeze() const;
  Tensor squeeze(std::int64_t dim) const;
  Tensor unsqueeze(std::int64_t dim) const;
  Tensor unflatten(std::int64_t dim, Shape sizes) const;
  Tensor expand(Shape shape) const;  // -1 keeps a size; new dims may be added in front
  Tensor broadcast_to(Shape shape) const { return expand(std::move(shape)); }
  Tensor expand_as(const Tensor& other) const { return expand(other.shape()); }
  Tensor diagonal(std::int64_t offset = 0, std::int64_t dim1 = 0, std::int64_t dim2 = 1) const;
  std::vector<Tensor> split(std::int64_t split_size, std::int64_t dim = 0) const;
  std::vector<Tensor> split(const std::vector<std::int64_t>& split_sizes, std::int64_t dim = 0) const;
  std::vector<Tensor> chunk(std::int64_t chunks, std::int64_t dim = 0) const;
  // All windows of `size` elements along dim, `step` apart, as a new last dimension.
  Tensor unfold(std::int64_t dim, std::int64_t size, std::int64_t step) const;

  // ---- views when the strides allow, copies otherwise (like PyTorch) ----
  Tensor reshape(Shape shape) const;
  Tensor flatten(std::int64_t start_dim = 0, std::int64_t end_dim = -1) const;

  // ---- autograd (the engine lives in infini.autograd) ----
  bool requires_grad() const;
  // Marks a leaf as needing gradients; DTypeError for non-floating dtypes, Error on a non-leaf.
  Tensor& requires_grad_(bool requires_grad = true);
  // The accumulated gradient of a leaf (or of a tensor that called retain_grad()); undefined until backward.
  const Tensor& grad() const;
  void set_grad(const Tensor& grad) const;
  // The node that computed this tensor, or null for leaves.
  std::shared_ptr<Node> grad_fn() const;
  std::uint32_t output_nr() const;
  bool is_leaf() const { return grad_fn() == nullptr; }
  // A new handle to the same data with no autograd history.
  Tensor detach() const;
  // Makes this leaf (and every handle to it) refer to `data`'s storage, shape, strides and
  // dtype, keeping requires_grad and hooks; the grad is dropped unless it still fits
  // (same shape, dtype and device). How Module::to(dtype/device) converts parameters in place.
  void set_data(const Tensor& data) const;
  // Makes backward keep this non-leaf's gradient in grad().
  void retain_grad() const;
  // hook(grad) runs when this tensor's gradient is computed; a defined result replaces it.
  void register_hook(TensorHook hook) const;
  // For leaves: hook(leaf) runs after its grad() was accumulated in a backward pass.
  void register_post_accumulate_grad_hook(std::function<void(const Tensor&)> hook) const;
  // Computes gradients of this tensor w.r.t. the leaves of its graph (see infini.autograd).
  void backward(const Tensor& gradient = {}, bool retain_graph = false, bool create_graph = false) const;
  // Version of the storage's data (see Storage::version).
  std::uint64_t version() const { return storage().version(); }
  // This tensor's autograd record, created on first use (for autograd implementations).
  AutogradMeta& autograd_meta() const;
  bool has_autograd_meta() const { return impl().autograd != nullptr; }

  // PyTorch-style repr: "tensor([[1., 2.],\n        [3., 4.]])", summarised above 1000 elements.
  std::string str() const;

 private:
  struct Impl {
    Storage storage;
    Shape shape;
    Strides strides;
    std::int64_t offset = 0;
    std::int64_t numel = 0;
    DataType dtype = kFloat32;
    std::shared_ptr<AutogradMeta> autograd;
  };
  const Impl& impl() const {
    if (!impl_) throw Error("Tensor", "operation on an undefined tensor");
    return *impl_;
  }
  // Re-applies a view op to another tensor of this one's geometry (autograd's backward of views).
  using ViewReplay = std::function<Tensor(const Tensor&)>;
  // A view of this tensor's storage; records autograd history when this tensor needs it.
  Tensor make_view(Shape shape, Strides strides, std::int64_t offset, ViewReplay replay) const;
  // ShapeError (from `op`) unless every element of the view lies inside the storage.
  static void check_in_storage(std::string_view op, const Storage& storage, const Shape& shape,
                               const Strides& strides, std::int64_t storage_offset, DataType dtype);

  std::shared_ptr<Impl> impl_;
};

inline std::ostream& operator<<(std::ostream& out, const Tensor& t) { return out << t.str(); }

// Strides that view a tensor of (shape, strides) as `new_shape` without copying, if any
// exist (PyTorch's rule: dims may merge only where they are contiguous with each other).
std::optional<Strides> view_strides(const Shape& shape, const Strides& strides, const Shape& new_shape);

}  // namespace infini
