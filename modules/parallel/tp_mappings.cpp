// The tensor- and sequence-parallel maps (see tp_mappings.cppm): each is a forward collective
// recorded with the transposed collective as its backward.
module;
#include <cstdint>
module infini.parallel;
import infini.std;

namespace infini::parallel {
namespace {

using Map = Tensor (*)(const Tensor&, ProcessGroup&);

// Records y = forward(x) with backward(grad) as its gradient, both outside grad mode.
Tensor mapped(std::string_view op, const Tensor& x, const GroupPtr& group, Map forward, Map backward) {
  if (!group) throw Error(op, "needs a process group, got null");
  Tensor y;
  {
    NoGradGuard no_grad;
    y = forward(x, *group);
  }
  record(op, {x}, {y}, {}, [group, backward](const TensorList& g, const TensorList&) {
    if (!g[0].defined()) return TensorList{Tensor()};
    NoGradGuard no_grad;
    return TensorList{backward(g[0], *group)};
  });
  return y;
}

std::int64_t checked_dim(std::string_view op, const Tensor& x, std::int64_t dim) {
  if (x.dim() == 0) throw ShapeError(op, "expected a tensor with at least one dim, got a scalar");
  const std::int64_t d = dim < 0 ? dim + x.dim() : dim;
  if (d < 0 || d >= x.dim()) throw ShapeError(op, concat("dim ", dim, " is out of range for shape ", x.shape()));
  return d;
}

// Block rank() of `dim` (split into size() equal blocks), a new tensor.
Tensor block_of(std::string_view op, const Tensor& x, std::int64_t dim, ProcessGroup& group) {
  dim = checked_dim(op, x, dim);
  const std::int64_t n = x.size(dim), ranks = group.size();
  if (n % ranks != 0)
    throw ShapeError(op, concat("dim ", dim, " of ", x.shape(), " does not split into ", ranks, " equal blocks"));
  const std::int64_t block = n / ranks;
  return x.slice(dim, group.rank() * block, (group.rank() + 1) * block).contiguous().clone();
}

// Block rank() of `dim` of the sum over the ranks, a new tensor.
Tensor reduce_scatter_along(std::string_view op, const Tensor& x, std::int64_t dim, ProcessGroup& group) {
  dim = checked_dim(op, x, dim);
  const std::int64_t n = x.size(dim), ranks = group.size();
  if (n % ranks != 0)
    throw ShapeError(op, concat("dim ", dim, " of ", x.shape(), " does not split into ", ranks, " equal blocks"));
  Shape blocks = x.shape();  // dim split into (ranks, n / ranks), the ranks moved to the front
  blocks[static_cast<std::size_t>(dim)] = n / ranks;
  blocks.insert(blocks.begin() + dim, ranks);
  const Tensor in = movedim(x.reshape(blocks), dim, 0).contiguous();
  Shape out_shape = x.shape();
  out_shape[static_cast<std::size_t>(dim)] = n / ranks;
  Tensor out = empty(out_shape, {.dtype = x.dtype(), .device = x.device()});
  group.reduce_scatter(out, in).wait();
  return out;
}

Tensor all_reduced(const Tensor& x, ProcessGroup& group) {
  Tensor y = x.contiguous().clone();
  group.all_reduce(y).wait();
  return y;
}

Tensor same(const Tensor& x, ProcessGroup&) { return x.detach(); }

Tensor gather_last(const Tensor& x, ProcessGroup& g) { return all_gather_along(x, -1, g); }
Tensor block_of_last(const Tensor& x, ProcessGroup& g) { return block_of("scatter_to_tensor_parallel", x, -1, g); }
Tensor gather_sequence(const Tensor& x, ProcessGroup& g) { return all_gather_along(x, 1, g); }
Tensor block_of_sequence(const Tensor& x, ProcessGroup& g) { return block_of("scatter_to_sequence_parallel", x, 1, g); }
Tensor reduce_scatter_sequence(const Tensor& x, ProcessGroup& g) {
  return reduce_scatter_along("reduce_scatter_to_sequence_parallel", x, 1, g);
}

}  // namespace

Tensor all_gather_along(const Tensor& x, std::int64_t dim, ProcessGroup& group) {
  dim = checked_dim("all_gather_along", x, dim);
  Shape stacked_shape = x.shape();
  stacked_shape.insert(stacked_shape.begin(), group.size());
  Tensor stacked = empty(stacked_shape, {.dtype = x.dtype(), .device = x.device()});  // (S, ...x)
  group.all_gather(stacked, x.contiguous()).wait();
  Shape out_shape = x.shape();
  out_shape[static_cast<std::size_t>(dim)] *= group.size();
  return movedim(stacked, 0, dim).reshape(out_shape);  // (..., S, n, ...) -> (..., S n, ...)
}

Tensor copy_to_tensor_parallel(const Tensor& x, const GroupPtr& group) {
  return mapped("copy_to_tensor_parallel", x, group, same, all_reduced);
}

Tensor reduce_from_tensor_parallel(const Tensor& x, const GroupPtr& group) {
  return mapped("reduce_from_tensor_parallel", x, group, all_reduced, same);
}

Tensor gather_from_tensor_parallel(const Tensor& x, const GroupPtr& group) {
  return mapped("gather_from_tensor_parallel", x, group, gather_last, block_of_last);
}

Tensor scatter_to_tensor_parallel(const Tensor& x, const GroupPtr& group) {
  return mapped("scatter_to_tensor_parallel", x, group, block_of_last, gather_last);
}

Tensor scatter_to_sequence_parallel(const Tensor& x, const GroupPtr& group) {
  return mapped("scatter_to_sequence_parallel", x, group, block_of_sequence, gather_sequence);
}

Tensor gather_from_sequence_parallel(const Tensor& x, const GroupPtr& group) {
  return mapped("gather_from_sequence_parallel", x, group, gather_sequence, reduce_scatter_sequence);
}

Tensor reduce_scatter_to_sequence_parallel(const Tensor& x, const GroupPtr& group) {
  return mapped("reduce_scatter_to_sequence_parallel", x, group, reduce_scatter_sequence, gather_sequence);
}

}  // namespace infini::parallel
