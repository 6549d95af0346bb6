// libFuzzer target: trace::merge_chrome_files (--profile's merge of the ranks' trace files) on
// arbitrary bytes. The input is split (fuzz_input.h) into two rank files; a merge that
// succeeds must write valid JSON. IOError is the expected answer to a malformed file; any
// other exception, a crash or a sanitizer report is a bug.
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "fuzz_input.h"

import infini.tensor;

namespace {
const infini_fuzz::ScratchDir scratch;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto pieces = infini_fuzz::split(data, size, 2);
  const auto first = scratch.write("rank_0.json", pieces[0]);
  const auto second = scratch.write("rank_1.json", pieces[1]);
  const auto merged = scratch.path() / "trace.json";
  try {
    infini::trace::merge_chrome_files({first, second}, merged);
    std::ifstream in(merged, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // nlohmann's parser stops at a NUL byte: none may be in a valid merged file either.
    if (text.find('\0') != std::string::npos || !nlohmann::json::accept(text)) __builtin_trap();
  } catch (const infini::Error&) {
  }
  return 0;
}
