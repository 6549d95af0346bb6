// Shard specs and the single-process TensorParallelLayers (see tensor_parallel.cppm).
module;
#include <cstdint>
module infini.nn;
import infini.std;

namespace infini::nn {

std::int64_t ShardSpec::whole_size() const { return std::accumulate(parts.begin(), parts.end(), std::int64_t{0}); }

Tensor ShardSpec::shard(const Tensor& whole, int rank, int ranks) const {
  if (!sharded()) return whole;
  if (dim >= whole.dim() || whole.size(dim) != whole_size())
    throw ShapeError("ShardSpec.shard", concat("expected a tensor whose dim ", dim, " has ", whole_size(),
                                               " entries, got ", whole.shape()));
  TensorList blocks;
  std::int64_t start = 0;
  for (const std::int64_t part : parts) {
    if (part % ranks != 0)
      throw ShapeError("ShardSpec.shard", concat("a part of ", part, " entries along dim ", dim,
                                                 " does not split over ", ranks, " ranks"));
    const std::int64_t block = part / ranks;
    blocks.push_back(whole.slice(dim, start + rank * block, start + (rank + 1) * block));
    start += part;
  }
  NoGradGuard no_grad;
  return blocks.size() == 1 ? blocks.front() : cat(blocks, dim);
}

Tensor ShardSpec::unshard(const std::vector<Tensor>& shards) const {
  NoGradGuard no_grad;
  if (!sharded()) return shards.front().clone();
  const std::int64_t ranks = static_cast<std::int64_t>(shards.size());
  TensorList pieces;  // part 0 of every rank, part 1 of every rank, ...
  std::int64_t start = 0;
  for (const std::int64_t part : parts) {
    const std::int64_t block = part / ranks;
    for (const Tensor& s : shards) pieces.push_back(s.slice(dim, start, start + block));
    start += block;
  }
  return cat(pieces, dim);
}

std::shared_ptr<LinearImpl> TensorParallelLayers::column_linear(std::int64_t in, std::int64_t out, bool bias,
                                                                std::vector<std::int64_t>) {
  return std::make_shared<LinearImpl>(in, out, bias);
}

std::shared_ptr<LinearImpl> TensorParallelLayers::row_linear(std::int64_t in, std::int64_t out, bool bias) {
  return std::make_shared<LinearImpl>(in, out, bias);
}

std::shared_ptr<EmbeddingImpl> TensorParallelLayers::vocab_embedding(std::int64_t num_embeddings, std::int64_t dim) {
  return std::make_shared<EmbeddingImpl>(num_embeddings, dim);
}

Tensor TensorParallelLayers::vocab_logits(const Tensor& x, const Tensor& weight) { return linear(x, weight); }

Tensor TensorParallelLayers::vocab_cross_entropy(const Tensor& logits, const Tensor& targets, std::int64_t vocab_size) {
  // The padded columns take no probability and get a zero gradient, written with the rest.
  const std::int64_t columns = logits.size(logits.dim() - 1);
  if (columns <= vocab_size) return cross_entropy(logits, targets);
  return padded_cross_entropy(logits, targets, vocab_size);
}

ShardSpec TensorParallelLayers::shard_spec(const Tensor& param) const {
  for (const auto& [p, spec] : shards_)
    if (p.is_same(param)) return spec;
  return {};
}

std::shared_ptr<TensorParallelLayers> single_process_layers() {
  static const auto layers = std::make_shared<TensorParallelLayers>();
  return layers;
}

}  // namespace infini::nn
