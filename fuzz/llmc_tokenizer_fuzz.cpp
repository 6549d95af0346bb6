// libFuzzer target: llm.c's tokenizer files (llmc::read_tokenizer_file) on arbitrary bytes.
// IOError is the expected answer to a malformed file; any other exception, a crash or a
// sanitizer report is a bug.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "fuzz_input.h"

import infini.nn;

namespace {
const infini_fuzz::ScratchDir scratch;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto path = scratch.write("tokenizer.bin", std::span(data, size));
  try {
    const infini::llmc::TokenizerFile file = infini::llmc::read_tokenizer_file(path);
    // 1 KiB header, then one length byte and 1..255 bytes per token: nothing beyond the input.
    std::size_t total = 1024;
    for (const std::string& token : file.tokens) {
      if (token.empty() || token.size() > 255) __builtin_trap();
      total += 1 + token.size();
    }
    if (file.tokens.empty() || total > size) __builtin_trap();
    if (file.eot_token && (*file.eot_token < 0 || *file.eot_token >= static_cast<std::int64_t>(file.tokens.size())))
      __builtin_trap();
  } catch (const infini::Error&) {
  }
  return 0;
}
