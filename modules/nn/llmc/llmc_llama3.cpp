// LLaMA-3 checkpoints in the layout InfiniTrain's example/llama3 reads (LoadFromLLMC) and its
// scripts/assets/prepare_llama3_assets.py writes: one 256 x int32 header with three float32
// fields in it, then the tensors in the order of llm.c's first train_llama3.py write_tensors.
//   [0] magic 20240803  [1] version   [2] maxT   [3] V   [4] L   [5] NH   [6] KV   [7] C
//   [8] ffn_dim_multiplier (f32)  [9] multiple_of  [10] norm_eps (f32)  [11] rope_theta (f32)
//   [12] use_scaled_rope  [13] max_gen_batch_size  [14] version_major  [15] version_minor
module;
#include <cmath>
#include <cstdint>
module infini.nn;
import infini.std;

namespace infini::llmc {
namespace {

using detail::FileError;
using detail::Header;

constexpr std::int32_t kMagic = 20240803;
constexpr float kMinMultiplier = 0.01f;
constexpr float kMaxMultiplier = 100.0f;

using Field = detail::HeaderField<LLaMA3Config>;

constexpr std::int64_t kAnyInt32 = std::numeric_limits<std::int32_t>::min();
constexpr std::array<Field, 14> kFields = {{{2, "max_seq_len", &LLaMA3Config::max_seq_len},
                                            {3, "vocab_size", &LLaMA3Config::vocab_size},
                                            {4, "num_layers", &LLaMA3Config::num_layers},
                                            {5, "num_heads", &LLaMA3Config::num_heads},
                                            {6, "num_kv_heads", &LLaMA3Config::num_kv_heads},
                                            {7, "channels", &LLaMA3Config::channels},
                                            {8, "ffn_dim_multiplier", &LLaMA3Config::ffn_dim_multiplier},
                                            {9, "multiple_of", &LLaMA3Config::multiple_of},
                                            {10, "norm_eps", &LLaMA3Config::norm_eps},
                                            {11, "rope_theta", &LLaMA3Config::rope_theta},
                                            {12, "use_scaled_rope", &LLaMA3Config::use_scaled_rope},
                                            {13, "max_gen_batch_size", &LLaMA3Config::max_gen_batch_size, 0},
                                            {14, "version_major", &LLaMA3Config::version_major, kAnyInt32},
                                            {15, "version_minor", &LLaMA3Config::version_minor, kAnyInt32}}};

// fail() unless the config (its integers checked by the header's table) is one the reader accepts.
void check_config(const LLaMA3Config& c, const FileError& source) {
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
  const LLaMA3Config config = detail::read_fields(header, kFields, source);
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
  detail::write_fields(c, kFields, header, source);
  check_config(c, source);
  if (c.use_scaled_rope && c.rope_scaling != RopeScaling{})
    source.fail("RoPE scaling factor ", c.rope_scaling.factor, ", low/high frequency factors ",
                c.rope_scaling.low_freq_factor, "/", c.rope_scaling.high_freq_factor, ", original context ",
                c.rope_scaling.original_context, ": llm.c's header holds only LLaMA-3.1's (8, 1/4, 8192); "
                "export this model as a Hugging Face directory");
  detail::write_checkpoint(path, header, llama3_layout(c), checkpoint.tensors, dtype, source);
}

}  // namespace infini::llmc
