// Unicode NFC, tokenizer.json's normalizer "NFC" (Qwen's), with utf8proc: its tables follow
// the Unicode version of the Debian package, as tokenizers' follow its Rust crate's. Tokenizers
// take any bytes, so only the valid UTF-8 runs of a text are normalized; each byte that is not
// part of valid UTF-8 stays where it is, unchanged (a combining mark after it composes with
// nothing before it).
module;
#include <utf8proc.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
module infini.nn;
import infini.std;

namespace infini::text::detail {
namespace {

struct Free {
  void operator()(utf8proc_uint8_t* p) const { std::free(p); }
};

// Appends NFC(run) to `out`; `run` is valid UTF-8.
void append_nfc(const char* op, std::string_view run, std::string& out) {
  utf8proc_uint8_t* result = nullptr;
  const utf8proc_ssize_t size = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(run.data()),
                                             static_cast<utf8proc_ssize_t>(run.size()), &result,
                                             static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  const std::unique_ptr<utf8proc_uint8_t, Free> owned(result);
  if (size < 0)
    throw Error(op, concat("cannot NFC-normalize ", run.size(), " bytes of text (utf8proc: ", utf8proc_errmsg(size), ")"));
  out.append(reinterpret_cast<const char*>(result), static_cast<std::size_t>(size));
}

}  // namespace

std::string nfc(const char* op, std::string_view text) {
  if (std::ranges::none_of(text, [](char c) { return static_cast<unsigned char>(c) >= 0x80; }))
    return std::string(text);  // ASCII is NFC
  std::string out;
  out.reserve(text.size());
  const auto* bytes = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  std::size_t run = 0;  // the valid UTF-8 run text[run, i) is not normalized yet
  for (std::size_t i = 0; i < text.size();) {
    utf8proc_int32_t c = 0;
    const utf8proc_ssize_t n = utf8proc_iterate(bytes + i, static_cast<utf8proc_ssize_t>(text.size() - i), &c);
    if (n > 0) {
      i += static_cast<std::size_t>(n);
      continue;
    }
    if (i > run) append_nfc(op, text.substr(run, i - run), out);
    out += text[i];  // not valid UTF-8: kept as it is
    run = ++i;
  }
  if (text.size() > run) append_nfc(op, text.substr(run), out);
  return out;
}

}  // namespace infini::text::detail
