// LLaMA-3 checkpoints (InfiniTrain's layout of llm.c's magic 20240803): the FFN size rule on
// published models, the exact bytes written, a bfloat16 round trip, and one test per kind
// of file the reader rejects.
#include "llmc_test_util.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

import infini.nn;

namespace infini::llmc::test::llmc_llama3_test {
namespace {

using Tensors = std::vector<std::pair<std::string, Tensor>>;

// maxT 4, V 5, L 1, NH 2, KV 1, C 4 (hd 2), ffn_dim_multiplier 1.5, multiple_of 4:
// H = round(1.5 * (2 * 16 / 3 = 10)) = 15, rounded up to 16. 292 parameters.
constexpr std::int64_t kTinyParams = 292;
LLaMA3Config tiny() {
  return {.max_seq_len = 4,
          .vocab_size = 5,
          .num_layers = 1,
          .num_heads = 2,
          .num_kv_heads = 1,
          .channels = 4,
          .ffn_dim_multiplier = 1.5f,
          .multiple_of = 4,
          .norm_eps = 1e-5f,
          .rope_theta = 500000.0f,
          .use_scaled_rope = true,
          .max_gen_batch_size = 4,
          .version_major = 3,
          .version_minor = 2};
}

// Parameter i holds ((i % 16) - 8) / 4: exact in float32 and bfloat16.
float value(std::int64_t i) { return static_cast<float>(i % 16 - 8) * 0.25f; }

Tensors make_tensors(const LLaMA3Config& config) {
  Tensors tensors;
  std::int64_t next = 0;
  for (const auto& [name, shape] : llama3_layout(config)) {
    Tensor t = empty(shape);
    float* data = t.data_ptr<float>();
    for (std::int64_t k = 0; k < t.numel(); ++k) data[k] = value(next++);
    tensors.emplace_back(name, t);
  }
  return tensors;
}

std::int32_t bits(float f) { return std::bit_cast<std::int32_t>(f); }

// The tiny checkpoint's bytes: the header (floats in slots 8, 10, 11), then 292 float32s.
Bytes tiny_file() {
  Bytes out = header({{0, 20240803}, {1, 3}, {2, 4}, {3, 5}, {4, 1}, {5, 2}, {6, 1}, {7, 4}, {8, bits(1.5f)}, {9, 4},
                      {10, bits(1e-5f)}, {11, bits(500000.0f)}, {12, 1}, {13, 4}, {14, 3}, {15, 2}});
  for (std::int64_t i = 0; i < kTinyParams; ++i) put_f32(out, value(i));
  return out;
}

Bytes with_slot(Bytes bytes, int index, std::int32_t v) {
  for (int b = 0; b < 4; ++b) bytes[4 * index + b] = static_cast<std::byte>(static_cast<std::uint32_t>(v) >> (8 * b));
  return bytes;
}

class Llama3Checkpoint : public LlmcFileTest {
 protected:
  void expect_rejected(const Bytes& bytes, const std::vector<std::string>& parts) const {
    const fs::path path = file_with(bytes);
    expect_error<IOError>([&] { read_llama3_checkpoint(path); }, "read_llama3_checkpoint", parts);
  }
};

TEST_F(Llama3Checkpoint, FfnHiddenSizeOfPublishedModels) {
  // (C, ffn_dim_multiplier, multiple_of) -> intermediate_size of Meta's configs.
  const auto hidden = [](std::int64_t c, float m, std::int64_t multiple_of) {
    return llama3_ffn_hidden_dim({.channels = c, .ffn_dim_multiplier = m, .multiple_of = multiple_of});
  };
  EXPECT_EQ(hidden(4096, 1.3f, 1024), 14336);   // 3.1 8B
  EXPECT_EQ(hidden(8192, 1.3f, 4096), 28672);   // 3.1 70B
  EXPECT_EQ(hidden(16384, 1.2f, 4096), 53248);  // 3.1 405B
  EXPECT_EQ(hidden(2048, 1.5f, 256), 8192);     // 3.2 1B
  EXPECT_EQ(hidden(4096, 0.0f, 256), 11008);    // LLaMA-2 7B: no multiplier
  EXPECT_EQ(hidden(4, 1.5f, 4), 16);            // the tiny config
}

TEST_F(Llama3Checkpoint, LayoutIsTheOrderInfiniTrainReads) {
  const std::vector<std::pair<std::string, Shape>> expected = {
      {"wte", {5, 4}},       {"ln1w", {1, 4}},       {"qkvw", {1, 8, 4}},     {"attprojw", {1, 4, 4}},
      {"ln2w", {1, 4}},      {"fcw", {1, 16, 4}},    {"fc2w", {1, 16, 4}},    {"fcprojw", {1, 4, 16}},
      {"lnfw", {4}},         {"wlmhead", {5, 4}}};
  EXPECT_EQ(llama3_layout(tiny()), expected);
}

TEST_F(Llama3Checkpoint, WritesTheExactBytesAndReadsThemBack) {
  const fs::path path = dir_ / "llama.bin";
  write_llama3_checkpoint(path, {.config = tiny(), .tensors = make_tensors(tiny())});
  EXPECT_EQ(read_file(path), tiny_file());

  const LLaMA3Checkpoint read = read_llama3_checkpoint(file_with(tiny_file(), "hand.bin"));
  const LLaMA3Config& c = read.config;
  EXPECT_EQ(c.max_seq_len, 4);
  EXPECT_EQ(c.vocab_size, 5);
  EXPECT_EQ(c.num_layers, 1);
  EXPECT_EQ(c.num_heads, 2);
  EXPECT_EQ(c.num_kv_heads, 1);
  EXPECT_EQ(c.channels, 4);
  EXPECT_EQ(c.ffn_dim_multiplier, 1.5f);
  EXPECT_EQ(c.multiple_of, 4);
  EXPECT_EQ(c.norm_eps, 1e-5f);
  EXPECT_EQ(c.rope_theta, 500000.0f);
  EXPECT_TRUE(c.use_scaled_rope);
  EXPECT_EQ(c.max_gen_batch_size, 4);
  EXPECT_EQ(c.version_major, 3);
  EXPECT_EQ(c.version_minor, 2);
  ASSERT_EQ(read.tensors.size(), 10u);
  std::int64_t next = 0;
  for (const auto& [name, tensor] : read.tensors) {
    const float* data = tensor.data_ptr<float>();
    for (std::int64_t k = 0; k < tensor.numel(); ++k) ASSERT_EQ(data[k], value(next++)) << name << "[" << k << "]";
  }
  EXPECT_EQ(next, kTinyParams);
}

TEST_F(Llama3Checkpoint, RoundTripsBFloat16) {
  const fs::path path = dir_ / "llama_bf16.bin";
  write_llama3_checkpoint(path, {.config = tiny(), .tensors = make_tensors(tiny())}, kBFloat16);
  const Bytes bytes = read_file(path);
  ASSERT_EQ(bytes.size(), 1024u + 2 * kTinyParams);
  const Bytes fp32 = tiny_file();
  EXPECT_EQ(Bytes(bytes.begin(), bytes.begin() + 1024), with_slot(Bytes(fp32.begin(), fp32.begin() + 1024), 1, 5));
  // value(1) = -1.75 = 0xbfe00000 -> bfloat16 0xbfe0.
  EXPECT_EQ(bytes[1026], std::byte{0xe0});
  EXPECT_EQ(bytes[1027], std::byte{0xbf});
  const LLaMA3Checkpoint read = read_llama3_checkpoint(path);
  std::int64_t next = 0;
  for (const auto& [name, tensor] : read.tensors) {
    const float* data = tensor.data_ptr<float>();
    for (std::int64_t k = 0; k < tensor.numel(); ++k) ASSERT_EQ(data[k], value(next++)) << name << "[" << k << "]";
  }
}

// ---- what the reader rejects ----

TEST_F(Llama3Checkpoint, RejectsAShortHeader) {
  expect_rejected(Bytes(1023), {"the file has 1023 bytes, fewer than the 1024-byte header"});
}

TEST_F(Llama3Checkpoint, RejectsAGpt2Checkpoint) {
  expect_rejected(with_slot(tiny_file(), 0, 20240326),
                  {"bad magic number 20240326, expected 20240803 (a LLaMA-3 checkpoint)",
                   "20240326 is the magic of a GPT-2 checkpoint"});
}

TEST_F(Llama3Checkpoint, RejectsAnUnknownVersion) {
  expect_rejected(with_slot(tiny_file(), 1, 4), {"unknown version 4, expected 3"});
}

TEST_F(Llama3Checkpoint, RejectsNonPositiveDims) {
  const std::pair<int, const char*> slots[] = {{2, "max_seq_len"}, {3, "vocab_size"}, {4, "num_layers"},
                                               {5, "num_heads"},   {6, "num_kv_heads"}, {7, "channels"},
                                               {9, "multiple_of"}};
  for (const auto& [slot, name] : slots)
    expect_rejected(with_slot(tiny_file(), slot, -2), {std::string(name) + " is -2, expected a positive number"});
}

TEST_F(Llama3Checkpoint, RejectsKvHeadsThatDoNotDivideHeads) {
  expect_rejected(with_slot(tiny_file(), 6, 3), {"num_kv_heads 3 does not divide num_heads 2"});
}

TEST_F(Llama3Checkpoint, RejectsHeadsThatDoNotDivideChannels) {
  expect_rejected(with_slot(with_slot(tiny_file(), 5, 3), 6, 3), {"num_heads 3 does not divide channels 4"});
}

TEST_F(Llama3Checkpoint, RejectsLlmcBranchHeaderLayout) {
  // llm.c's train_llama3.py puts multiple_of (an int) in slot 8 and the floats in a second
  // 1024-byte header: slot 8 read as a float is a denormal.
  expect_rejected(with_slot(tiny_file(), 8, 1024),
                  {"ffn_dim_multiplier is 1.43493e-42, expected 0 (none) or 0.01 .. 100", "is not supported"});
  expect_rejected(with_slot(tiny_file(), 8, bits(-1.0f)), {"ffn_dim_multiplier is -1"});
}

TEST_F(Llama3Checkpoint, RejectsNonPositiveOrNonFiniteFloats) {
  for (float v : {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    expect_rejected(with_slot(tiny_file(), 10, bits(v)), {"norm_eps is", "expected > 0"});
    expect_rejected(with_slot(tiny_file(), 11, bits(v)), {"rope_theta is", "expected > 0"});
  }
}

TEST_F(Llama3Checkpoint, RejectsUseScaledRopeOtherThanZeroOrOne) {
  expect_rejected(with_slot(tiny_file(), 12, 2), {"use_scaled_rope is 2, expected 0 or 1"});
}

TEST_F(Llama3Checkpoint, RejectsAZeroFfnHiddenSize) {
  // C 1: h = 2 * 4 / 3 = 2, round(0.01 * 2) = 0.
  Bytes bytes = with_slot(with_slot(with_slot(with_slot(tiny_file(), 5, 1), 6, 1), 7, 1), 8, bits(0.01f));
  expect_rejected(bytes, {"the FFN hidden size is 0"});
}

TEST_F(Llama3Checkpoint, RejectsATruncatedFileAndTrailingBytes) {
  Bytes bytes = tiny_file();
  bytes.resize(bytes.size() - 2);
  expect_rejected(bytes, {"the header's dims need 2192 bytes (1024-byte header + 292 float32 parameters), the file "
                          "has 2190 (truncated?)"});
  bytes = tiny_file();
  bytes.resize(bytes.size() + 4);
  expect_rejected(bytes, {"the file has 2196 (bytes after the last tensor)"});
}

// ---- what the writer refuses ----

TEST_F(Llama3Checkpoint, WriterChecksShapesAgainstTheFfnSize) {
  Tensors tensors = make_tensors(tiny());
  tensors[5].second = zeros({1, 12, 4});
  expect_error<ShapeError>([&] { write_llama3_checkpoint(dir_ / "m.bin", {.config = tiny(), .tensors = tensors}); },
                           "write_llama3_checkpoint",
                           "tensor 'fcw' has shape [1, 12, 4], the config needs [1, 16, 4]");
}

TEST_F(Llama3Checkpoint, WriterRefusesAnInvalidConfig) {
  LLaMA3Config config = tiny();
  config.norm_eps = std::nanf("");
  expect_error<IOError>([&] { write_llama3_checkpoint(dir_ / "m.bin", {.config = config, .tensors = {}}); },
                        "write_llama3_checkpoint", "norm_eps is nan, expected > 0");
  EXPECT_FALSE(fs::exists(dir_ / "m.bin"));
}

}  // namespace
}  // namespace infini::llmc::test::llmc_llama3_test
