// Embedding (see embedding.cppm).
module;
#include <cstdint>
module infini.nn;
import infini.std;

namespace infini::nn {

EmbeddingImpl::EmbeddingImpl(std::int64_t num_embeddings, std::int64_t embedding_dim,
                             std::optional<std::int64_t> padding_idx)
    : Cloneable("Embedding"), num_embeddings(num_embeddings), embedding_dim(embedding_dim), padding_idx(padding_idx) {
  reset();
}

void EmbeddingImpl::reset() {
  if (num_embeddings < 0 || embedding_dim < 0)
    throw ShapeError(type_name(), concat("num_embeddings and embedding_dim must be >= 0, got ", num_embeddings,
                                         " and ", embedding_dim));
  if (padding_idx) {
    if (*padding_idx < -num_embeddings || *padding_idx >= num_embeddings)
      throw IndexError(type_name(), concat("padding_idx ", *padding_idx, " must be within [", -num_embeddings, ", ",
                                           num_embeddings, ")"));
    if (*padding_idx < 0) *padding_idx += num_embeddings;
  }
  weight = register_parameter("weight", empty({num_embeddings, embedding_dim}));
  reset_parameters();
}

void EmbeddingImpl::reset_parameters(Generator* generator) {
  init::normal_(weight, 0, 1, generator);
  if (padding_idx) {
    NoGradGuard no_grad;
    weight.detach().select(0, *padding_idx).zero_();
  }
}

Tensor EmbeddingImpl::forward(const Tensor& indices) {
  if (is_floating_point(indices.dtype()) || indices.dtype() == kBool)
    throw DTypeError(type_name(), concat("indices must have an integer dtype, got ", indices.dtype()));
  return with_layer_name(type_name(), [&] { return embedding(indices, weight, padding_idx); });
}

std::string EmbeddingImpl::extra_repr() const {
  std::string s = concat(num_embeddings, ", ", embedding_dim);
  if (padding_idx) s += concat(", padding_idx=", *padding_idx);
  return s;
}

}  // namespace infini::nn
