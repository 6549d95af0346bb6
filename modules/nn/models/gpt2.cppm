// GPT-2 (Radford et al. 2019), as llm.c and nanoGPT build it: token and position
// embeddings, L pre-LayerNorm blocks of causal self-attention and a GELU (tanh) MLP, a final
// LayerNorm and an LM head tied to the token embedding. The vocabulary is padded to a
// multiple of 128 rows (Vp) for speed; the padded rows stay zero and the loss ignores them.
// Parameter names are nanoGPT's / Hugging Face's ("h.0.attn.c_attn.weight", ...).
// Built with tensor-parallel layers (see tensor_parallel.cppm) the attention heads, the MLP's
// hidden features and the vocabulary are split over the ranks: c_attn and c_fc are column
// parallel (c_attn by heads: a rank holds the same heads of Q, K and V), the c_proj layers row
// parallel, wte vocab parallel, and forward's logits are this rank's vocabulary columns.
//
//   nn::GPT2 model(nn::GPT2Config::from_name("d12"));
//   Tensor logits = model(idx);                  // idx (B, T) int64 -> (B, T, Vp)
//   Tensor loss = model->loss(logits, targets);  // mean cross-entropy over the first V logits
//   nn::KVCache cache;                           // generation: new positions after cached ones
//   logits = model->forward_cached(idx, cache);  // (B, T, Vp) of positions past .. past + T - 1
export module infini.nn:gpt2;
import infini.std;
import infini.autograd;
import :module_base;
import :containers;
import :linear;
import :embedding;
import :normalization;
import :kv_cache;
import :tensor_parallel;
import :model_part;
import :causal_lm;
import :llmc_layout;
import :llmc_checkpoint;

export namespace infini::nn {

struct GPT2Config {
  std::int64_t max_seq_len = 1024;         // maxT: positions of wpe
  std::int64_t vocab_size = 50257;         // V
  std::int64_t padded_vocab_size = 50304;  // Vp >= V: rows of wte
  std::int64_t num_layers = 12;            // L
  std::int64_t num_heads = 12;             // NH
  std::int64_t channels = 768;             // C, a multiple of NH

  // llm.c's model names: "d12" (124M), "d24" (350M), "d36" (774M), "d48" (1558M), with
  // GPT-2's vocabulary padded to 50304 and maxT 1024. Error for another name.
  static GPT2Config from_name(std::string_view name);
  // The same sizes as llm.c's header has them.
  static GPT2Config from_llmc(const llmc::GPT2Config& config);
  llmc::GPT2Config to_llmc() const;
  // Error naming the field unless every size is >= 1, Vp >= V and C % NH == 0.
  void validate() const;
  bool operator==(const GPT2Config&) const = default;
};

// x (B, T, C) -> (B, T, C): multi-head causal self-attention, heads of C / NH channels
// (NH / tp of them on each of tp tensor-parallel ranks).
class CausalSelfAttentionImpl : public Cloneable<CausalSelfAttentionImpl> {
 public:
  CausalSelfAttentionImpl(std::int64_t channels, std::int64_t num_heads,
                          std::shared_ptr<TensorParallelLayers> tp = nullptr);
  void reset() override;
  Tensor forward(const Tensor& x) override;
  // x (B, T, C) of the positions after the `past` ones whose keys / values (B, NH, past, hs)
  // are given (undefined: none); appends this call's keys and values to them (see
  // cached_causal_attention). forward(x) is this with undefined keys / values.
  Tensor forward_cached(const Tensor& x, Tensor& keys, Tensor& values);

  std::int64_t channels, num_heads;
  std::shared_ptr<TensorParallelLayers> tp;
  std::shared_ptr<LinearImpl> c_attn;  // C -> 3C: q, k, v side by side (column parallel by heads)
  std::shared_ptr<LinearImpl> c_proj;  // C -> C (row parallel)

 private:
  // qkv (B, T, 3 Cl) -> the heads' attention (B, T, Cl), Cl = C / tp (see attention_core).
  Tensor core(const Tensor& qkv, Tensor& keys, Tensor& values) const;
};
using CausalSelfAttention = ModuleHolder<CausalSelfAttentionImpl>;

// x (B, T, C) -> (B, T, C): c_proj(gelu_tanh(c_fc(x))), hidden 4C.
class GPT2MLPImpl : public Cloneable<GPT2MLPImpl> {
 public:
  explicit GPT2MLPImpl(std::int64_t channels, std::shared_ptr<TensorParallelLayers> tp = nullptr);
  void reset() override;
  Tensor forward(const Tensor& x) override;

