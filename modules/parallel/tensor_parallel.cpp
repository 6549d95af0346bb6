// TensorParallel (see tensor_parallel.cppm).
module;
#include <cmath>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>
module infini.parallel;

namespace infini::parallel {

TensorParallel::TensorParallel(GroupPtr group, bool sequence_parallel)
    : group_(std::move(group)), sequence_parallel_(sequence_parallel) {
  if (!group_) throw Error("TensorParallel", "needs a process group, got null");
}

namespace {

std::shared_ptr<TensorParallel> shared(TensorParallel& tp) {
  const std::weak_ptr<TensorParallel> weak = tp.weak_from_this();
  if (weak.expired()) throw Error("TensorParallel", "make it with std::make_shared: the layers it makes share it");
  return weak.lock();
}

}  // namespace

std::shared_ptr<nn::LinearImpl> TensorParallel::column_linear(std::int64_t in, std::int64_t out, bool bias,
                                                              std::vector<std::int64_t> parts) {
  return std::make_shared<ColumnParallelLinearImpl>(shared(*this), in, out, bias, std::move(parts));
}

std::shared_ptr<nn::LinearImpl> TensorParallel::row_linear(std::int64_t in, std::int64_t out, bool bias) {
  return std::make_shared<RowParallelLinearImpl>(shared(*this), in, out, bias);
}

std::shared_ptr<nn::EmbeddingImpl> TensorParallel::vocab_embedding(std::int64_t num_embeddings, std::int64_t dim) {
  return std::make_shared<VocabParallelEmbeddingImpl>(shared(*this), num_embeddings, dim);
}

void TensorParallel::sequence_parallel_layer(const nn::Module& layer) {
  for (const Tensor& p : layer.parameters()) sequence_partial_.push_back(p);
}

void TensorParallel::add_parameter(const Tensor& param, nn::ShardSpec spec, bool sequence_partial) {
  if (spec.sharded()) record_shard(param, std::move(spec));
  if (sequence_partial) sequence_partial_.push_back(param);
}

Tensor TensorParallel::scatter_sequence(const Tensor& x) {
  if (!sequence_parallel()) return x;
  if (x.dim() < 2 || x.size(1) % size() != 0)
    throw ShapeError("TensorParallel.scatter_sequence",
                     concat("sequence parallelism splits the sequence (dim 1) over ", size(),
                            " ranks: expected (B, T, ...) with T a multiple of ", size(), ", got ", x.shape()));
  return scatter_to_sequence_parallel(x, group_);
}

Tensor TensorParallel::column_input(const Tensor& x) {
  return sequence_parallel() ? gather_from_sequence_parallel(x, group_) : copy_to_tensor_parallel(x, group_);
}

Tensor TensorParallel::row_output(const Tensor& y) {
  return sequence_parallel() ? reduce_scatter_to_sequence_parallel(y, group_) : reduce_from_tensor_parallel(y, group_);
}

Tensor TensorParallel::vocab_logits(const Tensor& x, const Tensor& weight) { return linear(column_input(x), weight); }

Tensor TensorParallel::vocab_cross_entropy(const Tensor& logits, const Tensor& targets, std::int64_t vocab_size) {
  return vocab_parallel_cross_entropy(logits, targets, vocab_size, group_);
}

Tensor TensorParallel::gather_vocab(const Tensor& logits) { return gather_from_tensor_parallel(logits, group_); }

Tensor TensorParallel::gather_shards(const Tensor& shard, const nn::ShardSpec& spec) {
  NoGradGuard no_grad;
  std::vector<Tensor> shards;
  for (int r = 0; r < size(); ++r) shards.push_back(empty(shard.shape(), {.dtype = shard.dtype(), .device = shard.device()}));
  group_->all_gather(shards, shard.contiguous()).wait();
  return spec.unshard(shards);
}

void TensorParallel::reduce_sequence_parallel_grads() {
  if (!sequence_parallel_ || size() == 1) return;
  NoGradGuard no_grad;
  std::vector<Tensor> grads;  // one all-reduce per dtype (in practice one)
  for (const Tensor& p : sequence_partial_)
    if (p.grad().defined()) grads.push_back(p.grad());
  while (!grads.empty()) {
    const DataType dtype = grads.front().dtype();
    std::vector<Tensor> same, rest;
    for (const Tensor& g : grads) (g.dtype() == dtype ? same : rest).push_back(g);
    TensorList flat;
    for (const Tensor& g : same) flat.push_back(g.reshape({-1}));
    Tensor buffer = cat(flat, 0);
    group_->all_reduce(buffer).wait();
    std::int64_t offset = 0;
    for (Tensor& g : same) {
      g.copy_(buffer.slice(0, offset, offset + g.numel()).view(g.shape()));
      offset += g.numel();
    }
    grads = std::move(rest);
  }
}

double TensorParallel::grad_norm(const std::vector<Tensor>& params) const {
  NoGradGuard no_grad;
  double sharded = 0, replicated = 0;  // sums of squares
  for (const Tensor& p : params) {
    if (!p.grad().defined()) continue;
    const Tensor g = p.grad().to(kFloat64);
    (shard_spec(p).sharded() ? sharded : replicated) += sum(mul(g, g)).item<double>();
  }
  Tensor total = full({1}, sharded, TensorOptions{.dtype = kFloat64});
  group_->all_reduce(total).wait();
  return std::sqrt(total.item<double>() + replicated);
}

}  // namespace infini::parallel
