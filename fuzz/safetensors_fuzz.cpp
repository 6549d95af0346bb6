// libFuzzer target: parse_safetensors on arbitrary bytes. An infini::Error is the expected
// answer to a malformed file; any other exception, a crash or a sanitizer report is a bug.
#include <cstddef>
#include <cstdint>
#include <map>  // iterating the StateDict: its instantiations must be visible here
#include <span>
#include <string>

import infini.nn;

namespace {
volatile unsigned char checksum_sink;  // keeps the reads of the tensors' bytes
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const infini::io::SafetensorsFile file = infini::io::parse_safetensors(std::as_bytes(std::span(data, size)));
    // Names come from the header and tensor bytes from the buffer behind it: together they
    // cannot exceed the input. Reading every byte lets AddressSanitizer check the tensors.
    std::size_t total = 0;
    unsigned char checksum = 0;
    for (const auto& [name, tensor] : file.tensors) {
      const auto* bytes = static_cast<const unsigned char*>(tensor.data_ptr());
      for (std::int64_t i = 0; i < tensor.nbytes(); ++i) checksum ^= bytes[i];
      total += name.size() + static_cast<std::size_t>(tensor.nbytes());
    }
    checksum_sink = checksum;
    if (total > size) __builtin_trap();
  } catch (const infini::Error&) {
  }
  return 0;
}
