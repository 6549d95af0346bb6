// llm.c's 20-step reference training of tests/data/gpt2-tiny (expected.json: B = 4, T = 32,
// AdamW at lr 3e-3, no weight decay, no clipping, llm.c's sequential batches) run in-process
// with nn::GPT2 on the CPU and on the first CUDA GPU, in float32: every step's loss within
// expected.json's tolerance (5e-5). The same run as samples/gpt2's reference tests, without
// the trainer around it. Under autocast (bfloat16, and float16 with a GradScaler) every
// loss is within 2e-2 of the float32 reference, and measurably off it (so the autocast
// really ran in 16 bits). The CUDA tests skip without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

import infini.nn;

namespace infini::gpt2_training_test {
namespace {

const std::string kDir = INFINI_TEST_DATA_DIR "/gpt2-tiny/";

// The losses of the reference run on `device`: the model made on the CPU from model.bin and
// moved, each step's batch built on the CPU and moved. With `autocast`, the forward pass runs
// under it, and float16 scales the loss (GradScaler; a step with overflowed grads is
// skipped, as in PyTorch).
std::vector<double> reference_losses(const nlohmann::json& expected, Device device,
                                     std::optional<DataType> autocast = std::nullopt) {
  const nlohmann::json& train = expected.at("train");
  const auto B = train.at("batch_size").get<std::int64_t>(), T = train.at("sequence_length").get<std::int64_t>();
  const auto steps = train.at("num_iteration").get<std::int64_t>();
  EXPECT_EQ(train.at("total_batch_size").get<std::int64_t>(), B * T);  // one micro-batch per step
  EXPECT_EQ(train.at("lr_schedule").get<std::string>(), "constant");
  EXPECT_EQ(train.at("grad_clip").get<double>(), 0.0);
  EXPECT_FALSE(train.at("shuffle").get<bool>());

  const llmc::GPT2Checkpoint checkpoint = llmc::read_gpt2_checkpoint(kDir + expected.at("model").get<std::string>());
  const llmc::GPT2Config& c = checkpoint.config;
  nn::GPT2 model(nn::GPT2Config{.max_seq_len = c.max_seq_len, .vocab_size = c.vocab_size,
                                .padded_vocab_size = c.padded_vocab_size, .num_layers = c.num_layers,
                                .num_heads = c.num_heads, .channels = c.channels});
  model->load_llmc_tensors(checkpoint.tensors);
  model->to(device);
  optim::AdamW optimizer(model->parameters(),
                         {.lr = train.at("learning_rate").get<double>(),
                          .betas = {train.at("beta1").get<double>(), train.at("beta2").get<double>()},
                          .eps = train.at("eps").get<double>(),
                          .weight_decay = train.at("weight_decay").get<double>()});

  // Sequence g: inputs tokens[g*T ..] and targets tokens[g*T + 1 ..], reading on from token 0
  // at the end of the file (llm.c's order without shuffling).
  optim::GradScaler scaler({.enabled = autocast == kFloat16});
  const llmc::TokenFile tokens(kDir + expected.at("tokens").get<std::string>());
  std::vector<std::int64_t> window(static_cast<std::size_t>(T + 1));
  std::vector<double> losses;
  for (std::int64_t step = 0; step < steps; ++step) {
    Tensor inputs = empty({B, T}, {.dtype = kInt64}), targets = empty({B, T}, {.dtype = kInt64});
    for (std::int64_t b = 0; b < B; ++b) {
      tokens.read_window((step * B + b) * T % tokens.size(), T + 1, window.data());
      for (std::int64_t t = 0; t < T; ++t) {
        inputs.data_ptr<std::int64_t>()[b * T + t] = window[static_cast<std::size_t>(t)];
        targets.data_ptr<std::int64_t>()[b * T + t] = window[static_cast<std::size_t>(t + 1)];
      }
    }
    optimizer.zero_grad();
    Tensor loss;
    {
      std::optional<AutocastGuard> guard;
      if (autocast) guard.emplace(device.type, *autocast);
      loss = model->loss(model(inputs.to(device)), targets.to(device));
    }
    EXPECT_EQ(loss.device(), device);
    EXPECT_EQ(loss.dtype(), kFloat32);
    losses.push_back(loss.item<double>());
    scaler.scale(loss).backward();
    scaler.step(optimizer);
    scaler.update();
  }
  for (const Tensor& p : model->parameters()) EXPECT_EQ(p.device(), device);
  return losses;
}

void expect_reference_losses(Device device) {
  std::ifstream in(kDir + "expected.json");
  ASSERT_TRUE(in) << kDir << "expected.json";
  const nlohmann::json expected = nlohmann::json::parse(in);
  const auto want = expected.at("losses").get<std::vector<double>>();
  const auto tolerance = expected.at("tolerance_abs").get<double>();
  const std::vector<double> got = reference_losses(expected, device);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t step = 0; step < want.size(); ++step) EXPECT_NEAR(got[step], want[step], tolerance) << "step " << step;
}

// Under autocast: within 2e-2 of the float32 reference at every step, and off it by more
// than float32's tolerance somewhere.
void expect_autocast_losses(Device device, DataType dtype) {
  std::ifstream in(kDir + "expected.json");
  ASSERT_TRUE(in) << kDir << "expected.json";
  const nlohmann::json expected = nlohmann::json::parse(in);
  const auto want = expected.at("losses").get<std::vector<double>>();
  const std::vector<double> got = reference_losses(expected, device, dtype);
  ASSERT_EQ(got.size(), want.size());
  double largest = 0;
  for (std::size_t step = 0; step < want.size(); ++step) {
    EXPECT_NEAR(got[step], want[step], 2e-2) << "step " << step;
    largest = std::max(largest, std::abs(got[step] - want[step]));
  }
  EXPECT_GT(largest, expected.at("tolerance_abs").get<double>());
  std::printf("%s autocast: largest |loss - float32 reference| %.3g\n", dtype == kBFloat16 ? "bfloat16" : "float16",
              largest);
}

TEST(GPT2Training, ReferenceLossesMatchLlmc) { expect_reference_losses(Device::cpu()); }
TEST(GPT2Training, AutocastBfloat16LossesWithin2e2) { expect_autocast_losses(Device::cpu(), kBFloat16); }
TEST(GPT2Training, AutocastFloat16WithLossScalingWithin2e2) { expect_autocast_losses(Device::cpu(), kFloat16); }

TEST(GPT2TrainingCuda, ReferenceLossesMatchLlmc) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  expect_reference_losses(Device::cuda(0));
}

TEST(GPT2TrainingCuda, AutocastBfloat16LossesWithin2e2) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  expect_autocast_losses(Device::cuda(0), kBFloat16);
}

TEST(GPT2TrainingCuda, AutocastFloat16WithLossScalingWithin2e2) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  expect_autocast_losses(Device::cuda(0), kFloat16);
}

}  // namespace
}  // namespace infini::gpt2_training_test
