// LLaMA-3's layers, RoPE tables, initialisation and checkpoint layout (see llama3.cppm).
module;
#include <cmath>
#include <cstdint>
module infini.nn;
import infini.std;

namespace infini::nn {

LLaMA3Config LLaMA3Config::from_name(std::string_view name) {
  struct Size {
    std::int64_t layers, heads, channels;
    float ffn_dim_multiplier;
    std::int64_t multiple_of;
  };
  static const std::map<std::string_view, Size> sizes = {{"llama3_1B", {16, 32, 2048, 1.5f, 256}},
                                                         {"llama3_3B", {28, 24, 3072, 1.0f, 256}},
                                                         {"llama3_8B", {32, 32, 4096, 1.3f, 1024}}};
  const auto it = sizes.find(name);
  if (it == sizes.end())
    throw Error("LLaMA3Config.from_name",
                concat("unknown model \"", name, "\" (expected llama3_1B, llama3_3B or llama3_8B)"));
  const Size& s = it->second;
  return {.max_seq_len = 8192, .vocab_size = 128256, .num_layers = s.layers, .num_heads = s.heads, .num_kv_heads = 8,
          .channels = s.channels, .ffn_dim_multiplier = s.ffn_dim_multiplier, .multiple_of = s.multiple_of,
          .norm_eps = 1e-5f, .rope_theta = 500000.0f, .use_scaled_rope = true};
}

LLaMA3Config LLaMA3Config::from_llmc(const llmc::LLaMA3Config& c) {
  return {.max_seq_len = c.max_seq_len, .vocab_size = c.vocab_size, .num_layers = c.num_layers,
          .num_heads = c.num_heads, .num_kv_heads = c.num_kv_heads, .channels = c.channels,
          .ffn_dim_multiplier = c.ffn_dim_multiplier, .multiple_of = c.multiple_of, .norm_eps = c.norm_eps,
          .rope_theta = c.rope_theta, .use_scaled_rope = c.use_scaled_rope, .rope_scaling = c.rope_scaling,
          .tie_word_embeddings = c.tie_word_embeddings};
}

llmc::LLaMA3Config LLaMA3Config::to_llmc() const {
  return {.max_seq_len = max_seq_len, .vocab_size = vocab_size, .num_layers = num_layers, .num_heads = num_heads,
          .num_kv_heads = num_kv_heads, .channels = channels, .ffn_dim_multiplier = ffn_dim_multiplier,
          .multiple_of = multiple_of, .norm_eps = norm_eps, .rope_theta = rope_theta,
          .use_scaled_rope = use_scaled_rope, .rope_scaling = rope_scaling,
          .tie_word_embeddings = tie_word_embeddings};
}

std::int64_t LLaMA3Config::ffn_hidden_dim() const { return llmc::llama3_ffn_hidden_dim(to_llmc()); }

void LLaMA3Config::validate() const {
  const std::pair<const char*, std::int64_t> sizes[] = {
      {"max_seq_len", max_seq_len}, {"vocab_size", vocab_size}, {"num_layers", num_layers},
      {"num_heads", num_heads},     {"num_kv_heads", num_kv_heads}, {"channels", channels},
      {"multiple_of", multiple_of}};
  for (const auto& [field, value] : sizes)
    if (value < 1) throw Error("LLaMA3Config", concat(field, " must be >= 1, got ", value));
  if (channels % num_heads != 0)
    throw Error("LLaMA3Config", concat("channels ", channels, " is not a multiple of num_heads ", num_heads));
  if (num_heads % num_kv_heads != 0)
    throw Error("LLaMA3Config", concat("num_heads ", num_heads, " is not a multiple of num_kv_heads ", num_kv_heads));
  if (head_dim() % 2 != 0)
    throw Error("LLaMA3Config", concat("the head dim channels / num_heads = ", head_dim(),
                                       " must be even (RoPE rotates pairs of channels)"));
  if (ffn_dim_multiplier != 0 && !(ffn_dim_multiplier >= 0.01f && ffn_dim_multiplier <= 100.0f))
    throw Error("LLaMA3Config", concat("ffn_dim_multiplier must be 0 (none) or in [0.01, 100], got ", ffn_dim_multiplier));
  if (!(std::isfinite(norm_eps) && norm_eps > 0))
    throw Error("LLaMA3Config", concat("norm_eps must be finite and > 0, got ", norm_eps));
  if (!(std::isfinite(rope_theta) && rope_theta > 0))
    throw Error("LLaMA3Config", concat("rope_theta must be finite and > 0, got ", rope_theta));
  const llmc::RopeScaling& r = rope_scaling;
  if (use_scaled_rope && !(r.factor > 0 && r.low_freq_factor > 0 && r.high_freq_factor > r.low_freq_factor &&
                           r.original_context > 0))
    throw Error("LLaMA3Config", concat("rope_scaling: factor ", r.factor, ", low_freq_factor ", r.low_freq_factor,
                                       ", high_freq_factor ", r.high_freq_factor, ", original context ",
                                       r.original_context, ": expected all > 0 and high_freq_factor > low_freq_factor"));
  if (ffn_hidden_dim() < 1)
    throw Error("LLaMA3Config", concat("the MLP hidden size is ", ffn_hidden_dim(), " (channels ", channels,
                                       ", ffn_dim_multiplier ", ffn_dim_multiplier, ")"));
}

namespace {

// theta^(-2i/hd) for i < hd/2, then (with a scaling) LLaMA-3.1's apply_scaling.
std::vector<double> rope_inverse_frequencies(std::int64_t head_dim, double theta,
                                             const std::optional<llmc::RopeScaling>& scaling) {
  std::vector<double> freq(static_cast<std::size_t>(head_dim / 2));
  for (std::size_t i = 0; i < freq.size(); ++i) {
    double f = 1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(head_dim));
    if (scaling) {
      const double context = static_cast<double>(scaling->original_context);
      const double low_freq_wavelen = context / scaling->low_freq_factor;    // longer: divided by factor
      const double high_freq_wavelen = context / scaling->high_freq_factor;  // shorter: kept
      const double wavelen = 2 * std::numbers::pi / f;
      if (wavelen > low_freq_wavelen) {
        f /= scaling->factor;
      } else if (wavelen >= high_freq_wavelen) {
        const double smooth = (context / wavelen - scaling->low_freq_factor) /
                              (scaling->high_freq_factor - scaling->low_freq_factor);
        f = (1 - smooth) * f / scaling->factor + smooth * f;
      }
    }
    freq[i] = f;
  }
  return freq;
}

std::int64_t checked_head_dim(std::int64_t head_dim, std::int64_t max_seq_len) {
  if (head_dim < 2 || head_dim % 2 != 0 || max_seq_len < 1)
    throw ShapeError("LLaMA3RopeTable", concat("head_dim ", head_dim, " must be positive and even, max_seq_len ",
                                               max_seq_len, " positive"));
  return head_dim;
}

}  // namespace

