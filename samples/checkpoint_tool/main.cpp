// checkpoint_tool: looks inside a distributed checkpoint (what --save writes under any layout)
// and converts it to one whole-model safetensors file.
//   checkpoint_tool inspect DIR [--sums]       step, ranks, metadata, files, every tensor's
//                                              dtype, shape, chunks and bytes (--sums: and the
//                                              sum of its elements, read from the shards)
//   checkpoint_tool safetensors DIR OUT [--prefix model/]
//                                              the tensors under the prefix, whole, named without
//                                              it (a state dict: load_state_dict reads it)
//   checkpoint_tool sums FILE.safetensors      every tensor's dtype, shape and sum
// For an llm.c file, run the trainer with --load DIR --export_llmc FILE.
#include <cstdint>
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

import infini.parallel;

using namespace infini;

namespace {

std::string shape_text(const Shape& shape) { return concat(shape); }

// Every digit a double needs to read back as itself.
std::string format_double(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

double sum_of(const Tensor& t) { return sum(t.to(kFloat64)).item<double>(); }

void inspect(const std::string& dir, bool sums) {
  const parallel::DistributedCheckpoint checkpoint(dir);
  std::printf("checkpoint %s: step %lld, saved by %d ranks\n", dir.c_str(), static_cast<long long>(checkpoint.step()),
              checkpoint.world_size());
  for (const auto& [key, value] : checkpoint.metadata()) std::printf("metadata %s: %s\n", key.c_str(), value.c_str());
  std::uint64_t file_bytes = 0;
  for (const parallel::ShardFile& file : checkpoint.files()) file_bytes += file.bytes;
  std::printf("%zu files, %llu bytes\n", checkpoint.files().size(), static_cast<unsigned long long>(file_bytes));
  for (const parallel::ShardFile& file : checkpoint.files())
    std::printf("  %s  rank %d  %llu bytes\n", file.name.c_str(), file.rank, static_cast<unsigned long long>(file.bytes));
  std::printf("%zu tensors\n", checkpoint.tensors().size());
  for (const auto& [key, t] : checkpoint.tensors()) {
    std::int64_t numel = 1;
    for (const std::int64_t s : t.shape) numel *= s;
    std::string line = concat("  ", key, "  ", name(t.dtype), " ", shape_text(t.shape), "  ", t.chunks.size(),
                              t.chunks.size() == 1 ? " chunk  " : " chunks  ",
                              numel * static_cast<std::int64_t>(itemsize(t.dtype)), " bytes");
    if (sums) {
      const Tensor whole = checkpoint.read({parallel::replicated(key, empty(t.shape, TensorOptions{.dtype = t.dtype}))})[0];
      line += concat("  sum ", format_double(sum_of(whole)));
    }
    std::printf("%s\n", line.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Inspect a distributed checkpoint, or convert it to a whole-model safetensors file");
  app.require_subcommand(1);
  std::string dir, out, file, prefix = "model/";
  bool sums = false;
  CLI::App* inspect_cmd = app.add_subcommand("inspect", "step, ranks, metadata, files and tensors");
  inspect_cmd->add_option("DIR", dir, "checkpoint directory")->required();
  inspect_cmd->add_flag("--sums", sums, "the sum of every tensor's elements too");
  CLI::App* convert_cmd = app.add_subcommand("safetensors", "the tensors under --prefix, whole, as one file");
  convert_cmd->add_option("DIR", dir, "checkpoint directory")->required();
  convert_cmd->add_option("OUT", out, "safetensors file to write")->required();
  convert_cmd->add_option("--prefix", prefix, "which tensors (model/: the model's state dict)");
  CLI::App* sums_cmd = app.add_subcommand("sums", "every tensor of a safetensors file with its sum");
  sums_cmd->add_option("FILE", file, "safetensors file")->required();
  CLI11_PARSE(app, argc, argv);
  try {
    if (*inspect_cmd) inspect(dir, sums);
    if (*convert_cmd) {
      const StateDict whole = parallel::DistributedCheckpoint(dir).read_whole(prefix);
      if (whole.empty()) throw Error("checkpoint_tool", concat("'", dir, "' has no tensor named ", prefix, "..."));
      io::save_safetensors(out, whole, {{"format", "pt"}});
      std::printf("wrote %zu tensors to %s\n", whole.size(), out.c_str());
    }
    if (*sums_cmd)
      for (const auto& [key, t] : io::load_safetensors(file).tensors)
        std::printf("  %s  %s %s  sum %s\n", key.c_str(), std::string(name(t.dtype())).c_str(),
                    shape_text(t.shape()).c_str(), format_double(sum_of(t)).c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "checkpoint_tool: %s\n", e.what());
    return 1;
  }
  return 0;
}
