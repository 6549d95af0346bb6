#include "token_batches.h"

#include <utility>

namespace samples {

using namespace infini;

TokenBatches::TokenBatches(std::shared_ptr<const llmc::TokenFile> tokens, std::int64_t T, bool shuffle,
                           std::uint64_t seed, std::int64_t vocab_size)
    : tokens_(std::move(tokens)), T_(T), vocab_size_(vocab_size), shuffle_(shuffle), seed_(seed) {
  if (!tokens_) throw Error("TokenBatches", "no token file");
  if (T < 1) throw Error("TokenBatches", concat("sequence length must be >= 1, got ", T));
  if (tokens_->size() < T + 1)
    throw Error("TokenBatches", concat("the token file holds ", tokens_->size(), " tokens, fewer than sequence length + 1 = ", T + 1));
  per_epoch_ = tokens_->size() / T;
}

std::int64_t TokenBatches::start_of(std::int64_t g) {
  if (!shuffle_) return static_cast<std::int64_t>((static_cast<unsigned __int128>(g) * static_cast<unsigned __int128>(T_)) %
                                                  static_cast<unsigned __int128>(tokens_->size()));
  const std::int64_t epoch = g / per_epoch_;
  if (epoch != cached_epoch_) {
    permutation_ = data::random_permutation(per_epoch_, seed_, epoch);
    cached_epoch_ = epoch;
  }
  return permutation_[static_cast<std::size_t>(g % per_epoch_)] * T_;
}

data::Example TokenBatches::sequences(std::int64_t first, std::int64_t count) {
  Tensor inputs = empty({count, T_}, {.dtype = kInt64}), targets = empty({count, T_}, {.dtype = kInt64});
  std::vector<std::int64_t> window(static_cast<std::size_t>(T_ + 1));
  auto* in = inputs.data_ptr<std::int64_t>();
  auto* out = targets.data_ptr<std::int64_t>();
  for (std::int64_t i = 0; i < count; ++i) {
    const std::int64_t start = start_of(first + i);
    tokens_->read_window(start, T_ + 1, window.data());
    for (std::int64_t t = 0; t <= T_ && vocab_size_ > 0; ++t)
      if (window[static_cast<std::size_t>(t)] >= vocab_size_)
        throw Error("TokenBatches", concat("'", tokens_->path().string(), "': token ", (start + t) % tokens_->size(),
                                           " (from 0) is ", window[static_cast<std::size_t>(t)],
                                           ", not an id of the model's vocabulary of ", vocab_size_));
    for (std::int64_t t = 0; t < T_; ++t) {
      in[i * T_ + t] = window[static_cast<std::size_t>(t)];
      out[i * T_ + t] = window[static_cast<std::size_t>(t + 1)];
    }
  }
  return {inputs, targets};
}

}  // namespace samples
