// Qwen3's layers, initialisation and tensor list (see qwen3.cppm).
module;
#include <cmath>
#include <cstdint>
module infini.nn;
import infini.std;

namespace infini::nn {

Qwen3Config Qwen3Config::from_name(std::string_view name) {
  struct Size {
    std::int64_t channels, intermediate;
  };
  static const std::map<std::string_view, Size> sizes = {{"qwen3_0.6B", {1024, 3072}}, {"qwen3_1.7B", {2048, 6144}}};
  const auto it = sizes.find(name);
  if (it == sizes.end())
    throw Error("Qwen3Config.from_name", concat("unknown model \"", name, "\" (expected qwen3_0.6B or qwen3_1.7B)"));
  return {.max_seq_len = 40960, .vocab_size = 151936, .num_layers = 28, .num_heads = 16, .num_kv_heads = 8,
          .head_dim = 128, .channels = it->second.channels, .intermediate_size = it->second.intermediate,
          .norm_eps = 1e-6f, .rope_theta = 1000000.0f, .tie_word_embeddings = true};
}

void Qwen3Config::validate() const {
  const std::pair<const char*, std::int64_t> sizes[] = {
      {"max_seq_len", max_seq_len},   {"vocab_size", vocab_size}, {"num_layers", num_layers},
      {"num_heads", num_heads},       {"num_kv_heads", num_kv_heads}, {"head_dim", head_dim},
      {"channels", channels},         {"intermediate_size", intermediate_size}};
  for (const auto& [field, value] : sizes)
    if (value < 1) throw Error("Qwen3Config", concat(field, " must be >= 1, got ", value));
  if (num_heads % num_kv_heads != 0)
    throw Error("Qwen3Config", concat("num_heads ", num_heads, " is not a multiple of num_kv_heads ", num_kv_heads));
  if (head_dim % 2 != 0)
    throw Error("Qwen3Config", concat("head_dim ", head_dim, " must be even (RoPE rotates pairs of channels)"));
  if (!(std::isfinite(norm_eps) && norm_eps > 0))
    throw Error("Qwen3Config", concat("norm_eps must be finite and > 0, got ", norm_eps));
  if (!(std::isfinite(rope_theta) && rope_theta > 0))
    throw Error("Qwen3Config", concat("rope_theta must be finite and > 0, got ", rope_theta));
}

Qwen3AttentionImpl::Qwen3AttentionImpl(const Qwen3Config& config, std::shared_ptr<const LLaMA3RopeTable> rope_table,
                                       std::shared_ptr<TensorParallelLayers> tp)
    : Cloneable("Qwen3Attention"), config(config), rope_table(std::move(rope_table)), tp(or_single_process(std::move(tp))) {
  config.validate();
  if (!this->rope_table || this->rope_table->head_dim != config.head_dim)
    throw ShapeError(type_name(), concat("expected a RoPE table of head dim ", config.head_dim));
  if (config.num_kv_heads % this->tp->size() != 0)
    throw ShapeError(type_name(), concat("num_kv_heads ", config.num_kv_heads, " does not split over ", this->tp->size(),
                                         " tensor-parallel ranks (each query head stays with its key/value head)"));
  reset();
}

void Qwen3AttentionImpl::reset() {
  const std::int64_t C = config.channels, q = config.num_heads * config.head_dim, kv = config.num_kv_heads * config.head_dim;
  const RMSNormOptions norm{.eps = static_cast<double>(config.norm_eps)};
  c_attn = register_module("c_attn", tp->column_linear(C, q + 2 * kv, /*bias=*/false, {q, kv, kv}));
  q_norm = register_module("q_norm", std::make_shared<RMSNormImpl>(config.head_dim, norm));
  k_norm = register_module("k_norm", std::make_shared<RMSNormImpl>(config.head_dim, norm));
  c_proj = register_module("c_proj", tp->row_linear(q, C, /*bias=*/false));
  tp->per_head_layer(*q_norm);
  tp->per_head_layer(*k_norm);
}

Tensor Qwen3AttentionImpl::forward(const Tensor& x) {
  Tensor no_keys, no_values;
  return forward_cached(x, no_keys, no_values);
}

Tensor Qwen3AttentionImpl::forward_cached(const Tensor& x, Tensor& keys, Tensor& values) {
  if (x.dim() != 3 || x.size(2) != config.channels)
    throw ShapeError(type_name(), concat("expected x (B, T, ", config.channels, "), got ", x.shape()));
  // This rank's nh = NH / tp query heads and nkv = KV / tp key/value heads.
  const std::int64_t hd = config.head_dim, nh = config.num_heads / tp->size(), nkv = config.num_kv_heads / tp->size();
  const Tensor qkv = (*c_attn)(x);  // (B, T, (nh + 2 nkv) hd)
  const std::int64_t B = qkv.size(0), T = qkv.size(1);
  const TensorList parts = split(qkv, {nh * hd, nkv * hd, nkv * hd}, 2);
  // q_norm / k_norm hold parameters: applied here, outside the part that selective
  // recomputation reruns (attention_core), which must hold none.
  const Tensor q = (*q_norm)(parts[0].view({B, T, nh, hd})).view({B, T, nh * hd});
  const Tensor k = (*k_norm)(parts[1].view({B, T, nkv, hd})).view({B, T, nkv * hd});
  const DataType table_dtype = x.dtype();
  const AttentionCore attend = [this, table_dtype](const Tensor& t, Tensor& ks, Tensor& vs) {
    return core(t, ks, vs, table_dtype);
  };
  return (*c_proj)(attention_core(attend, cat({q, k, parts[2]}, 2), keys, values));  // (B, T, nh hd) -> (B, T, C)
}

Tensor Qwen3AttentionImpl::core(const Tensor& qkv, Tensor& keys, Tensor& values, DataType table_dtype) const {
  const std::int64_t hd = config.head_dim, nh = config.num_heads / tp->size(), nkv = config.num_kv_heads / tp->size();
  const std::int64_t B = qkv.size(0), T = qkv.size(1);
  const TensorList parts = split(qkv, {nh * hd, nkv * hd, nkv * hd}, 2);
  auto heads = [&](std::size_t i, std::int64_t count) {  // part i -> (B, count, T, hd)
    return parts[i].view({B, T, count, hd}).transpose(1, 2);
  };
  const std::int64_t past = keys.defined() ? keys.size(2) : 0;
  const auto [cos, sin] = rope_table->get(past, T, table_dtype, qkv.device());  // (T, hd/2)
  const Tensor y = cached_causal_attention(rope(heads(0, nh), cos, sin), rope(heads(1, nkv), cos, sin),
                                           heads(2, nkv), keys, values);  // (B, nh, T, hd)
  return y.transpose(1, 2).reshape({B, T, nh * hd});
}

Qwen3BlockImpl::Qwen3BlockImpl(const Qwen3Config& config, std::shared_ptr<const LLaMA3RopeTable> rope_table,
                               std::shared_ptr<TensorParallelLayers> tp)
    : Cloneable("Qwen3Block"), config(config), rope_table(std::move(rope_table)), tp(or_single_process(std::move(tp))) {
  config.validate();
  reset();
}

void Qwen3BlockImpl::reset() {
  const RMSNormOptions norm{.eps = static_cast<double>(config.norm_eps)};
  ln_1 = register_module("ln_1", std::make_shared<RMSNormImpl>(config.channels, norm));
  attn = register_module("attn", std::make_shared<Qwen3AttentionImpl>(config, rope_table, tp));
  ln_2 = register_module("ln_2", std::make_shared<RMSNormImpl>(config.channels, norm));
  mlp = register_module("mlp", std::make_shared<LLaMA3MLPImpl>(config.channels, config.intermediate_size, tp));
  tp->sequence_parallel_layer(*ln_1);
  tp->sequence_parallel_layer(*ln_2);
}

Tensor Qwen3BlockImpl::forward(const Tensor& x) {
  Tensor no_keys, no_values;
  return forward_cached(x, no_keys, no_values);
}

Tensor Qwen3BlockImpl::forward_cached(const Tensor& x, Tensor& keys, Tensor& values) {
  const Tensor x1 = add(x, attn->forward_cached((*ln_1)(x), keys, values));
  return add(x1, (*mlp)((*ln_2)(x1)));
}

namespace {

CausalLMSizes causal_lm_sizes(const Qwen3Config& config) {
  config.validate();
  return {.max_seq_len = config.max_seq_len, .vocab_size = config.vocab_size, .logit_columns = config.vocab_size,
          .num_layers = config.num_layers};
}

}  // namespace

Qwen3Impl::Qwen3Impl(Qwen3Config config, std::shared_ptr<TensorParallelLayers> tp, std::optional<ModelPart> part)
    : Cloneable("Qwen3"), CausalLM("Qwen3", causal_lm_sizes(config), std::move(part), std::move(tp)), config(config) {
  const int ranks = this->tp->size();
  if (config.num_heads % ranks != 0 || config.num_kv_heads % ranks != 0 || config.intermediate_size % ranks != 0 ||
      config.vocab_size % ranks != 0)
    throw Error("Qwen3", concat("num_heads ", config.num_heads, ", num_kv_heads ", config.num_kv_heads,
                                ", intermediate_size ", config.intermediate_size, " and vocab_size ", config.vocab_size,
                                " must be multiples of the tensor-parallel size ", ranks));
  reset();
}

void Qwen3Impl::reset() {
  const std::int64_t C = config.channels;
  // As LLaMA3Impl::reset: the layers' own draws are rewound and reset_parameters draws from here.
  Generator& generator = default_generator();
  const PhiloxState start = generator.state();
  rope_table = std::make_shared<const LLaMA3RopeTable>(config.head_dim, config.max_seq_len, config.rope_theta);
  const bool has_wte = part.embed || (part.head && config.tie_word_embeddings);
  wte = has_wte ? register_module("wte", tp->vocab_embedding(config.vocab_size, C)) : nullptr;
  h.clear();
  std::vector<ModulePtr> blocks;
  for (std::size_t i = 0; i < part.blocks.size(); ++i) {
    h.push_back(std::make_shared<Qwen3BlockImpl>(config, rope_table, tp));
    blocks.push_back(h.back());
  }
  register_module("h", block_container(blocks, part, config.num_layers));
  const RMSNormOptions norm{.eps = static_cast<double>(config.norm_eps)};
  ln_f = part.head ? register_module("ln_f", std::make_shared<RMSNormImpl>(C, norm)) : nullptr;
  if (ln_f) tp->sequence_parallel_layer(*ln_f);
  lm_head = part.head && !config.tie_word_embeddings
                ? register_module("lm_head", tp->column_linear(C, config.vocab_size, /*bias=*/false))
                : nullptr;
  generator.set_state(start);
  reset_parameters();
}

void Qwen3Impl::reset_parameters(Generator* generator) {
  NoGradGuard no_grad;
  auto normal = [&](const Tensor& weight) { init::normal_(weight, 0.0, 0.02, generator); };
  const std::int64_t C = config.channels, ranks = tp->size(), V = config.vocab_size, H = config.intermediate_size;
  if (wte)
    normal(wte->weight);
  else
    init::skip_draws(V / ranks * C, generator);
  const std::int64_t q = config.num_heads * config.head_dim, qkv = q + 2 * config.num_kv_heads * config.head_dim;
  std::size_t next = 0;  // h[next] is the next block of the part
  for (std::int64_t l = 0; l < config.num_layers; ++l) {
    if (!part.has_block(l)) {  // c_attn (qkv, C), attn.c_proj (C, q), c_fc, c_fc2 (H, C) and mlp.c_proj (C, H)
      init::skip_draws((qkv * C + C * q + 3 * H * C) / ranks, generator);
      continue;
    }
    const Qwen3BlockImpl& block = *h[next++];
    init::ones_(block.ln_1->weight);
    normal(block.attn->c_attn->weight);
    init::ones_(block.attn->q_norm->weight);
    init::ones_(block.attn->k_norm->weight);
    normal(block.attn->c_proj->weight);
    init::ones_(block.ln_2->weight);
    normal(block.mlp->c_fc->weight);
    normal(block.mlp->c_fc2->weight);
    normal(block.mlp->c_proj->weight);
  }
  if (ln_f) init::ones_(ln_f->weight);
  if (lm_head) normal(lm_head->weight);
}

Tensor Qwen3Impl::run_block(std::size_t l, const Tensor& x, KVCache* cache) {
  return cache ? h[l]->forward_cached(x, cache->keys[l], cache->values[l]) : (*h[l])(x);
}

Tensor Qwen3Impl::embed_at(const Tensor& idx, std::int64_t) {
  return tp->scatter_sequence((*wte)(idx));  // (B, T, C) -> (B, t, C)
}

Tensor Qwen3Impl::head(const Tensor& x) {
  part.require(type_name(), "head", config.num_layers);
  const Tensor y = (*ln_f)(x);
  return lm_head ? (*lm_head)(y) : tp->vocab_logits(y, wte->weight);  // (B, T, V / tp)
}

namespace {

constexpr std::pair<std::string_view, Tensor (*)(const Qwen3BlockImpl&)> kLayerTensors[] = {
    {"ln1w", [](const Qwen3BlockImpl& b) { return b.ln_1->weight; }},
    {"qkvw", [](const Qwen3BlockImpl& b) { return b.attn->c_attn->weight; }},
    {"qnormw", [](const Qwen3BlockImpl& b) { return b.attn->q_norm->weight; }},
    {"knormw", [](const Qwen3BlockImpl& b) { return b.attn->k_norm->weight; }},
    {"attprojw", [](const Qwen3BlockImpl& b) { return b.attn->c_proj->weight; }},
    {"ln2w", [](const Qwen3BlockImpl& b) { return b.ln_2->weight; }},
    {"fcw", [](const Qwen3BlockImpl& b) { return b.mlp->c_fc->weight; }},
    {"fc2w", [](const Qwen3BlockImpl& b) { return b.mlp->c_fc2->weight; }},
    {"fcprojw", [](const Qwen3BlockImpl& b) { return b.mlp->c_proj->weight; }},
};

}  // namespace

LlmcLayout Qwen3Impl::llmc_layout() const {
  LlmcLayout layout;
  layout.whole("wte", wte->weight);
  for (const auto& [name, pick] : kLayerTensors) layout.layers(std::string(name), h, pick);
  layout.whole("lnfw", ln_f->weight);
  if (lm_head) layout.whole("wlmhead", lm_head->weight);
  return layout;
}

std::string Qwen3Impl::extra_repr() const {
  return concat("max_seq_len=", config.max_seq_len, ", vocab_size=", config.vocab_size,
                ", num_layers=", config.num_layers, ", num_heads=", config.num_heads,
                ", num_kv_heads=", config.num_kv_heads, ", head_dim=", config.head_dim, ", channels=", config.channels,
                ", intermediate_size=", config.intermediate_size, ", norm_eps=", config.norm_eps,
                ", rope_theta=", config.rope_theta, ", tie_word_embeddings=", config.tie_word_embeddings, part_repr());
}

}  // namespace infini::nn
