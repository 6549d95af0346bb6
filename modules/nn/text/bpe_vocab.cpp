// What GPT-2's files and tokenizer.json share: the byte characters of byte-level vocabularies,
// the checks that turn token strings -> ids into BpeVocab's tokens, and the merges, resolved
// to token ids once so that the merge loop works on integers only.
module;
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
module infini.nn;
import infini.std;

namespace infini::text::detail {

std::array<char32_t, 256> byte_characters() {
  std::array<char32_t, 256> chars{};
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    chars[b] = printable ? static_cast<char32_t>(b) : next++;
  }
  return chars;
}

std::optional<std::string> token_to_bytes(std::string_view token) {
  static const std::array<int, 324> byte_of = [] {
    std::array<int, 324> table;
    table.fill(-1);
    const std::array<char32_t, 256> chars = byte_characters();
    for (int b = 0; b < 256; ++b) table[chars[b]] = b;
    return table;
  }();
  std::string bytes;
  for (std::size_t i = 0; i < token.size();) {
    const auto lead = static_cast<unsigned char>(token[i]);
    char32_t c = 0;
    if (lead < 0x80) {
      c = lead;
      i += 1;
    } else if ((lead & 0xE0) == 0xC0 && i + 1 < token.size() && (token[i + 1] & 0xC0) == 0x80) {
      c = ((lead & 0x1Fu) << 6) | (static_cast<unsigned char>(token[i + 1]) & 0x3Fu);
      i += 2;
    } else {
      return std::nullopt;  // every byte character is below U+0800: one or two UTF-8 bytes
    }
    if (c >= byte_of.size() || byte_of[c] < 0) return std::nullopt;
    bytes += static_cast<char>(byte_of[c]);
  }
  return bytes;
}

std::string quote(std::string_view text) {
  std::string out = "'";
  for (std::size_t i = 0; i < text.size() && i < 40; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7F) {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + (text.size() > 40 ? "...'" : "'");
}

std::string read_text_file(const char* op, const std::filesystem::path& path) {
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IOError(op, concat(path.string(), ": cannot open (", errno ? std::strerror(errno) : "unknown error", ")"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw IOError(op, concat(path.string(), ": read error"));
  return text;
}

void set_bpe_tokens(const char* op, const std::string& where, const std::unordered_map<std::string, std::int64_t>& ids,
                    std::size_t size, BpeVocab& vocab) {
  vocab.tokens.assign(size, std::string());
  std::vector<std::string_view> token_of(size);
  for (const auto& [token, id] : ids) {
    if (id < 0 || static_cast<std::uint64_t>(id) >= size)
      throw IOError(op, concat(where, ": token ", quote(token), " has id ", id, ", expected ids 0..", size - 1,
                               " (the file has ", size, " tokens)"));
    if (!token_of[id].empty())
      throw IOError(op, concat(where, ": id ", id, " is given to both ", quote(token_of[id]), " and ", quote(token)));
    std::optional<std::string> bytes = token_to_bytes(token);
    if (!bytes || bytes->empty())
      throw IOError(op, concat(where, ": token ", quote(token), " (id ", id, ") ",
                               bytes ? "is empty" : "holds a character that stands for no byte (see bytes_to_unicode)"));
    token_of[id] = token;
    if (vocab.ignore_merges) vocab.whole_pieces.emplace(*bytes, static_cast<std::int32_t>(id));
    vocab.tokens[id] = std::move(*bytes);
  }

  std::array<bool, 256> found{};
  for (std::size_t id = 0; id < size; ++id)
    if (vocab.tokens[id].size() == 1 && !found[static_cast<unsigned char>(vocab.tokens[id][0])]) {
      const auto b = static_cast<unsigned char>(vocab.tokens[id][0]);
      vocab.byte_tokens[b] = static_cast<std::int32_t>(id);
      found[b] = true;
    }
  for (int b = 0; b < 256; ++b)
    if (!found[b]) throw IOError(op, concat(where, ": no token for the byte ", b, ": every byte needs one"));
}

std::optional<std::int32_t> add_merge(const char* op, const std::string& line, std::string_view vocab_name,
                                      const std::unordered_map<std::string, std::int64_t>& ids, std::string_view left,
                                      std::string_view right, std::int32_t rank, BpeVocab& vocab) {
  auto token_id = [&](std::string_view token, const char* what) {
    const auto it = ids.find(std::string(token));
    if (it == ids.end()) throw IOError(op, concat(line, ": ", what, " ", quote(token), " is not a token of ", vocab_name));
    return static_cast<std::int32_t>(it->second);
  };
  const std::uint64_t key = pair_key(token_id(left, "the left token"), token_id(right, "the right token"));
  const Merge merge{rank, token_id(std::string(left) + std::string(right), "the merged token")};
  const auto [it, inserted] = vocab.merges.emplace(key, merge);
  if (!inserted) return it->second.rank;
  return std::nullopt;
}

}  // namespace infini::text::detail
