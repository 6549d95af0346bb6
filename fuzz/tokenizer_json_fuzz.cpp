// libFuzzer target: Hugging Face's tokenizer.json (Tokenizer::from_pretrained) and the encoder
// it makes. The input is split (fuzz_input.h) into tokenizer.json and a text. A valid file must
// encode the text and decode it back to the same bytes, with and without added tokens; with an
// NFC normalizer, to the text's NFC (with added tokens, to a text of the same NFC: the text
// between them is normalized piece by piece).
// IOError is the expected answer to malformed files and Error to a pattern PCRE2 rejects; any
// other exception, a crash or a sanitizer report is a bug.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_input.h"

import infini.nn;

namespace {
const infini_fuzz::ScratchDir scratch;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto pieces = infini_fuzz::split(data, size, 2);
  const auto file = scratch.write("tokenizer.json", pieces[0]);
  const std::string_view text(reinterpret_cast<const char*>(pieces[1].data()), pieces[1].size());
  try {
    const infini::text::Tokenizer tokenizer = infini::text::Tokenizer::from_pretrained(file);
    const std::string normalized = tokenizer.normalize(text);  // `text` itself without a normalizer
    if (tokenizer.decode(tokenizer.encode(text)) != normalized) __builtin_trap();  // byte-level BPE loses nothing
    if (tokenizer.normalize(tokenizer.decode(tokenizer.encode_with_special(text))) != normalized) __builtin_trap();
  } catch (const infini::Error&) {
  }
  return 0;
}