LLaMA3RopeTable::LLaMA3RopeTable(std::int64_t head_dim, std::int64_t max_seq_len, double theta,
                                 std::optional<llmc::RopeScaling> scaling)
    : head_dim(checked_head_dim(head_dim, max_seq_len)),
      max_seq_len(max_seq_len),
      inverse_frequencies(rope_inverse_frequencies(head_dim, theta, scaling)) {
  const std::int64_t half = head_dim / 2;
  std::vector<double> c(static_cast<std::size_t>(max_seq_len * half)), s(c.size());
  for (std::int64_t t = 0; t < max_seq_len; ++t)
    for (std::int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(t) * inverse_frequencies[static_cast<std::size_t>(i)];
      c[static_cast<std::size_t>(t * half + i)] = std::cos(angle);
      s[static_cast<std::size_t>(t * half + i)] = std::sin(angle);
    }
  cos_ = from_vector(c, {max_seq_len, half}, {.dtype = kFloat64});
  sin_ = from_vector(s, {max_seq_len, half}, {.dtype = kFloat64});
}

std::pair<Tensor, Tensor> LLaMA3RopeTable::get(std::int64_t T, DataType dtype, Device device) const {
  return get(0, T, dtype, device);
}

std::pair<Tensor, Tensor> LLaMA3RopeTable::get(std::int64_t start, std::int64_t T, DataType dtype,
                                               Device device) const {
  if (start < 0 || T < 0)
    throw ShapeError("LLaMA3RopeTable", concat("expected positions start ", start, " and count ", T, " >= 0"));
  if (start + T > max_seq_len)
    throw ShapeError("LLaMA3RopeTable", concat("sequence length ", start + T, " exceeds the table's ", max_seq_len,
                                               " positions"));
  std::lock_guard lock(mutex_);
  const Converted* hit = nullptr;
  for (const Converted& c : converted_)
    if (c.dtype == dtype && c.device == device) hit = &c;
  if (!hit) {
    NoGradGuard no_grad;
    converted_.push_back({dtype, device, cos_.to(device, dtype), sin_.to(device, dtype)});
    hit = &converted_.back();
  }
  return {hit->cos.narrow(0, start, T), hit->sin.narrow(0, start, T)};
}

