// GPT-2's layers, initialisation and llm.c tensor layout (see gpt2.cppm).
module;
#include <cmath>
#include <cstdint>
module infini.nn;
import infini.std;

namespace infini::nn {
namespace {

// The dtype a norm's output is made in for the product after it: under autocast, autocast's
// dtype (the bits the product's cast would give, with no float32 copy in between). Not under
// tensor parallelism, whose sequence-parallel gathers (and their gradients' reductions) then
// stay in float32 as before.
std::optional<DataType> product_input_dtype(const Tensor& x, const TensorParallelLayers& tp) {
  const DeviceType device = x.device().type;
  if (x.dtype() != kFloat32 || !is_autocast_enabled(device) || tp.size() > 1) return std::nullopt;
  return autocast_dtype(device);
}

}  // namespace

GPT2Config GPT2Config::from_llmc(const llmc::GPT2Config& c) {
  return {.max_seq_len = c.max_seq_len, .vocab_size = c.vocab_size, .padded_vocab_size = c.padded_vocab_size,
          .num_layers = c.num_layers, .num_heads = c.num_heads, .channels = c.channels};
}

llmc::GPT2Config GPT2Config::to_llmc() const {
  return {.max_seq_len = max_seq_len, .vocab_size = vocab_size, .padded_vocab_size = padded_vocab_size,
          .num_layers = num_layers, .num_heads = num_heads, .channels = channels};
}

GPT2Config GPT2Config::from_name(std::string_view name) {
  // (layers, heads, channels) of llm.c's GPT-2 sizes.
  static const std::map<std::string_view, std::array<std::int64_t, 3>> sizes = {
      {"d12", {12, 12, 768}}, {"d24", {24, 16, 1024}}, {"d36", {36, 20, 1280}}, {"d48", {48, 25, 1600}}};
  const auto it = sizes.find(name);
  if (it == sizes.end())
    throw Error("GPT2Config.from_name", concat("unknown model \"", name, "\" (expected d12, d24, d36 or d48)"));
  const auto [layers, heads, channels] = it->second;
  return {.max_seq_len = 1024, .vocab_size = 50257, .padded_vocab_size = 50304, .num_layers = layers,
          .num_heads = heads, .channels = channels};
}

void GPT2Config::validate() const {
  const std::pair<const char*, std::int64_t> sizes[] = {{"max_seq_len", max_seq_len}, {"vocab_size", vocab_size},
                                                        {"padded_vocab_size", padded_vocab_size},
                                                        {"num_layers", num_layers}, {"num_heads", num_heads},
                                                        {"channels", channels}};
  for (const auto& [field, value] : sizes)
    if (value < 1) throw Error("GPT2Config", concat(field, " must be >= 1, got ", value));
  if (padded_vocab_size < vocab_size)
    throw Error("GPT2Config", concat("padded_vocab_size ", padded_vocab_size, " is smaller than vocab_size ", vocab_size));
  if (channels % num_heads != 0)
    throw Error("GPT2Config", concat("channels ", channels, " is not a multiple of num_heads ", num_heads));
}

CausalSelfAttentionImpl::CausalSelfAttentionImpl(std::int64_t channels, std::int64_t num_heads,
                                                 std::shared_ptr<TensorParallelLayers> tp)
    : Cloneable("CausalSelfAttention"), channels(channels), num_heads(num_heads), tp(or_single_process(std::move(tp))) {
  if (channels < 1 || num_heads < 1 || channels % num_heads != 0)
    throw ShapeError(type_name(), concat("channels ", channels, " must be a positive multiple of num_heads ", num_heads));
  if (num_heads % this->tp->size() != 0)
    throw ShapeError(type_name(), concat("num_heads ", num_heads, " does not split over ", this->tp->size(),
                                         " tensor-parallel ranks"));
  reset();
}

void CausalSelfAttentionImpl::reset() {
  const std::int64_t C = channels;
  c_attn = register_module("c_attn", tp->column_linear(C, 3 * C, /*bias=*/true, {C, C, C}));
  c_proj = register_module("c_proj", tp->row_linear(C, C, /*bias=*/true));
}

Tensor CausalSelfAttentionImpl::forward(const Tensor& x) {
  Tensor no_keys, no_values;
  return forward_cached(x, no_keys, no_values);
}

Tensor CausalSelfAttentionImpl::forward_cached(const Tensor& x, Tensor& keys, Tensor& values) {
  if (x.dim() != 3 || x.size(2) != channels)
    throw ShapeError(type_name(), concat("expected x (B, T, ", channels, "), got ", x.shape()));
  const Tensor qkv = (*c_attn)(x);  // (B, T, 3 Cl); x's T is the whole sequence under SP too
  return (*c_proj)(attention_core([this](const Tensor& t, Tensor& k, Tensor& v) { return core(t, k, v); }, qkv,
                                  keys, values));  // (B, T, Cl) -> (B, T, C)
}

Tensor CausalSelfAttentionImpl::core(const Tensor& qkv, Tensor& keys, Tensor& values) const {
  // This rank's nh = NH / tp heads of Cl = nh hs channels (all of them on one process).
  const std::int64_t head = channels / num_heads, nh = num_heads / tp->size(), Cl = nh * head;
  const std::int64_t B = qkv.size(0), T = qkv.size(1);
  // q, k, v (B, T, Cl) -> (B, nh, T, hs); split's backward writes qkv's gradient in one cat
  const TensorList parts = split(qkv, Cl, 2);
  auto heads = [&](std::size_t i) { return parts[i].view({B, T, nh, head}).transpose(1, 2); };
  const Tensor y = cached_causal_attention(heads(0), heads(1), heads(2), keys, values);  // (B, nh, T, hs)
  return y.transpose(1, 2).reshape({B, T, Cl});  // (B, nh, T, hs) -> (B, T, Cl)
}

GPT2MLPImpl::GPT2MLPImpl(std::int64_t channels, std::shared_ptr<TensorParallelLayers> tp)
    : Cloneable("GPT2MLP"), channels(channels), tp(or_single_process(std::move(tp))) {
  if (channels < 1) throw ShapeError(type_name(), concat("channels must be >= 1, got ", channels));
  reset();
}

void GPT2MLPImpl::reset() {
  c_fc = register_module("c_fc", tp->column_linear(channels, 4 * channels, /*bias=*/true));
  c_proj = register_module("c_proj", tp->row_linear(4 * channels, channels, /*bias=*/true));
}

// One node for c_fc, GELU and c_proj (dense_gelu_dense: the composed ops' bits, with GELU and
// its gradient in the products' epilogues on CUDA); under tensor parallelism the layers'
// own forwards, which gather and reduce across the ranks, and with LoRA adapters those that
// add their updates.
Tensor GPT2MLPImpl::forward(const Tensor& x) {
  if (tp->size() > 1 || lora::adapted(*c_fc) || lora::adapted(*c_proj)) return (*c_proj)(gelu((*c_fc)(x), GeluApproximation::Tanh));
  return dense_gelu_dense(x, c_fc->weight, c_fc->bias, c_proj->weight, c_proj->bias, GeluApproximation::Tanh);
}

GPT2BlockImpl::GPT2BlockImpl(std::int64_t channels, std::int64_t num_heads, std::shared_ptr<TensorParallelLayers> tp)
    : Cloneable("GPT2Block"), channels(channels), num_heads(num_heads), tp(or_single_process(std::move(tp))) {
  reset();
}

void GPT2BlockImpl::reset() {
  ln_1 = register_module("ln_1", std::make_shared<LayerNormImpl>(channels));
  attn = register_module("attn", std::make_shared<CausalSelfAttentionImpl>(channels, num_heads, tp));
  ln_2 = register_module("ln_2", std::make_shared<LayerNormImpl>(channels));
  mlp = register_module("mlp", std::make_shared<GPT2MLPImpl>(channels, tp));
  tp->sequence_parallel_layer(*ln_1);
  tp->sequence_parallel_layer(*ln_2);
}

Tensor GPT2BlockImpl::forward(const Tensor& x) {
  Tensor no_keys, no_values;
  return forward_cached(x, no_keys, no_values);
}

// Each norm also passes its input through for the residual sum, so the residual's gradient
// and the norm's input gradient are added by the norm's backward (layer_norm_with_residual).
Tensor GPT2BlockImpl::forward_cached(const Tensor& x, Tensor& keys, Tensor& values) {
  const auto [h1, x_res] = ln_1->forward_with_residual(x, product_input_dtype(x, *tp));
  const Tensor x1 = add(x_res, attn->forward_cached(h1, keys, values));
  const auto [h2, x1_res] = ln_2->forward_with_residual(x1, product_input_dtype(x1, *tp));
  return add(x1_res, (*mlp)(h2));
}

namespace {

CausalLMSizes causal_lm_sizes(const GPT2Config& config) {
  config.validate();
  return {.max_seq_len = config.max_seq_len, .vocab_size = config.vocab_size,
          .logit_columns = config.padded_vocab_size, .num_layers = config.num_layers};
}

}  // namespace

GPT2Impl::GPT2Impl(GPT2Config config, std::shared_ptr<TensorParallelLayers> tp, std::optional<ModelPart> part)
    : Cloneable("GPT2"), CausalLM("GPT2", causal_lm_sizes(config), std::move(part), std::move(tp)), config(config) {
  const int ranks = this->tp->size();
  if (config.num_heads % ranks != 0 || config.padded_vocab_size % ranks != 0)
    throw Error("GPT2", concat("num_heads ", config.num_heads, " and padded_vocab_size ", config.padded_vocab_size,
                               " must be multiples of the tensor-parallel size ", ranks));
  reset();
}

void GPT2Impl::reset() {
  const std::int64_t C = config.channels;
  // The layers draw their own initialisation, which reset_parameters overwrites: rewound, so
  // that its draws start where the generator stood here, for the whole model and a part alike.
  Generator& generator = default_generator();
  const PhiloxState start = generator.state();
  wte = part.embed || part.head ? register_module("wte", tp->vocab_embedding(config.padded_vocab_size, C)) : nullptr;
  wpe = part.embed ? register_module("wpe", std::make_shared<EmbeddingImpl>(config.max_seq_len, C)) : nullptr;
  h.clear();
  std::vector<ModulePtr> blocks;
  for (std::size_t i = 0; i < part.blocks.size(); ++i) {
    h.push_back(std::make_shared<GPT2BlockImpl>(C, config.num_heads, tp));
    blocks.push_back(h.back());
  }
  register_module("h", block_container(blocks, part, config.num_layers));
  ln_f = part.head ? register_module("ln_f", std::make_shared<LayerNormImpl>(C)) : nullptr;
  if (ln_f) tp->sequence_parallel_layer(*ln_f);
  generator.set_state(start);
  reset_parameters();
}

void GPT2Impl::reset_parameters(Generator* generator) {
  NoGradGuard no_grad;
  const std::int64_t C = config.channels, ranks = tp->size();
  const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(config.num_layers));
  // A piece the part lacks skips the values the whole model would draw for it.
  if (wte) {
    init::normal_(wte->weight, 0.0, 0.02, generator);
    // The padded rows (>= V) are zero: those of this rank's block [tp rank * rows, ..).
    const std::int64_t rows = wte->weight.size(0), first = tp->rank() * rows;
    wte->weight.slice(0, std::clamp(config.vocab_size - first, std::int64_t{0}, rows)).zero_();
  } else {
    init::skip_draws(config.padded_vocab_size / ranks * C, generator);
  }
  if (wpe)
    init::normal_(wpe->weight, 0.0, 0.02, generator);
  else
    init::skip_draws(config.max_seq_len * C, generator);
  auto init_linear = [&](LinearImpl& linear, double std) {
    init::normal_(linear.weight, 0.0, std, generator);
    init::zeros_(linear.bias);
  };
  auto init_norm = [](LayerNormImpl& norm) {
    init::ones_(norm.weight);
    init::zeros_(norm.bias);
  };
  std::size_t next = 0;  // h[next] is the next block of the part
  for (std::int64_t l = 0; l < config.num_layers; ++l) {
    if (!part.has_block(l)) {  // c_attn, attn.c_proj, c_fc and mlp.c_proj: (3 + 1 + 4 + 4) C^2 / tp
      init::skip_draws(12 * C * C / ranks, generator);
      continue;
    }
    const GPT2BlockImpl& block = *h[next++];
    init_norm(*block.ln_1);
    init_linear(*block.attn->c_attn, 0.02);
    init_linear(*block.attn->c_proj, residual_std);
    init_norm(*block.ln_2);
    init_linear(*block.mlp->c_fc, 0.02);
    init_linear(*block.mlp->c_proj, residual_std);
  }
  if (ln_f) init_norm(*ln_f);
}

