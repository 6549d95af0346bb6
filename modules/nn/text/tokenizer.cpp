// Tokenizer (see tokenizer.cppm): the text NFC-normalized when the vocabulary says so, pieces
// from the pre-tokenizer, ids from the vocabulary (ignore_merges), the cache or the merge loop;
// decoding concatenates the tokens' bytes.
module;
#include <cstddef>
#include <cstdint>
module infini.nn;
import infini.std;

namespace infini::text {

Tokenizer Tokenizer::from_gpt2_files(const std::filesystem::path& encoder_json, const std::filesystem::path& vocab_bpe) {
  constexpr const char* op = "Tokenizer::from_gpt2_files";
  return Tokenizer(std::make_shared<const detail::TokenizerState>(op, detail::load_gpt2_vocab(op, encoder_json, vocab_bpe)));
}

Tokenizer Tokenizer::from_pretrained(const std::filesystem::path& path) {
  constexpr const char* op = "Tokenizer::from_pretrained";
  const std::filesystem::path file = path.extension() == ".json" ? path : path / "tokenizer.json";
  const std::filesystem::path config = file.parent_path() / "tokenizer_config.json";
  std::optional<std::filesystem::path> config_if_any;
  std::error_code error;
  if (std::filesystem::exists(config, error)) config_if_any = config;
  return Tokenizer(std::make_shared<const detail::TokenizerState>(op, detail::load_tokenizer_json(op, file, config_if_any)));
}

std::vector<std::int64_t> Tokenizer::encode(std::string_view text) const {
  const detail::BpeVocab& vocab = state_->vocab;
  std::string normalized;  // Qwen's NFC: "e" + U+0301 gives the ids of U+00E9
  if (vocab.normalize_nfc) text = normalized = detail::nfc("Tokenizer::encode", text);
  std::vector<std::int64_t> ids;
  ids.reserve(text.size() / 4);
  state_->pretokenizer.split("Tokenizer::encode", text, [&](std::string_view piece) {
    if (vocab.ignore_merges) {
      const auto whole = vocab.whole_pieces.find(piece);
      if (whole != vocab.whole_pieces.end()) {
        ids.push_back(whole->second);
        return;
      }
    }
    if (state_->cache.find(piece, ids)) return;
    const std::size_t first = ids.size();
    detail::bpe_merge(vocab, piece, ids);
    state_->cache.insert(piece, std::span<const std::int64_t>(ids).subspan(first));
  });
  return ids;
}

std::vector<std::int64_t> Tokenizer::encode_with_special(std::string_view text) const {
  const std::vector<detail::AddedToken>& added = state_->vocab.added;  // longest first
  std::array<bool, 256> first_byte{};  // bytes an added token starts with
  for (const detail::AddedToken& t : added) first_byte[static_cast<unsigned char>(t.content[0])] = true;
  std::vector<std::int64_t> ids;
  std::size_t done = 0;  // text[0, done) is encoded
  for (std::size_t at = 0; at < text.size(); ++at) {
    if (!first_byte[static_cast<unsigned char>(text[at])]) continue;
    const auto match = std::ranges::find_if(added, [&](const detail::AddedToken& t) { return text.substr(at).starts_with(t.content); });
    if (match == added.end()) continue;
    const std::vector<std::int64_t> part = encode(text.substr(done, at - done));
    ids.insert(ids.end(), part.begin(), part.end());
    ids.push_back(match->id);
    at += match->content.size() - 1;
    done = at + 1;
  }
  const std::vector<std::int64_t> rest = encode(text.substr(done));
  ids.insert(ids.end(), rest.begin(), rest.end());
  return ids;
}

std::string Tokenizer::normalize(std::string_view text) const {
  return state_->vocab.normalize_nfc ? detail::nfc("Tokenizer::normalize", text) : std::string(text);
}

std::string Tokenizer::decode(std::span<const std::int64_t> ids) const {
  const std::vector<std::string>& tokens = state_->vocab.tokens;
  std::size_t size = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size())
      throw IndexError("Tokenizer::decode", concat("ids[", i, "] = ", ids[i], " is outside the vocabulary [0, ",
                                                   vocab_size(), ")"));
    size += tokens[static_cast<std::size_t>(ids[i])].size();
  }
  std::string text;
  text.reserve(size);
  for (const std::int64_t id : ids) text += tokens[static_cast<std::size_t>(id)];
  return text;
}

std::string Tokenizer::token_bytes(std::int64_t id) const {
  if (id < 0 || id >= vocab_size())
    throw IndexError("Tokenizer::token_bytes", concat("id ", id, " is outside the vocabulary [0, ", vocab_size(), ")"));
  return state_->vocab.tokens[static_cast<std::size_t>(id)];
}

std::int64_t Tokenizer::vocab_size() const { return static_cast<std::int64_t>(state_->vocab.tokens.size()); }

std::optional<std::int64_t> Tokenizer::bos_token() const { return state_->vocab.bos; }

std::optional<std::int64_t> Tokenizer::eos_token() const { return state_->vocab.eos; }

std::int64_t Tokenizer::document_token() const {
  if (const auto bos = bos_token()) return *bos;
  if (const auto eos = eos_token()) return *eos;
  throw Error("Tokenizer::document_token",
              "the tokenizer names no begin- or end-of-text token (give a tokenizer_config.json with bos_token or eos_token)");
}

}  // namespace infini::text
