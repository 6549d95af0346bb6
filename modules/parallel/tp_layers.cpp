// The tensor-parallel layers (see tp_layers.cppm).
module;
#include <cstdint>
module infini.parallel;
import infini.std;

namespace infini::parallel {
namespace {

// The parts of a column-parallel layer's `out` features (one part when none are given), each
// split over the ranks.
std::vector<std::int64_t> column_parts(const TensorParallel& tp, std::int64_t out, std::vector<std::int64_t> parts) {
  if (parts.empty()) parts = {out};
  if (std::accumulate(parts.begin(), parts.end(), std::int64_t{0}) != out)
    throw ShapeError("ColumnParallelLinear", concat("the parts of the output features must add up to ", out));
  for (const std::int64_t part : parts)
    if (part < 1 || part % tp.size() != 0)
      throw ShapeError("ColumnParallelLinear", concat("a part of ", part, " output features does not split over ",
                                                      tp.size(), " tensor-parallel ranks"));
  return parts;
}

// n / ranks, or a ShapeError from `op` naming what does not split.
std::int64_t split(std::string_view op, std::string_view what, std::int64_t n, const TensorParallel& tp) {
  if (n < 1 || n % tp.size() != 0)
    throw ShapeError(op, concat(what, " ", n, " does not split over ", tp.size(), " tensor-parallel ranks"));
  return n / tp.size();
}

const std::shared_ptr<TensorParallel>& not_null(const std::shared_ptr<TensorParallel>& tp, std::string_view op) {
  if (!tp) throw Error(op, "needs a TensorParallel context, got null");
  return tp;
}

}  // namespace

ColumnParallelLinearImpl::ColumnParallelLinearImpl(std::shared_ptr<TensorParallel> tp, std::int64_t in_features,
                                                   std::int64_t out_features, bool bias,
                                                   std::vector<std::int64_t> parts, bool gather_output)
    : LinearImpl(in_features, split("ColumnParallelLinear", "out_features", out_features, *not_null(tp, "ColumnParallelLinear")), bias),
      tp(std::move(tp)),
      parts(column_parts(*this->tp, out_features, std::move(parts))),
      gather_output(gather_output) {
  if (gather_output && this->parts.size() > 1)
    throw Error("ColumnParallelLinear", "gather_output needs one part of output features (the gathered columns would "
                                        "come in rank order, not in the parts' order)");
  this->tp->add_parameter(weight, {0, this->parts});
  if (bias) this->tp->add_parameter(this->bias, {0, this->parts});
}

Tensor ColumnParallelLinearImpl::forward(const Tensor& x) {
  const Tensor y = LinearImpl::forward(tp->column_input(x));  // (*, out / S)
  return gather_output ? gather_from_tensor_parallel(y, tp->group()) : y;
}

nn::ModulePtr ColumnParallelLinearImpl::clone() const {
  const std::int64_t out = std::accumulate(parts.begin(), parts.end(), std::int64_t{0});
  auto copy = std::make_shared<ColumnParallelLinearImpl>(tp, in_features, out, bias.defined(), parts, gather_output);
  copy->copy_state_from(*this);
  return copy;
}

std::string ColumnParallelLinearImpl::extra_repr() const {
  return concat(LinearImpl::extra_repr(), ", tensor_parallel=", tp->size(), gather_output ? ", gather_output=true" : "");
}

RowParallelLinearImpl::RowParallelLinearImpl(std::shared_ptr<TensorParallel> tp, std::int64_t in_features,
                                             std::int64_t out_features, bool bias, bool input_is_parallel)
    : LinearImpl(split("RowParallelLinear", "in_features", in_features, *not_null(tp, "RowParallelLinear")), out_features, bias),
      tp(std::move(tp)),
      input_is_parallel(input_is_parallel) {
  this->tp->add_parameter(weight, {1, {in_features}});
  if (bias) this->tp->add_parameter(this->bias, {}, /*sequence_partial=*/true);
}

Tensor RowParallelLinearImpl::forward(const Tensor& x) {
  const Tensor x_local = input_is_parallel ? x : scatter_to_tensor_parallel(x, tp->group());  // (*, in / S)
  if (x_local.dim() < 1 || x_local.size(x_local.dim() - 1) != in_features)
    throw ShapeError(type_name(), concat("expected input (*, ", in_features, ") (this rank's block of ",
                                         in_features * tp->size(), " features), got ", x_local.shape()));
  const Tensor y = tp->row_output(linear(x_local, weight));
  return bias.defined() ? add(y, bias) : y;
}

nn::ModulePtr RowParallelLinearImpl::clone() const {
  auto copy = std::make_shared<RowParallelLinearImpl>(tp, in_features * tp->size(), out_features, bias.defined(),
                                                      input_is_parallel);
  copy->copy_state_from(*this);
  return copy;
}

std::string RowParallelLinearImpl::extra_repr() const {
  return concat(LinearImpl::extra_repr(), ", tensor_parallel=", tp->size(),
                input_is_parallel ? "" : ", input_is_parallel=false");
}

VocabParallelEmbeddingImpl::VocabParallelEmbeddingImpl(std::shared_ptr<TensorParallel> tp, std::int64_t num_embeddings,
                                                       std::int64_t dim)
    : EmbeddingImpl(split("VocabParallelEmbedding", "num_embeddings", num_embeddings,
                          *not_null(tp, "VocabParallelEmbedding")), dim),
      tp(std::move(tp)),
      whole_num_embeddings(num_embeddings) {
  this->tp->add_parameter(weight, {0, {num_embeddings}});
}

Tensor VocabParallelEmbeddingImpl::forward(const Tensor& ids) {
  if (is_floating_point(ids.dtype()) || ids.dtype() == kBool)
    throw DTypeError(type_name(), concat("indices must have an integer dtype, got ", ids.dtype()));
  const Tensor id = ids.to(kInt64);
  if (id.numel() > 0 && (amin(id).item<std::int64_t>() < 0 || amax(id).item<std::int64_t>() >= whole_num_embeddings))
    throw IndexError(type_name(), concat("indices must be in [0, ", whole_num_embeddings, ")"));
  const std::int64_t first = tp->rank() * num_embeddings;  // this rank's rows first .. first + num_embeddings - 1
  const Tensor shifted = sub(id, first);
  const Tensor here = logical_and(ge(shifted, 0), lt(shifted, num_embeddings));  // (*)
  const Tensor rows = embedding(where(here, shifted, 0), weight);                // (*, dim)
  return reduce_from_tensor_parallel(mul(rows, here.unsqueeze(-1).to(rows.dtype())), tp->group());
}

nn::ModulePtr VocabParallelEmbeddingImpl::clone() const {
  auto copy = std::make_shared<VocabParallelEmbeddingImpl>(tp, whole_num_embeddings, embedding_dim);
  copy->copy_state_from(*this);
  return copy;
}

std::string VocabParallelEmbeddingImpl::extra_repr() const {
  return concat(whole_num_embeddings, ", ", embedding_dim, ", tensor_parallel=", tp->size());
}

}  // namespace infini::parallel
