// TensorParallel: nn::TensorParallelLayers over a process group (the Layout's tensor-parallel
// group), so that GPT2 and LLaMA3 built with it run split over its ranks, optionally with
// sequence parallelism. It makes the tp_layers, records how each parameter is split, and
// finishes a step's gradients (sequence-parallel sums, the global gradient norm).
//
//   auto tp = std::make_shared<parallel::TensorParallel>(groups.tp, /*sequence_parallel=*/true);
//   nn::GPT2 model(config, tp);
//   model->load_llmc_tensors(whole->llmc_tensors());  // the single-process weights, sharded
//   ... loss.backward(); tp->reduce_partial_grads(); tp->grad_norm(params) ...
//
// Under ZeRO-1 (a Reducer with shard_gradients over the data-parallel group) the optimizer
// holds this rank's pieces of the averaged gradients: the partial-gradient sums take the
// reducer.
export module infini.parallel:tensor_parallel;
import infini.std;
import infini.nn;
import :process_group;
import :tp_mappings;
import :tp_layers;
import :reducer;

export namespace infini::parallel {

class TensorParallel : public nn::TensorParallelLayers, public std::enable_shared_from_this<TensorParallel> {
 public:
  // Make it with std::make_shared: its layers share it. Error for a null group.
  explicit TensorParallel(GroupPtr group, bool sequence_parallel = false);

  int size() const override { return group_->size(); }
  int rank() const override { return group_->rank(); }
  bool sequence_parallel() const override { return sequence_parallel_ && pauses_ == 0; }
  void pause_sequence_parallel(bool paused) override { pauses_ += paused ? 1 : -1; }
  const GroupPtr& group() const { return group_; }

  std::shared_ptr<nn::LinearImpl> column_linear(std::int64_t in, std::int64_t out, bool bias,
                                                std::vector<std::int64_t> parts = {}) override;
  std::shared_ptr<nn::LinearImpl> row_linear(std::int64_t in, std::int64_t out, bool bias) override;
  std::shared_ptr<nn::EmbeddingImpl> vocab_embedding(std::int64_t num_embeddings, std::int64_t dim) override;
  void sequence_parallel_layer(const nn::Module& layer) override;
  void per_head_layer(const nn::Module& layer) override;

  // ShapeError under sequence parallelism when T does not divide by the size.
  Tensor scatter_sequence(const Tensor& x) override;
  Tensor vocab_logits(const Tensor& x, const Tensor& weight) override;
  Tensor vocab_cross_entropy(const Tensor& logits, const Tensor& targets, std::int64_t vocab_size) override;
  Tensor gather_vocab(const Tensor& logits) override;
  Tensor gather_shards(const Tensor& shard, const nn::ShardSpec& spec) override;

  // A column-parallel layer's input: x itself (its gradient all-reduced), or under sequence
  // parallelism x (B, T / S, C) all-gathered to (B, T, C) (its gradient reduce-scattered).
  Tensor column_input(const Tensor& x);
  // A row-parallel layer's partial output (B, T, C): the sum over the ranks, or under sequence
  // parallelism this rank's part of the sequence of it (B, T / S, C).
  Tensor row_output(const Tensor& y);
  // Records that `param` (of a layer made here) is split as `spec`; `sequence_partial`: its
  // gradient is a per-rank partial sum under sequence parallelism (a row-parallel bias).
  void add_parameter(const Tensor& param, nn::ShardSpec spec, bool sequence_partial = false);

  // After the backward passes of a step: sums over the ranks, in one all-reduce, the gradients
  // that are per-rank partial sums: under sequence parallelism those of the norms' parameters
  // and of the row-parallel biases (each rank has its part of the sequence's share), and always
  // those of per-head layers (each rank has its heads' share: Qwen3's q_norm / k_norm).
  void reduce_partial_grads();
  // The 2-norm of the gradients of `params` (a model's): its shards' squares summed over the
  // ranks, each replicated parameter counted once. The same on every rank (collective).
  double grad_norm(const std::vector<Tensor>& params) const;
  // The first under ZeRO-1, where `reducer` (shard_gradients, over the data-parallel group)
  // shards this rank's parameters: on this rank's pieces of them (reducer.shard_pieces(),
  // blocks of the averaged gradients; every tensor-parallel rank's pieces lie alike).
  // TrainingPlan computes the norm of such pieces.
  void reduce_partial_grads(const Reducer& reducer);

 private:
  GroupPtr group_;
  bool sequence_parallel_;
  int pauses_ = 0;
  // Sums `grads` over the ranks in place (one all-reduce per dtype).
  void sum_over_ranks(std::vector<Tensor> grads) const;
  // Whether reduce_partial_grads sums param's gradient in this run.
  bool is_partial(const Tensor& param) const;
  std::vector<Tensor> sequence_partial_;  // partial gradients under sequence parallelism
  std::vector<Tensor> head_partial_;      // partial gradients always (per-head layers)
};

}  // namespace infini::parallel
