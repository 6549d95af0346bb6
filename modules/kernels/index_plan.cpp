// Resolution of Python-style index lists (see index_plan.cppm) and the storage offsets of
// the elements they select.
module;
#include <cstdint>
module infini.kernels;
import infini.std;

namespace infini::kernels {
namespace {

using Kind = TensorIndex::Kind;

// How many dims of the indexed tensor an entry consumes.
std::int64_t dims_consumed(const TensorIndex& index) {
  switch (index.kind()) {
    case Kind::Integer:
    case Kind::Slice: return 1;
    case Kind::Tensor: return index.tensor().dtype() == kBool ? index.tensor().dim() : 1;
    case Kind::None:
    case Kind::Ellipsis: return 0;
  }
  return 0;
}

// The broadcast shape of the index tensors; IndexError (like PyTorch) when there is none.
Shape broadcast_indices(std::string_view op, const std::vector<Tensor>& indices) {
  Shape shape = indices[0].shape();
  try {
    for (const Tensor& i : indices) shape = broadcast_shapes(op, shape, i.shape());
  } catch (const ShapeError&) {
    std::string shapes;
    for (const Tensor& i : indices) shapes += (shapes.empty() ? "" : ", ") + shape_str(i.shape());
    throw IndexError(op, concat("index tensors of shapes ", shapes, " cannot be broadcast together"));
  }
  return shape;
}

}  // namespace

IndexPlan plan_index(std::string_view op, const Tensor& self, const std::vector<TensorIndex>& indices) {
  std::int64_t consumed = 0, ellipses = 0;
  for (const TensorIndex& index : indices) {
    consumed += dims_consumed(index);
    ellipses += index.kind() == Kind::Ellipsis;
  }
  if (ellipses > 1) throw IndexError(op, concat("an index list may hold one Ellipsis, got ", ellipses));
  if (consumed > self.dim())
    throw IndexError(op, concat("too many indices for a tensor of shape ", self.shape(), ": ", consumed,
                                " dims are indexed"));
  IndexPlan plan;
  Tensor v = self;
  std::vector<Tensor> raw;             // the advanced indices, unwrapped
  std::int64_t d = 0, source = 0;      // the next dim of v, and the dim of self it came from
  for (std::size_t n = 0; n < indices.size(); ++n) {
    const TensorIndex& index = indices[n];
    switch (index.kind()) {
      case Kind::Integer: {
        const std::int64_t i = index.integer(), size = v.shape()[d];
        if (i < -size || i >= size)
          throw IndexError(op, concat("index ", i, " is out of bounds for dimension ", source, " with size ", size));
        v = v.select(d, i);
        ++source;
        break;
      }
      case Kind::Slice: {
        const indexing::Slice& s = index.slice();
        if (s.step <= 0) throw IndexError(op, concat("slice step must be positive, got ", s.step));
        v = v.slice(d++, s.start, s.stop, s.step);
        ++source;
        break;
      }
      case Kind::None: v = v.unsqueeze(d++); break;
      case Kind::Ellipsis: {
        const std::int64_t skipped = self.dim() - consumed;
        d += skipped;
        source += skipped;
        break;
      }
      case Kind::Tensor: {
        const Tensor& t = index.tensor();
        if (t.device() != self.device())
          throw DeviceError(op, concat("index on ", t.device(), " for a tensor on ", self.device()));
        if (t.dtype() == kBool && t.dim() == 0) {  // a new dim, kept (size 1) or emptied (size 0)
          v = v.unsqueeze(d);
          plan.dims.push_back(d++);
          raw.push_back(zeros({t.item<bool>() ? 1 : 0}, {.dtype = kInt64, .device = self.device()}));
        } else if (t.dtype() == kBool) {  // the coordinates of its true elements, one index per dim
          const Shape covered(v.shape().begin() + d, v.shape().begin() + d + t.dim());
          if (covered != t.shape())
            throw IndexError(op, concat("the mask of shape ", t.shape(), " at position ", n,
                                        " does not match the shape ", covered, " of dims ", source, " to ",
                                        source + t.dim() - 1, " of the indexed tensor"));
          const Tensor coords = nonzero(op, t);
          for (std::int64_t j = 0; j < t.dim(); ++j) {
            plan.dims.push_back(d++);
            raw.push_back(coords.select(1, j));
          }
          source += t.dim();
        } else {
          const Tensor i = index_as_int64(op, t);
          check_index_range(op, i, source++, v.shape()[d]);
          plan.dims.push_back(d++);
          raw.push_back(i);
        }
        break;
      }
    }
  }
  plan.view = v;
  Shape rest;  // view's dims that no tensor indexes
  for (std::int64_t k = 0, j = 0; k < v.dim(); ++k) {
    if (j < static_cast<std::int64_t>(plan.dims.size()) && plan.dims[j] == k) ++j;
    else rest.push_back(v.shape()[k]);
  }
  if (plan.dims.empty()) {
    plan.result_shape = rest;
    return plan;
  }
  NoGradGuard no_grad;
  plan.index_shape = broadcast_indices(op, raw);
  for (std::size_t j = 0; j < raw.size(); ++j) {
    const std::int64_t size = v.shape()[plan.dims[j]];
    Tensor i = raw[j];
    if (find_index_outside(i, 0, size)) i = where(binary(BinaryOp::Lt, i, Scalar(0)), binary(BinaryOp::Add, i, Scalar(size)), i);
    plan.indices.push_back(i.expand(plan.index_shape));
  }
  // Adjacent indexed dims keep their place in the result; scattered ones go in front.
  const bool adjacent =
      plan.dims.back() - plan.dims.front() + 1 == static_cast<std::int64_t>(plan.dims.size());
  plan.position = adjacent ? plan.dims.front() : 0;
  plan.result_shape.assign(rest.begin(), rest.begin() + plan.position);
  plan.result_shape.insert(plan.result_shape.end(), plan.index_shape.begin(), plan.index_shape.end());
  plan.result_shape.insert(plan.result_shape.end(), rest.begin() + plan.position, rest.end());
  return plan;
}

Tensor index_offsets(const IndexPlan& plan, std::int64_t base) {
  NoGradGuard no_grad;
  const Tensor& v = plan.view;
  const TensorOptions options{.dtype = kInt64, .device = v.device()};
  const std::size_t rank = plan.result_shape.size(), index_rank = plan.index_shape.size();
  Tensor offsets = scalar_tensor(v.storage_offset() - base, options);
  // Advanced dims: index * stride, laid over the index dims of the result.
  Shape index_layout(rank, 1);
  std::copy(plan.index_shape.begin(), plan.index_shape.end(), index_layout.begin() + plan.position);
  for (std::size_t j = 0; j < plan.dims.size(); ++j)
    offsets = binary(BinaryOp::Add, offsets,
                     binary(BinaryOp::Mul, plan.indices[j].reshape(index_layout), Scalar(v.strides()[plan.dims[j]])));
  // Other dims: position * stride along their own result dim.
  std::int64_t q = 0;  // among the other dims
  for (std::int64_t k = 0, j = 0; k < v.dim(); ++k) {
    if (j < static_cast<std::int64_t>(plan.dims.size()) && plan.dims[j] == k) {
      ++j;
      continue;
    }
    Shape layout(rank, 1);
    const std::int64_t at = q < plan.position ? q : q + static_cast<std::int64_t>(index_rank);
    layout[at] = v.shape()[k];
    offsets = binary(BinaryOp::Add, offsets,
                     binary(BinaryOp::Mul, arange(v.shape()[k], options), Scalar(v.strides()[k])).view(layout));
    ++q;
  }
  return offsets.expand(plan.result_shape);
}

}  // namespace infini::kernels
