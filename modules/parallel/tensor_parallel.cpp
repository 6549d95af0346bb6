// TensorParallel (see tensor_parallel.cppm).
module;
#include <cmath>
#include <cstdint>
module infini.parallel;
import infini.std;

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

void TensorParallel::per_head_layer(const nn::Module& layer) {
  for (const Tensor& p : layer.parameters()) head_partial_.push_back(p);
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

void TensorParallel::sum_over_ranks(std::vector<Tensor> grads) const {
  NoGradGuard no_grad;
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

bool TensorParallel::is_partial(const Tensor& param) const {
  const auto same = [&](const Tensor& p) { return p.is_same(param); };
  return (sequence_parallel_ && std::ranges::any_of(sequence_partial_, same)) || std::ranges::any_of(head_partial_, same);
}

void TensorParallel::reduce_partial_grads() {
  if (size() == 1) return;
  std::vector<Tensor> grads;
  for (const auto* list : {&sequence_partial_, &head_partial_})
    for (const Tensor& p : *list)
      if (is_partial(p) && p.grad().defined()) grads.push_back(p.grad());
  sum_over_ranks(std::move(grads));
}

void TensorParallel::reduce_partial_grads(const Reducer& reducer) {
  if (size() == 1) return;
  std::vector<Tensor> grads;
  for (std::size_t k = 0; k < reducer.shard_pieces().size(); ++k)
    if (is_partial(reducer.parameters().at(reducer.shard_owners()[k])) && reducer.shard_pieces()[k].grad().defined())
      grads.push_back(reducer.shard_pieces()[k].grad());
  sum_over_ranks(std::move(grads));
}

namespace {

// Sums of the squares of `grads`' entries: [those of tensor-parallel shards, the rest].
std::array<double, 2> squares(const std::vector<Tensor>& grads, const std::vector<bool>& sharded) {
  std::array<double, 2> sums{0, 0};
  for (std::size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined()) continue;
    const Tensor g = grads[i].to(kFloat64);
    sums[sharded[i] ? 0 : 1] += sum(mul(g, g)).item<double>();
  }
  return sums;
}

}  // namespace

double TensorParallel::grad_norm(const std::vector<Tensor>& params) const {
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  std::vector<bool> sharded;
  for (const Tensor& p : params) {
    grads.push_back(p.grad());
    sharded.push_back(shard_spec(p).sharded());
  }
  const auto [shards, replicated] = squares(grads, sharded);
  Tensor total = full({1}, shards, TensorOptions{.dtype = kFloat64});
  group_->all_reduce(total).wait();
  return std::sqrt(total.item<double>() + replicated);
}

}  // namespace infini::parallel
