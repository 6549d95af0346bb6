// llm.c GPT-2 checkpoints: the exact bytes written (float32 and bfloat16), hand-built files
// read back, the reference model.bin, and one test per kind of file the reader rejects and
// per kind of input the writer refuses.
#include "llmc_test_util.h"

#include <bit>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

import infini.nn;

namespace infini::llmc::test::llmc_format_test {
namespace {

using Tensors = std::vector<std::pair<std::string, Tensor>>;

// maxT 2, V 3, Vp 4, L 1, NH 1, C 2: 90 parameters.
constexpr std::int64_t kTinyParams = 90;
GPT2Config tiny() {
  return {.max_seq_len = 2, .vocab_size = 3, .padded_vocab_size = 4, .num_layers = 1, .num_heads = 1, .channels = 2};
}

// Parameter i (counting in file order) holds 0.25 i - 3, exact in float32.
float value(std::int64_t i) { return 0.25f * static_cast<float>(i) - 3.0f; }

// New float32 tensors of gpt2_layout(config), parameter i holding fill(i).
Tensors make_tensors(const GPT2Config& config, float (*fill)(std::int64_t)) {
  Tensors tensors;
  std::int64_t next = 0;
  for (const auto& [name, shape] : gpt2_layout(config)) {
    Tensor t = empty(shape);
    float* data = t.data_ptr<float>();
    for (std::int64_t k = 0; k < t.numel(); ++k) data[k] = fill(next++);
    tensors.emplace_back(name, t);
  }
  return tensors;
}

// The tiny checkpoint as llm.c writes it: header, then the 90 float32 values.
Bytes tiny_file() {
  Bytes out = header({{0, 20240326}, {1, 3}, {2, 2}, {3, 3}, {4, 1}, {5, 1}, {6, 2}, {7, 4}});
  for (std::int64_t i = 0; i < kTinyParams; ++i) put_f32(out, value(i));
  return out;
}

// `bytes` with int32 slot `index` of the header set to `v`.
Bytes with_slot(Bytes bytes, int index, std::int32_t v) {
  for (int b = 0; b < 4; ++b) bytes[4 * index + b] = static_cast<std::byte>(static_cast<std::uint32_t>(v) >> (8 * b));
  return bytes;
}

class Gpt2Checkpoint : public LlmcFileTest {
 protected:
  void expect_rejected(const Bytes& bytes, const std::vector<std::string>& parts) const {
    const fs::path path = file_with(bytes);
    expect_error<IOError>([&] { read_gpt2_checkpoint(path); }, "read_gpt2_checkpoint", parts);
  }
};

// ---- layout, writing and reading ----

TEST_F(Gpt2Checkpoint, LayoutIsLlmcOrderAndShapes) {
  const std::vector<std::pair<std::string, Shape>> expected = {
      {"wte", {4, 2}},  {"wpe", {2, 2}},  {"ln1w", {1, 2}},     {"ln1b", {1, 2}},     {"qkvw", {1, 6, 2}},
      {"qkvb", {1, 6}}, {"attprojw", {1, 2, 2}}, {"attprojb", {1, 2}}, {"ln2w", {1, 2}}, {"ln2b", {1, 2}},
      {"fcw", {1, 8, 2}}, {"fcb", {1, 8}}, {"fcprojw", {1, 2, 8}}, {"fcprojb", {1, 2}}, {"lnfw", {2}}, {"lnfb", {2}}};
  EXPECT_EQ(gpt2_layout(tiny()), expected);
}

TEST_F(Gpt2Checkpoint, WritesLlmcBytesAndReadsThemBack) {
  const fs::path path = dir_ / "model.bin";
  write_gpt2_checkpoint(path, {.config = tiny(), .tensors = make_tensors(tiny(), value)});
  EXPECT_EQ(read_file(path), tiny_file());

  const GPT2Checkpoint read = read_gpt2_checkpoint(file_with(tiny_file(), "hand.bin"));
  EXPECT_EQ(read.config.max_seq_len, 2);
  EXPECT_EQ(read.config.vocab_size, 3);
  EXPECT_EQ(read.config.padded_vocab_size, 4);
  EXPECT_EQ(read.config.num_layers, 1);
  EXPECT_EQ(read.config.num_heads, 1);
  EXPECT_EQ(read.config.channels, 2);
  ASSERT_EQ(read.tensors.size(), 16u);
  std::int64_t next = 0;
  for (const auto& [name, tensor] : read.tensors) {
    EXPECT_EQ(tensor.dtype(), kFloat32) << name;
    EXPECT_TRUE(tensor.device().is_cpu()) << name;
    const float* data = tensor.data_ptr<float>();
    for (std::int64_t k = 0; k < tensor.numel(); ++k) ASSERT_EQ(data[k], value(next++)) << name << "[" << k << "]";
  }
  EXPECT_EQ(next, kTinyParams);
}

TEST_F(Gpt2Checkpoint, WritesAnyFloatDtypeAndStrides) {
  Tensors tensors = make_tensors(tiny(), value);
  // wte (4, 2) given as the float64 transpose of a (2, 4) tensor: a non-contiguous view.
  const Tensor wte_t = from_vector<double>({-3.0, -2.5, -2.0, -1.5, -2.75, -2.25, -1.75, -1.25}, {2, 4});
  tensors[0].second = wte_t.transpose(0, 1);
  ASSERT_FALSE(tensors[0].second.is_contiguous());
  const fs::path path = dir_ / "model.bin";
  write_gpt2_checkpoint(path, {.config = tiny(), .tensors = tensors});
  EXPECT_EQ(read_file(path), tiny_file());
}

TEST_F(Gpt2Checkpoint, WritesBFloat16RoundedToNearestEven) {
  Tensors tensors = make_tensors(tiny(), [](std::int64_t) { return 0.0f; });
  // wte's first values and their bfloat16 bits, rounded by hand: the upper 16 bits of the
  // float32, plus one when the lower 16 bits exceed 0x8000 or equal it with an odd result.
  const float inputs[] = {1.0f,
                          std::bit_cast<float>(0x3f808000u),  // 1 + 2^-8: a tie, 0x3f80 is even
                          std::bit_cast<float>(0x3f818000u),  // a tie, rounds up to even 0x3f82
                          std::bit_cast<float>(0x3f808001u),  // just above the tie
                          -2.0f,
                          std::bit_cast<float>(0x40490fdbu)};  // pi: 0x0fdb < 0x8000
  const std::uint16_t bits[] = {0x3f80, 0x3f80, 0x3f82, 0x3f81, 0xc000, 0x4049};
  const float rounded[] = {1.0f, 1.0f, 1.015625f, 1.0078125f, -2.0f, 3.140625f};
  float* wte = tensors[0].second.data_ptr<float>();
  for (int k = 0; k < 6; ++k) wte[k] = inputs[k];
  const fs::path path = dir_ / "model_bf16.bin";
  write_gpt2_checkpoint(path, {.config = tiny(), .tensors = tensors}, kBFloat16);

  const Bytes bytes = read_file(path);
  ASSERT_EQ(bytes.size(), 1024u + 2 * kTinyParams);
  const Bytes head(bytes.begin(), bytes.begin() + 1024);
  EXPECT_EQ(head, header({{0, 20240326}, {1, 5}, {2, 2}, {3, 3}, {4, 1}, {5, 1}, {6, 2}, {7, 4}}));
  for (int k = 0; k < 6; ++k) {
    const auto got = static_cast<std::uint16_t>(std::to_integer<unsigned>(bytes[1024 + 2 * k]) |
                                                std::to_integer<unsigned>(bytes[1025 + 2 * k]) << 8);
    EXPECT_EQ(got, bits[k]) << "value " << k;
  }
  for (std::size_t i = 1024 + 12; i < bytes.size(); ++i) ASSERT_EQ(bytes[i], std::byte{0}) << i;

  const GPT2Checkpoint read = read_gpt2_checkpoint(path);
  const float* back = read.tensors[0].second.data_ptr<float>();
  for (int k = 0; k < 6; ++k) EXPECT_EQ(back[k], rounded[k]) << k;
}

TEST_F(Gpt2Checkpoint, ReadsTheReferenceModel) {
  const fs::path path = kReferenceDir / "model.bin";
  if (!fs::exists(path)) GTEST_SKIP() << path << " is not present";
  const GPT2Checkpoint ckpt = read_gpt2_checkpoint(path);
  EXPECT_EQ(ckpt.config.max_seq_len, 128);
  EXPECT_EQ(ckpt.config.vocab_size, 500);
  EXPECT_EQ(ckpt.config.padded_vocab_size, 512);
  EXPECT_EQ(ckpt.config.num_layers, 2);
  EXPECT_EQ(ckpt.config.num_heads, 4);
  EXPECT_EQ(ckpt.config.channels, 64);
  ASSERT_EQ(ckpt.tensors.size(), 16u);
  EXPECT_EQ(ckpt.tensors[0].first, "wte");
  EXPECT_EQ(ckpt.tensors[0].second.shape(), (Shape{512, 64}));
  EXPECT_EQ(ckpt.tensors[12].first, "fcprojw");
  EXPECT_EQ(ckpt.tensors[12].second.shape(), (Shape{2, 64, 256}));

  // The padded rows V..Vp-1 of wte are zero (README); the real rows are not.
  const float* wte = ckpt.tensors[0].second.data_ptr<float>();
  for (std::int64_t k = 500 * 64; k < 512 * 64; ++k) ASSERT_EQ(wte[k], 0.0f) << k;
  std::int64_t nonzero = 0;
  for (std::int64_t k = 0; k < 500 * 64; ++k) nonzero += wte[k] != 0.0f;
  EXPECT_GT(nonzero, 500 * 64 / 2);

  // The first and the last parameter are the file's first and last float after the header.
  const Bytes raw = read_file(path);
  const auto f32_at = [&](std::size_t offset) {
    std::uint32_t bits = 0;
    for (int b = 3; b >= 0; --b) bits = bits << 8 | std::to_integer<std::uint32_t>(raw[offset + b]);
    return std::bit_cast<float>(bits);
  };
  EXPECT_EQ(wte[0], f32_at(1024));
  EXPECT_EQ(ckpt.tensors[15].second.data_ptr<float>()[63], f32_at(raw.size() - 4));

  // Written back as float32, the file is the same byte for byte.
  write_gpt2_checkpoint(dir_ / "copy.bin", ckpt);
  EXPECT_EQ(read_file(dir_ / "copy.bin"), raw);
}

// ---- what the reader rejects ----

TEST_F(Gpt2Checkpoint, RejectsAShortHeader) {
  expect_rejected(Bytes(1000), {"'" + (dir_ / "file.bin").string() + "'",
                                "the file has 1000 bytes, fewer than the 1024-byte header"});
  expect_rejected(Bytes(), {"the file has 0 bytes"});
}

TEST_F(Gpt2Checkpoint, RejectsAWrongMagic) {
  expect_rejected(with_slot(tiny_file(), 0, 12345), {"bad magic number 12345, expected 20240326 (a GPT-2 checkpoint)"});
}

TEST_F(Gpt2Checkpoint, NamesTheKindOfAnotherLlmcFile) {
  expect_rejected(with_slot(tiny_file(), 0, 20240803), {"20240803 is the magic of a LLaMA-3 checkpoint"});
}

TEST_F(Gpt2Checkpoint, RejectsAnUnknownVersion) {
  for (std::int32_t version : {0, 1, 4, 6})
    expect_rejected(with_slot(tiny_file(), 1, version),
                    {"unknown version " + std::to_string(version) + ", expected 3 (float32", "5 (bfloat16"});
}

TEST_F(Gpt2Checkpoint, RejectsNonPositiveDims) {
  const std::pair<int, const char*> slots[] = {{2, "max_seq_len"}, {3, "vocab_size"}, {4, "num_layers"},
                                               {5, "num_heads"},   {6, "channels"},   {7, "padded_vocab_size"}};
  for (const auto& [slot, name] : slots)
    for (std::int32_t v : {0, -1})
      expect_rejected(with_slot(tiny_file(), slot, v),
                      {std::string(name) + " is " + std::to_string(v) + ", expected a positive number"});
}

TEST_F(Gpt2Checkpoint, RejectsPaddedVocabBelowVocab) {
  expect_rejected(with_slot(tiny_file(), 7, 2), {"padded_vocab_size 2 is smaller than vocab_size 3"});
}

TEST_F(Gpt2Checkpoint, RejectsHeadsThatDoNotDivideChannels) {
  expect_rejected(with_slot(tiny_file(), 5, 3), {"num_heads 3 does not divide channels 2"});
}

TEST_F(Gpt2Checkpoint, RejectsATruncatedFile) {
  Bytes bytes = tiny_file();
  bytes.pop_back();
  expect_rejected(bytes, {"the header's dims need 1384 bytes (1024-byte header + 90 float32 parameters), the file "
                          "has 1383 (truncated?)"});
  expect_rejected(Bytes(bytes.begin(), bytes.begin() + 1024), {"the file has 1024 (truncated?)"});
}

TEST_F(Gpt2Checkpoint, RejectsTrailingBytes) {
  Bytes bytes = tiny_file();
  bytes.push_back(std::byte{0});
  expect_rejected(bytes, {"the file has 1385 (bytes after the last tensor)"});
}

TEST_F(Gpt2Checkpoint, RejectsHugeDimsBeforeAllocating) {
  // A 1024-byte file claiming L = NH = C = Vp = maxT = 2^31 - 1: sizes that fit int64 are
  // compared with the file's size, larger ones are refused outright.
  const std::int32_t big = std::numeric_limits<std::int32_t>::max();
  expect_rejected(header({{0, 20240326}, {1, 3}, {2, 1}, {3, 1}, {4, 1}, {5, 1}, {6, 65536}, {7, big}}),
                  {"the header's dims need", "(truncated?)"});
  expect_rejected(header({{0, 20240326}, {1, 3}, {2, big}, {3, big}, {4, big}, {5, big}, {6, big}, {7, big}}),
                  {"needs more than 2^63 - 1 bytes"});
}

TEST_F(Gpt2Checkpoint, RejectsAMissingFileOrADirectory) {
  expect_error<IOError>([&] { read_gpt2_checkpoint(dir_ / "missing.bin"); }, "read_gpt2_checkpoint",
                        {"missing.bin'", "cannot open the file"});
  expect_error<IOError>([&] { read_gpt2_checkpoint(dir_); }, "read_gpt2_checkpoint", "not a regular file");
}

// ---- what the writer refuses (before touching the file) ----

TEST_F(Gpt2Checkpoint, WriterRefusesDtypesOtherThanFloat32AndBFloat16) {
  expect_error<DTypeError>(
      [&] {
        write_gpt2_checkpoint(dir_ / "m.bin", {.config = tiny(), .tensors = make_tensors(tiny(), value)}, kFloat16);
      },
      "write_gpt2_checkpoint", "float32 (version 3) or bfloat16 (version 5)");
}

TEST_F(Gpt2Checkpoint, WriterRefusesAMissingTensor) {
  Tensors tensors = make_tensors(tiny(), value);
  tensors.pop_back();
  expect_error<Error>([&] { write_gpt2_checkpoint(dir_ / "m.bin", {.config = tiny(), .tensors = tensors}); },
                      "write_gpt2_checkpoint", {"expected 16 tensors (wte, wpe, ln1w", "got 15"});
}

TEST_F(Gpt2Checkpoint, WriterRefusesTensorsOutOfOrder) {
  Tensors tensors = make_tensors(tiny(), value);
  std::swap(tensors[2], tensors[3]);
  expect_error<Error>([&] { write_gpt2_checkpoint(dir_ / "m.bin", {.config = tiny(), .tensors = tensors}); },
                      "write_gpt2_checkpoint", "tensor 2 is named 'ln1b', expected 'ln1w'");
}

TEST_F(Gpt2Checkpoint, WriterRefusesAWrongShape) {
  Tensors tensors = make_tensors(tiny(), value);
  tensors[4].second = zeros({1, 2, 6});
  expect_error<ShapeError>([&] { write_gpt2_checkpoint(dir_ / "m.bin", {.config = tiny(), .tensors = tensors}); },
                           "write_gpt2_checkpoint", "tensor 'qkvw' has shape [1, 2, 6], the config needs [1, 6, 2]");
}

TEST_F(Gpt2Checkpoint, WriterRefusesIntegerOrUndefinedTensors) {
  Tensors tensors = make_tensors(tiny(), value);
  tensors[0].second = zeros({4, 2}, {.dtype = kInt64});
  expect_error<DTypeError>([&] { write_gpt2_checkpoint(dir_ / "m.bin", {.config = tiny(), .tensors = tensors}); },
                           "write_gpt2_checkpoint", "tensor 'wte' is int64, expected a floating-point dtype");
  tensors[0].second = Tensor();
  expect_error<Error>([&] { write_gpt2_checkpoint(dir_ / "m.bin", {.config = tiny(), .tensors = tensors}); },
                      "write_gpt2_checkpoint", "tensor 'wte' is undefined");
}

TEST_F(Gpt2Checkpoint, WriterRefusesAnInvalidConfigAndLeavesTheFile) {
  const fs::path path = file_with(Bytes{std::byte{7}}, "m.bin");
  GPT2Config config = tiny();
  config.padded_vocab_size = 2;
  expect_error<IOError>([&] { write_gpt2_checkpoint(path, {.config = config, .tensors = {}}); },
                        "write_gpt2_checkpoint",
                        {"'" + path.string() + "'", "padded_vocab_size 2 is smaller than vocab_size 3"});
  config = tiny();
  config.channels = std::int64_t{1} << 31;
  expect_error<IOError>([&] { write_gpt2_checkpoint(path, {.config = config, .tensors = {}}); },
                        "write_gpt2_checkpoint", "channels is 2147483648, more than the header's int32 holds");
  EXPECT_EQ(read_file(path), Bytes{std::byte{7}});
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

}  // namespace
}  // namespace infini::llmc::test::llmc_format_test
