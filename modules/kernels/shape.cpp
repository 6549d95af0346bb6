// Raw gather / scatter-add along dims: argument checks and result allocation around the
// device kernels.
module;
#include <cstdint>
module infini.kernels;
import infini.std;

namespace infini::kernels {
namespace {

// IndexError (from op) unless every entry of index lies in [0, size).
void check_index(std::string_view op, const std::vector<std::int64_t>& index, std::int64_t dim, std::int64_t size) {
  for (std::size_t j = 0; j < index.size(); ++j)
    if (index[j] < 0 || index[j] >= size)
      throw IndexError(op, concat("index ", index[j], " at position ", j, " is out of range for dimension ", dim,
                                  " of size ", size));
}

// True when some dim of x (not an expanded one) steps through memory less than its last dim
// does: reading x along its last dim would jump across rows.
bool transposed_layout(const Tensor& x) {
  if (x.dim() < 2 || x.shape().back() <= 1) return false;
  for (std::int64_t d = 0; d + 1 < x.dim(); ++d)
    if (x.shape()[d] > 1 && x.strides()[d] > 0 && x.strides()[d] < x.strides().back()) return true;
  return false;
}

}  // namespace

Tensor gather_dims(std::string_view op, const Tensor& x, std::vector<DimIndex> index) {
  NoGradGuard no_grad;
  Shape shape = x.shape();
  std::vector<bool> seen(shape.size(), false);
  if (x.dim() == 0 && !index.empty()) throw ShapeError(op, "a 0-d tensor has no dimension to index");
  for (DimIndex& d : index) {
    const std::int64_t given = d.dim;
    d.dim = wrap_dim(op, d.dim, x.dim());
    if (seen[d.dim]) throw IndexError(op, concat("dimension ", given, " is indexed twice"));
    seen[d.dim] = true;
    check_index(op, d.index, d.dim, shape[d.dim]);
    shape[d.dim] = static_cast<std::int64_t>(d.index.size());
  }
  Tensor out = empty(shape, {.dtype = x.dtype(), .device = x.device()});
  if (out.numel() == 0) return out;
  // The kernel reads along the last dim: a transposed input goes through the copy kernel's
  // tiled transpose first.
  KernelTable<GatherDimsKernel>::call(x.device(), out, transposed_layout(x) ? x.contiguous() : x, index);
  return out;
}

Tensor scatter_add_dim(std::string_view op, const Tensor& x, std::int64_t dim, const std::vector<std::int64_t>& index,
                       std::int64_t size) {
  NoGradGuard no_grad;
  if (x.dim() == 0) throw ShapeError(op, "a 0-d tensor has no dimension to scatter along");
  dim = wrap_dim(op, dim, x.dim());
  if (static_cast<std::int64_t>(index.size()) != x.size(dim))
    throw ShapeError(op, concat("index of ", index.size(), " entries for dimension ", dim, " of size ", x.size(dim),
                                " (shape ", x.shape(), ")"));
  if (size < 0) throw ShapeError(op, concat("negative result size ", size));
  check_index(op, index, dim, size);
  Shape shape = x.shape();
  shape[dim] = size;
  if (x.numel() == 0) return zeros(shape, {.dtype = x.dtype(), .device = x.device()});  // nothing to add
  Tensor out = empty(shape, {.dtype = x.dtype(), .device = x.device()});
  KernelTable<ScatterAddDimKernel>::call(x.device(), out, x.contiguous(), dim, index);
  return out;
}

}  // namespace infini::kernels
