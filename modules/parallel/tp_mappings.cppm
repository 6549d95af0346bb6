// The maps between tensor-parallel regions (Megatron-LM's mappings.py): differentiable
// collectives over a tensor-parallel group, each one's backward the transpose of its forward.
// They block until the collective completes (every rank of the group must call them in the
// same order, as it runs the same model). Shapes: B batch, T sequence, S = group size.
export module infini.parallel:tp_mappings;
import infini.std;
import infini.tensor;
import :process_group;

export namespace infini::parallel {

using GroupPtr = std::shared_ptr<ProcessGroup>;

// x -> x; backward all-reduces the gradient (the input of a column-parallel layer).
Tensor copy_to_tensor_parallel(const Tensor& x, const GroupPtr& group);
// x -> the sum of every rank's x; backward: identity (the output of a row-parallel layer).
Tensor reduce_from_tensor_parallel(const Tensor& x, const GroupPtr& group);
// x (..., n) -> (..., S n): every rank's x along the last dim, in rank order; backward keeps
// this rank's block of the gradient.
Tensor gather_from_tensor_parallel(const Tensor& x, const GroupPtr& group);
// x (..., S n) -> (..., n): this rank's block of the last dim; backward all-gathers.
Tensor scatter_to_tensor_parallel(const Tensor& x, const GroupPtr& group);

// Sequence parallelism (dim 1 of (B, T, ...)).
// x (B, T, ...) -> (B, T / S, ...): this rank's block of the sequence; backward all-gathers.
Tensor scatter_to_sequence_parallel(const Tensor& x, const GroupPtr& group);
// x (B, t, ...) -> (B, S t, ...): every rank's block, in rank order; backward reduce-scatters
// (the input of a column-parallel layer).
Tensor gather_from_sequence_parallel(const Tensor& x, const GroupPtr& group);
// x (B, T, ...) -> (B, T / S, ...): this rank's block of the sum over the ranks; backward
// all-gathers (the output of a row-parallel layer).
Tensor reduce_scatter_to_sequence_parallel(const Tensor& x, const GroupPtr& group);

// Not differentiable: x -> every rank's x concatenated along `dim`, a new tensor.
Tensor all_gather_along(const Tensor& x, std::int64_t dim, ProcessGroup& group);

}  // namespace infini::parallel
