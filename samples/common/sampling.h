// Text generation for the samples: top-k sampling with temperature, seeded, through the
// model's KV cache.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

import infini.nn;

namespace samples {

// One step of a model with a KV cache: new_tokens (1, t) int64 on the CPU, the positions after
// the cache.length() ones the cache holds -> logits (1, t, Vp) on any device; the cache then
// holds them too (GPT2Impl::forward_cached, LLaMA3Impl::forward_cached, after moving the
// tokens to the model's device).
using CachedLogitsFn = std::function<infini::Tensor(const infini::Tensor& new_tokens, infini::nn::KVCache& cache)>;

// Appends `count` tokens to `tokens`, each drawn from the logits of the last position of the
// window (the last max_seq_len tokens), restricted to the first vocab_size entries and the
// top_k largest (0: all), softmax at `temperature` (> 0). Draws from `generator`. The window
// goes through the cache once; then each step feeds only the newest token. Once the tokens
// outgrow max_seq_len the window slides (positions restart at 0) and every step recomputes
// it on a fresh cache, so the tokens are those of forward() on each window, as without a cache.
// Without `use_cache` every step feeds the whole window on an empty cache (a model split over
// pipeline stages, which keeps none).
void generate(std::vector<std::int64_t>& tokens, std::int64_t count, const CachedLogitsFn& step_fn,
              std::int64_t vocab_size, std::int64_t max_seq_len, std::int64_t top_k, double temperature,
              infini::Generator& generator, bool use_cache = true);

}  // namespace samples
