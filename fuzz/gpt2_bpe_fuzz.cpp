// libFuzzer target: GPT-2's BPE files (Tokenizer::from_gpt2_files) and the encoder they make.
// The input is split (fuzz_input.h) into encoder.json, vocab.bpe and a text. A valid pair of
// files must encode the text and decode it back to the same bytes. IOError is the expected
// answer to malformed files; any other exception, a crash or a sanitizer report is a bug.
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
  const auto pieces = infini_fuzz::split(data, size, 3);
  const auto encoder = scratch.write("encoder.json", pieces[0]);
  const auto vocab = scratch.write("vocab.bpe", pieces[1]);
  const std::string_view text(reinterpret_cast<const char*>(pieces[2].data()), pieces[2].size());
  try {
    const infini::text::Tokenizer tokenizer = infini::text::Tokenizer::from_gpt2_files(encoder, vocab);
    const std::vector<std::int64_t> ids = tokenizer.encode(text);
    if (tokenizer.decode(ids) != text) __builtin_trap();  // byte-level BPE loses nothing
    const std::vector<std::int64_t> special = tokenizer.encode_with_special(text);
    if (tokenizer.decode(special) != text) __builtin_trap();
  } catch (const infini::Error&) {
  }
  return 0;
}
