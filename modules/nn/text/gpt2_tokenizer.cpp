// GPT2Tokenizer (see gpt2_tokenizer.cppm): pieces from the pre-tokenizer, ids from the cache or
// the merge loop; decoding concatenates the tokens' bytes.
module;
#include <cstddef>
#include <cstdint>
module infini.nn;
import infini.std;

namespace infini::text {

GPT2Tokenizer GPT2Tokenizer::from_files(const std::filesystem::path& encoder_json,
                                        const std::filesystem::path& vocab_bpe) {
  return GPT2Tokenizer(
      std::make_shared<const detail::GPT2State>(detail::load_gpt2_vocab("GPT2Tokenizer::from_files", encoder_json, vocab_bpe)));
}

std::vector<std::int64_t> GPT2Tokenizer::encode(std::string_view text) const {
  std::vector<std::int64_t> ids;
  ids.reserve(text.size() / 4);
  state_->pretokenizer.split("GPT2Tokenizer::encode", text, [&](std::string_view piece) {
    if (state_->cache.find(piece, ids)) return;
    const std::size_t first = ids.size();
    detail::bpe_merge(state_->vocab, piece, ids);
    state_->cache.insert(piece, std::span<const std::int64_t>(ids).subspan(first));
  });
  return ids;
}

std::vector<std::int64_t> GPT2Tokenizer::encode_with_special(std::string_view text) const {
  const std::string_view special = state_->vocab.tokens[state_->vocab.eot];
  std::vector<std::int64_t> ids;
  for (;;) {
    const std::size_t at = text.find(special);
    const std::vector<std::int64_t> part = encode(text.substr(0, at));
    ids.insert(ids.end(), part.begin(), part.end());
    if (at == std::string_view::npos) return ids;
    ids.push_back(state_->vocab.eot);
    text.remove_prefix(at + special.size());
  }
}

std::string GPT2Tokenizer::decode(std::span<const std::int64_t> ids) const {
  const std::vector<std::string>& tokens = state_->vocab.tokens;
  std::size_t size = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size())
      throw IndexError("GPT2Tokenizer::decode", concat("ids[", i, "] = ", ids[i], " is outside the vocabulary [0, ",
                                                       vocab_size(), ")"));
    size += tokens[static_cast<std::size_t>(ids[i])].size();
  }
  std::string text;
  text.reserve(size);
  for (const std::int64_t id : ids) text += tokens[static_cast<std::size_t>(id)];
  return text;
}

std::string GPT2Tokenizer::token_bytes(std::int64_t id) const {
  if (id < 0 || id >= vocab_size())
    throw IndexError("GPT2Tokenizer::token_bytes",
                     concat("id ", id, " is outside the vocabulary [0, ", vocab_size(), ")"));
  return state_->vocab.tokens[static_cast<std::size_t>(id)];
}

std::int64_t GPT2Tokenizer::vocab_size() const { return static_cast<std::int64_t>(state_->vocab.tokens.size()); }

std::int64_t GPT2Tokenizer::eot_token() const { return state_->vocab.eot; }

}  // namespace infini::text
