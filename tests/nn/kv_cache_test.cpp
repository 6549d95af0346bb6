// nn::KVCache with nn::GPT2 and nn::LLaMA3 (grouped-query: 2 KV heads for 4 query heads), in
// float64 with random weights: forward_cached fed a sequence in chunks 3 + 1 + 1 + 2 gives
// forward()'s logits position by position and, with grad enabled, the same gradients; greedy
// generation through the cache picks the same tokens as recomputing the whole sequence; the
// cache holds (B, Hkv, t, hd) per layer, layer 0's keys / values equal to its projections
// (LLaMA-3's keys rotated by their absolute positions, checked by formula); past + T > maxT
// and a cache of another model are rejected.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "layer_test_util.h"

import infini.nn;

namespace infini::nn::test::kv_cache_test {
namespace {

// C 16, L 2, NH 4 (hd 4), V 37 (padded to 40), maxT 12.
GPT2Config gpt2_config(std::int64_t layers = 2) {
  return {.max_seq_len = 12, .vocab_size = 37, .padded_vocab_size = 40, .num_layers = layers, .num_heads = 4,
          .channels = 16};
}

// C 16, L 2, NH 4, KV 2 (hd 4), V 37, maxT 12; theta 10000 so both RoPE frequencies (1 and
// 0.01) turn visibly over a few positions (no 3.1 scaling at these wavelengths).
LLaMA3Config llama3_config(std::int64_t layers = 2) {
  return {.max_seq_len = 12, .vocab_size = 37, .num_layers = layers, .num_heads = 4, .num_kv_heads = 2,
          .channels = 16, .ffn_dim_multiplier = 1.3f, .multiple_of = 8, .norm_eps = 1e-5f, .rope_theta = 10000.0f,
          .use_scaled_rope = true};
}

// A float64 model with every parameter ~ N(0, 0.3), norm weights 1 + N(0, 0.3): far from the
// init, so every part of the computation shows in the logits.
template <class Model, class Config>
Model random_model(const Config& config, std::uint64_t seed) {
  Model model(config);
  model->to(kFloat64);
  for (const auto& [name, param] : model->named_parameters()) {
    std::vector<double> v = sample(param.shape(), seed++);
    const bool norm_weight = name.find("ln") != std::string::npos && name.ends_with("weight");
    for (double& x : v) x = 0.3 * x + (norm_weight ? 1.0 : 0.0);
    assign(param, v);
  }
  return model;
}

// (B, T) int64 tokens (b * 11 + t * mul + 3) % V: different rows, no repeating pattern.
Tensor token_ids(std::int64_t B, std::int64_t T, std::int64_t V, std::int64_t mul) {
  std::vector<std::int64_t> ids;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < T; ++t) ids.push_back((b * 11 + t * mul + 3) % V);
  return from_vector(ids, {B, T}, {.dtype = kInt64});
}

double max_abs_diff(const Tensor& a, const Tensor& b) { return max_abs(values(sub(a, b))); }

// Feeds idx (B, 7) in chunks 3 + 1 + 1 + 2: each chunk's logits equal forward()'s at its
// positions, the cache grows to (B, kv_heads, t, hd) per layer, and the weighted sum of all
// chunks' logits has forward()'s gradients (the graph runs through the cached keys / values).
template <class Model>
void expect_chunks_match_forward(Model& model, std::int64_t kv_heads, std::int64_t head_dim) {
  const std::int64_t B = 2, T = 7, L = static_cast<std::int64_t>(model->h.size());
  const Tensor idx = token_ids(B, T, 37, 5);
  const Tensor full = model(idx);  // (B, T, Vp)
  const std::int64_t Vp = full.size(2);
  ASSERT_GT(max_abs(values(full)), 1.0);  // not a trivial output
  const Tensor weights = random_input(full.shape(), 99, /*requires_grad=*/false);

  model->zero_grad();
  sum(mul(full, weights)).backward();
  std::vector<Tensor> expected_grads;
  for (const Tensor& p : model->parameters()) expected_grads.push_back(p.grad().clone());
  model->zero_grad();

  KVCache cache;
  EXPECT_EQ(cache.length(), 0);
  std::int64_t past = 0;
  Tensor loss;
  for (const std::int64_t t : {3, 1, 1, 2}) {
    const Tensor logits = model->forward_cached(idx.slice(1, past, past + t), cache);
    ASSERT_EQ(logits.shape(), (Shape{B, t, Vp}));
    EXPECT_LT(max_abs_diff(logits, full.slice(1, past, past + t)), 1e-12) << "positions " << past << " + " << t;
    const Tensor term = sum(mul(logits, weights.slice(1, past, past + t)));
    loss = loss.defined() ? add(loss, term) : term;
    past += t;
    EXPECT_EQ(cache.length(), past);
    ASSERT_EQ(static_cast<std::int64_t>(cache.keys.size()), L);
    ASSERT_EQ(static_cast<std::int64_t>(cache.values.size()), L);
    for (std::int64_t l = 0; l < L; ++l) {
      EXPECT_EQ(cache.keys[l].shape(), (Shape{B, kv_heads, past, head_dim})) << "layer " << l;
      EXPECT_EQ(cache.values[l].shape(), (Shape{B, kv_heads, past, head_dim})) << "layer " << l;
    }
  }
  loss.backward();
  const std::vector<Tensor> params = model->parameters();
  ASSERT_EQ(params.size(), expected_grads.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    ASSERT_TRUE(params[i].grad().defined()) << "parameter " << i;
    EXPECT_GT(max_abs(values(expected_grads[i])), 0.0) << "parameter " << i;
    EXPECT_LT(max_abs_diff(params[i].grad(), expected_grads[i]), 1e-10) << "parameter " << i;
  }
}

// Greedy decoding of `count` tokens after `prompt`, recomputing the whole sequence each step
// (cached = false) or feeding the prompt once and then one token at a time through a cache.
// Returns the tokens; `step_logits` gets each step's last-position logits (Vp).
template <class Model>
std::vector<std::int64_t> greedy(Model& model, std::vector<std::int64_t> tokens, std::int64_t count, bool cached,
                                 std::vector<Tensor>& step_logits) {
  NoGradGuard no_grad;
  KVCache cache;
  std::size_t fed = 0;
  for (std::int64_t n = 0; n < count; ++n) {
    const std::size_t first = cached ? fed : 0;
    const std::vector<std::int64_t> input(tokens.begin() + static_cast<std::ptrdiff_t>(first), tokens.end());
    const auto T = static_cast<std::int64_t>(input.size());
    const Tensor idx = from_vector(input, {1, T}, {.dtype = kInt64});
    const Tensor logits = cached ? model->forward_cached(idx, cache) : model(idx);
    if (cached) EXPECT_EQ(cache.length(), static_cast<std::int64_t>(tokens.size()));
    fed = tokens.size();
    const Tensor last = logits.select(0, 0).select(0, T - 1);  // (Vp)
    step_logits.push_back(last);
    tokens.push_back(argmax(last.slice(0, 0, 37)).item<std::int64_t>());
  }
  return tokens;
}

// 10 tokens after a 2-token prompt fill maxT = 12 exactly; cached and uncached agree.
template <class Model>
void expect_cached_generation_matches(Model& model) {
  std::vector<Tensor> plain_logits, cached_logits;
  const std::vector<std::int64_t> plain = greedy(model, {5, 17}, 10, false, plain_logits);
  const std::vector<std::int64_t> cached = greedy(model, {5, 17}, 10, true, cached_logits);
  EXPECT_EQ(cached, plain);
  ASSERT_EQ(plain.size(), 12u);
  EXPECT_GE(std::set<std::int64_t>(plain.begin() + 2, plain.end()).size(), 3u);  // not one token repeated
  for (std::size_t n = 0; n < plain_logits.size(); ++n)
    EXPECT_LT(max_abs_diff(cached_logits[n], plain_logits[n]), 1e-12) << "step " << n;
}

// ShapeError once past + T > maxT (12), leaving the cache as it was; a cache of a model with
// another number of layers is an Error.
template <class Model, class OtherModel>
void expect_rejections(Model& model, OtherModel& three_layers, const std::string& op) {
  NoGradGuard no_grad;
  KVCache cache;
  model->forward_cached(token_ids(1, 10, 37, 3), cache);
  expect_error<ShapeError>([&] { model->forward_cached(token_ids(1, 3, 37, 2), cache); }, op,
                           "sequence length 13 (10 cached + 3 new) exceeds max_seq_len 12");
  EXPECT_EQ(cache.length(), 10);
  EXPECT_EQ(model->forward_cached(token_ids(1, 2, 37, 2), cache).size(1), 2);
  EXPECT_EQ(cache.length(), 12);
  expect_error<ShapeError>([&] { model->forward_cached(token_ids(1, 1, 37, 2), cache); }, op,
                           "sequence length 13 (12 cached + 1 new) exceeds max_seq_len 12");
  KVCache fresh;
  expect_error<ShapeError>([&] { model->forward_cached(token_ids(1, 13, 37, 2), fresh); }, op,
                           "sequence length 13 exceeds max_seq_len 12");
  EXPECT_EQ(fresh.length(), 0);

  KVCache foreign;
  three_layers->forward_cached(token_ids(1, 2, 37, 2), foreign);
  expect_error<Error>([&] { model->forward_cached(token_ids(1, 1, 37, 2), foreign); }, op,
                      "the cache holds keys / values of 3 / 3 layers, the model has 2");
}

TEST(KVCache, GPT2ChunkedForwardMatchesForwardAndItsGradients) {
  GPT2 model = random_model<GPT2>(gpt2_config(), 1);
  expect_chunks_match_forward(model, /*kv_heads=*/4, /*head_dim=*/4);
}

TEST(KVCache, LLaMA3ChunkedForwardMatchesForwardAndItsGradients) {
  LLaMA3 model = random_model<LLaMA3>(llama3_config(), 1);
  expect_chunks_match_forward(model, /*kv_heads=*/2, /*head_dim=*/4);
}

TEST(KVCache, GPT2CachedGreedyGenerationMatchesRecomputing) {
  GPT2 model = random_model<GPT2>(gpt2_config(), 21);
  expect_cached_generation_matches(model);
}

TEST(KVCache, LLaMA3CachedGreedyGenerationMatchesRecomputing) {
  LLaMA3 model = random_model<LLaMA3>(llama3_config(), 21);
  expect_cached_generation_matches(model);
}

TEST(KVCache, GPT2CacheHoldsTheFirstLayersProjections) {
  NoGradGuard no_grad;
  GPT2 model = random_model<GPT2>(gpt2_config(), 41);
  const Tensor idx = token_ids(2, 5, 37, 7);
  KVCache cache;
  model->forward_cached(idx.slice(1, 0, 2), cache);
  model->forward_cached(idx.slice(1, 2, 5), cache);
  // Layer 0's input: token plus position embeddings of positions 0 .. 4; its c_attn rows
  // C .. 2C are the keys, 2C .. 3C the values, 4 channels per head.
  const GPT2BlockImpl& block = *model->h[0];
  const Tensor x = add(index_select(model->wte->weight, 0, idx.reshape({-1})).view({2, 5, 16}),
                       model->wpe->weight.slice(0, 0, 5));
  const Tensor qkv = (*block.attn->c_attn)((*block.ln_1)(x));  // (2, 5, 48)
  auto heads = [&](std::int64_t i) { return qkv.slice(2, 16 * i, 16 * (i + 1)).view({2, 5, 4, 4}).transpose(1, 2); };
  EXPECT_LT(max_abs_diff(cache.keys[0], heads(1)), 1e-12);
  EXPECT_LT(max_abs_diff(cache.values[0], heads(2)), 1e-12);
  EXPECT_GT(max_abs(values(heads(1))), 0.5);
}

TEST(KVCache, LLaMA3CacheHoldsRotatedKeysOfKVHeads) {
  NoGradGuard no_grad;
  LLaMA3 model = random_model<LLaMA3>(llama3_config(), 41);
  const Tensor idx = token_ids(1, 6, 37, 7);
  KVCache cache;
  model->forward_cached(idx.slice(1, 0, 4), cache);
  model->forward_cached(idx.slice(1, 4, 6), cache);
  // Layer 0's c_attn (rows: 4 query heads, 2 key heads, 2 value heads of 4) on its RMSNorm.
  const LLaMA3BlockImpl& block = *model->h[0];
  const Tensor qkv = (*block.attn->c_attn)((*block.ln_1)((*model->wte)(idx)));  // (1, 6, 32)
  const std::vector<double> raw = values(qkv), keys = values(cache.keys[0]), vals = values(cache.values[0]);
  ASSERT_EQ(keys.size(), 2u * 6 * 4);
  const double freq[2] = {1.0, 0.01};  // 10000^(-2i/4)
  for (std::size_t g = 0; g < 2; ++g)
    for (std::size_t t = 0; t < 6; ++t)
      for (std::size_t i = 0; i < 2; ++i) {
        const std::size_t at = (g * 6 + t) * 4 + 2 * i;                // cache (1, 2, 6, 4)
        const std::size_t k = t * 32 + (4 + g) * 4 + 2 * i, v = k + 8;  // qkv (1, 6, 32)
        const double a = static_cast<double>(t) * freq[i];
        EXPECT_NEAR(keys[at], raw[k] * std::cos(a) - raw[k + 1] * std::sin(a), 1e-12) << g << " " << t << " " << i;
        EXPECT_NEAR(keys[at + 1], raw[k] * std::sin(a) + raw[k + 1] * std::cos(a), 1e-12) << g << " " << t << " " << i;
        EXPECT_EQ(vals[at], raw[v]);
        EXPECT_EQ(vals[at + 1], raw[v + 1]);
      }
}

TEST(KVCache, GPT2RejectsTooLongSequencesAndForeignCaches) {
  GPT2 model = random_model<GPT2>(gpt2_config(), 61);
  GPT2 three_layers = random_model<GPT2>(gpt2_config(3), 61);
  expect_rejections(model, three_layers, "GPT2");
}

TEST(KVCache, LLaMA3RejectsTooLongSequencesAndForeignCaches) {
  LLaMA3 model = random_model<LLaMA3>(llama3_config(), 61);
  LLaMA3 three_layers = random_model<LLaMA3>(llama3_config(3), 61);
  expect_rejections(model, three_layers, "LLaMA3");
}

TEST(KVCache, RopeTableRowsFromAnOffset) {
  const LLaMA3RopeTable table(4, 12, 10000.0);
  const auto [cos, sin] = table.get(12, kFloat64, Device::cpu());
  const auto [cos_at, sin_at] = table.get(5, 3, kFloat64, Device::cpu());
  ASSERT_EQ(cos_at.shape(), (Shape{3, 2}));
  EXPECT_EQ(values(cos_at), values(cos.slice(0, 5, 8)));
  EXPECT_EQ(values(sin_at), values(sin.slice(0, 5, 8)));
  EXPECT_NEAR(values(cos_at)[0], std::cos(5.0), 1e-15);  // position 5, frequency 1
  expect_error<ShapeError>([&] { (void)table.get(10, 3, kFloat64, Device::cpu()); }, "LLaMA3RopeTable",
                           "sequence length 13 exceeds the table's 12 positions");
  expect_error<ShapeError>([&] { (void)table.get(-1, 2, kFloat64, Device::cpu()); }, "LLaMA3RopeTable",
                           "expected positions start -1 and count 2 >= 0");
}

}  // namespace
}  // namespace infini::nn::test::kv_cache_test
