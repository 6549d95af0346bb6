// Raw gather / scatter along one dim and the index checks: every shape, dtype, device and
// index value is checked before a kernel writes anything; 0-d operands are handled as
// 1-element 1-d views; the kernels get operands of one iteration shape.
module;
#include <cstdint>
module infini.kernels;
import infini.std;

namespace infini::kernels {
namespace {

void check_same_device(std::string_view op, const Tensor& a, const Tensor& b) {
  if (a.device() != b.device())
    throw DeviceError(op, concat("expected all tensors on one device, got ", a.device(), " and ", b.device()));
}

// A 0-d tensor as a 1-element 1-d view: the kernels walk a dim.
Tensor as_1d(const Tensor& t) { return t.dim() == 0 ? t.view({1}) : t; }

// t narrowed to `shape` in every dim except `skip` (-1: none).
Tensor narrow_to(const Tensor& t, const Shape& shape, std::int64_t skip) {
  Tensor out = t;
  for (std::int64_t d = 0; d < t.dim(); ++d)
    if (d != skip && out.shape()[d] != shape[d]) out = out.narrow(d, 0, shape[d]);
  return out;
}

// A 1-d index laid along `dim` of `shape` and broadcast over the other dims.
Tensor spread_index(const Tensor& index, const Shape& shape, std::int64_t dim) {
  Shape along(shape.size(), 1);
  along[dim] = index.numel();
  return index.reshape(along).expand(shape);
}

// What a kernel writing `self` reads: a copy when it shares self's storage.
Tensor unaliased(const Tensor& t, const Tensor& self) { return t.storage().is_same(self.storage()) ? t.clone() : t; }

void check_writable(std::string_view op, const Tensor& self) {
  if (may_have_internal_overlap(self))
    throw Error(op, concat("cannot write into a tensor of shape ", self.shape(), " and strides ", self.strides(),
                           ": several elements share one memory location (clone() it first)"));
}

void check_same_dtype(std::string_view op, std::string_view what, const Tensor& self, const Tensor& other) {
  if (other.dtype() != self.dtype())
    throw DTypeError(op, concat("expected ", what, " of the input's dtype ", self.dtype(), ", got ", other.dtype()));
}

}  // namespace

Tensor index_as_int64(std::string_view op, const Tensor& index) {
  if (!index.defined()) throw Error(op, "the index tensor is undefined");
  if (index.dtype() == kInt64) return index;
  if (index.dtype() == kInt32) {
    NoGradGuard no_grad;
    return index.to(kInt64);
  }
  throw DTypeError(op, concat("expected an int64 (or int32) index tensor, got ", index.dtype()));
}

std::optional<std::int64_t> find_index_outside(const Tensor& index, std::int64_t lo, std::int64_t hi) {
  if (index.numel() == 0) return std::nullopt;
  return KernelTable<IndexRangeKernel>::call(index.device(), index, lo, hi);
}

void check_index_range(std::string_view op, const Tensor& index, std::int64_t dim, std::int64_t size) {
  if (const auto bad = find_index_outside(index, -size, size))
    throw IndexError(op, concat("index ", *bad, " is out of bounds for dimension ", dim, " with size ", size));
}

Tensor gather(std::string_view op, const Tensor& self, std::int64_t dim, const Tensor& index) {
  NoGradGuard no_grad;
  check_same_device(op, self, index);
  const Tensor idx = as_1d(index_as_int64(op, index));
  dim = wrap_dim(op, dim, self.dim());
  if (index.dim() != self.dim())
    throw ShapeError(op, concat("index of shape ", index.shape(), " and input of shape ", self.shape(),
                                " must have the same number of dims"));
  const Tensor x = as_1d(self);
  for (std::int64_t d = 0; d < x.dim(); ++d)
    if (d != dim && idx.shape()[d] > x.shape()[d])
      throw ShapeError(op, concat("index of shape ", index.shape(), " is larger than the input of shape ", self.shape(),
                                  " in dimension ", d));
  check_index_range(op, idx, dim, x.shape()[dim]);
  Tensor out = empty(index.shape(), {.dtype = self.dtype(), .device = self.device()});
  if (out.numel() > 0) KernelTable<GatherKernel>::call(self.device(), as_1d(out), narrow_to(x, idx.shape(), dim), dim, idx);
  return out;
}

const Tensor& scatter_(std::string_view op, const Tensor& self, std::int64_t dim, const Tensor& index,
                       const Tensor& src, ScatterMode mode) {
  NoGradGuard no_grad;
  check_same_device(op, self, index);
  check_same_device(op, self, src);
  const Tensor idx = as_1d(index_as_int64(op, index));
  check_same_dtype(op, "src", self, src);
  dim = wrap_dim(op, dim, self.dim());
  if (index.dim() != self.dim() || src.dim() != self.dim())
    throw ShapeError(op, concat("index of shape ", index.shape(), ", src of shape ", src.shape(), " and input of shape ",
                                self.shape(), " must have the same number of dims"));
  const Tensor y = as_1d(self), s = as_1d(src);
  for (std::int64_t d = 0; d < y.dim(); ++d) {
    if (idx.shape()[d] > s.shape()[d] || (d != dim && idx.shape()[d] > y.shape()[d]))
      throw ShapeError(op, concat("index of shape ", index.shape(), " is larger than src of shape ", src.shape(),
                                  " or (outside dimension ", dim, ") the input of shape ", self.shape(),
                                  " in dimension ", d));
  }
  check_writable(op, self);
  check_index_range(op, idx, dim, y.shape()[dim]);
  if (idx.numel() == 0) return self;
  KernelTable<ScatterKernel>::call(self.device(), narrow_to(y, idx.shape(), dim), dim, unaliased(idx, self),
                                   unaliased(narrow_to(s, idx.shape(), -1), self), mode);
  self.storage().bump_version();
  return self;
}

Tensor index_select(std::string_view op, const Tensor& self, std::int64_t dim, const Tensor& index) {
  NoGradGuard no_grad;
  check_same_device(op, self, index);
  const Tensor idx = index_as_int64(op, index);
  if (idx.dim() > 1) throw ShapeError(op, concat("the index must be 0-d or 1-d, got shape ", index.shape()));
  dim = wrap_dim(op, dim, self.dim());
  const Tensor x = as_1d(self);
  check_index_range(op, idx, dim, x.shape()[dim]);
  if (self.dim() == 0 && idx.numel() != 1)
    throw ShapeError(op, concat("a 0-d input takes exactly one index, got ", idx.numel()));
  Shape shape = x.shape();
  shape[dim] = idx.numel();
  Tensor out = empty(shape, {.dtype = self.dtype(), .device = self.device()});
  if (out.numel() > 0) KernelTable<GatherKernel>::call(self.device(), out, x, dim, spread_index(idx, shape, dim));
  return self.dim() == 0 ? out.view({}) : out;
}

const Tensor& index_scatter_(std::string_view op, const Tensor& self, std::int64_t dim, const Tensor& index,
                             const Tensor& source, ScatterMode mode) {
  NoGradGuard no_grad;
  check_same_device(op, self, index);
  check_same_device(op, self, source);
  const Tensor idx = index_as_int64(op, index);
  if (idx.dim() > 1) throw ShapeError(op, concat("the index must be 0-d or 1-d, got shape ", index.shape()));
  check_same_dtype(op, "source", self, source);
  dim = wrap_dim(op, dim, self.dim());
  const Tensor y = as_1d(self), s = as_1d(source);
  Shape expected = y.shape();
  expected[dim] = idx.numel();
  if (s.shape() != expected)
    throw ShapeError(op, concat("source of shape ", source.shape(), " does not fit ", idx.numel(),
                                " indices into dimension ", dim, " of the input of shape ", self.shape(), " (expected ",
                                expected, ")"));
  check_writable(op, self);
  check_index_range(op, idx, dim, y.shape()[dim]);
  if (s.numel() == 0) return self;
  KernelTable<ScatterKernel>::call(self.device(), y, dim, unaliased(spread_index(idx, expected, dim), self),
                                   unaliased(s, self), mode);
  self.storage().bump_version();
  return self;
}

}  // namespace infini::kernels
