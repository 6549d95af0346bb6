// Shared by the tokenizer tests: GPT-2's byte characters, written independently of the library's.
#pragma once

#include <array>
#include <string>

namespace infini::text::test {

// GPT-2's bytes_to_unicode as a UTF-8 string per byte: printable bytes stand for themselves,
// the others, in byte order, for U+0100, U+0101, ...
inline std::array<std::string, 256> byte_strings() {
  auto utf8 = [](unsigned c) {
    if (c < 0x80) return std::string(1, static_cast<char>(c));
    return std::string{static_cast<char>(0xC0 | (c >> 6)), static_cast<char>(0x80 | (c & 0x3F))};
  };
  std::array<std::string, 256> out;
  unsigned next = 0x100;
  for (unsigned b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    out[b] = utf8(printable ? b : next++);
  }
  return out;
}

}  // namespace infini::text::test