LLaMA3AttentionImpl::LLaMA3AttentionImpl(std::int64_t channels, std::int64_t num_heads, std::int64_t num_kv_heads,
                                         std::shared_ptr<const LLaMA3RopeTable> rope_table,
                                         std::shared_ptr<TensorParallelLayers> tp)
    : Cloneable("LLaMA3Attention"),
      channels(channels),
      num_heads(num_heads),
      num_kv_heads(num_kv_heads),
      rope_table(std::move(rope_table)),
      tp(or_single_process(std::move(tp))) {
  if (channels < 1 || num_heads < 1 || num_kv_heads < 1 || channels % num_heads != 0 || num_heads % num_kv_heads != 0)
    throw ShapeError(type_name(), concat("channels ", channels, " must be a positive multiple of num_heads ", num_heads,
                                         ", and num_heads a multiple of num_kv_heads ", num_kv_heads));
  if (!this->rope_table || this->rope_table->head_dim != channels / num_heads)
    throw ShapeError(type_name(), concat("expected a RoPE table of head dim ", channels / num_heads));
  if (num_kv_heads % this->tp->size() != 0)
    throw ShapeError(type_name(), concat("num_kv_heads ", num_kv_heads, " does not split over ", this->tp->size(),
                                         " tensor-parallel ranks (each query head stays with its key/value head)"));
  reset();
}

void LLaMA3AttentionImpl::reset() {
  const std::int64_t head = channels / num_heads;
  const std::int64_t q = num_heads * head, kv = num_kv_heads * head;
  c_attn = register_module("c_attn", tp->column_linear(channels, q + 2 * kv, /*bias=*/false, {q, kv, kv}));
  c_proj = register_module("c_proj", tp->row_linear(channels, channels, /*bias=*/false));
}

Tensor LLaMA3AttentionImpl::forward(const Tensor& x) {
  Tensor no_keys, no_values;
  return forward_cached(x, no_keys, no_values);
}

Tensor LLaMA3AttentionImpl::forward_cached(const Tensor& x, Tensor& keys, Tensor& values) {
  if (x.dim() != 3 || x.size(2) != channels)
    throw ShapeError(type_name(), concat("expected x (B, T, ", channels, "), got ", x.shape()));
  const Tensor qkv = (*c_attn)(x);  // (B, T, (nh + 2 nkv) hd); x's T is the whole sequence under SP too
  const DataType table_dtype = x.dtype();  // RoPE's tables in the block input's dtype
  const AttentionCore attend = [this, table_dtype](const Tensor& t, Tensor& k, Tensor& v) {
    return core(t, k, v, table_dtype);
  };
  return (*c_proj)(attention_core(attend, qkv, keys, values));  // (B, T, nh hd) -> (B, T, C)
}

Tensor LLaMA3AttentionImpl::core(const Tensor& qkv, Tensor& keys, Tensor& values, DataType table_dtype) const {
  // This rank's nh = NH / tp query heads and nkv = KV / tp key/value heads (all on one process).
  const std::int64_t head = channels / num_heads, nh = num_heads / tp->size(), nkv = num_kv_heads / tp->size();
  const std::int64_t B = qkv.size(0), T = qkv.size(1);
  // q (B, T, nh hd), k and v (B, T, nkv hd); split's backward writes qkv's gradient in one cat
  const TensorList parts = split(qkv, {nh * head, nkv * head, nkv * head}, 2);
  // part i of `count` heads -> (B, count, T, hd)
  auto heads = [&](std::size_t i, std::int64_t count) {
    return parts[i].view({B, T, count, head}).transpose(1, 2);
  };
  const std::int64_t past = keys.defined() ? keys.size(2) : 0;
  const auto [cos, sin] = rope_table->get(past, T, table_dtype, qkv.device());  // (T, hd/2) of positions past ..
  const Tensor q = rope(heads(0, nh), cos, sin);
  const Tensor k = rope(heads(1, nkv), cos, sin);
  const Tensor v = heads(2, nkv);
  const Tensor y = cached_causal_attention(q, k, v, keys, values);  // (B, nh, T, hd)
  return y.transpose(1, 2).reshape({B, T, nh * head});
}

LLaMA3MLPImpl::LLaMA3MLPImpl(std::int64_t channels, std::int64_t hidden, std::shared_ptr<TensorParallelLayers> tp)
    : Cloneable("LLaMA3MLP"), channels(channels), hidden(hidden), tp(or_single_process(std::move(tp))) {
  if (channels < 1 || hidden < 1)
    throw ShapeError(type_name(), concat("channels ", channels, " and hidden ", hidden, " must be >= 1"));
  reset();
}

