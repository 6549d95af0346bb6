// LLaMA-3 checkpoints in the layout InfiniTrain's example/llama3 reads (LoadFromLLMC) and its
// scripts/assets/prepare_llama3_assets.py writes: one 256 x int32 header with three float32
// fields in it, then the tensors in the order of llm.c's first train_llama3.py write_tensors.
//   [0] magic 20240803  [1] version   [2] maxT   [3] V   [4] L   [5] NH   [6] KV   [7] C
//   [8] ffn_dim_multiplier (f32)  [9] multiple_of  [10] norm_eps (f32)  [11] rope_theta (f32)
//   [12] use_scaled_rope  [13] max_gen_batch_size  [14] version_major  [15] version_minor
module;
#include <bit>
#include <cmath>
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

constexpr std::int32_t kMagic = 20240803;
constexpr float kMinMultiplier = 0.01f;
constexpr float kMaxMultiplier = 100.0f;

// fail() unless the config is one a file can hold and the reader accepts.
void check_config(const LLaMA3Config& c, const FileError& source) {
  const std::pair<const char*, std::int64_t> dims[] = {
      {"max_seq_len", c.max_seq_len}, {"vocab_size", c.vocab_size},     {"num_layers", c.num_layers},
      {"num_heads", c.num_heads},     {"num_kv_heads", c.num_kv_heads}, {"channels", c.channels},
      {"multiple_of", c.multiple_of}};
  for (const auto& [name, value] : dims) {
    if (value <= 0) source.fail(name, " is ", value, ", expected a positive number");
    if (value > std::numeric_limits<std::int32_t>::max())
      source.fail(name, " is ", value, ", more than the header's int32 holds");
  }
  if (c.max_gen_batch_size < 0 || c.max_gen_batch_size > std::numeric_limits<std::int32_t>::max())
    source.fail("max_gen_batch_size is ", c.max_gen_batch_size, ", expected 0 .. 2^31 - 1");
  if (c.channels % c.num_heads != 0) source.fail("num_heads ", c.num_heads, " does not divide channels ", c.channels);
  if (c.num_heads % c.num_kv_heads != 0)
    source.fail("num_kv_heads ", c.num_kv_heads, " does not divide num_heads ", c.num_heads);
  const float m = c.ffn_dim_multiplier;
  if (m != 0 && !(m >= kMinMultiplier && m <= kMaxMultiplier))
    source.fail("ffn_dim_multiplier is ", m, ", expected 0 (none) or ", kMinMultiplier, " .. ", kMaxMultiplier,
                " (a file with llm.c's separate float header, where slot 8 holds multiple_of, is not supported)");
  if (!(std::isfinite(c.norm_eps) && c.norm_eps > 0)) source.fail("norm_eps is ", c.norm_eps, ", expected > 0");
  if (!(std::isfinite(c.rope_theta) && c.rope_theta > 0)) source.fail("rope_theta is ", c.rope_theta, ", expected > 0");
  if (llama3_ffn_hidden_dim(c) <= 0)
    source.fail("the FFN hidden size is 0 (channels ", c.channels, ", ffn_dim_multiplier ", m, ")");
}

}  // namespace

std::int64_t llama3_ffn_hidden_dim(const LLaMA3Config& config) {
  if (config.multiple_of <= 0)
    throw Error("llama3_ffn_hidden_dim", concat("multiple_of is ", config.multiple_of, ", expected a positive number"));
  std::int64_t hidden = 2 * (4 * config.channels) / 3;
  if (config.ffn_dim_multiplier > 0)
    hidden = std::llround(static_cast<double>(config.ffn_dim_multiplier) * static_cast<double>(hidden));
  return (hidden + config.multiple_of - 1) / config.multiple_of * config.multiple_of;
}

std::vector<std::pair<std::string, Shape>> llama3_layout(const LLaMA3Config& config) {
  const std::int64_t V = config.vocab_size, L = config.num_layers, C = config.channels;
  const std::int64_t qkv = (config.num_heads + 2 * config.num_kv_heads) * (C / config.num_heads);
  const std::int64_t H = llama3_ffn_hidden_dim(config);
  return {{"wte", {V, C}},  {"ln1w", {L, C}},    {"qkvw", {L, qkv, C}}, {"attprojw", {L, C, C}}, {"ln2w", {L, C}},
          {"fcw", {L, H, C}}, {"fc2w", {L, H, C}}, {"fcprojw", {L, C, H}}, {"lnfw", {C}},         {"wlmhead", {V, C}}};
}

LLaMA3Checkpoint read_llama3_checkpoint(const std::filesystem::path& path) {
  const FileError source{.op = "read_llama3_checkpoint", .file = path.string()};
  const detail::MappedFile file = detail::map_file(path, source);
  const Header header = detail::read_header(file.bytes(), source);
  detail::check_magic(header, kMagic, source);
  const DataType dtype = detail::checkpoint_dtype(header[1], source);
  if (header[12] != 0 && header[12] != 1) source.fail("use_scaled_rope is ", header[12], ", expected 0 or 1");
  const LLaMA3Config config{.max_seq_len = header[2],
                            .vocab_size = header[3],
                            .num_layers = header[4],
                            .num_heads = header[5],
                            .num_kv_heads = header[6],
                            .channels = header[7],
                            .ffn_dim_multiplier = std::bit_cast<float>(header[8]),
                            .multiple_of = header[9],
                            .norm_eps = std::bit_cast<float>(header[10]),
                            .rope_theta = std::bit_cast<float>(header[11]),
                            .use_scaled_rope = header[12] == 1,
                            .max_gen_batch_size = header[13],
                            .version_major = header[14],
                            .version_minor = header[15]};
  check_config(config, source);
  return {.config = config,
          .tensors = detail::read_tensors(file.bytes().subspan(detail::kHeaderBytes), llama3_layout(config), dtype,
                                          source)};
}

void write_llama3_checkpoint(const std::filesystem::path& path, const LLaMA3Checkpoint& checkpoint, DataType dtype) {
  const FileError source{.op = "write_llama3_checkpoint", .file = path.string()};
  const LLaMA3Config& c = checkpoint.config;
  Header header{};
  header[0] = kMagic;
  check_config(c, source);
  header[2] = static_cast<std::int32_t>(c.max_seq_len);
  header[3] = static_cast<std::int32_t>(c.vocab_size);
  header[4] = static_cast<std::int32_t>(c.num_layers);
  header[5] = static_cast<std::int32_t>(c.num_heads);
  header[6] = static_cast<std::int32_t>(c.num_kv_heads);
  header[7] = static_cast<std::int32_t>(c.channels);
  header[8] = std::bit_cast<std::int32_t>(c.ffn_dim_multiplier);
  header[9] = static_cast<std::int32_t>(c.multiple_of);
  header[10] = std::bit_cast<std::int32_t>(c.norm_eps);
  header[11] = std::bit_cast<std::int32_t>(c.rope_theta);
  header[12] = c.use_scaled_rope ? 1 : 0;
  header[13] = static_cast<std::int32_t>(c.max_gen_batch_size);
  header[14] = c.version_major;
  header[15] = c.version_minor;
  detail::write_checkpoint(path, header, llama3_layout(c), checkpoint.tensors, dtype, source);
}

}  // namespace infini::llmc
