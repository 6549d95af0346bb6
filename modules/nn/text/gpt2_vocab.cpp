// GPT-2's vocabulary files. encoder.json is read with nlohmann::json's SAX interface, so its one
// allowed shape ({"token": id, ...}) is checked event by event and a duplicate token is seen;
// each token string is turned back into bytes with byte_characters(). vocab.bpe's merges are
// resolved to token ids once, here, so the merge loop works on integers only.
module;
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
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

namespace {

using nlohmann::json;
constexpr std::string_view kEndOfText = "<|endoftext|>";

// `text` for messages: control bytes as \xNN, cut after 40 bytes.
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

std::string read_file(const char* op, const std::filesystem::path& path) {
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IOError(op, concat(path.string(), ": cannot open (", errno ? std::strerror(errno) : "unknown error", ")"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw IOError(op, concat(path.string(), ": read error"));
  return text;
}

// The bytes a token string of encoder.json / vocab.bpe stands for, or nullopt when it holds a
// character that is not one of byte_characters() (or is not UTF-8).
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

// encoder.json: exactly one object of token strings to integer ids.
class EncoderParser final : public nlohmann::json_sax<json> {
 public:
  explicit EncoderParser(std::string where) : where_(std::move(where)) {}

  std::unordered_map<std::string, std::int64_t>& ids() { return ids_; }
  const std::string& error() const { return error_; }

  bool null() override { return unexpected("null"); }
  bool boolean(bool) override { return unexpected("a boolean"); }
  bool number_integer(std::int64_t value) override { return id(value < 0 ? -1 : value, std::to_string(value)); }
  bool number_unsigned(std::uint64_t value) override {
    return id(value > std::numeric_limits<std::int32_t>::max() ? -1 : static_cast<std::int64_t>(value),
              std::to_string(value));
  }
  bool number_float(double, const std::string& text) override { return unexpected("the number " + text.substr(0, 40)); }
  bool string(std::string&) override { return unexpected("a string"); }
  bool binary(json::binary_t&) override { return unexpected("binary data"); }
  bool start_object(std::size_t) override {
    if (depth_++ > 0) return unexpected("an object");
    return true;
  }
  bool key(std::string& token) override {
    key_ = std::move(token);
    return true;
  }
  bool end_object() override {
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override { return unexpected("an array"); }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    return fail(concat("not valid JSON (", e.what(), ")"));
  }

 private:
  bool id(std::int64_t value, const std::string& text) {
    if (depth_ != 1) return unexpected("a number");
    if (value < 0) return fail(concat("token ", quote(key_), " has id ", text, ", expected 0 <= id < 2^31"));
    if (!ids_.emplace(key_, value).second) return fail(concat("token ", quote(key_), " appears twice"));
    return true;
  }
  bool unexpected(const std::string& what) {
    return fail(concat("expected one JSON object mapping token strings to integer ids, found ", what,
                       depth_ ? " as the value of token " + quote(key_) : std::string()));
  }
  bool fail(const std::string& message) {
    error_ = where_ + ": " + message;
    return false;
  }

  std::string where_;
  std::string error_;
  std::string key_;
  int depth_ = 0;
  std::unordered_map<std::string, std::int64_t> ids_;
};

// Fills vocab.tokens, byte_tokens and eot from encoder.json; returns the token strings' ids
// for resolving the merges.
std::unordered_map<std::string, std::int64_t> read_encoder(const char* op, const std::filesystem::path& path,
                                                           GPT2Vocab& vocab) {
  const std::string where = path.string();
  const std::string text = read_file(op, path);
  // nlohmann's lexer takes a NUL byte for the end of the input; JSON allows NUL only escaped.
  if (const std::size_t nul = text.find('\0'); nul != std::string::npos)
    throw IOError(op, concat(where, ": not valid JSON (a NUL byte at byte ", nul, ")"));
  EncoderParser parser(where);
  if (!json::sax_parse(text, &parser)) throw IOError(op, parser.error());
  std::unordered_map<std::string, std::int64_t> ids = std::move(parser.ids());
  const std::size_t n = ids.size();
  if (n == 0) throw IOError(op, concat(where, ": expected one JSON object mapping token strings to integer ids, found {}"));

  // ids are distinct (one per token) and all below n: so they are exactly 0..n-1.
  vocab.tokens.assign(n, std::string());
  std::vector<std::string_view> token_of(n);
  for (const auto& [token, id] : ids) {
    if (static_cast<std::uint64_t>(id) >= n)
      throw IOError(op, concat(where, ": token ", quote(token), " has id ", id, ", expected ids 0..", n - 1,
                               " (the file has ", n, " tokens)"));
    if (!token_of[id].empty())
      throw IOError(op, concat(where, ": id ", id, " is given to both ", quote(token_of[id]), " and ", quote(token)));
    std::optional<std::string> bytes = token_to_bytes(token);
    if (!bytes || bytes->empty())
      throw IOError(op, concat(where, ": token ", quote(token), " (id ", id, ") ",
                               bytes ? "is empty" : "holds a character that stands for no byte (see bytes_to_unicode)"));
    token_of[id] = token;
    vocab.tokens[id] = std::move(*bytes);
  }

  std::array<bool, 256> found{};
  for (std::size_t id = 0; id < n; ++id)
    if (vocab.tokens[id].size() == 1) {
      const auto b = static_cast<unsigned char>(vocab.tokens[id][0]);
      vocab.byte_tokens[b] = static_cast<std::int32_t>(id);
      found[b] = true;
    }
  for (int b = 0; b < 256; ++b)
    if (!found[b]) throw IOError(op, concat(where, ": no token for the byte ", b, ": every byte needs one"));
  const auto eot = ids.find(std::string(kEndOfText));
  if (eot == ids.end()) throw IOError(op, concat(where, ": no ", kEndOfText, " token"));
  vocab.eot = static_cast<std::int32_t>(eot->second);
  return ids;
}

// vocab.bpe: a "#version" line, then one merge "left right" per line in rank order.
void read_merges(const char* op, const std::filesystem::path& path,
                 const std::unordered_map<std::string, std::int64_t>& ids, GPT2Vocab& vocab) {
  const std::string where = path.string();
  const std::string text = read_file(op, path);
  std::vector<std::string_view> lines;
  for (std::size_t begin = 0; begin < text.size();) {
    const std::size_t end = std::min(text.find('\n', begin), text.size());
    lines.push_back(std::string_view(text).substr(begin, end - begin));
    begin = end + 1;
  }
  if (lines.empty() || !lines[0].starts_with("#version"))
    throw IOError(op, concat(where, ": line 1 must be the version comment \"#version: ...\", found ",
                             lines.empty() ? "an empty file" : quote(lines[0])));
  if (lines.size() - 1 > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
    throw IOError(op, concat(where, ": more than 2^31 - 1 merges"));

  auto token_id = [&](std::string_view token, std::size_t line, const char* what) {
    const auto it = ids.find(std::string(token));
    if (it == ids.end())
      throw IOError(op, concat(where, ": line ", line, ": ", what, " ", quote(token), " is not a token of encoder.json"));
    return static_cast<std::int32_t>(it->second);
  };
  vocab.merges.reserve(lines.size());
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    const std::size_t space = line.find(' ');
    if (space == std::string_view::npos || space == 0 || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string_view::npos)
      throw IOError(op, concat(where, ": line ", i + 1, ": expected a merge \"left right\" (two tokens, one space), found ",
                               quote(line)));
    const std::string_view left = line.substr(0, space), right = line.substr(space + 1);
    const std::uint64_t key = pair_key(token_id(left, i + 1, "the left token"), token_id(right, i + 1, "the right token"));
    const Merge merge{static_cast<std::int32_t>(i - 1),
                      token_id(std::string(left) + std::string(right), i + 1, "the merged token")};
    const auto [it, inserted] = vocab.merges.emplace(key, merge);
    if (!inserted)
      throw IOError(op, concat(where, ": line ", i + 1, ": the merge ", quote(line), " repeats line ", it->second.rank + 2));
  }
}

}  // namespace

GPT2Vocab load_gpt2_vocab(const char* op, const std::filesystem::path& encoder_json,
                          const std::filesystem::path& vocab_bpe) {
  GPT2Vocab vocab;
  const std::unordered_map<std::string, std::int64_t> ids = read_encoder(op, encoder_json, vocab);
  read_merges(op, vocab_bpe, ids, vocab);
  return vocab;
}

}  // namespace infini::text::detail
