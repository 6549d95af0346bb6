#include "sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace samples {

using namespace infini;

namespace {

// One draw from softmax(logits / temperature) over the top_k largest logits.
std::int64_t sample_token(const float* logits, std::int64_t vocab_size, std::int64_t top_k, double temperature,
                          Generator& generator) {
  std::vector<std::int64_t> ids(static_cast<std::size_t>(vocab_size));
  std::iota(ids.begin(), ids.end(), std::int64_t{0});
  const std::int64_t k = top_k > 0 ? std::min(top_k, vocab_size) : vocab_size;
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                    [&](std::int64_t a, std::int64_t b) { return logits[a] > logits[b]; });
  std::vector<double> weights(static_cast<std::size_t>(k));
  double total = 0;
  for (std::int64_t i = 0; i < k; ++i) {
    weights[static_cast<std::size_t>(i)] = std::exp((logits[ids[static_cast<std::size_t>(i)]] - logits[ids[0]]) / temperature);
    total += weights[static_cast<std::size_t>(i)];
  }
  double u = rand({}, {.dtype = kFloat64}, &generator).item<double>() * total;
  for (std::int64_t i = 0; i < k; ++i) {
    u -= weights[static_cast<std::size_t>(i)];
    if (u < 0) return ids[static_cast<std::size_t>(i)];
  }
  return ids[static_cast<std::size_t>(k - 1)];
}

}  // namespace

void generate(std::vector<std::int64_t>& tokens, std::int64_t count, const CachedLogitsFn& step_fn,
              std::int64_t vocab_size, std::int64_t max_seq_len, std::int64_t top_k, double temperature,
              Generator& generator, bool use_cache) {
  if (tokens.empty()) throw Error("generate", "needs at least one token to start from");
  if (!(temperature > 0)) throw Error("generate", concat("temperature must be > 0, got ", temperature));
  NoGradGuard no_grad;
  nn::KVCache cache;
  std::int64_t cached_end = 0;  // the cache holds the tokens just before tokens[cached_end]
  for (std::int64_t n = 0; n < count; ++n) {
    const auto size = static_cast<std::int64_t>(tokens.size());
    std::int64_t first = cached_end;                    // feed tokens[first ..]
    if (!use_cache || cache.length() + size - first > max_seq_len) {  // the whole window, or slide it
      cache = {};
      first = size - std::min(size, max_seq_len);
    }
    const std::int64_t T = size - first;
    const std::vector<std::int64_t> fresh(tokens.begin() + first, tokens.end());
    const Tensor logits = step_fn(from_vector(fresh).view({1, T}), cache);  // (1, T, Vp)
    cached_end = size;
    const Tensor last = logits.select(1, T - 1).select(0, 0).to(Device::cpu(), kFloat32).contiguous();  // (Vp)
    tokens.push_back(sample_token(last.data_ptr<float>(), vocab_size, top_k, temperature, generator));
  }
}

}  // namespace samples
