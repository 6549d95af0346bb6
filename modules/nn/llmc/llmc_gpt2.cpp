// GPT-2 checkpoints: header[0] magic 20240326, [1] version, [2] maxT, [3] V, [4] L, [5] NH,
// [6] C, [7] Vp (llm.c's train_gpt2.py write_model, train_gpt2.c gpt2_build_from_checkpoint).
module;
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <utility>
#include <vector>
module infini.nn;

namespace infini::llmc {
namespace {

using detail::FileError;
using detail::Header;

constexpr std::int32_t kMagic = 20240326;

// fail() unless the config is one a file can hold and the reader accepts.
void check_config(const GPT2Config& c, const FileError& source) {
  const std::pair<const char*, std::int64_t> dims[] = {{"max_seq_len", c.max_seq_len}, {"vocab_size", c.vocab_size},
                                                       {"padded_vocab_size", c.padded_vocab_size},
                                                       {"num_layers", c.num_layers},   {"num_heads", c.num_heads},
                                                       {"channels", c.channels}};
  for (const auto& [name, value] : dims) {
    if (value <= 0) source.fail(name, " is ", value, ", expected a positive number");
    if (value > std::numeric_limits<std::int32_t>::max())
      source.fail(name, " is ", value, ", more than the header's int32 holds");
  }
  if (c.padded_vocab_size < c.vocab_size)
    source.fail("padded_vocab_size ", c.padded_vocab_size, " is smaller than vocab_size ", c.vocab_size);
  if (c.channels % c.num_heads != 0)
    source.fail("num_heads ", c.num_heads, " does not divide channels ", c.channels);
}

}  // namespace

std::vector<std::pair<std::string, Shape>> gpt2_layout(const GPT2Config& config) {
  const std::int64_t Vp = config.padded_vocab_size, maxT = config.max_seq_len, L = config.num_layers,
                     C = config.channels;
  return {{"wte", {Vp, C}},           {"wpe", {maxT, C}},     {"ln1w", {L, C}},        {"ln1b", {L, C}},
          {"qkvw", {L, 3 * C, C}},    {"qkvb", {L, 3 * C}},   {"attprojw", {L, C, C}}, {"attprojb", {L, C}},
          {"ln2w", {L, C}},           {"ln2b", {L, C}},       {"fcw", {L, 4 * C, C}},  {"fcb", {L, 4 * C}},
          {"fcprojw", {L, C, 4 * C}}, {"fcprojb", {L, C}},    {"lnfw", {C}},           {"lnfb", {C}}};
}

GPT2Checkpoint read_gpt2_checkpoint(const std::filesystem::path& path) {
  const FileError source{.op = "read_gpt2_checkpoint", .file = path.string()};
  // Checkpoints are replaced by rename, never changed in place, so the mapping cannot shrink.
  const detail::MappedFile file = detail::map_file(path, source);
  const Header header = detail::read_header(file.bytes(), source);
  detail::check_magic(header, kMagic, source);
  const DataType dtype = detail::checkpoint_dtype(header[1], source);
  const GPT2Config config{.max_seq_len = header[2],
                          .vocab_size = header[3],
                          .padded_vocab_size = header[7],
                          .num_layers = header[4],
                          .num_heads = header[5],
                          .channels = header[6]};
  check_config(config, source);
  return {.config = config,
          .tensors = detail::read_tensors(file.bytes().subspan(detail::kHeaderBytes), gpt2_layout(config), dtype,
                                          source)};
}

void write_gpt2_checkpoint(const std::filesystem::path& path, const GPT2Checkpoint& checkpoint, DataType dtype) {
  const FileError source{.op = "write_gpt2_checkpoint", .file = path.string()};
  const GPT2Config& c = checkpoint.config;
  Header header{};
  header[0] = kMagic;
  check_config(c, source);
  header[2] = static_cast<std::int32_t>(c.max_seq_len);
  header[3] = static_cast<std::int32_t>(c.vocab_size);
  header[4] = static_cast<std::int32_t>(c.num_layers);
  header[5] = static_cast<std::int32_t>(c.num_heads);
  header[6] = static_cast<std::int32_t>(c.channels);
  header[7] = static_cast<std::int32_t>(c.padded_vocab_size);
  detail::write_checkpoint(path, header, gpt2_layout(c), checkpoint.tensors, dtype, source);
}

}  // namespace infini::llmc
