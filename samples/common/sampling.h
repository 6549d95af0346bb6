// Text generation for the samples: top-k sampling with temperature, seeded.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

import infini.nn;

namespace samples {

// Appends `count` tokens to `tokens`, each drawn from the last position's logits of
// logits_fn(window) (window: the last max_seq_len tokens, (1, T) int64; logits (1, T, Vp)),
// restricted to the first vocab_size entries and the top_k largest (0: all), softmax at
// `temperature` (> 0). Draws from `generator`.
void generate(std::vector<std::int64_t>& tokens, std::int64_t count,
              const std::function<infini::Tensor(const infini::Tensor&)>& logits_fn, std::int64_t vocab_size,
              std::int64_t max_seq_len, std::int64_t top_k, double temperature, infini::Generator& generator);

}  // namespace samples
