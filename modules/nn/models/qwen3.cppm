// Qwen3 (dense; transformers' modeling_qwen3.py): a token embedding, L pre-RMSNorm blocks of
// grouped-query causal self-attention and a SwiGLU MLP, a final RMSNorm and an LM head that is
// the embedding when tied (Qwen3-0.6B / 1.7B / 4B). Two things set it apart from LLaMA-3:
// head_dim is its own size (0.6B: hidden 1024, 16 query heads of 128), and q and k pass a
// per-head RMSNorm (q_norm, k_norm, over head_dim) after the projection and before RoPE.
// No biases. RoPE is LLaMA's, unscaled, theta from the config (1e6); Infini keeps q/k rows and
// the q_norm / k_norm weights in interleaved-pair order (as its LLaMA-3), and the family's
// Hugging Face mapping (qwen3_family.cpp) permutes them from and to transformers' rotate-half
// order. Parameter names follow Infini's other models ("h.0.attn.c_attn.weight",
// "h.0.attn.q_norm.weight", "lm_head.weight" when untied).
// Built with tensor-parallel layers (tensor_parallel.cppm): c_attn column parallel by heads,
// c_proj row parallel, the MLP as LLaMA-3's, wte vocab parallel; q_norm / k_norm replicated,
// each rank's gradients of them partial (per_head_layer).
//
//   nn::Qwen3 model(nn::Qwen3Config::from_name("qwen3_0.6B"));
//   Tensor logits = model(idx);                  // idx (B, T) int64 -> (B, T, V)
export module infini.nn:qwen3;
import infini.std;
import infini.autograd;
import :module_base;
import :linear;
import :embedding;
import :normalization;
import :kv_cache;
import :tensor_parallel;
import :model_part;
import :causal_lm;
import :llmc_layout;
import :llama3;

export namespace infini::nn {

struct Qwen3Config {
  std::int64_t max_seq_len = 40960;  // maxT: positions of the RoPE table
  std::int64_t vocab_size = 151936;  // V
  std::int64_t num_layers = 28;      // L
  std::int64_t num_heads = 16;       // NH query heads
  std::int64_t num_kv_heads = 8;     // KV key/value heads, divides NH
  std::int64_t head_dim = 128;       // hd (even), independent of C / NH
  std::int64_t channels = 1024;      // C (hidden_size)
  std::int64_t intermediate_size = 3072;  // H of the SwiGLU MLP
  float norm_eps = 1e-6f;            // every RMSNorm's epsilon
  float rope_theta = 1000000.0f;
  bool tie_word_embeddings = true;   // the head is wte

  // Qwen's sizes: "qwen3_0.6B" (C 1024, L 28, NH 16, KV 8, hd 128, H 3072) and "qwen3_1.7B"
  // (C 2048, L 28, NH 16, KV 8, hd 128, H 6144), both tied, V 151936, maxT 40960. Error for another.
  static Qwen3Config from_name(std::string_view name);
  // Error naming the field unless every size is >= 1, NH % KV == 0, hd is even, norm_eps and
  // rope_theta are finite and > 0.
  void validate() const;
  bool operator==(const Qwen3Config&) const = default;
};

// x (B, T, C) -> (B, T, C): causal self-attention with NH query heads and KV key/value heads of
// hd channels each (query head h reads key/value head h / (NH / KV)); q and k RMS-normalised per
// head, then rotated by RoPE.
class Qwen3AttentionImpl : public Cloneable<Qwen3AttentionImpl> {
 public:
  Qwen3AttentionImpl(const Qwen3Config& config, std::shared_ptr<const LLaMA3RopeTable> rope_table,
                     std::shared_ptr<TensorParallelLayers> tp = nullptr);
  void reset() override;
  Tensor forward(const Tensor& x) override;
  // As LLaMA3Attention's: positions past .. past + T - 1 after the cached keys / values
  // (B, KV, past, hd), which this call's (normalised, rotated) keys and values extend.
  Tensor forward_cached(const Tensor& x, Tensor& keys, Tensor& values);

  const Qwen3Config config;
  std::shared_ptr<const LLaMA3RopeTable> rope_table;
  std::shared_ptr<TensorParallelLayers> tp;
  std::shared_ptr<LinearImpl> c_attn;   // C -> (NH + 2 KV) hd: rows Q heads, K heads, V heads
  std::shared_ptr<RMSNormImpl> q_norm;  // (hd), shared by the query heads
  std::shared_ptr<RMSNormImpl> k_norm;  // (hd), shared by the key heads
  std::shared_ptr<LinearImpl> c_proj;   // NH hd -> C

