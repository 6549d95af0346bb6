// nn::GPT2: forward and backward against llm.c's reference state on tests/data/gpt2-tiny
// (logits and loss within 1e-5, every gradient within 1e-4; on the CPU and, when there is
// one, a CUDA GPU), its fused norms against composed blocks, the llm.c tensor layout,
// initialisation, the d12 parameter count and bad inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "data_test_util.h"

import infini.nn;

namespace infini::gpt2_model_test {
namespace {

using data::test::expect_error;

const std::string kDir = INFINI_TEST_DATA_DIR "/gpt2-tiny/";

nn::GPT2Config tiny_config() {
  return {.max_seq_len = 128, .vocab_size = 500, .padded_vocab_size = 512, .num_layers = 2, .num_heads = 4, .channels = 64};
}

double max_abs_diff(const Tensor& a, const Tensor& b) { return amax(abs(sub(a, b))).item<double>(); }

// debug_state.bin: 256 int32 header (20240327, 2, B, T), int32 inputs and targets (B*T),
// float32 logits (B, T, V), the loss, then every gradient in checkpoint order.
struct DebugState {
  std::int64_t B = 0, T = 0;
  Tensor inputs, targets, logits;
  double loss = 0;
  std::vector<char> bytes;
  std::size_t grads_at = 0;
};

DebugState read_debug_state(std::int64_t V) {
  std::ifstream in(kDir + "debug_state.bin", std::ios::binary);
  DebugState s;
  s.bytes.assign(std::istreambuf_iterator<char>(in), {});
  std::int32_t header[256];
  std::memcpy(header, s.bytes.data(), sizeof header);
  EXPECT_EQ(header[0], 20240327);
  s.B = header[2];
  s.T = header[3];
  std::size_t at = sizeof header;
  auto ints = [&] {
    std::vector<std::int32_t> v(static_cast<std::size_t>(s.B * s.T));
    std::memcpy(v.data(), s.bytes.data() + at, v.size() * 4);
    at += v.size() * 4;
    return from_vector(std::vector<std::int64_t>(v.begin(), v.end())).view({s.B, s.T});
  };
  s.inputs = ints();
  s.targets = ints();
  s.logits = empty({s.B, s.T, V});
  std::memcpy(s.logits.data_ptr(), s.bytes.data() + at, static_cast<std::size_t>(s.logits.nbytes()));
  at += static_cast<std::size_t>(s.logits.nbytes());
  float loss = 0;
  std::memcpy(&loss, s.bytes.data() + at, 4);
  s.loss = loss;
  s.grads_at = at + 4;
  return s;
}

nn::GPT2 reference_model() {
  const llmc::GPT2Checkpoint checkpoint = llmc::read_gpt2_checkpoint(kDir + "model.bin");
  nn::GPT2 model(tiny_config());
  model->load_llmc_tensors(checkpoint.tensors);
  return model;
}

// The reference model moved to `device`, on the debug state's batch: logits and loss within
// 1e-5, every gradient within 1e-4 (compared on the CPU).
void expect_llmc_forward_and_backward(Device device) {
  nn::GPT2 model = reference_model();
  model->to(device);
  const std::int64_t V = 500;
  DebugState state = read_debug_state(V);
  const Tensor logits = model(state.inputs.to(device));
  ASSERT_EQ(logits.shape(), (Shape{state.B, state.T, 512}));
  ASSERT_EQ(logits.device(), device);
  EXPECT_LT(max_abs_diff(logits.slice(2, 0, V).to(Device::cpu()), state.logits), 1e-5);
  const Tensor loss = model->loss(logits, state.targets.to(device));
  EXPECT_NEAR(loss.item<double>(), state.loss, 1e-5);

  loss.backward();
  std::size_t at = state.grads_at;
  for (const auto& [name, grad] : model->llmc_tensors(/*gradients=*/true)) {
    Tensor expected = empty(grad.shape());
    ASSERT_LE(at + static_cast<std::size_t>(expected.nbytes()), state.bytes.size()) << name;
    std::memcpy(expected.data_ptr(), state.bytes.data() + at, static_cast<std::size_t>(expected.nbytes()));
    at += static_cast<std::size_t>(expected.nbytes());
    EXPECT_LT(max_abs_diff(grad, expected), 1e-4) << name;  // llmc_tensors are CPU tensors
  }
  EXPECT_EQ(at, state.bytes.size());
}

TEST(GPT2Model, ForwardAndBackwardMatchLlmc) { expect_llmc_forward_and_backward(Device::cpu()); }

TEST(GPT2ModelCuda, ForwardAndBackwardMatchLlmc) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  expect_llmc_forward_and_backward(Device::cuda(0));
}

// The blocks' norms pass their input through for the residual sums (whose gradient the
// norms' backward adds) and, under autocast, write autocast's dtype for the products after
// them: the logits and every gradient are the bits of the blocks composed from plain norms,
// sums and the products' casts (below), with and without autocast.
TEST(GPT2Model, FusedNormsGiveTheComposedBlocksBits) {
  nn::GPT2 model(tiny_config());
  const Tensor idx = randint(0, 500, {2, 16}, {.dtype = kInt64});
  const Tensor targets = randint(0, 500, {2, 16}, {.dtype = kInt64});
  auto run = [&](bool fused, bool autocast) {
    model->zero_grad();
    AutocastGuard guard(DeviceType::CPU, kBFloat16, autocast);
    Tensor logits;
    if (fused) {
      logits = model(idx);
    } else {
      Tensor x = model->embed(idx);
      for (const auto& block : model->h) {
        const Tensor x1 = add(x, block->attn->forward(block->ln_1->forward(x)));
        x = add(x1, block->mlp->forward(block->ln_2->forward(x1)));
      }
      logits = model->tp->vocab_logits(model->ln_f->forward(x), model->wte->weight);
    }
    model->loss(logits, targets).backward();
    TensorList out{logits};
    for (const Tensor& p : model->parameters()) out.push_back(p.grad());
    return out;
  };
  for (const bool autocast : {false, true}) {
    const TensorList fused = run(true, autocast), composed = run(false, autocast);
    ASSERT_EQ(fused.size(), composed.size());
    for (std::size_t k = 0; k < fused.size(); ++k) {
      ASSERT_EQ(fused[k].dtype(), composed[k].dtype()) << k;
      EXPECT_EQ(max_abs_diff(fused[k].to(kFloat64), composed[k].to(kFloat64)), 0.0)
          << (autocast ? "autocast " : "") << (k == 0 ? "logits" : "gradient ") << k;
    }
  }
}

TEST(GPT2Model, LlmcTensorsRoundTripAndFollowTheCheckpointLayout) {
  const llmc::GPT2Checkpoint checkpoint = llmc::read_gpt2_checkpoint(kDir + "model.bin");
  nn::GPT2 model = reference_model();
  const auto tensors = model->llmc_tensors();
  ASSERT_EQ(tensors.size(), checkpoint.tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(tensors[i].first, checkpoint.tensors[i].first);
    EXPECT_EQ(max_abs_diff(tensors[i].second, checkpoint.tensors[i].second), 0.0) << tensors[i].first;
  }
  // Layer 1's attention projection is row 1 of the stacked (L, C, C) tensor.
  EXPECT_EQ(max_abs_diff(model->h[1]->attn->c_proj->weight, tensors[6].second.select(0, 1)), 0.0);
  EXPECT_EQ(tensors[6].first, "attprojw");
}

TEST(GPT2Model, ParameterNamesAndD12Size) {
  nn::GPT2 model(tiny_config());
  const auto named = model->named_parameters();
  EXPECT_EQ(named.front().first, "wte.weight");
  EXPECT_EQ(named[2].first, "h.0.ln_1.weight");
  EXPECT_EQ(named[4].first, "h.0.attn.c_attn.weight");
  EXPECT_EQ(named.back().first, "ln_f.bias");
  // 12 * L * C^2 + 13 * L * C + Vp * C + maxT * C + 2C, with llm.c's d12 printing 124475904.
  const nn::GPT2Config d12 = nn::GPT2Config::from_name("d12");
  const std::int64_t L = 12, C = 768;
  EXPECT_EQ(12 * L * C * C + 13 * L * C + d12.padded_vocab_size * C + d12.max_seq_len * C + 2 * C, 124475904);
  std::int64_t count = 0;
  for (const Tensor& p : nn::GPT2(d12)->parameters()) count += p.numel();
  EXPECT_EQ(count, 124475904);
  EXPECT_EQ(nn::GPT2Config::from_name("d48").channels, 1600);
}

TEST(GPT2Model, InitialisationFollowsLlmc) {
  manual_seed(5);
  nn::GPT2Config config = tiny_config();
  config.channels = 128;
  config.num_layers = 8;
  nn::GPT2 model(config);
  auto stddev = [](const Tensor& t) { return std::sqrt(var(t, {}, 0).item<double>()); };
  EXPECT_NEAR(stddev(model->h[0]->attn->c_attn->weight), 0.02, 0.001);
  EXPECT_NEAR(stddev(model->h[3]->mlp->c_proj->weight), 0.02 / std::sqrt(16.0), 0.0003);
  EXPECT_NEAR(stddev(model->wte->weight.slice(0, 0, 500)), 0.02, 0.001);
  EXPECT_EQ(amax(abs(model->wte->weight.slice(0, 500))).item<double>(), 0.0);  // padded rows
  EXPECT_EQ(amax(abs(model->h[0]->attn->c_attn->bias)).item<double>(), 0.0);
  EXPECT_EQ(amin(model->h[0]->ln_1->weight).item<double>(), 1.0);
}

TEST(GPT2Model, RejectsBadConfigsAndInputs) {
  nn::GPT2Config bad = tiny_config();
  bad.channels = 66;
  expect_error<Error>([&] { nn::GPT2 m(bad); }, "GPT2Config", "channels 66 is not a multiple of num_heads 4");
  bad = tiny_config();
  bad.padded_vocab_size = 499;
  expect_error<Error>([&] { nn::GPT2 m(bad); }, "GPT2Config", "padded_vocab_size 499 is smaller than vocab_size 500");
  expect_error<Error>([] { (void)nn::GPT2Config::from_name("d13"); }, "GPT2Config.from_name", "unknown model \"d13\"");

  nn::GPT2 model(tiny_config());
  expect_error<ShapeError>([&] { (void)model(zeros({2, 3})); }, "GPT2", "expected idx (B, T) int64");
  expect_error<ShapeError>([&] { (void)model(zeros({1, 129}, {.dtype = kInt64})); }, "GPT2",
                           "sequence length 129 exceeds max_seq_len 128");
  expect_error<ShapeError>([&] { (void)model->loss(zeros({2, 3, 512}), zeros({2, 4}, {.dtype = kInt64})); }, "GPT2.loss",
                           "targets (B, T)");
  auto tensors = model->llmc_tensors();
  tensors[4].first = "qkv";
  expect_error<Error>([&] { model->load_llmc_tensors(tensors); }, "GPT2.load_llmc_tensors",
                      "tensor 4 should be \"qkvw\", got \"qkv\"");
  tensors = model->llmc_tensors();
  tensors[1].second = zeros({127, 64});
  expect_error<ShapeError>([&] { model->load_llmc_tensors(tensors); }, "GPT2.load_llmc_tensors", "\"wpe\" should have shape");
  expect_error<Error>([&] { (void)model->llmc_tensors(true); }, "GPT2.llmc_tensors", "has no gradient");
}

}  // namespace
}  // namespace infini::gpt2_model_test
