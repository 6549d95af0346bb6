// libFuzzer target: the distributed checkpoint reader (parallel::DistributedCheckpoint: the
// manifest, then every tensor read whole from its chunks) on arbitrary bytes. The input is
// split (fuzz_input.h) into checkpoint.json and shard-0-0-0.safetensors, the shard file the seed
// manifests name. An infini::Error is the expected answer to a malformed checkpoint; any other
// exception, a crash or a sanitizer report is a bug, and so is a tensor read back with another
// size than the manifest's shape.
#include <cstddef>
#include <cstdint>
#include <map>  // iterating the tensors: their instantiations must be visible here
#include <string>

#include "fuzz_input.h"

import infini.parallel;

namespace {
const infini_fuzz::ScratchDir scratch;
volatile unsigned char sink;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto pieces = infini_fuzz::split(data, size, 2);
  scratch.write("checkpoint.json", pieces[0]);
  scratch.write("shard-0-0-0.safetensors", pieces[1]);
  try {
    const infini::parallel::DistributedCheckpoint checkpoint(scratch.path());
    const infini::StateDict tensors = checkpoint.read_whole("");
    for (const auto& [key, tensor] : tensors) {
      const auto& stored = checkpoint.tensors().at(key);
      if (tensor.shape() != stored.shape || tensor.dtype() != stored.dtype) __builtin_trap();
      const auto* p = static_cast<const unsigned char*>(tensor.data_ptr());
      if (tensor.nbytes() > 0) sink = p[tensor.nbytes() - 1];  // AddressSanitizer checks the end
    }
  } catch (const infini::Error&) {
  }
  return 0;
}
