// Sequences of an llm.c token file in the order of tests/data's reference run (see
// docs/user-guide.md, "Training GPT-2"): sequence g has inputs tokens[s .. s+T-1] and
// targets tokens[s+1 .. s+T], reading on from token 0 at the end of the file, where
//   s = g * T (mod the token count)                    without shuffling,
//   s = perm_e[g mod E] * T, e = g / E                 with shuffling,
// E = token count / T sequences per epoch and perm_e = data::random_permutation(E, seed, e).
// A step of S sequences uses g = step * S .. step * S + S - 1, so every split of a step into
// micro-batches (and ranks) sees the same sequences.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

import infini.nn;

namespace samples {

class TokenBatches {
 public:
  // Error unless T >= 1 and the file holds at least T + 1 tokens. vocab_size: the model's
  // (0: unchecked).
  TokenBatches(std::shared_ptr<const infini::llmc::TokenFile> tokens, std::int64_t T, bool shuffle, std::uint64_t seed,
               std::int64_t vocab_size = 0);

  // Inputs and targets (count, T) int64 of sequences first .. first + count - 1. Error naming
  // the file, the token's position in it and its value for a token id >= vocab_size.
  infini::data::Example sequences(std::int64_t first, std::int64_t count);
  std::int64_t sequences_per_epoch() const { return per_epoch_; }

 private:
  std::int64_t start_of(std::int64_t g);  // first token of sequence g

  std::shared_ptr<const infini::llmc::TokenFile> tokens_;
  std::int64_t T_, per_epoch_, vocab_size_;
  bool shuffle_;
  std::uint64_t seed_;
  std::int64_t cached_epoch_ = -1;
  std::vector<std::int64_t> permutation_;  // of cached_epoch_
};

}  // namespace samples