void LLaMA3MLPImpl::reset() {
  c_fc = register_module("c_fc", tp->column_linear(channels, hidden, /*bias=*/false));
  c_fc2 = register_module("c_fc2", tp->column_linear(channels, hidden, /*bias=*/false));
  c_proj = register_module("c_proj", tp->row_linear(hidden, channels, /*bias=*/false));
}

Tensor LLaMA3MLPImpl::forward(const Tensor& x) {
  return (*c_proj)(silu_and_mul((*c_fc2)(x), (*c_fc)(x)));
}

LLaMA3BlockImpl::LLaMA3BlockImpl(const LLaMA3Config& config, std::shared_ptr<const LLaMA3RopeTable> rope_table,
                                 std::shared_ptr<TensorParallelLayers> tp)
    : Cloneable("LLaMA3Block"), config(config), rope_table(std::move(rope_table)), tp(or_single_process(std::move(tp))) {
  config.validate();
  reset();
}

void LLaMA3BlockImpl::reset() {
  const std::int64_t C = config.channels;
  const RMSNormOptions norm{.eps = static_cast<double>(config.norm_eps)};
  ln_1 = register_module("ln_1", std::make_shared<RMSNormImpl>(C, norm));
  attn = register_module("attn", std::make_shared<LLaMA3AttentionImpl>(C, config.num_heads, config.num_kv_heads,
                                                                       rope_table, tp));
  ln_2 = register_module("ln_2", std::make_shared<RMSNormImpl>(C, norm));
  mlp = register_module("mlp", std::make_shared<LLaMA3MLPImpl>(C, config.ffn_hidden_dim(), tp));
  tp->sequence_parallel_layer(*ln_1);
  tp->sequence_parallel_layer(*ln_2);
}

Tensor LLaMA3BlockImpl::forward(const Tensor& x) {
  Tensor no_keys, no_values;
  return forward_cached(x, no_keys, no_values);
}

Tensor LLaMA3BlockImpl::forward_cached(const Tensor& x, Tensor& keys, Tensor& values) {
  const Tensor x1 = add(x, attn->forward_cached((*ln_1)(x), keys, values));
  return add(x1, (*mlp)((*ln_2)(x1)));
}

namespace {

CausalLMSizes causal_lm_sizes(const LLaMA3Config& config) {
  config.validate();
  return {.max_seq_len = config.max_seq_len, .vocab_size = config.vocab_size, .logit_columns = config.vocab_size,
          .num_layers = config.num_layers};
}

}  // namespace

LLaMA3Impl::LLaMA3Impl(LLaMA3Config config, std::shared_ptr<TensorParallelLayers> tp, std::optional<ModelPart> part)
    : Cloneable("LLaMA3"), CausalLM("LLaMA3", causal_lm_sizes(config), std::move(part), std::move(tp)), config(config) {
  const int ranks = this->tp->size();
  if (config.num_heads % ranks != 0 || config.num_kv_heads % ranks != 0 || config.ffn_hidden_dim() % ranks != 0 ||
      config.vocab_size % ranks != 0)
    throw Error("LLaMA3", concat("num_heads ", config.num_heads, ", num_kv_heads ", config.num_kv_heads,
                                 ", the MLP's hidden size ", config.ffn_hidden_dim(), " and vocab_size ",
                                 config.vocab_size, " must be multiples of the tensor-parallel size ", ranks,
                                 " (each query head stays with its key/value head)"));
  reset();
}

