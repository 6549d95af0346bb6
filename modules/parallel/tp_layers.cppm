// Megatron-LM's tensor-parallel layers (tensor_parallel/layers.py) over a TensorParallel
// context: each is the nn layer it splits (a LinearImpl / EmbeddingImpl holding this rank's
// shard), so models hold them where they hold the plain ones. S = the tensor-parallel size.
// Their shards are sliced from whole tensors (nn::ShardSpec), never drawn per rank.
export module infini.parallel:tp_layers;
import infini.std;
import infini.nn;

export namespace infini::parallel {

class TensorParallel;

// y = x W^T + b, W's rows (the output features) split over the ranks: rank r holds block r of
// every part of them (parts: nn::ShardSpec's; empty: one part). x (*, in), whole on every
// rank (under sequence parallelism (B, T / S, in), this rank's part of the sequence, gathered
// first) -> (*, out / S), or (*, out) with gather_output (one part only). The input's
// gradient is all-reduced (reduce-scattered under sequence parallelism).
class ColumnParallelLinearImpl : public nn::LinearImpl {
 public:
  ColumnParallelLinearImpl(std::shared_ptr<TensorParallel> tp, std::int64_t in_features, std::int64_t out_features,
                           bool bias = true, std::vector<std::int64_t> parts = {}, bool gather_output = false);
  Tensor forward(const Tensor& x) override;
  nn::ModulePtr clone() const override;

  const std::shared_ptr<TensorParallel> tp;
  const std::vector<std::int64_t> parts;  // of the whole out_features
  const bool gather_output;

 protected:
  std::string extra_repr() const override;
};

// y = x W^T + b, W's columns (the input features) split over the ranks: x (*, in / S), this
// rank's block of the features (input_is_parallel; otherwise x (*, in) is whole and split
// here) -> the sum over the ranks (*, out), then the bias, whole on every rank. Under sequence
// parallelism (B, T, in / S) -> (B, T / S, out), this rank's part of the sequence of the sum.
class RowParallelLinearImpl : public nn::LinearImpl {
 public:
  RowParallelLinearImpl(std::shared_ptr<TensorParallel> tp, std::int64_t in_features, std::int64_t out_features,
                        bool bias = true, bool input_is_parallel = true);
  Tensor forward(const Tensor& x) override;
  nn::ModulePtr clone() const override;

  const std::shared_ptr<TensorParallel> tp;
  const bool input_is_parallel;

 protected:
  std::string extra_repr() const override;
};

// A (V, dim) lookup table split by rows: rank r holds rows [r V / S, (r + 1) V / S). Each rank
// looks up the ids in its rows (zeros for the others) and the ranks sum: ids (*) in [0, V)
// -> (*, dim), whole on every rank. IndexError for an id outside [0, V).
class VocabParallelEmbeddingImpl : public nn::EmbeddingImpl {
 public:
  VocabParallelEmbeddingImpl(std::shared_ptr<TensorParallel> tp, std::int64_t num_embeddings, std::int64_t dim);
  Tensor forward(const Tensor& ids) override;
  nn::ModulePtr clone() const override;

  const std::shared_ptr<TensorParallel> tp;
  const std::int64_t whole_num_embeddings;  // V

 protected:
  std::string extra_repr() const override;
};

}  // namespace infini::parallel