 private:
  // qkv (B, T, (nh + 2 nkv) hd) with q and k normalised -> (B, T, nh hd) (see attention_core).
  Tensor core(const Tensor& qkv, Tensor& keys, Tensor& values, DataType table_dtype) const;
};
using Qwen3Attention = ModuleHolder<Qwen3AttentionImpl>;

// x + attn(ln_1(x)), then x + mlp(ln_2(x)); RMSNorms, LLaMA-3's SwiGLU MLP of width H.
class Qwen3BlockImpl : public Cloneable<Qwen3BlockImpl> {
 public:
  Qwen3BlockImpl(const Qwen3Config& config, std::shared_ptr<const LLaMA3RopeTable> rope_table,
                 std::shared_ptr<TensorParallelLayers> tp = nullptr);
  void reset() override;
  Tensor forward(const Tensor& x) override;
  Tensor forward_cached(const Tensor& x, Tensor& keys, Tensor& values);

  const Qwen3Config config;
  std::shared_ptr<const LLaMA3RopeTable> rope_table;
  std::shared_ptr<TensorParallelLayers> tp;
  std::shared_ptr<RMSNormImpl> ln_1;
  std::shared_ptr<Qwen3AttentionImpl> attn;
  std::shared_ptr<RMSNormImpl> ln_2;
  std::shared_ptr<LLaMA3MLPImpl> mlp;
};
using Qwen3Block = ModuleHolder<Qwen3BlockImpl>;

// The causal-LM skeleton (causal_lm.cppm) gives forward_cached, embed, loss and the stacked
// tensor list (llmc_tensors): wte (V,C), ln1w (L,C), qkvw (L,(NH+2KV)hd,C), qnormw (L,hd),
// knormw (L,hd), attprojw (L,C,NH hd), ln2w (L,C), fcw (L,H,C), fc2w (L,H,C), fcprojw (L,C,H),
// lnfw (C), and wlmhead (V,C) when untied. Qwen3 has no llm.c file; the list is the form the
// Hugging Face mapping reads and writes.
class Qwen3Impl : public Cloneable<Qwen3Impl>, public CausalLM {
 public:
  // Error unless NH, KV, H and V divide by tp's size, or for a part that does not fit L. A tied
  // model's head stage holds wte too (kept equal to the first stage's by the pipeline).
  explicit Qwen3Impl(Qwen3Config config, std::shared_ptr<TensorParallelLayers> tp = nullptr,
                     std::optional<ModelPart> part = std::nullopt);
  void reset() override;
  // Matrices and the embedding ~ N(0, 0.02) (transformers' initializer_range), norms 1; a part
  // draws what the whole model would (see LLaMA3Impl::reset_parameters).
  void reset_parameters(Generator* generator = nullptr);

  Tensor forward(const Tensor& idx) override { return forward_from(idx, 0, nullptr); }
  // The last block's output -> logits (B, T, V / tp) through ln_f and the head (wte when tied).
  Tensor head(const Tensor& x) override;

  const Qwen3Config config;
  std::shared_ptr<const LLaMA3RopeTable> rope_table;
  std::shared_ptr<EmbeddingImpl> wte;  // (V, C); null without the embedding (and, tied, the head)
  std::vector<std::shared_ptr<Qwen3BlockImpl>> h;
  std::shared_ptr<RMSNormImpl> ln_f;    // null without the head
  std::shared_ptr<LinearImpl> lm_head;  // C -> V; null when tied or without the head

  std::vector<ModulePtr> blocks() const override { return {h.begin(), h.end()}; }
  std::vector<Tensor> tied_parameters() const override { return config.tie_word_embeddings && wte ? std::vector<Tensor>{wte->weight} : std::vector<Tensor>{}; }

 protected:
  std::string extra_repr() const override;
  Tensor embed_at(const Tensor& idx, std::int64_t past) override;
  Tensor run_block(std::size_t l, const Tensor& x, KVCache* cache) override;
  std::size_t num_blocks_held() const override { return h.size(); }
  LlmcLayout llmc_layout() const override;
};
using Qwen3 = ModuleHolder<Qwen3Impl>;

}  // namespace infini::nn