void LLaMA3Impl::reset() {
  const std::int64_t C = config.channels;
  // The layers draw their own initialisation, which reset_parameters overwrites: rewound, so
  // that its draws start where the generator stood here, for the whole model and a part alike.
  Generator& generator = default_generator();
  const PhiloxState start = generator.state();
  rope_table = std::make_shared<const LLaMA3RopeTable>(
      config.head_dim(), config.max_seq_len, config.rope_theta,
      config.use_scaled_rope ? std::optional(config.rope_scaling) : std::nullopt);
  // A tied model's head stage holds wte too (the pipeline keeps it equal to the first stage's).
  const bool has_wte = part.embed || (part.head && config.tie_word_embeddings);
  wte = has_wte ? register_module("wte", tp->vocab_embedding(config.vocab_size, C)) : nullptr;
  h.clear();
  std::vector<ModulePtr> blocks;
  for (std::size_t i = 0; i < part.blocks.size(); ++i) {
    h.push_back(std::make_shared<LLaMA3BlockImpl>(config, rope_table, tp));
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

void LLaMA3Impl::reset_parameters(Generator* generator) {
  NoGradGuard no_grad;
  auto normal = [&](const Tensor& weight) { init::normal_(weight, 0.0, 0.02, generator); };
  // A piece the part lacks skips the values the whole model would draw for it.
  const std::int64_t C = config.channels, ranks = tp->size(), V = config.vocab_size, H = config.ffn_hidden_dim();
  if (wte)
    normal(wte->weight);
  else
    init::skip_draws(V / ranks * C, generator);
  const std::int64_t qkv = (config.num_heads + 2 * config.num_kv_heads) * config.head_dim();
  std::size_t next = 0;  // h[next] is the next block of the part
  for (std::int64_t l = 0; l < config.num_layers; ++l) {
    if (!part.has_block(l)) {  // c_attn, attn.c_proj, c_fc, c_fc2 and mlp.c_proj
      init::skip_draws((qkv + C + 3 * H) * C / ranks, generator);
      continue;
    }
    const LLaMA3BlockImpl& block = *h[next++];
    init::ones_(block.ln_1->weight);
    normal(block.attn->c_attn->weight);
    normal(block.attn->c_proj->weight);
    init::ones_(block.ln_2->weight);
    normal(block.mlp->c_fc->weight);
    normal(block.mlp->c_fc2->weight);
    normal(block.mlp->c_proj->weight);
  }
  if (ln_f) init::ones_(ln_f->weight);
  if (lm_head) normal(lm_head->weight);
}

Tensor LLaMA3Impl::run_block(std::size_t l, const Tensor& x, KVCache* cache) {
  return cache ? h[l]->forward_cached(x, cache->keys[l], cache->values[l]) : (*h[l])(x);
}

Tensor LLaMA3Impl::embed_at(const Tensor& idx, std::int64_t) {
  return tp->scatter_sequence((*wte)(idx));  // (B, T, C) -> (B, t, C)
}

Tensor LLaMA3Impl::head(const Tensor& x) {
  part.require(type_name(), "head", config.num_layers);
  const Tensor y = (*ln_f)(x);
  return lm_head ? (*lm_head)(y) : tp->vocab_logits(y, wte->weight);  // (B, T, V / tp)
}

namespace {

// The per-layer parameters in the checkpoint's order (after wte).
constexpr std::pair<std::string_view, Tensor (*)(const LLaMA3BlockImpl&)> kLayerTensors[] = {
    {"ln1w", [](const LLaMA3BlockImpl& b) { return b.ln_1->weight; }},
    {"qkvw", [](const LLaMA3BlockImpl& b) { return b.attn->c_attn->weight; }},
    {"attprojw", [](const LLaMA3BlockImpl& b) { return b.attn->c_proj->weight; }},
    {"ln2w", [](const LLaMA3BlockImpl& b) { return b.ln_2->weight; }},
    {"fcw", [](const LLaMA3BlockImpl& b) { return b.mlp->c_fc->weight; }},
    {"fc2w", [](const LLaMA3BlockImpl& b) { return b.mlp->c_fc2->weight; }},
    {"fcprojw", [](const LLaMA3BlockImpl& b) { return b.mlp->c_proj->weight; }},
};

}  // namespace

// The parameters in the checkpoint's order: wte, the per-layer tensors, lnfw, wlmhead.
LlmcLayout LLaMA3Impl::llmc_layout() const {
  LlmcLayout layout;
  layout.whole("wte", wte->weight);
  for (const auto& [name, pick] : kLayerTensors) layout.layers(std::string(name), h, pick);
  layout.whole("lnfw", ln_f->weight);
  layout.whole("wlmhead", lm_head ? lm_head->weight : wte->weight);  // tied: the file's copy of wte
  return layout;
}

std::string LLaMA3Impl::extra_repr() const {
  return concat("max_seq_len=", config.max_seq_len, ", vocab_size=", config.vocab_size,
                ", num_layers=", config.num_layers, ", num_heads=", config.num_heads,
                ", num_kv_heads=", config.num_kv_heads, ", channels=", config.channels,
                ", ffn_hidden_dim=", config.ffn_hidden_dim(), ", norm_eps=", config.norm_eps,
                ", rope_theta=", config.rope_theta, ", use_scaled_rope=", config.use_scaled_rope,
                config.tie_word_embeddings ? ", tie_word_embeddings=true" : "",
                part_repr());
}

}  // namespace infini::nn
