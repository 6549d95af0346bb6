// The layers GPT2 and LLaMA3 build through, so that one model class runs on one process or
// split over tensor-parallel ranks (Megatron-LM's scheme). TensorParallelLayers itself is the
// single-process kind: plain Linear / Embedding layers and identity mappings. infini.parallel's
// TensorParallel overrides it with ColumnParallelLinear, RowParallelLinear,
// VocabParallelEmbedding and the vocab-parallel cross-entropy over a process group; nn never
// imports infini.parallel.
//
//   GPT2 model(config, tp);   // tp: shared_ptr<TensorParallelLayers> (null: one process)
//   model->load_llmc_tensors(whole->llmc_tensors());  // whole tensors in, this rank's shards kept
export module infini.nn:tensor_parallel;
import infini.std;
import infini.autograd;
import :module_base;
import :linear;
import :embedding;

export namespace infini::nn {

// How a parameter is split over the ranks: its whole tensor's dim `dim` is the concatenation
// of `parts` (e.g. GPT-2's fused Q|K|V: three parts of C rows) and rank r holds block r of
// every part, concatenated. No parts: the parameter is replicated.
struct ShardSpec {
  std::int64_t dim = 0;
  std::vector<std::int64_t> parts;

  bool sharded() const { return !parts.empty(); }
  // The sum of the parts (the whole size along dim).
  std::int64_t whole_size() const;
  // Rank `rank`'s shard of `whole` (a view when there is one part); ShapeError unless whole's
  // dim has the parts' total size and every part divides by `ranks`.
  Tensor shard(const Tensor& whole, int rank, int ranks) const;
  // The whole tensor from every rank's shard (shards[r] of rank r), a new tensor.
  Tensor unshard(const std::vector<Tensor>& shards) const;
};

class TensorParallelLayers {
 public:
  virtual ~TensorParallelLayers() = default;

  virtual int size() const { return 1; }
  virtual int rank() const { return 0; }
  // Whether the activations between the tensor-parallel regions are split along the
  // sequence (dim 1 of (B, T, C)) over the ranks.
  virtual bool sequence_parallel() const { return false; }
  // While paused, sequence parallelism is off (the models' cached forward: generation runs
  // every position on every rank).
  virtual void pause_sequence_parallel(bool /*paused*/) {}

  // x (*, in) -> (*, out / size()): this rank's block of every part of the output features
  // (parts: as ShardSpec; empty: one part of `out`).
  virtual std::shared_ptr<LinearImpl> column_linear(std::int64_t in, std::int64_t out, bool bias,
                                                    std::vector<std::int64_t> parts = {});
  // x (*, in / size()) -> (*, out): the sum over the ranks, the bias added once after it.
  virtual std::shared_ptr<LinearImpl> row_linear(std::int64_t in, std::int64_t out, bool bias);
  // `layer` (a norm) works on the activations between the tensor-parallel regions: under
  // sequence parallelism each rank's gradients of its parameters are partial sums.
  virtual void sequence_parallel_layer(const Module& /*layer*/) {}
  // `layer` (a norm over each head's channels, replicated) works on this rank's heads: each
  // rank's gradients of its parameters are partial sums, always.
  virtual void per_head_layer(const Module& /*layer*/) {}
  // ids (*) -> (*, dim): rows [rank * V / size(), ..) of a (V, dim) table, every id looked up
  // where its row lives.
  virtual std::shared_ptr<EmbeddingImpl> vocab_embedding(std::int64_t num_embeddings, std::int64_t dim);

  // x (B, T, C), the same on every rank -> what the blocks work on: (B, T / size(), C), this
  // rank's part of the sequence, under sequence parallelism; x itself otherwise.
  virtual Tensor scatter_sequence(const Tensor& x) { return x; }
  // x (B, t, C) from the blocks, weight (Vl, C) of this rank's vocabulary block -> logits
  // (B, T, Vl) (a column-parallel product without bias).
  virtual Tensor vocab_logits(const Tensor& x, const Tensor& weight);
  // Mean cross-entropy of logits (N, Vl), this rank's vocabulary columns [rank * Vl, ..), against
  // targets (N) int64 (ignore_index -100); columns >= vocab_size (padding) take no probability.
  virtual Tensor vocab_cross_entropy(const Tensor& logits, const Tensor& targets, std::int64_t vocab_size);
  // logits (..., Vl) -> (..., Vl * size()): every rank's vocabulary block, in rank order.
  virtual Tensor gather_vocab(const Tensor& logits) { return logits; }
  // The whole tensor of a parameter from this rank's `shard` (collective over the ranks).
  virtual Tensor gather_shards(const Tensor& shard, const ShardSpec& /*spec*/) { return shard; }

  // How `param` is split (replicated for a parameter these layers did not make).
  ShardSpec shard_spec(const Tensor& param) const;

 protected:
  void record_shard(const Tensor& param, ShardSpec spec) { shards_.emplace_back(param, std::move(spec)); }

 private:
  std::vector<std::pair<Tensor, ShardSpec>> shards_;
};

// The single-process layers (a shared instance).
std::shared_ptr<TensorParallelLayers> single_process_layers();
// tp, or the single-process layers when it is null.
inline std::shared_ptr<TensorParallelLayers> or_single_process(std::shared_ptr<TensorParallelLayers> tp) {
  return tp ? std::move(tp) : single_process_layers();
}

// Turns sequence parallelism off for its lifetime when `pause` is true.
class SequenceParallelPause {
 public:
  SequenceParallelPause(TensorParallelLayers& tp, bool pause) : tp_(pause ? &tp : nullptr) {
    if (tp_) tp_->pause_sequence_parallel(true);
  }
  ~SequenceParallelPause() {
    if (tp_) tp_->pause_sequence_parallel(false);
  }
  SequenceParallelPause(const SequenceParallelPause&) = delete;
  SequenceParallelPause& operator=(const SequenceParallelPause&) = delete;

 private:
  TensorParallelLayers* tp_;
};

}  // namespace infini::nn
