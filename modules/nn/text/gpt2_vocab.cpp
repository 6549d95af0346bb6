// OpenAI's GPT-2 vocabulary files. encoder.json is read with nlohmann::json's SAX interface, so
// its one allowed shape ({"token": id, ...}) is checked event by event and a duplicate token is
// seen; set_bpe_tokens (bpe_vocab.cpp) turns the token strings back into bytes. vocab.bpe holds
// the merges, one per line in rank order.
module;
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
module infini.nn;
import infini.std;

namespace infini::text::detail {

namespace {

using nlohmann::json;
constexpr std::string_view kEndOfText = "<|endoftext|>";

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
                                                           BpeVocab& vocab) {
  const std::string where = path.string();
  const std::string text = read_text_file(op, path);
  // nlohmann's lexer takes a NUL byte for the end of the input; JSON allows NUL only escaped.
  if (const std::size_t nul = text.find('\0'); nul != std::string::npos)
    throw IOError(op, concat(where, ": not valid JSON (a NUL byte at byte ", nul, ")"));
  EncoderParser parser(where);
  if (!json::sax_parse(text, &parser)) throw IOError(op, parser.error());
  std::unordered_map<std::string, std::int64_t> ids = std::move(parser.ids());
  const std::size_t n = ids.size();
  if (n == 0) throw IOError(op, concat(where, ": expected one JSON object mapping token strings to integer ids, found {}"));

  // ids are distinct (one per token), so set_bpe_tokens finds them to be exactly 0..n-1 or
  // names one outside.
  set_bpe_tokens(op, where, ids, n, vocab);
  const auto eot = ids.find(std::string(kEndOfText));
  if (eot == ids.end()) throw IOError(op, concat(where, ": no ", kEndOfText, " token"));
  const auto eot_id = static_cast<std::int32_t>(eot->second);
  vocab.added = {{std::string(kEndOfText), eot_id}};
  vocab.bos = vocab.eos = eot_id;  // as transformers' GPT-2 tokenizer_config.json has them
  return ids;
}

// vocab.bpe: a "#version" line, then one merge "left right" per line in rank order.
void read_merges(const char* op, const std::filesystem::path& path,
                 const std::unordered_map<std::string, std::int64_t>& ids, BpeVocab& vocab) {
  const std::string where = path.string();
  const std::string text = read_text_file(op, path);
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

  vocab.merges.reserve(lines.size());
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    const std::size_t space = line.find(' ');
    if (space == std::string_view::npos || space == 0 || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string_view::npos)
      throw IOError(op, concat(where, ": line ", i + 1, ": expected a merge \"left right\" (two tokens, one space), found ",
                               quote(line)));
    const std::string_view left = line.substr(0, space), right = line.substr(space + 1);
    const std::string line_name = concat(where, ": line ", i + 1);
    if (const auto earlier = add_merge(op, line_name, "encoder.json", ids, left, right, static_cast<std::int32_t>(i - 1), vocab))
      throw IOError(op, concat(line_name, ": the merge ", quote(line), " repeats line ", *earlier + 2));
  }
}

}  // namespace

BpeVocab load_gpt2_vocab(const char* op, const std::filesystem::path& encoder_json,
                         const std::filesystem::path& vocab_bpe) {
  BpeVocab vocab;
  vocab.pattern = kGPT2Pattern;
  const std::unordered_map<std::string, std::int64_t> ids = read_encoder(op, encoder_json, vocab);
  read_merges(op, vocab_bpe, ids, vocab);
  return vocab;
}

}  // namespace infini::text::detail
