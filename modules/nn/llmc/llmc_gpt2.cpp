// GPT-2 checkpoints: header[0] magic 20240326, [1] version, [2] maxT, [3] V, [4] L, [5] NH,
// [6] C, [7] Vp (llm.c's train_gpt2.py write_model, train_gpt2.c gpt2_build_from_checkpoint).
module;
#include <cstdint>
module infini.nn;
import infini.std;

namespace infini::llmc {
namespace {

using detail::FileError;
using detail::Header;

constexpr std::int32_t kMagic = 20240326;

using Field = detail::HeaderField<GPT2Config>;

constexpr std::array<Field, 6> kFields = {{{2, "max_seq_len", &GPT2Config::max_seq_len},
                                           {3, "vocab_size", &GPT2Config::vocab_size},
                                           {4, "num_layers", &GPT2Config::num_layers},
                                           {5, "num_heads", &GPT2Config::num_heads},
                                           {6, "channels", &GPT2Config::channels},
                                           {7, "padded_vocab_size", &GPT2Config::padded_vocab_size}}};

// fail() unless the config (its fields checked by the header's table) is one the reader accepts.
void check_config(const GPT2Config& c, const FileError& source) {
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
  const GPT2Config config = detail::read_fields(header, kFields, source);
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
  detail::write_fields(c, kFields, header, source);
  check_config(c, source);
  detail::write_checkpoint(path, header, gpt2_layout(c), checkpoint.tensors, dtype, source);
}

}  // namespace infini::llmc
