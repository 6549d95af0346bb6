// The safetensors JSON header, read with nlohmann::json's SAX interface: each event is
// checked against the one structure allowed, so the first unexpected token (a duplicate key,
// a wrong type, nesting that does not belong) stops the parse. No document tree is built:
// memory stays proportional to the header's entries, and depth never exceeds three.
module;
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
module infini.nn;
import infini.std;

namespace infini::io::detail {
namespace {

using nlohmann::json;

class HeaderParser final : public nlohmann::json_sax<json> {
 public:
  explicit HeaderParser(const ErrorSource& source) : source_(source) {}

  Header take() { return std::move(header_); }

  bool null() override { return unexpected("null"); }
  bool boolean(bool value) override { return unexpected(value ? "true" : "false"); }
  bool number_integer(std::int64_t value) override {
    if (value < 0) return unexpected(concat("the negative number ", value));
    return number(static_cast<std::uint64_t>(value));  // "-0"
  }
  bool number_unsigned(std::uint64_t value) override { return number(value); }
  bool number_float(double, const std::string& text) override {
    return unexpected(concat("the number ", text.substr(0, 64)));  // fractions, exponents, integers >= 2^64
  }
  bool binary(json::binary_t&) override { return unexpected("binary data"); }

  bool string(std::string& value) override {
    if (scope_ == Scope::Entry && field_ == Field::Dtype) {
      const auto dtype = dtype_from_name(value);
      if (!dtype)
        source_.fail("tensor ", quote(entry_.name), ": unknown dtype ", quote(value),
                     " (expected one of F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL)");
      entry_.dtype = *dtype;
      return true;
    }
    if (scope_ == Scope::Metadata) {
      header_.metadata.emplace(std::move(key_), std::move(value));
      return true;
    }
    return unexpected("a string");
  }

  bool start_object(std::size_t) override {
    if (scope_ == Scope::Start) {
      scope_ = Scope::Top;
    } else if (scope_ == Scope::Top && key_ == "__metadata__") {
      scope_ = Scope::Metadata;
    } else if (scope_ == Scope::Top) {
      scope_ = Scope::Entry;
      entry_ = HeaderEntry{};
      entry_.name = std::move(key_);
      seen_fields_ = 0;
    } else {
      return unexpected("an object");
    }
    return true;
  }

  bool key(std::string& key) override {
    if (scope_ == Scope::Top) {
      if (!top_keys_.insert(key).second) source_.fail("duplicate key ", quote(key), " in the header");
    } else if (scope_ == Scope::Metadata) {
      if (header_.metadata.contains(key)) source_.fail("duplicate key ", quote(key), " in __metadata__");
    } else {  // Scope::Entry: the only other scope with keys
      field_ = key == "dtype" ? Field::Dtype : key == "shape" ? Field::Shape : key == "data_offsets" ? Field::Offsets : Field::None;
      if (field_ == Field::None)
        source_.fail("tensor ", quote(entry_.name), ": unexpected key ", quote(key),
                     " (expected dtype, shape and data_offsets)");
      const unsigned bit = 1u << static_cast<int>(field_);
      if (seen_fields_ & bit) source_.fail("tensor ", quote(entry_.name), ": duplicate key ", quote(key));
      seen_fields_ |= bit;
    }
    key_ = std::move(key);
    return true;
  }

  bool end_object() override {
    if (scope_ == Scope::Entry) {
      if (seen_fields_ != kAllFields)
        source_.fail("tensor ", quote(entry_.name), ": missing ", missing_fields(), " (expected dtype, shape and data_offsets)");
      header_.tensors.push_back(std::move(entry_));
      scope_ = Scope::Top;
    } else if (scope_ == Scope::Metadata) {
      scope_ = Scope::Top;
    } else {  // Scope::Top
      scope_ = Scope::Done;
    }
    return true;
  }

  bool start_array(std::size_t) override {
    if (scope_ == Scope::Entry && field_ == Field::Shape) scope_ = Scope::Shape;
    else if (scope_ == Scope::Entry && field_ == Field::Offsets) scope_ = Scope::Offsets;
    else return unexpected("an array");
    return true;
  }