  std::int64_t channels;
  std::shared_ptr<TensorParallelLayers> tp;
  std::shared_ptr<LinearImpl> c_fc;    // C -> 4C (column parallel)
  std::shared_ptr<LinearImpl> c_proj;  // 4C -> C (row parallel)
};
using GPT2MLP = ModuleHolder<GPT2MLPImpl>;

// x + attn(ln_1(x)), then x + mlp(ln_2(x)).
class GPT2BlockImpl : public Cloneable<GPT2BlockImpl> {
 public:
  GPT2BlockImpl(std::int64_t channels, std::int64_t num_heads, std::shared_ptr<TensorParallelLayers> tp = nullptr);
  void reset() override;
  Tensor forward(const Tensor& x) override;
  // forward, its attention through attn->forward_cached(.., keys, values).
  Tensor forward_cached(const Tensor& x, Tensor& keys, Tensor& values);

  std::int64_t channels, num_heads;
  std::shared_ptr<TensorParallelLayers> tp;
  std::shared_ptr<LayerNormImpl> ln_1;
  std::shared_ptr<CausalSelfAttentionImpl> attn;
  std::shared_ptr<LayerNormImpl> ln_2;
  std::shared_ptr<GPT2MLPImpl> mlp;
};
using GPT2Block = ModuleHolder<GPT2BlockImpl>;

// The causal-LM skeleton (causal_lm.cppm) gives forward_cached, embed, loss and the llm.c
// tensors: wte (Vp,C), wpe (maxT,C), ln1w (L,C), ln1b, qkvw (L,3C,C), qkvb (L,3C),
// attprojw (L,C,C), attprojb (L,C), ln2w, ln2b, fcw (L,4C,C), fcb (L,4C), fcprojw (L,C,4C),
// fcprojb (L,C), lnfw (C), lnfb (C). Its logits have Vp columns (Vp / tp per rank); the loss
// counts the first V.
class GPT2Impl : public Cloneable<GPT2Impl>, public CausalLM {
 public:
  // tp: the layers to build with (null: one process). part: the pieces built (a pipeline
  // stage's; default: all): wte with the embedding or the head (tied to it), wpe with the
  // embedding, ln_f with the head. Error unless NH and Vp divide by tp's size, or for a part
  // that does not fit L.
  explicit GPT2Impl(GPT2Config config, std::shared_ptr<TensorParallelLayers> tp = nullptr,
                    std::optional<ModelPart> part = std::nullopt);
  void reset() override;
  // llm.c's initialisation: weights of linear layers and embeddings ~ N(0, 0.02), the two
  // residual projections (attn.c_proj, mlp.c_proj) ~ N(0, 0.02 / sqrt(2 L)), biases 0,
  // LayerNorms 1 and 0; wte's padded rows 0. Draws from `generator` (default: the global one),
  // for a part's missing pieces too (skipping their values): a part gets the whole model's.
  // Construction calls it with the generator where it stood before the layers were built.
  void reset_parameters(Generator* generator = nullptr);

  // idx (B, T) int64 token ids < V, T <= maxT -> logits (B, T, Vp / tp): this rank's columns.
  // The whole model only (a part runs embed, its blocks and head through a pipeline).
  Tensor forward(const Tensor& idx) override { return forward_from(idx, 0, nullptr); }
  // The last block's output -> logits (B, T, Vp / tp) through ln_f and wte (tied).
  Tensor head(const Tensor& x) override;

  const GPT2Config config;
  std::shared_ptr<EmbeddingImpl> wte;  // (Vp, C), also the LM head (vocab parallel: (Vp / tp, C))
  std::shared_ptr<EmbeddingImpl> wpe;  // (maxT, C)
  // The part's blocks, children "h.<index in the whole model>" (a ModuleList "h", or a
  // ModuleDict for a part without all of them).
  std::vector<std::shared_ptr<GPT2BlockImpl>> h;
  std::shared_ptr<LayerNormImpl> ln_f;  // null without the head; wte and wpe null when not built

  std::vector<ModulePtr> blocks() const override { return {h.begin(), h.end()}; }
  std::vector<Tensor> tied_parameters() const override { return wte ? std::vector<Tensor>{wte->weight} : std::vector<Tensor>{}; }

 protected:
  std::string extra_repr() const override;
  Tensor embed_at(const Tensor& idx, std::int64_t past) override;
  Tensor run_block(std::size_t l, const Tensor& x, KVCache* cache) override;
  std::size_t num_blocks_held() const override { return h.size(); }
  LlmcLayout llmc_layout() const override;
};
using GPT2 = ModuleHolder<GPT2Impl>;

}  // namespace infini::nn
