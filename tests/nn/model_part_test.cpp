// nn::ModelPart: GPT-2 and LLaMA-3 built in part (a pipeline stage's embedding, blocks and
// head) hold exactly the whole model's weights for those pieces, named by their index in the
// whole model, and only those; a part refuses what needs the whole model.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "data_test_util.h"

import infini.nn;

namespace infini::model_part_test {
namespace {

using data::test::expect_error;

// 4 blocks of C = 32: a block has 12 C^2 + 13 C = 12,704 parameters, wte 512 C, wpe 64 C.
nn::GPT2Config gpt2_config() {
  return {.max_seq_len = 64, .vocab_size = 500, .padded_vocab_size = 512, .num_layers = 4, .num_heads = 2, .channels = 32};
}

nn::LLaMA3Config llama3_config() {
  return {.max_seq_len = 8, .vocab_size = 37, .num_layers = 4, .num_heads = 4, .num_kv_heads = 2, .channels = 16,
          .ffn_dim_multiplier = 1.3f, .multiple_of = 8, .norm_eps = 1e-5f, .rope_theta = 500000.0f};
}

std::map<std::string, Tensor> by_name(const nn::Module& model) {
  std::map<std::string, Tensor> named;
  for (const auto& [name, p] : model.named_parameters()) named.emplace(name, p);
  return named;
}

// The names of `whole` a part holds: its blocks' ("h.<l>."), and the others `keep` accepts.
template <class Keep>
std::vector<std::string> expected_names(const nn::Module& whole, const std::vector<std::int64_t>& blocks, Keep keep) {
  std::vector<std::string> names;
  for (const auto& [name, p] : by_name(whole)) {
    bool in_part = false;
    if (name.starts_with("h."))
      for (const std::int64_t l : blocks) in_part = in_part || name.starts_with("h." + std::to_string(l) + ".");
    else
      in_part = keep(name);
    if (in_part) names.push_back(name);
  }
  return names;
}

// Every parameter of `part` equals whole's of the same name, and part has exactly `names`.
void expect_part_of(const nn::Module& whole, const nn::Module& part, const std::vector<std::string>& names) {
  const auto wanted = by_name(whole), held = by_name(part);
  std::vector<std::string> held_names;
  for (const auto& [name, p] : held) {
    held_names.push_back(name);
    ASSERT_TRUE(wanted.contains(name)) << name;
    EXPECT_EQ(p.shape(), wanted.at(name).shape()) << name;
    EXPECT_EQ(amax(abs(sub(p, wanted.at(name)))).item<double>(), 0.0) << name;
  }
  EXPECT_EQ(held_names, names);
}

std::int64_t count(const nn::Module& model) {
  std::int64_t n = 0;
  for (const Tensor& p : model.parameters()) n += p.numel();
  return n;
}

TEST(ModelPart, Gpt2PartsHoldTheWholeModelsWeights) {
  manual_seed(7);
  const nn::GPT2 whole(gpt2_config());
  // A middle stage (blocks 1 and 2), the last (block 3 and the head: ln_f and the tied wte), the
  // first of an interleaved pipeline (embedding, blocks 0 and 2).
  const std::vector<nn::ModelPart> parts = {{.blocks = {1, 2}, .embed = false, .head = false},
                                            {.blocks = {3}, .embed = false, .head = true},
                                            {.blocks = {0, 2}, .embed = true, .head = false}};
  for (const nn::ModelPart& part : parts) {
    manual_seed(7);
    const nn::GPT2 model(gpt2_config(), nullptr, part);
    const auto keep = [&](const std::string& name) {
      return (name.starts_with("wte.") && (part.embed || part.head)) || (name.starts_with("wpe.") && part.embed) ||
             (name.starts_with("ln_f.") && part.head);
    };
    SCOPED_TRACE(part.str());
    expect_part_of(*whole, *model, expected_names(*whole, part.blocks, keep));
    const std::int64_t C = 32, block = 12 * C * C + 13 * C;
    EXPECT_EQ(count(*model), static_cast<std::int64_t>(part.blocks.size()) * block + (part.embed || part.head ? 512 * C : 0) +
                                 (part.embed ? 64 * C : 0) + (part.head ? 2 * C : 0));
    // The generator ends where building the whole model leaves it.
    const std::uint64_t after_part = default_generator().state().offset;
    manual_seed(7);
    const nn::GPT2 again(gpt2_config());
    EXPECT_EQ(after_part, default_generator().state().offset);
  }
  EXPECT_EQ(count(*whole), 4 * (12 * 32 * 32 + 13 * 32) + 512 * 32 + 64 * 32 + 2 * 32);
}

TEST(ModelPart, Llama3PartsHoldTheWholeModelsWeights) {
  manual_seed(11);
  const nn::LLaMA3 whole(llama3_config());
  const std::vector<nn::ModelPart> parts = {{.blocks = {0}, .embed = true, .head = false},
                                            {.blocks = {1, 3}, .embed = false, .head = true}};
  for (const nn::ModelPart& part : parts) {
    manual_seed(11);
    const nn::LLaMA3 model(llama3_config(), nullptr, part);
    const auto keep = [&](const std::string& name) {
      return (name.starts_with("wte.") && part.embed) ||
             ((name.starts_with("ln_f.") || name.starts_with("lm_head.")) && part.head);
    };
    SCOPED_TRACE(part.str());
    expect_part_of(*whole, *model, expected_names(*whole, part.blocks, keep));
  }
}

// The pieces a pipeline runs: embed on the first stage, blocks, head on the last, give the
// whole model's logits.
TEST(ModelPart, StagesComposeToTheWholeModel) {
  manual_seed(3);
  const nn::GPT2 whole(gpt2_config());
  manual_seed(3);
  const nn::GPT2 first(gpt2_config(), nullptr, nn::ModelPart{.blocks = {0, 1}, .embed = true, .head = false});
  manual_seed(3);
  const nn::GPT2 last(gpt2_config(), nullptr, nn::ModelPart{.blocks = {2, 3}, .embed = false, .head = true});
  const Tensor idx = from_vector(std::vector<std::int64_t>{1, 7, 499, 0, 42, 3}).view({2, 3});
  Tensor x = first->embed(idx);
  for (const auto& block : first->h) x = (*block)(x);
  for (const auto& block : last->h) x = (*block)(x);
  EXPECT_LE(amax(abs(sub(last->head(x), whole(idx)))).item<double>(), 1e-6);
}

TEST(ModelPart, Names) {
  EXPECT_EQ(nn::ModelPart::whole(3).str(), "embed, blocks 0-2, head");
  EXPECT_EQ((nn::ModelPart{.blocks = {1, 3}, .embed = false, .head = true}).str(), "blocks 1, 3, head");
  EXPECT_EQ((nn::ModelPart{.blocks = {0, 1, 4, 5, 6}, .embed = true, .head = false}).str(), "embed, blocks 0-1, 4-6");
  EXPECT_EQ((nn::ModelPart{.blocks = {}, .embed = false, .head = false}).str(), "nothing");
  EXPECT_TRUE(nn::ModelPart::whole(3).is_whole(3));
  EXPECT_FALSE((nn::ModelPart{.blocks = {0, 1, 2}, .embed = true, .head = false}).is_whole(3));
}

TEST(ModelPart, RefusesWhatNeedsTheWholeModel) {
  const nn::GPT2 middle(gpt2_config(), nullptr, nn::ModelPart{.blocks = {1, 3}, .embed = false, .head = true});
  const Tensor idx = zeros({1, 2}, {.dtype = kInt64});
  expect_error<Error>([&] { middle(idx); }, "GPT2.forward", {"needs the whole model", "blocks 1, 3, head", "4 blocks"});
  expect_error<Error>([&] { middle->embed(idx); }, "GPT2.embed", "needs the embed");
  expect_error<Error>([&] { middle->llmc_tensors(); }, "GPT2.llmc_tensors", "needs the whole model");
  const nn::LLaMA3 first(llama3_config(), nullptr, nn::ModelPart{.blocks = {0}, .embed = true, .head = false});
  expect_error<Error>([&] { first->head(zeros({1, 2, 16})); }, "LLaMA3.head", "needs the head");
  expect_error<Error>([&] { nn::GPT2(gpt2_config(), nullptr, nn::ModelPart{.blocks = {2, 4}}); }, "GPT2",
                      "ascending indices in [0, 4), got [2, 4]");
  expect_error<Error>([&] { nn::LLaMA3(llama3_config(), nullptr, nn::ModelPart{.blocks = {1, 0}}); }, "LLaMA3",
                      "ascending indices in [0, 4)");
  // A part names its blocks by their index in the whole model.
  EXPECT_TRUE(by_name(*middle).contains("h.3.mlp.c_fc.weight"));
  EXPECT_FALSE(by_name(*middle).contains("h.0.mlp.c_fc.weight"));
}

TEST(ModelPart, SkipDrawsAdvancesLikeADraw) {
  Generator a(5), b(5);
  nn::init::normal_(empty({7, 3}), 0, 1, &a);
  nn::init::skip_draws(21, &b);
  EXPECT_EQ(a.state().offset, b.state().offset);
  const Tensor next_a = nn::init::normal_(empty({4}), 0, 1, &a), next_b = nn::init::normal_(empty({4}), 0, 1, &b);
  EXPECT_EQ(amax(abs(sub(next_a, next_b))).item<double>(), 0.0);
  expect_error<Error>([&] { nn::init::skip_draws(-1, &b); }, "nn.init.skip_draws", "numel >= 0");
}

}  // namespace
}  // namespace infini::model_part_test
