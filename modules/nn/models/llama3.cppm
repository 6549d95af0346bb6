// LLaMA-3 (Meta's reference model.py, as InfiniTrain's example/llama3 builds it): a token
// embedding, L pre-RMSNorm blocks of grouped-query causal self-attention with rotary position
// embeddings (RoPE, LLaMA-3.1's frequency scaling optional) and a SwiGLU MLP, a final RMSNorm
// and an untied LM head. No biases, no padded vocabulary. Parameter names follow GPT-2's
// ("h.0.attn.c_attn.weight", "h.0.mlp.c_fc2.weight", "lm_head.weight", ...); the tensors load
// from and export to llm.c / InfiniTrain's LLaMA-3 checkpoint (llmc::llama3_layout).
// Built with tensor-parallel layers (see tensor_parallel.cppm): c_attn is column parallel by
// heads (a rank holds NH / tp query heads and the KV / tp key/value heads they read), c_fc and
// c_fc2 column parallel, the c_proj layers row parallel, wte vocab parallel and lm_head column
// parallel (forward's logits are this rank's vocabulary columns).
//
//   nn::LLaMA3 model(nn::LLaMA3Config::from_name("llama3_1B"));
//   Tensor logits = model(idx);                  // idx (B, T) int64 -> (B, T, V)
//   Tensor loss = model->loss(logits, targets);  // mean cross-entropy
//   nn::KVCache cache;                           // generation: new positions after cached ones
//   logits = model->forward_cached(idx, cache);  // (B, T, V) of positions past .. past + T - 1
export module infini.nn:llama3;
import infini.std;
import infini.autograd;
import :module_base;
import :containers;
import :linear;
import :embedding;
import :normalization;
import :kv_cache;
import :llmc_checkpoint;
import :tensor_parallel;
import :model_part;
import :causal_lm;
import :llmc_layout;

export namespace infini::nn {

struct LLaMA3Config {
  std::int64_t max_seq_len = 8192;   // maxT: positions of the RoPE table
  std::int64_t vocab_size = 128256;  // V
  std::int64_t num_layers = 16;      // L
  std::int64_t num_heads = 32;       // NH query heads, divides C; head dim hd = C / NH (even)
  std::int64_t num_kv_heads = 8;     // KV key/value heads, divides NH
  std::int64_t channels = 2048;      // C
  float ffn_dim_multiplier = 1.5f;   // 0: none (see llmc::llama3_ffn_hidden_dim)
  std::int64_t multiple_of = 256;    // the MLP's hidden size is rounded up to a multiple of this
  float norm_eps = 1e-5f;            // RMSNorm epsilon
  float rope_theta = 500000.0f;
  bool use_scaled_rope = true;       // LLaMA-3.1's RoPE frequency scaling
  llmc::RopeScaling rope_scaling;    // its constants (3.1's factor 8; 3.2's Hugging Face configs give 32)
  bool tie_word_embeddings = false;  // the head is wte (LLaMA-3.2 1B / 3B): one weight, no lm_head

  // Meta's sizes, with maxT 8192 and V 128256: "llama3_1B" (LLaMA 3.2 1B: C 2048, L 16, NH 32,
  // KV 8, multiplier 1.5, multiple_of 256), "llama3_3B" (3.2 3B: C 3072, L 28, NH 24, KV 8,
  // 1.0, 256), "llama3_8B" (3.1 8B: C 4096, L 32, NH 32, KV 8, 1.3, 1024); all with
  // rope_theta 500000 and scaled RoPE. Error for another name.
  static LLaMA3Config from_name(std::string_view name);
  // The model fields of a checkpoint's config / a checkpoint config (version 3.2,
  // max_gen_batch_size 4) holding them.
  static LLaMA3Config from_llmc(const llmc::LLaMA3Config& config);
  llmc::LLaMA3Config to_llmc() const;
  std::int64_t head_dim() const { return channels / num_heads; }
  std::int64_t ffn_hidden_dim() const;  // H = llmc::llama3_ffn_hidden_dim
  // Error naming the field unless every size is >= 1, C % NH == 0, NH % KV == 0, hd is even,
  // ffn_dim_multiplier is 0 or in [0.01, 100] (as checkpoints require), norm_eps and
  // rope_theta are finite and > 0 and H >= 1.
  void validate() const;
  bool operator==(const LLaMA3Config&) const = default;
};

// LLaMA-3's rotary tables, all float64: the inverse frequencies freq[i] = theta^(-2i/hd)
// (i < hd/2), with a `scaling` changed by LLaMA-3.1's apply_scaling (3.1's constants: scale
// factor 8, low_freq_factor 1, high_freq_factor 4, original context 8192: wavelengths 2 pi /
// freq above 8192 are divided by 8, below 2048 kept, blended in between), and cos / sin of t * freq[i]
// for positions t < max_seq_len. (autograd's rope_frequencies gives the same in float32,
// which would hold a float64 model to ~1e-7.) get() hands them out in the activations'
// dtype and device, converted once per (dtype, device). A model's attention layers share one.
class LLaMA3RopeTable {
 public:
  // ShapeError unless head_dim is positive and even and max_seq_len >= 1.
  LLaMA3RopeTable(std::int64_t head_dim, std::int64_t max_seq_len, double theta,
                  std::optional<llmc::RopeScaling> scaling = std::nullopt);
  // cos, sin (T, hd/2) for positions 0 .. T-1; ShapeError if T > max_seq_len.
  std::pair<Tensor, Tensor> get(std::int64_t T, DataType dtype, Device device) const;
  // cos, sin (T, hd/2) for positions start .. start + T - 1 (views of the table's rows);
  // ShapeError if start < 0 or start + T > max_seq_len.
  std::pair<Tensor, Tensor> get(std::int64_t start, std::int64_t T, DataType dtype, Device device) const;