Tensor GPT2Impl::run_block(std::size_t l, const Tensor& x, KVCache* cache) {
  return cache ? h[l]->forward_cached(x, cache->keys[l], cache->values[l]) : (*h[l])(x);
}

Tensor GPT2Impl::embed_at(const Tensor& idx, std::int64_t past) {
  const Tensor positions = arange(past, past + idx.size(1), 1, TensorOptions{.dtype = kInt64, .device = idx.device()});
  return tp->scatter_sequence(add((*wte)(idx), (*wpe)(positions)));  // (B, T, C) + (T, C) -> (B, t, C)
}

Tensor GPT2Impl::head(const Tensor& x) {
  part.require(type_name(), "head", config.num_layers);
  const std::optional<DataType> dtype = product_input_dtype(x, *tp);
  return tp->vocab_logits(dtype ? ln_f->forward(x, *dtype) : ln_f->forward(x), wte->weight);  // (B, T, Vp / tp)
}

namespace {

// The per-layer parameters in llm.c's order (after wte and wpe).
constexpr std::pair<std::string_view, Tensor (*)(const GPT2BlockImpl&)> kLayerTensors[] = {
    {"ln1w", [](const GPT2BlockImpl& b) { return b.ln_1->weight; }},
    {"ln1b", [](const GPT2BlockImpl& b) { return b.ln_1->bias; }},
    {"qkvw", [](const GPT2BlockImpl& b) { return b.attn->c_attn->weight; }},
    {"qkvb", [](const GPT2BlockImpl& b) { return b.attn->c_attn->bias; }},
    {"attprojw", [](const GPT2BlockImpl& b) { return b.attn->c_proj->weight; }},
    {"attprojb", [](const GPT2BlockImpl& b) { return b.attn->c_proj->bias; }},
    {"ln2w", [](const GPT2BlockImpl& b) { return b.ln_2->weight; }},
    {"ln2b", [](const GPT2BlockImpl& b) { return b.ln_2->bias; }},
    {"fcw", [](const GPT2BlockImpl& b) { return b.mlp->c_fc->weight; }},
    {"fcb", [](const GPT2BlockImpl& b) { return b.mlp->c_fc->bias; }},
    {"fcprojw", [](const GPT2BlockImpl& b) { return b.mlp->c_proj->weight; }},
    {"fcprojb", [](const GPT2BlockImpl& b) { return b.mlp->c_proj->bias; }},
};

}  // namespace

// The parameters in llm.c's order: wte, wpe, the per-layer tensors, lnfw, lnfb.
LlmcLayout GPT2Impl::llmc_layout() const {
  LlmcLayout layout;
  layout.whole("wte", wte->weight);
  layout.whole("wpe", wpe->weight);
  for (const auto& [name, pick] : kLayerTensors) layout.layers(std::string(name), h, pick);
  layout.whole("lnfw", ln_f->weight);
  layout.whole("lnfb", ln_f->bias);
  return layout;
}

std::string GPT2Impl::extra_repr() const {
  return concat("max_seq_len=", config.max_seq_len, ", vocab_size=", config.vocab_size,
                ", padded_vocab_size=", config.padded_vocab_size, ", num_layers=", config.num_layers,
                ", num_heads=", config.num_heads, ", channels=", config.channels,
                tp->size() > 1 ? concat(", tensor_parallel=", tp->size()) : std::string(),
                part_repr());
}

}  // namespace infini::nn
