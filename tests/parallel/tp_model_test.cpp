// GPT-2 and LLaMA-3 split over the world group (tensor parallel, with and without sequence
// parallelism) against the same model on one process, from the same whole weights: loss,
// every gradient (gathered whole), the gradient norm, the weights' round trip and cached
// generation's logits.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm_test_util.h"

import infini.parallel;

namespace infini::parallel::test::tp_model_test {
namespace {

class TensorParallelModel : public ::testing::TestWithParam<bool> {};

// (B, T) = (2, 8) token ids below V and the next-token targets.
std::pair<Tensor, Tensor> batch(std::int64_t V) {
  std::vector<std::int64_t> ids(18);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int64_t>((i * 37 + 11) % static_cast<std::size_t>(V));
  const Tensor all = from_vector(ids, {2, 9});
  return {all.slice(1, 0, 8).contiguous(), all.slice(1, 1, 9).contiguous()};
}

// Runs forward, loss and backward on both models and compares what the issue asks for.
template <class Holder>
void expect_same_training_step(const Holder& whole, const Holder& split, TensorParallel& tp) {
  const auto [idx, targets] = batch(whole->config.vocab_size);
  const Tensor whole_loss = whole->loss(whole(idx), targets);
  whole_loss.backward();
  const Tensor loss = split->loss(split(idx), targets);
  loss.backward();
  tp.reduce_partial_grads();
  EXPECT_NEAR(loss.item<double>(), whole_loss.item<double>(), 1e-5);

  const auto expected = whole->llmc_tensors(/*gradients=*/true), actual = split->llmc_tensors(/*gradients=*/true);
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    ASSERT_EQ(actual[i].first, expected[i].first);
    expect_near(actual[i].second, expected[i].second, 2e-6, "gradient of " + expected[i].first);
  }
  const double norm = optim::total_grad_norm(whole->parameters());
  EXPECT_NEAR(tp.grad_norm(split->parameters()), norm, 1e-5 * norm);

  // Cached generation: every rank gets the whole vocabulary's logits.
  nn::KVCache whole_cache, cache;
  NoGradGuard no_grad;
  for (const auto& [start, stop] : {std::pair{0, 3}, std::pair{3, 4}}) {
    const Tensor step = idx.slice(1, start, stop).contiguous();
    expect_near(split->forward_cached(step, cache), whole->forward_cached(step, whole_cache), 1e-5,
                "cached logits of positions " + std::to_string(start) + ".." + std::to_string(stop - 1));
  }
}

TEST_P(TensorParallelModel, GPT2MatchesOneProcess) {
  auto pg = world();
  const nn::GPT2Config config{.max_seq_len = 16, .vocab_size = 100, .padded_vocab_size = 128, .num_layers = 2,
                              .num_heads = 4, .channels = 32};
  manual_seed(7);
  const nn::GPT2 whole(config);
  auto tp = std::make_shared<TensorParallel>(pg, GetParam());
  const nn::GPT2 split(config, tp);
  split->load_llmc_tensors(whole->llmc_tensors());
  EXPECT_EQ(split->wte->weight.size(0), 128 / pg->size());
  EXPECT_EQ(split->h[0]->attn->c_attn->weight.size(0), 3 * 32 / pg->size());
  // The whole weights come back exactly.
  const auto weights = whole->llmc_tensors(), gathered = split->llmc_tensors();
  for (std::size_t i = 0; i < weights.size(); ++i) expect_near(gathered[i].second, weights[i].second, 0.0, weights[i].first);
  expect_same_training_step(whole, split, *tp);

  if (pg->size() > 1) {  // 3 heads do not split over 2 or 4 ranks
    nn::GPT2Config three_heads = config;
    three_heads.num_heads = 3;
    three_heads.channels = 36;
    EXPECT_THROW(nn::GPT2(three_heads, tp), Error);
  }
}

TEST_P(TensorParallelModel, LLaMA3MatchesOneProcess) {
  auto pg = world();
  const nn::LLaMA3Config config{.max_seq_len = 16, .vocab_size = 64, .num_layers = 2, .num_heads = 8,
                                .num_kv_heads = 4, .channels = 64, .ffn_dim_multiplier = 0, .multiple_of = 32,
                                .use_scaled_rope = false};
  manual_seed(11);
  const nn::LLaMA3 whole(config);
  auto tp = std::make_shared<TensorParallel>(pg, GetParam());
  const nn::LLaMA3 split(config, tp);
  split->load_llmc_tensors(whole->llmc_tensors());
  // Rank r holds query heads [8r / S, ..) and the key/value heads [4r / S, ..) they read.
  EXPECT_EQ(split->h[0]->attn->c_attn->weight.size(0), (8 + 2 * 4) * 8 / pg->size());
  expect_same_training_step(whole, split, *tp);

  if (pg->size() > 1) {  // one key/value head cannot stay with the query heads of 2 or 4 ranks
    nn::LLaMA3Config one_kv = config;
    one_kv.num_kv_heads = 1;
    try {
      nn::LLaMA3 model(one_kv, tp);
      ADD_FAILURE() << "expected an Error for num_kv_heads 1 over " << pg->size() << " ranks";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("num_kv_heads"), std::string::npos) << e.what();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(SequenceParallel, TensorParallelModel, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "sp" : "tp"; });

}  // namespace
}  // namespace infini::parallel::test::tp_model_test
