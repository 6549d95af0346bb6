// Pre-tokenizer regexes with PCRE2 (UTF + UCP: \p{L}, \p{N} are Unicode categories). \s is
// spelled out as the 25 characters of Unicode's White_Space, which is what Python's regex
// module (OpenAI's encoder.py), tiktoken and tokenizers match; PCRE2's own \s also matches
// U+180E. PCRE2_MATCH_INVALID_UTF lets the pattern run over any bytes: a byte sequence that is
// not valid UTF-8 is never part of a match, so for GPT-2's and LLaMA-3's patterns (whose
// alternatives together match every character) the runs between matches are exactly the
// invalid bytes.
module;
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstddef>
module infini.nn;
import infini.std;

#if !defined(PCRE2_MATCH_INVALID_UTF)
#error "PCRE2 >= 10.34 is needed (PCRE2_MATCH_INVALID_UTF)"
#endif

namespace infini::text::detail {
namespace {

// Unicode White_Space, for use inside a character class.
constexpr std::string_view kSpace =
    R"(\t-\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  return pcre2_get_error_message(code, buffer, sizeof buffer) < 0 ? "error " + std::to_string(code)
                                                                  : reinterpret_cast<const char*>(buffer);
}

struct MatchDataFree {
  void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
};

// The bytes of the UTF-8 character starting at text[i] (1 for a byte that starts none).
std::size_t utf8_length(std::string_view text, std::size_t i) {
  const auto c = static_cast<unsigned char>(text[i]);
  const std::size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
  return std::min(n, text.size() - i);
}

}  // namespace

struct Pretokenizer::Impl {
  pcre2_code* code = nullptr;
  ~Impl() { pcre2_code_free(code); }
};

std::string pcre2_pattern(const char* op, std::string_view pattern) {
  const std::string space(kSpace);
  std::string out;
  bool in_class = false;  // inside [...]
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[++i];
      if (next == 's') {
        out += in_class ? space : "[" + space + "]";
      } else if (next == 'S') {
        if (in_class) throw Error(op, concat("the pre-tokenizer pattern has \\S inside a character class (at byte ", i - 1,
                                             "), which is not supported"));
        out += "[^" + space + "]";
      } else {
        out += {c, next};
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member, not the end of the class.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

Pretokenizer::Pretokenizer(const char* op, std::string_view pattern) : impl_(std::make_unique<Impl>()) {
  const std::string source = pcre2_pattern(op, pattern);
  int error = 0;
  PCRE2_SIZE offset = 0;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source.data()), source.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &offset, nullptr);
  if (!impl_->code)
    throw Error(op, concat("PCRE2 rejects the pre-tokenizer pattern ", quote(pattern), " at offset ", offset, ": ",
                           pcre2_message(error)));
  pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE);  // no JIT on this platform: pcre2_match interprets
}

Pretokenizer::~Pretokenizer() = default;

void Pretokenizer::split(const char* op, std::string_view text,
                         const std::function<void(std::string_view)>& piece) const {
  const std::unique_ptr<pcre2_match_data, MatchDataFree> match(pcre2_match_data_create_from_pattern(impl_->code, nullptr));
  if (!match) throw Error(op, "PCRE2 cannot allocate its match data (out of memory)");
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t at = 0;      // the first byte not yet given out
  std::size_t search = 0;  // where the next match may start
  while (search < text.size()) {
    const int rc = pcre2_match(impl_->code, subject, text.size(), search, 0, match.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0)
      throw Error(op, concat("PCRE2 failed to match at byte ", search, " of ", text.size(), ": ", pcre2_message(rc)));
    const PCRE2_SIZE* range = pcre2_get_ovector_pointer(match.get());
    if (range[0] == range[1]) {  // an empty match (a pattern like \p{N}{0,3}) gives no piece:
      search = range[0] + utf8_length(text, range[0]);  // as tokenizers' find_iter, a character on
      continue;
    }
    if (range[0] > at) piece(text.substr(at, range[0] - at));  // what no match took (invalid UTF-8, ...)
    piece(text.substr(range[0], range[1] - range[0]));
    at = search = range[1];
  }
  if (at < text.size()) piece(text.substr(at));
}

}  // namespace infini::text::detail
