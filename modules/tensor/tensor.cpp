// Tensor basics: construction, metadata, element access, copies and conversions.
module;
#include <cstdint>
module infini.tensor;
import infini.std;

namespace infini {

Tensor::Tensor(Storage storage, Shape shape, Strides strides, std::int64_t storage_offset, DataType dtype) {
  if (!storage.defined()) throw Error("Tensor", "storage is undefined");
  check_in_storage("Tensor", storage, shape, strides, storage_offset, dtype);
  const std::int64_t numel = checked_numel("Tensor", shape);
  impl_ = std::make_shared<Impl>(Impl{std::move(storage), std::move(shape), std::move(strides), storage_offset,
                                      numel, dtype, nullptr});
}

void Tensor::check_in_storage(std::string_view op, const Storage& storage, const Shape& shape, const Strides& strides,
                              std::int64_t storage_offset, DataType dtype) {
  if (shape.size() != strides.size())
    throw ShapeError(op, concat("shape ", shape, " and strides ", strides, " differ in length"));
  if (storage_offset < 0) throw ShapeError(op, concat("negative storage offset ", storage_offset));
  for (std::int64_t s : strides)
    if (s < 0) throw ShapeError(op, concat("negative strides are not supported: ", strides));
  if (checked_numel(op, shape) > 0) {
    // The last element must lie inside the storage.
    std::int64_t last = storage_offset;
    bool overflow = false;
    for (std::size_t i = 0; i < shape.size(); ++i) {
      std::int64_t step = 0;
      overflow = overflow || __builtin_mul_overflow(shape[i] - 1, strides[i], &step) ||
                 __builtin_add_overflow(last, step, &last);
    }
    const std::int64_t capacity = storage.nbytes() / static_cast<std::int64_t>(infini::itemsize(dtype));
    if (overflow || last >= capacity)
      throw ShapeError(op, concat("shape ", shape, ", strides ", strides, " and offset ", storage_offset,
                                  " reach element ", last, " of a storage holding ", capacity, " ", dtype,
                                  " elements"));
  }
}

std::int64_t Tensor::size(std::int64_t d) const {
  if (dim() == 0) throw IndexError("size", concat("a 0-d tensor has no dimension ", d));
  return shape()[wrap_dim("size", d, dim())];
}

std::int64_t Tensor::stride(std::int64_t d) const {
  if (dim() == 0) throw IndexError("stride", concat("a 0-d tensor has no dimension ", d));
  return strides()[wrap_dim("stride", d, dim())];
}

bool Tensor::is_contiguous() const {
  if (numel() == 0) return true;
  std::int64_t expected = 1;
  for (std::int64_t d = dim() - 1; d >= 0; --d) {
    if (shape()[d] == 1) continue;
    if (strides()[d] != expected) return false;
    expected *= shape()[d];
  }
  return true;
}

void* Tensor::data_ptr() const {
  char* base = static_cast<char*>(storage().data());
  return base ? base + storage_offset() * static_cast<std::int64_t>(itemsize()) : nullptr;
}

namespace {

// True when the two tensors' element ranges in one storage intersect.
bool may_overlap(const Tensor& a, const Tensor& b) {
  if (!a.storage().is_same(b.storage()) || a.numel() == 0 || b.numel() == 0) return false;
  auto range = [](const Tensor& t) {
    std::int64_t last = t.storage_offset();
    for (std::int64_t d = 0; d < t.dim(); ++d) last += (t.shape()[d] - 1) * t.strides()[d];
    const auto bytes = static_cast<std::int64_t>(t.itemsize());
    return std::pair{t.storage_offset() * bytes, (last + 1) * bytes};
  };
  const auto [a0, a1] = range(a);
  const auto [b0, b1] = range(b);
  return a0 < b1 && b0 < a1;
}

// Writing to a tensor in which two indices map to one address (an expanded dim) is an error.
void check_writable(std::string_view op, const Tensor& t) {
  for (std::int64_t d = 0; d < t.dim(); ++d)
    if (t.strides()[d] == 0 && t.shape()[d] > 1)
      throw Error(op, concat("cannot write to a tensor of shape ", t.shape(), " and strides ", t.strides(),
                             ": several elements share one memory location (clone() it first)"));
}

// In-place writes that autograd cannot follow are refused while grad mode is on.
void check_inplace_allowed(std::string_view op, const Tensor& t) {
  if (!GradMode::is_enabled() || !t.has_autograd_meta()) return;
  const AutogradMeta& meta = t.autograd_meta();
  if (t.is_leaf() && meta.requires_grad)
    throw Error(op, "a leaf tensor that requires grad is used in an in-place operation (wrap it in NoGradGuard)");
  if (meta.is_view_of_graph)
    throw Error(op, "in-place write into a view of a tensor that requires grad is not supported (clone() the view)");
}

}  // namespace

Tensor& Tensor::copy_(const Tensor& src) {
  check_writable("copy_", *this);
  check_inplace_allowed("copy_", *this);
  if (!broadcasts_to(src.shape(), shape()))
    throw ShapeError("copy_", concat("source of shape ", src.shape(), " does not broadcast to the destination shape ",
                                     shape()));
  Tensor source = src.detach().expand(shape());  // autograd records the copy as a whole, below
  if (numel() == 0) return *this;
  if (source.device() != device()) {
    // Move the bytes across as a contiguous block, then copy on this tensor's device.
    Tensor packed = source.contiguous();
    Tensor moved(Storage::allocate(packed.nbytes(), device()), packed.shape(), contiguous_strides(packed.shape()), 0,
                 packed.dtype());
    copy_bytes(moved.data_ptr(), device(), packed.data_ptr(), packed.device(), packed.nbytes());
    source = moved;
  } else if (may_overlap(*this, source)) {
    if (source.shape() == shape() && source.strides() == strides() && source.storage_offset() == storage_offset() &&
        source.dtype() == dtype())
      return *this;  // copying a tensor onto itself
    source = source.clone();
  }
  KernelTable<CopyKernel>::call(device(), *this, source);
  storage().bump_version();
  if (needs_grad(*this) || needs_grad(src)) autograd_hooks().record_overwrite("copy_", *this, src);
  return *this;
}

Tensor& Tensor::fill_(const Scalar& value) {
  check_writable("fill_", *this);
  check_inplace_allowed("fill_", *this);
  if (numel() > 0) KernelTable<FillKernel>::call(device(), *this, value);
  storage().bump_version();
  if (needs_grad(*this)) autograd_hooks().record_overwrite("fill_", *this, Tensor());
  return *this;
}

Tensor Tensor::to(Device target, DataType target_dtype) const {
  if (target == device() && target_dtype == dtype()) return *this;
  Tensor result = empty(shape(), {.dtype = target_dtype, .device = target});
  result.copy_(*this);
  return result;
}

Tensor Tensor::to(DataType target_dtype) const { return to(device(), target_dtype); }
Tensor Tensor::to(Device target) const { return to(target, dtype()); }

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

Tensor Tensor::clone() const {
  Tensor result = empty(shape(), {.dtype = dtype(), .device = device()});
  result.copy_(*this);
  return result;
}

Scalar Tensor::item() const {
  if (numel() != 1)
    throw ShapeError("item", concat("a tensor with ", numel(), " elements (shape ", shape(),
                                    ") cannot be converted to a scalar; expected exactly 1 element"));
  Tensor host = to(Device::cpu());
  return dispatch(dtype(), [&]<class T>() { return Scalar(*static_cast<const T*>(host.data_ptr())); });
}

}  // namespace infini
