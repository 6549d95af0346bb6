// libFuzzer target: llm.c's model files, GPT-2 and LLaMA-3 (read_gpt2_checkpoint,
// read_llama3_checkpoint) on arbitrary bytes. IOError is the expected answer to a malformed
// file; any other exception, a crash or a sanitizer report is a bug.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "fuzz_input.h"

import infini.nn;

namespace {
const infini_fuzz::ScratchDir scratch;
volatile float sink;  // keeps the reads of the tensors' last elements

// Every tensor a reader returned must match its layout and be readable to its last byte.
template <class Checkpoint>
void check(const Checkpoint& checkpoint, const std::vector<std::pair<std::string, infini::Shape>>& layout) {
  if (checkpoint.tensors.size() != layout.size()) __builtin_trap();
  for (std::size_t i = 0; i < layout.size(); ++i) {
    const infini::Tensor& t = checkpoint.tensors[i].second;
    if (checkpoint.tensors[i].first != layout[i].first || t.shape() != layout[i].second) __builtin_trap();
    if (t.dtype() != infini::kFloat32 || !t.is_contiguous()) __builtin_trap();
    if (t.numel() > 0) sink = t.template data_ptr<float>()[t.numel() - 1];  // AddressSanitizer checks the end
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto path = scratch.write("model.bin", std::span(data, size));
  try {
    const auto gpt2 = infini::llmc::read_gpt2_checkpoint(path);
    check(gpt2, infini::llmc::gpt2_layout(gpt2.config));
  } catch (const infini::Error&) {
  }
  try {
    const auto llama = infini::llmc::read_llama3_checkpoint(path);
    check(llama, infini::llmc::llama3_layout(llama.config));
  } catch (const infini::Error&) {
  }
  return 0;
}