  const std::int64_t head_dim, max_seq_len;
  const std::vector<double> inverse_frequencies;  // (hd/2)

 private:
  struct Converted {
    DataType dtype;
    Device device;
    Tensor cos, sin;
  };
  Tensor cos_, sin_;  // (maxT, hd/2) float64 CPU
  mutable std::mutex mutex_;
  mutable std::vector<Converted> converted_;
};

// x (B, T, C) -> (B, T, C): causal self-attention with NH query heads and KV key/value heads
// of hd = C / NH channels (query head h reads key/value head h / (NH / KV)), RoPE on q and k.
class LLaMA3AttentionImpl : public Cloneable<LLaMA3AttentionImpl> {
 public:
  LLaMA3AttentionImpl(std::int64_t channels, std::int64_t num_heads, std::int64_t num_kv_heads,
                      std::shared_ptr<const LLaMA3RopeTable> rope_table,
                      std::shared_ptr<TensorParallelLayers> tp = nullptr);
  void reset() override;
  Tensor forward(const Tensor& x) override;
  // x (B, T, C) of positions past .. past + T - 1 after the `past` ones whose keys / values
  // (B, KV, past, hd) are given (undefined: none); q and k rotate by their absolute
  // positions. Appends this call's keys (rotated) and values to them, KV heads each: the
  // cache stores them before grouped-query sharing, which scaled_dot_product_attention does
  // (see cached_causal_attention). forward(x) is this with undefined keys / values.
  Tensor forward_cached(const Tensor& x, Tensor& keys, Tensor& values);

  std::int64_t channels, num_heads, num_kv_heads;
  std::shared_ptr<const LLaMA3RopeTable> rope_table;
  std::shared_ptr<TensorParallelLayers> tp;
  std::shared_ptr<LinearImpl> c_attn;  // C -> (NH + 2 KV) hd, no bias: rows Q heads, K heads, V heads
  std::shared_ptr<LinearImpl> c_proj;  // C -> C, no bias

 private:
  // qkv (B, T, (nh + 2 nkv) hd) -> the heads' attention (B, T, nh hd) (see attention_core),
  // RoPE's cos / sin in table_dtype.
  Tensor core(const Tensor& qkv, Tensor& keys, Tensor& values, DataType table_dtype) const;
};
using LLaMA3Attention = ModuleHolder<LLaMA3AttentionImpl>;

// x (B, T, C) -> (B, T, C): SwiGLU, c_proj(silu(c_fc2(x)) * c_fc(x)), hidden H, no biases.
class LLaMA3MLPImpl : public Cloneable<LLaMA3MLPImpl> {
 public:
  LLaMA3MLPImpl(std::int64_t channels, std::int64_t hidden, std::shared_ptr<TensorParallelLayers> tp = nullptr);
  void reset() override;
  Tensor forward(const Tensor& x) override;

