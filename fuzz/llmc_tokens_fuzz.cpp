// libFuzzer target: llm.c's token files (llmc::TokenFile) on arbitrary bytes: open, then read
// every token one by one and as one window that wraps around. IOError is the expected answer
// to a malformed file; any other exception, a crash or a sanitizer report is a bug.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "fuzz_input.h"

import infini.nn;

namespace {
const infini_fuzz::ScratchDir scratch;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto path = scratch.write("tokens.bin", std::span(data, size));
  try {
    const infini::llmc::TokenFile tokens(path);
    const std::int64_t n = tokens.size();
    // The header counts the tokens and the file holds exactly them (1 KiB header, 2 or 4 bytes each).
    const std::int64_t width = tokens.format() == infini::llmc::TokenFormat::kGPT2 ? 2 : 4;
    if (n < 1 || 1024 + n * width != static_cast<std::int64_t>(size)) __builtin_trap();
    std::vector<std::int64_t> window(static_cast<std::size_t>(n + 1));
    tokens.read_window(0, n + 1, window.data());
    for (std::int64_t i = 0; i < n; ++i)
      if (window[i] != tokens.token(i)) __builtin_trap();
    if (window[n] != window[0]) __builtin_trap();  // wrapped to token 0
  } catch (const infini::Error&) {
  }
  return 0;
}
