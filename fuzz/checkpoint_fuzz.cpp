// libFuzzer target: the training-state checkpoint (io::load_checkpoint) on arbitrary bytes. The
// input is split (fuzz_input.h) into manifest.json and state-0-0.safetensors, the tensors file
// the seed manifests name. IOError is the expected answer to a malformed checkpoint; any other
// exception, a crash or a sanitizer report is a bug.
#include <cstddef>
#include <cstdint>
#include <map>  // iterating the parts: their instantiations must be visible here
#include <string>

#include "fuzz_input.h"

import infini.nn;

namespace {
const infini_fuzz::ScratchDir scratch;
volatile unsigned char sink;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto pieces = infini_fuzz::split(data, size, 2);
  scratch.write("manifest.json", pieces[0]);
  scratch.write("state-0-0.safetensors", pieces[1]);
  try {
    const infini::io::Checkpoint checkpoint = infini::io::load_checkpoint(scratch.path());
    std::size_t bytes = 0;
    for (const auto& [part, tensors] : checkpoint.parts)
      for (const auto& [name, tensor] : tensors) {
        const auto* p = static_cast<const unsigned char*>(tensor.data_ptr());
        if (tensor.nbytes() > 0) sink = p[tensor.nbytes() - 1];  // AddressSanitizer checks the end
        bytes += static_cast<std::size_t>(tensor.nbytes());
      }
    if (bytes > pieces[1].size()) __builtin_trap();
  } catch (const infini::Error&) {
  }
  return 0;
}