  std::int64_t channels, hidden;
  std::shared_ptr<TensorParallelLayers> tp;
  std::shared_ptr<LinearImpl> c_fc;    // C -> H, "up" (llm.c's fcw)
  std::shared_ptr<LinearImpl> c_fc2;   // C -> H, "gate", the SiLU input (fc2w)
  std::shared_ptr<LinearImpl> c_proj;  // H -> C, "down" (fcprojw)
};
using LLaMA3MLP = ModuleHolder<LLaMA3MLPImpl>;

// x + attn(ln_1(x)), then x + mlp(ln_2(x)); ln_1 and ln_2 are RMSNorms.
class LLaMA3BlockImpl : public Cloneable<LLaMA3BlockImpl> {
 public:
  LLaMA3BlockImpl(const LLaMA3Config& config, std::shared_ptr<const LLaMA3RopeTable> rope_table,
                  std::shared_ptr<TensorParallelLayers> tp = nullptr);
  void reset() override;
  Tensor forward(const Tensor& x) override;
  // forward, its attention through attn->forward_cached(.., keys, values).
  Tensor forward_cached(const Tensor& x, Tensor& keys, Tensor& values);

  const LLaMA3Config config;
  std::shared_ptr<const LLaMA3RopeTable> rope_table;
  std::shared_ptr<TensorParallelLayers> tp;
  std::shared_ptr<RMSNormImpl> ln_1;
  std::shared_ptr<LLaMA3AttentionImpl> attn;
  std::shared_ptr<RMSNormImpl> ln_2;
  std::shared_ptr<LLaMA3MLPImpl> mlp;
};
using LLaMA3Block = ModuleHolder<LLaMA3BlockImpl>;

// The causal-LM skeleton (causal_lm.cppm) gives forward_cached, embed, loss and the
// checkpoint's tensors (llmc::llama3_layout): wte (V,C), ln1w (L,C), qkvw (L,(NH+2KV)hd,C),
// attprojw (L,C,C), ln2w (L,C), fcw (L,H,C), fc2w (L,H,C), fcprojw (L,C,H), lnfw (C),
// wlmhead (V,C). Its logits have V columns (V / tp per rank).
class LLaMA3Impl : public Cloneable<LLaMA3Impl>, public CausalLM {
 public:
  // tp: the layers to build with (null: one process). part: the pieces built (a pipeline
  // stage's; default: all): wte with the embedding, ln_f and lm_head with the head. Error unless
  // NH, KV, H and V divide by tp's size, or for a part that does not fit L.
  explicit LLaMA3Impl(LLaMA3Config config, std::shared_ptr<TensorParallelLayers> tp = nullptr,
                      std::optional<ModelPart> part = std::nullopt);
  void reset() override;
  // Every matrix and the embedding ~ N(0, 0.02), the RMSNorm weights 1. Draws from
  // `generator` (default: the global one), for a part's missing pieces too (skipping their
  // values): a part gets the whole model's. Construction calls it with the generator where it
  // stood before the layers were built.
  void reset_parameters(Generator* generator = nullptr);

  // idx (B, T) int64 token ids < V, T <= maxT -> logits (B, T, V / tp): this rank's columns.
  // The whole model only (a part runs embed, its blocks and head through a pipeline).
  Tensor forward(const Tensor& idx) override { return forward_from(idx, 0, nullptr); }
  // The last block's output -> logits (B, T, V / tp) through ln_f and lm_head.
  Tensor head(const Tensor& x) override;

  const LLaMA3Config config;
  std::shared_ptr<const LLaMA3RopeTable> rope_table;  // shared by the blocks
  std::shared_ptr<EmbeddingImpl> wte;                 // (V, C); null without the embedding
  // The part's blocks, children "h.<index in the whole model>" (a ModuleList "h", or a
  // ModuleDict for a part without all of them).
  std::vector<std::shared_ptr<LLaMA3BlockImpl>> h;
  std::shared_ptr<RMSNormImpl> ln_f;    // null without the head
  std::shared_ptr<LinearImpl> lm_head;  // C -> V, no bias; null without the head and when tied

  std::vector<ModulePtr> blocks() const override { return {h.begin(), h.end()}; }
  std::vector<Tensor> tied_parameters() const override {
    return config.tie_word_embeddings && wte ? std::vector<Tensor>{wte->weight} : std::vector<Tensor>{};
  }

 protected:
  std::string extra_repr() const override;
  Tensor embed_at(const Tensor& idx, std::int64_t past) override;
  Tensor run_block(std::size_t l, const Tensor& x, KVCache* cache) override;
  std::size_t num_blocks_held() const override { return h.size(); }
  LlmcLayout llmc_layout() const override;
};
using LLaMA3 = ModuleHolder<LLaMA3Impl>;

}  // namespace infini::nn
