// llm.c token files: the exact bytes of both formats, token access and wrapping windows,
// the reference train.bin, and one test per kind of file TokenFile rejects.
#include "llmc_test_util.h"

#include <cstdint>
#include <string>
#include <vector>

import infini.nn;

namespace infini::llmc::test::llmc_tokens_test {
namespace {

// A GPT-2 token file of `tokens` built by hand.
Bytes gpt2_file(const std::vector<std::uint16_t>& tokens) {
  Bytes out = header({{0, 20240520}, {1, 1}, {2, static_cast<std::int32_t>(tokens.size())}});
  for (std::uint16_t t : tokens) put_le(out, t, 2);
  return out;
}

class TokenFiles : public LlmcFileTest {
 protected:
  void expect_rejected(const Bytes& bytes, const std::vector<std::string>& parts) const {
    const fs::path path = file_with(bytes);
    expect_error<IOError>([&] { TokenFile file(path); }, "TokenFile", parts);
  }
};

TEST_F(TokenFiles, WritesGpt2FormatWhenEveryTokenFitsUint16) {
  const fs::path path = dir_ / "tokens.bin";
  const std::vector<std::uint32_t> tokens = {1, 2, 65535, 0, 50256};
  write_token_file(path, tokens);
  EXPECT_EQ(read_file(path), gpt2_file({1, 2, 65535, 0, 50256}));
}

TEST_F(TokenFiles, WritesLlama3FormatForLargerTokens) {
  const fs::path path = dir_ / "tokens.bin";
  const std::vector<std::uint32_t> tokens = {128000, 5, 65536};
  write_token_file(path, tokens);
  Bytes expected = header({{0, 20240801}, {1, 7}, {2, 3}});
  for (std::uint32_t t : tokens) put_le(expected, t, 4);
  EXPECT_EQ(read_file(path), expected);

  const TokenFile file(path);
  EXPECT_EQ(file.format(), TokenFormat::kLLaMA3);
  EXPECT_EQ(file.size(), 3);
  EXPECT_EQ(file.token(0), 128000u);
  EXPECT_EQ(file.token(2), 65536u);
}

TEST_F(TokenFiles, WritesTheRequestedFormat) {
  const fs::path path = dir_ / "tokens.bin";
  const std::vector<std::uint32_t> tokens = {7, 8};
  write_token_file(path, tokens, TokenFormat::kLLaMA3);
  Bytes expected = header({{0, 20240801}, {1, 7}, {2, 2}});
  put_le(expected, 7, 4);
  put_le(expected, 8, 4);
  EXPECT_EQ(read_file(path), expected);
}

TEST_F(TokenFiles, ReadsTokensAndWrappingWindows) {
  const TokenFile file(file_with(gpt2_file({10, 11, 12, 13, 65535})));
  EXPECT_EQ(file.format(), TokenFormat::kGPT2);
  EXPECT_EQ(file.size(), 5);
  EXPECT_EQ(file.token(4), 65535u);

  std::vector<std::int64_t> out(12, -1);
  file.read_window(1, 3, out.data());
  EXPECT_EQ(out, (std::vector<std::int64_t>{11, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1}));
  // From token 3 on, the window wraps to token 0 at the end, as often as needed.
  file.read_window(3, 12, out.data());
  EXPECT_EQ(out, (std::vector<std::int64_t>{13, 65535, 10, 11, 12, 13, 65535, 10, 11, 12, 13, 65535}));
  file.read_window(0, 0, nullptr);

  // Copies share the mapping and outlive the original.
  const TokenFile copy = [&] {
    const TokenFile original(file.path());
    return original;
  }();
  EXPECT_EQ(copy.token(1), 11u);
}

TEST_F(TokenFiles, RejectsOutOfRangeAccess) {
  const TokenFile file(file_with(gpt2_file({1, 2, 3})));
  std::int64_t out[4];
  expect_error<IndexError>([&] { file.token(3); }, "TokenFile::token", "index 3 is out of range for 3 tokens");
  expect_error<IndexError>([&] { file.token(-1); }, "TokenFile::token", "index -1");
  expect_error<IndexError>([&] { file.read_window(3, 1, out); }, "TokenFile::read_window",
                           {"start 3, count 1 for 3 tokens", "expected 0 <= start < size and count >= 0"});
  expect_error<IndexError>([&] { file.read_window(0, -1, out); }, "TokenFile::read_window", "count -1");
}

TEST_F(TokenFiles, ReadsTheReferenceTrainingTokens) {
  const fs::path path = kReferenceDir / "train.bin";
  if (!fs::exists(path)) GTEST_SKIP() << path << " is not present";
  const TokenFile file(path);
  EXPECT_EQ(file.format(), TokenFormat::kGPT2);
  const Bytes raw = read_file(path);
  ASSERT_EQ(file.size(), static_cast<std::int64_t>((raw.size() - 1024) / 2));
  const auto token_at = [&](std::int64_t i) {
    return std::to_integer<std::int64_t>(raw[1024 + 2 * i]) | std::to_integer<std::int64_t>(raw[1025 + 2 * i]) << 8;
  };
  std::vector<std::int64_t> window(6);
  file.read_window(file.size() - 3, 6, window.data());
  const std::int64_t n = file.size();
  EXPECT_EQ(window, (std::vector<std::int64_t>{token_at(n - 3), token_at(n - 2), token_at(n - 1), token_at(0),
                                               token_at(1), token_at(2)}));
  for (std::int64_t i = 0; i < n; ++i) ASSERT_LT(file.token(i), 500u) << "token " << i << " outside the vocabulary";
}

// ---- what the writer refuses ----

TEST_F(TokenFiles, WriterRefusesNoTokens) {
  expect_error<IOError>([&] { write_token_file(dir_ / "t.bin", {}); }, "write_token_file",
                        "no tokens: llm.c's token files hold at least one");
  EXPECT_FALSE(fs::exists(dir_ / "t.bin"));
}

TEST_F(TokenFiles, WriterRefusesWideTokensInGpt2Format) {
  const std::vector<std::uint32_t> tokens = {1, 70000};
  expect_error<IOError>([&] { write_token_file(dir_ / "t.bin", tokens, TokenFormat::kGPT2); }, "write_token_file",
                        "token 1 is 70000, which does not fit the GPT-2 format's uint16");
}

// ---- what the reader rejects ----

TEST_F(TokenFiles, RejectsAShortHeader) {
  expect_rejected(Bytes(12), {"the file has 12 bytes, fewer than the 1024-byte header"});
}

TEST_F(TokenFiles, RejectsAWrongMagic) {
  expect_rejected(header({{0, 20240328}, {1, 1}, {2, 1}}),
                  {"bad magic number 20240328, expected 20240520 (a GPT-2 token file)",
                   "20240328 is the magic of a tokenizer file"});
}

TEST_F(TokenFiles, RejectsAVersionThatDoesNotMatchTheMagic) {
  Bytes gpt2 = header({{0, 20240520}, {1, 7}, {2, 1}});
  put_le(gpt2, 1, 2);
  expect_rejected(gpt2, {"unknown version 7 for magic 20240520, expected 1"});
  Bytes llama = header({{0, 20240801}, {1, 1}, {2, 1}});
  put_le(llama, 1, 4);
  expect_rejected(llama, {"unknown version 1 for magic 20240801, expected 7"});
}

TEST_F(TokenFiles, RejectsANonPositiveTokenCount) {
  expect_rejected(header({{0, 20240520}, {1, 1}, {2, 0}}), {"the header announces 0 tokens, expected at least 1"});
  expect_rejected(header({{0, 20240801}, {1, 7}, {2, -5}}), {"the header announces -5 tokens"});
}

TEST_F(TokenFiles, RejectsATruncatedFile) {
  Bytes bytes = gpt2_file({1, 2, 3});
  bytes.pop_back();  // half a token
  expect_rejected(bytes, {"expected 1030 bytes (1024-byte header + 3 uint16 tokens), the file has 1029 (truncated?)"});
  Bytes llama = header({{0, 20240801}, {1, 7}, {2, 2}});
  put_le(llama, 1, 4);
  expect_rejected(llama, {"expected 1032 bytes (1024-byte header + 2 uint32 tokens), the file has 1028 (truncated?)"});
}

TEST_F(TokenFiles, RejectsTrailingBytes) {
  Bytes bytes = gpt2_file({1, 2, 3});
  bytes.push_back(std::byte{0});
  expect_rejected(bytes, {"the file has 1031 (bytes after the last token)"});
}

TEST_F(TokenFiles, RejectsAMissingFile) {
  expect_error<IOError>([&] { TokenFile file(dir_ / "missing.bin"); }, "TokenFile", {"missing.bin'", "cannot open"});
}

}  // namespace
}  // namespace infini::llmc::test::llmc_tokens_test
