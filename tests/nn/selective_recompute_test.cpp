// nn::SelectiveRecompute (--activation_checkpointing selective): GPT-2 and LLaMA-3 give the
// same loss and the same gradient bits with their attention recomputed in backward, keep
// less memory between forward and backward (each block's attention output, and LLaMA's
// rotated queries and keys, are no longer held), and generation through a KV cache under the
// guard still fills the cache.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

import infini.nn;

namespace infini::nn::test::selective_recompute_test {
namespace {

struct Pass {
  double loss = 0;
  std::int64_t held_bytes = 0;  // allocated between forward and backward, beyond the inputs
  std::vector<std::pair<std::string, Tensor>> grads;
};

// One forward and backward of `model` on (idx, targets), with the attention recomputed when
// `selective`.
template <class Holder>
Pass run(Holder& model, const Tensor& idx, const Tensor& targets, bool selective) {
  model->zero_grad();
  const SelectiveRecompute recompute(selective);
  Pass pass;
  const std::int64_t before = memory_stats(Device::cpu()).allocated_bytes;
  {
    const Tensor loss = model->loss(model(idx), targets);
    pass.held_bytes = memory_stats(Device::cpu()).allocated_bytes - before;
    pass.loss = loss.template item<double>();
    loss.backward();
  }
  for (const auto& [name, p] : model->named_parameters()) pass.grads.emplace_back(name, p.grad().clone());
  return pass;
}

void expect_same_bits(const Pass& plain, const Pass& selective) {
  EXPECT_EQ(plain.loss, selective.loss);
  ASSERT_EQ(plain.grads.size(), selective.grads.size());
  for (std::size_t i = 0; i < plain.grads.size(); ++i)
    EXPECT_EQ(amax(abs(sub(plain.grads[i].second, selective.grads[i].second))).item<double>(), 0.0)
        << plain.grads[i].first;
}

Tensor tokens(std::int64_t B, std::int64_t T, std::int64_t V, std::uint64_t seed) {
  Generator generator(seed);
  return randint(0, V, {B, T}, TensorOptions{.dtype = kInt64}, &generator);
}

TEST(SelectiveRecompute, GPT2SameBitsLessMemory) {
  manual_seed(3);
  const std::int64_t B = 4, T = 32, C = 64, L = 3;
  GPT2 model(GPT2Config{.max_seq_len = 64, .vocab_size = 100, .padded_vocab_size = 128, .num_layers = L,
                        .num_heads = 4, .channels = C});
  const Tensor idx = tokens(B, T, 100, 1), targets = tokens(B, T, 100, 2);
  const Pass plain = run(model, idx, targets, false);
  const Pass selective = run(model, idx, targets, true);
  expect_same_bits(plain, selective);
  // Each block's attention output (B, NH, T, hs) = B T C floats is not held any more.
  EXPECT_LE(selective.held_bytes, plain.held_bytes - L * B * T * C * 4)
      << "plain " << plain.held_bytes << " bytes, selective " << selective.held_bytes;
}

TEST(SelectiveRecompute, LLaMA3SameBitsLessMemory) {
  manual_seed(4);
  const std::int64_t B = 4, T = 32, C = 64, L = 3, NH = 4, KV = 2;
  LLaMA3 model(LLaMA3Config{.max_seq_len = 64, .vocab_size = 100, .num_layers = L, .num_heads = NH,
                            .num_kv_heads = KV, .channels = C, .ffn_dim_multiplier = 0, .multiple_of = 32});
  const Tensor idx = tokens(B, T, 100, 5), targets = tokens(B, T, 100, 6);
  const Pass plain = run(model, idx, targets, false);
  const Pass selective = run(model, idx, targets, true);
  expect_same_bits(plain, selective);
  // Per block: the attention output (B T C floats) and the rotated q and k (B T (NH + KV) hd).
  const std::int64_t hd = C / NH;
  EXPECT_LE(selective.held_bytes, plain.held_bytes - L * B * T * (C + (NH + KV) * hd) * 4)
      << "plain " << plain.held_bytes << " bytes, selective " << selective.held_bytes;
}

TEST(SelectiveRecompute, GenerationStillFillsTheCache) {
  manual_seed(5);
  GPT2 model(GPT2Config{.max_seq_len = 32, .vocab_size = 50, .padded_vocab_size = 64, .num_layers = 2,
                        .num_heads = 2, .channels = 16});
  const Tensor idx = tokens(2, 6, 50, 7);
  const Tensor whole = model(idx);
  const SelectiveRecompute recompute;
  KVCache cache;
  const Tensor first = model->forward_cached(idx.slice(1, 0, 5), cache);
  EXPECT_EQ(cache.length(), 5);
  const Tensor last = model->forward_cached(idx.slice(1, 5, 6), cache);
  EXPECT_EQ(cache.length(), 6);
  EXPECT_LT(amax(abs(sub(last, whole.slice(1, 5, 6)))).item<double>(), 1e-5);
  EXPECT_LT(amax(abs(sub(first, whole.slice(1, 0, 5)))).item<double>(), 1e-5);
  EXPECT_TRUE(SelectiveRecompute::enabled());  // the cached passes paused it, then restored it
}

}  // namespace
}  // namespace infini::nn::test::selective_recompute_test
