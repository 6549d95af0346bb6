// The skeleton GPT2 and LLaMA3 share (a decoder-only language model): token ids (B, T) pass
// an embedding, the blocks and a head to logits (B, T, columns). From a model's sizes, its
// pieces (embed_at, run_block, head) and its llm.c layout come forward's checks, generation
// through a KV cache, the embedding and head a pipeline runs on its first and last stage, the
// loss over the first V columns (vocab parallel under tensor parallelism), and the llm.c
// tensor lists. A model derives from its Module (Cloneable<Model>) and from this.
export module infini.nn:causal_lm;
import infini.std;
import infini.autograd;
import :module_base;
import :kv_cache;
import :tensor_parallel;
import :llmc_layout;
import :model_part;

export namespace infini::nn {

// Selective activation checkpointing (Megatron's "selective" granularity with its default
// recomputed module, core attention): while a guard is alive on this thread, attention_core
// keeps only the fused q/k/v projection's output for backward and recomputes the rest of the
// attention from it (RoPE, scaled dot-product attention, the merge of the heads). No
// parameters live in that part, so it composes with split (zero-bubble) backwards. KV-cached
// passes (generation) never recompute.
class SelectiveRecompute {
 public:
  explicit SelectiveRecompute(bool enabled = true);
  ~SelectiveRecompute();
  SelectiveRecompute(const SelectiveRecompute&) = delete;
  SelectiveRecompute& operator=(const SelectiveRecompute&) = delete;
  static bool enabled();

 private:
  bool previous_;
};

// An attention layer's inner part: core(qkv, keys, values) from its q/k/v projection's output
// (B, T, ...) to the merged heads (B, T, C / tp), appending to a KV cache's keys / values when
// given. Under SelectiveRecompute, with undefined keys, it runs through autograd::checkpoint
// (keys and values stay undefined).
using AttentionCore = std::function<Tensor(const Tensor& qkv, Tensor& keys, Tensor& values)>;
Tensor attention_core(const AttentionCore& core, const Tensor& qkv, Tensor& keys, Tensor& values);

struct CausalLMSizes {
  std::int64_t max_seq_len;    // positions
  std::int64_t vocab_size;     // V: token ids < V, the loss's columns
  std::int64_t logit_columns;  // of the whole model's logits, >= V (GPT-2's padded vocabulary)
  std::int64_t num_layers;     // blocks of the whole model
};

class CausalLM {
 public:
  virtual ~CausalLM() = default;

  // The logits (B, T, columns) of the T positions idx (B, T) that follow the past =
  // cache.length() positions the cache holds (positions past .. past + T - 1), which it then
  // holds too: the last T positions of forward() on the whole sequence, computing only the new
  // ones. An empty cache is sized to the blocks. ShapeError if past + T > maxT, Error if the
  // cache holds another number of layers. Gradients flow as through forward(). Every column on
  // every tensor-parallel rank, and no sequence parallelism (generation). Whole model only.
  Tensor forward_cached(const Tensor& idx, KVCache& cache);
  // forward's two ends, for a pipeline that runs the blocks in between: idx (B, T) int64 with
  // T <= maxT -> the blocks' input x (B, T, C), or (B, T / tp, C) under sequence parallelism;
  // the last block's output -> logits (B, T, columns / tp). Error without the piece.
  Tensor embed(const Tensor& idx);
  virtual Tensor head(const Tensor& x) = 0;
  // Mean cross-entropy of logits (B, T, columns / tp) against targets (B, T) over the first V
  // columns only (padded ones are excluded from the softmax).
  Tensor loss(const Tensor& logits, const Tensor& targets) const;

  // The parameters in the model's llm.c checkpoint order, names and shapes (per-layer tensors
  // stacked along a new dim 0), as new float32 CPU tensors; with `gradients`, their grads
  // instead (Error naming a parameter without one). Whole tensors under tensor parallelism
  // too (a collective over its ranks). Whole model only.
  std::vector<std::pair<std::string, Tensor>> llmc_tensors(bool gradients = false) const;
  // Copies tensors of exactly that list (names, order and shapes: Error / ShapeError naming the
  // tensor otherwise) into the parameters: this rank's shards of them. Whole model only.
  void load_llmc_tensors(const std::vector<std::pair<std::string, Tensor>>& tensors);

  // The sizes the model was built with (of the whole model).
  const CausalLMSizes& sizes() const { return sizes_; }
  // The part's blocks in order (blocks()[i] is block part.blocks[i]), for a pipeline stage or
  // activation checkpointing to run one by one.
  virtual std::vector<ModulePtr> blocks() const = 0;
  // Parameters the embedding and the head share (a tied wte): held by the first and the last
  // pipeline stage, which keep them equal. None for an untied model.
  virtual std::vector<Tensor> tied_parameters() const { return {}; }

  const ModelPart part;  // the pieces built (a pipeline stage's; default: all)
  std::shared_ptr<TensorParallelLayers> tp;

 protected:
  // name: the model in errors ("GPT2"); tp null: one process. Error for a part that does not
  // fit sizes.num_layers.
  CausalLM(std::string name, const CausalLMSizes& sizes, std::optional<ModelPart> part,
           std::shared_ptr<TensorParallelLayers> tp);
  CausalLM(const CausalLM&) = default;

  // idx (B, T) int64 at positions past .. past + T - 1 -> logits (B, T, columns / tp), through
  // the cache's layers when given (every column then). Whole model only.
  Tensor forward_from(const Tensor& idx, std::int64_t past, KVCache* cache);
  // ", part=<part>" for a part of the model, else "" (for extra_repr).
  std::string part_repr() const;

  // The model's pieces: the embedding of idx (B, T) at positions past .. (checked),
  // block l of the part (its forward, or forward_cached with cache->keys[l] / values[l]),
  // the blocks held, and the llm.c layout of the parameters.
  virtual Tensor embed_at(const Tensor& idx, std::int64_t past) = 0;
  virtual Tensor run_block(std::size_t l, const Tensor& x, KVCache* cache) = 0;
  virtual std::size_t num_blocks_held() const = 0;
  virtual LlmcLayout llmc_layout() const = 0;

 private:
  std::string name_;
  CausalLMSizes sizes_;
};

}  // namespace infini::nn