  bool end_array() override {
    if (scope_ == Scope::Offsets && offsets_seen_ != 2)
      source_.fail("tensor ", quote(entry_.name), ": data_offsets has ", offsets_seen_, " elements, expected 2");
    offsets_seen_ = 0;
    scope_ = Scope::Entry;  // arrays exist only inside entries
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& error) override {
    // nlohmann's message (with the position) quotes the last token read, which can be as
    // long as the header.
    const std::string_view what = error.what();
    constexpr std::size_t kShown = 200;
    source_.fail("the header is not valid JSON: ", what.substr(0, kShown), what.size() > kShown ? "..." : "");
  }

 private:
  // Where the parser is: before the header object, directly in it, in a tensor entry, in
  // __metadata__, in an entry's shape or data_offsets array, or after the header object.
  enum class Scope { Start, Top, Entry, Metadata, Shape, Offsets, Done };
  // The key of an entry whose value comes next.
  enum class Field { Dtype, Shape, Offsets, None };
  static constexpr unsigned kAllFields = 0b111;

  bool number(std::uint64_t value) {
    if (scope_ == Scope::Shape) {
      entry_.shape.push_back(value);
    } else if (scope_ == Scope::Offsets) {
      if (offsets_seen_ == 2) source_.fail("tensor ", quote(entry_.name), ": data_offsets has more than 2 elements");
      (offsets_seen_ == 0 ? entry_.begin : entry_.end) = value;
      ++offsets_seen_;
    } else {
      return unexpected(concat("the number ", value));
    }
    return true;
  }

  // A value of the wrong kind (`what`) for where the parser is.
  bool unexpected(const std::string& what) {
    const std::string tensor = "tensor " + quote(entry_.name);
    switch (scope_) {
      case Scope::Start: source_.fail("the header must be a JSON object, got ", what);
      case Scope::Top:
        if (key_ == "__metadata__") source_.fail("__metadata__ must be an object of strings, got ", what);
        source_.fail("the value of ", quote(key_), " must be an object {dtype, shape, data_offsets}, got ", what);
      case Scope::Metadata: source_.fail("__metadata__ value of ", quote(key_), " must be a string, got ", what);
      case Scope::Shape: source_.fail(tensor, ": shape must hold non-negative integers, got ", what);
      case Scope::Offsets: source_.fail(tensor, ": data_offsets must hold non-negative integers, got ", what);
      case Scope::Entry:
        if (field_ == Field::Dtype) source_.fail(tensor, ": dtype must be a string, got ", what);
        source_.fail(tensor, ": ", field_ == Field::Shape ? "shape" : "data_offsets",
                     " must be an array of non-negative integers, got ", what);
      case Scope::Done: break;  // nlohmann reports anything after the object as a parse error
    }
    source_.fail("unexpected ", what, " after the header object");
  }

  std::string missing_fields() const {
    std::string missing;
    constexpr std::string_view kNames[] = {"dtype", "shape", "data_offsets"};
    for (int i = 0; i < 3; ++i)
      if (!(seen_fields_ & (1u << i))) missing += (missing.empty() ? "" : ", ") + std::string(kNames[i]);
    return missing;
  }

  const ErrorSource& source_;
  Header header_;
  Scope scope_ = Scope::Start;
  std::set<std::string> top_keys_;  // tensor names and __metadata__, to reject duplicates
  std::string key_;                 // the last key read (a tensor name, a metadata key, ...)
  HeaderEntry entry_;               // the entry being read
  Field field_ = Field::None;
  unsigned seen_fields_ = 0;        // bit i: Field i was given
  int offsets_seen_ = 0;
};

}  // namespace

Header parse_header(std::string_view json_text, const ErrorSource& source) {
  // nlohmann's lexer takes a NUL byte for the end of the input, which would hide whatever
  // follows it; JSON allows NUL only escaped, inside strings.
  if (const std::size_t nul = json_text.find('\0'); nul != std::string_view::npos)
    source.fail("the header has a NUL byte at byte ", nul, " (not valid JSON)");
  HeaderParser parser(source);
  // strict: nothing but whitespace may follow the object. Every violation throws from the
  // parser (no handler returns false), so returning means the whole header was accepted.
  json::sax_parse(json_text.begin(), json_text.end(), &parser, json::input_format_t::json, /*strict=*/true);
  return parser.take();
}

}  // namespace infini::io::detail
