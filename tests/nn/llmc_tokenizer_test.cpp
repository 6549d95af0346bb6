// llm.c's tokenizer file: the exact bytes of versions 1 and 2, round trips of the longest
// token and of arbitrary bytes, and one test per kind of file or input that is rejected.
#include "llmc_test_util.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

import infini.nn;

namespace infini::llmc::test::llmc_tokenizer_test {
namespace {

// Header then entries (length byte, bytes) built by hand.
Bytes tokenizer_file(std::int32_t version, std::int32_t vocab, std::int32_t eot,
                     const std::vector<std::string>& tokens) {
  Bytes out = header({{0, 20240328}, {1, version}, {2, vocab}, {3, eot}});
  for (const std::string& t : tokens) {
    out.push_back(static_cast<std::byte>(t.size()));
    for (char c : t) out.push_back(static_cast<std::byte>(c));
  }
  return out;
}

class TokenizerFiles : public LlmcFileTest {
 protected:
  void expect_rejected(const Bytes& bytes, const std::vector<std::string>& parts) const {
    const fs::path path = file_with(bytes);
    expect_error<IOError>([&] { read_tokenizer_file(path); }, "read_tokenizer_file", parts);
  }
  void expect_refused(const TokenizerFile& tokenizer, const std::vector<std::string>& parts) const {
    expect_error<IOError>([&] { write_tokenizer_file(dir_ / "tok.bin", tokenizer); }, "write_tokenizer_file", parts);
    EXPECT_FALSE(fs::exists(dir_ / "tok.bin"));
  }
};

TEST_F(TokenizerFiles, WritesVersion2WithTheEotToken) {
  const std::vector<std::string> tokens = {"a", "bc", std::string("\xff\x00", 2)};
  write_tokenizer_file(dir_ / "tok.bin", {.tokens = tokens, .eot_token = 1});
  EXPECT_EQ(read_file(dir_ / "tok.bin"), tokenizer_file(2, 3, 1, tokens));

  const TokenizerFile read = read_tokenizer_file(dir_ / "tok.bin");
  EXPECT_EQ(read.tokens, tokens);
  EXPECT_EQ(read.eot_token, std::optional<std::int64_t>(1));
}

TEST_F(TokenizerFiles, WritesVersion1WithoutAnEotToken) {
  const std::vector<std::string> tokens = {"x", "yz"};
  write_tokenizer_file(dir_ / "tok.bin", {.tokens = tokens, .eot_token = std::nullopt});
  EXPECT_EQ(read_file(dir_ / "tok.bin"), tokenizer_file(1, 2, 0, tokens));
  const TokenizerFile read = read_tokenizer_file(dir_ / "tok.bin");
  EXPECT_EQ(read.tokens, tokens);
  EXPECT_FALSE(read.eot_token.has_value());
}

TEST_F(TokenizerFiles, RoundTripsTheLongestTokenAndEveryByte) {
  std::string every_byte;
  for (int b = 0; b < 255; ++b) every_byte.push_back(static_cast<char>(b + 1));
  every_byte.back() = '\0';
  const TokenizerFile tokenizer{.tokens = {every_byte, " the", "\n"}, .eot_token = 2};
  write_tokenizer_file(dir_ / "tok.bin", tokenizer);
  EXPECT_EQ(fs::file_size(dir_ / "tok.bin"), 1024u + 256 + 5 + 2);
  const TokenizerFile read = read_tokenizer_file(dir_ / "tok.bin");
  EXPECT_EQ(read.tokens, tokenizer.tokens);
  EXPECT_EQ(read.eot_token, tokenizer.eot_token);
}

// ---- what the writer refuses ----

TEST_F(TokenizerFiles, WriterRefusesTokensLongerThan255Bytes) {
  expect_refused({.tokens = {"a", std::string(256, 'x')}, .eot_token = std::nullopt},
                 {"token 1 has 256 bytes, expected 1 .. 255"});
}

TEST_F(TokenizerFiles, WriterRefusesEmptyTokens) {
  expect_refused({.tokens = {"a", ""}, .eot_token = std::nullopt}, {"token 1 has 0 bytes, expected 1 .. 255"});
}

TEST_F(TokenizerFiles, WriterRefusesAnEmptyVocabulary) {
  expect_refused({.tokens = {}, .eot_token = std::nullopt}, {"no tokens"});
}

TEST_F(TokenizerFiles, WriterRefusesAnEotTokenOutsideTheVocabulary) {
  expect_refused({.tokens = {"a", "b"}, .eot_token = 2},
                 {"the EOT token id 2 is not a token id (the vocabulary has 2"});
  expect_refused({.tokens = {"a", "b"}, .eot_token = -1}, {"the EOT token id -1"});
}

// ---- what the reader rejects ----

TEST_F(TokenizerFiles, RejectsAShortHeader) {
  expect_rejected(Bytes(1020), {"the file has 1020 bytes, fewer than the 1024-byte header"});
}

TEST_F(TokenizerFiles, RejectsAWrongMagic) {
  expect_rejected(header({{0, 20240520}, {1, 1}, {2, 1}}),
                  {"bad magic number 20240520, expected 20240328 (a tokenizer file)",
                   "20240520 is the magic of a GPT-2 token file"});
}

TEST_F(TokenizerFiles, RejectsAnUnknownVersion) {
  expect_rejected(tokenizer_file(3, 1, 0, {"a"}), {"unknown version 3, expected 1 or 2"});
}

TEST_F(TokenizerFiles, RejectsANonPositiveVocabularySize) {
  expect_rejected(tokenizer_file(1, 0, 0, {}), {"the header announces 0 tokens, expected at least 1"});
  expect_rejected(tokenizer_file(2, -3, 0, {}), {"the header announces -3 tokens"});
}

TEST_F(TokenizerFiles, RejectsAnEotTokenOutsideTheVocabulary) {
  expect_rejected(tokenizer_file(2, 2, 2, {"a", "b"}),
                  {"the EOT token id 2 is not a token id (the vocabulary has 2 tokens)"});
}

TEST_F(TokenizerFiles, RejectsAnEmptyEntry) {
  expect_rejected(tokenizer_file(1, 2, 0, {"a", ""}), {"token 1 has length 0, expected 1 .. 255 bytes"});
}

TEST_F(TokenizerFiles, RejectsATruncatedEntry) {
  Bytes bytes = tokenizer_file(1, 2, 0, {"a", "hello"});
  bytes.resize(bytes.size() - 2);
  expect_rejected(bytes, {"token 1 announces 5 bytes, the file has 3 left (truncated?)"});
}

TEST_F(TokenizerFiles, RejectsMissingEntries) {
  expect_rejected(tokenizer_file(1, 3, 0, {"a", "b"}), {"the file ends before token 2 of 3 (truncated?)"});
}

TEST_F(TokenizerFiles, RejectsTrailingBytes) {
  Bytes bytes = tokenizer_file(1, 2, 0, {"a", "b"});
  bytes.push_back(std::byte{1});
  expect_rejected(bytes, {"the file has 1 bytes after the last of its 2 tokens"});
}

}  // namespace
}  // namespace infini::llmc::test::llmc_tokenizer_test
