// llm.c's model checkpoints (`.bin`): a 256 x int32 little-endian header, then every
// parameter tensor in a fixed order, all float32 (version 3) or all bfloat16 (version 5).
// GPT-2 files are what llm.c's train_gpt2.py / train_gpt2.cu write and read; LLaMA-3 files
// follow the layout InfiniTrain's example/llama3 reads. docs/formats.md describes both
// exactly and lists what the readers reject.
//
//   llmc::GPT2Checkpoint ckpt = llmc::read_gpt2_checkpoint("gpt2_124M.bin");
//   for (auto& [name, tensor] : ckpt.tensors) ...           // "wte" (Vp, C), "wpe" (maxT, C), ...
//   llmc::write_gpt2_checkpoint("out_bf16.bin", ckpt, kBFloat16);
export module infini.nn:llmc_checkpoint;
import infini.std;
import infini.tensor;

export namespace infini::llmc {

// ---- GPT-2 (magic 20240326) ----

struct GPT2Config {
  std::int64_t max_seq_len = 0;        // maxT, e.g. 1024
  std::int64_t vocab_size = 0;         // V, e.g. 50257
  std::int64_t padded_vocab_size = 0;  // Vp >= V (llm.c pads to a multiple of 128: 50304)
  std::int64_t num_layers = 0;         // L
  std::int64_t num_heads = 0;          // NH, divides C
  std::int64_t channels = 0;           // C
};

struct GPT2Checkpoint {
  GPT2Config config;
  // The 16 tensors in file order with llm.c's names (see gpt2_layout); float32 CPU tensors.
  std::vector<std::pair<std::string, Tensor>> tensors;
};

// Names and shapes in file order: wte (Vp,C), wpe (maxT,C), ln1w (L,C), ln1b (L,C),
// qkvw (L,3C,C), qkvb (L,3C), attprojw (L,C,C), attprojb (L,C), ln2w (L,C), ln2b (L,C),
// fcw (L,4C,C), fcb (L,4C), fcprojw (L,C,4C), fcprojb (L,C), lnfw (C), lnfb (C).
// Weights are (out, in) row-major; rows V..Vp-1 of wte are padding.
std::vector<std::pair<std::string, Shape>> gpt2_layout(const GPT2Config& config);

// Reads (memory-maps) a checkpoint; bfloat16 files are converted to float32. IOError naming
// the file and the problem for anything but a valid file (the sizes are checked against the
// file's size before any tensor is allocated).
GPT2Checkpoint read_gpt2_checkpoint(const std::filesystem::path& path);

// Writes version 3 (dtype kFloat32) or 5 (kBFloat16; values rounded to nearest even)
// atomically. The tensors must match gpt2_layout(config) in order, names and shapes (any
// floating dtype, device and strides); the config must be one the reader accepts.
void write_gpt2_checkpoint(const std::filesystem::path& path, const GPT2Checkpoint& checkpoint,
                           DataType dtype = kFloat32);

// ---- LLaMA-3 (magic 20240803) ----

// LLaMA-3.1's RoPE frequency scaling (transformers' rope_type "llama3"): wavelengths longer
// than original_context / low_freq_factor are divided by factor, those shorter than
// original_context / high_freq_factor kept, blended in between. LLaMA-3.1 uses factor 8,
// LLaMA-3.2 factor 32; llm.c's header has no field for them (it holds 3.1's).
struct RopeScaling {
  double factor = 8;
  double low_freq_factor = 1;
  double high_freq_factor = 4;
  std::int64_t original_context = 8192;
  bool operator==(const RopeScaling&) const = default;
};

struct LLaMA3Config {
  std::int64_t max_seq_len = 0;   // block_size, e.g. 8192
  std::int64_t vocab_size = 0;    // V, e.g. 128256 (no padding)
  std::int64_t num_layers = 0;    // L
  std::int64_t num_heads = 0;     // NH (query heads), divides C
  std::int64_t num_kv_heads = 0;  // KV (key/value heads), divides NH
  std::int64_t channels = 0;      // C
  float ffn_dim_multiplier = 0;   // 0: none; see llama3_ffn_hidden_dim
  std::int64_t multiple_of = 0;   // the FFN's hidden size is rounded up to a multiple of this
  float norm_eps = 1e-5f;         // RMSNorm epsilon
  float rope_theta = 500000.0f;
  bool use_scaled_rope = false;   // LLaMA-3.1's RoPE frequency scaling
  RopeScaling rope_scaling = {};  // its constants (not in the file: 3.1's when read; writing others is an Error)
  // The head is the embedding (Hugging Face's tie_word_embeddings; not in the file, where
  // wlmhead is then a copy of wte).
  bool tie_word_embeddings = false;
  std::int64_t max_gen_batch_size = 4;  // stored for InfiniTrain; no effect on the tensors
  std::int32_t version_major = 3;       // the LLaMA version, e.g. 3.2
  std::int32_t version_minor = 2;
};

// The SwiGLU hidden size H: h = (2 * 4C) / 3 (integer division); with a multiplier m > 0,
// h = round(m * h) (half away from zero, in double); then h is rounded up to a multiple of
// multiple_of. Meta's 8B: C 4096, m 1.3, multiple_of 1024 -> 14336.
std::int64_t llama3_ffn_hidden_dim(const LLaMA3Config& config);

struct LLaMA3Checkpoint {
  LLaMA3Config config;
  // The 10 tensors in file order (see llama3_layout); float32 CPU tensors.
  std::vector<std::pair<std::string, Tensor>> tensors;
};

// Names and shapes in file order, with hd = C / NH and H = llama3_ffn_hidden_dim:
// wte (V,C), ln1w (L,C), qkvw (L,(NH+2KV)*hd,C) (rows: Q heads, K heads, V heads),
// attprojw (L,C,C), ln2w (L,C), fcw (L,H,C) (c_fc, "up"), fc2w (L,H,C) (c_fc2, "gate", the
// SiLU input), fcprojw (L,C,H), lnfw (C), wlmhead (V,C). No biases.
std::vector<std::pair<std::string, Shape>> llama3_layout(const LLaMA3Config& config);

LLaMA3Checkpoint read_llama3_checkpoint(const std::filesystem::path& path);
void write_llama3_checkpoint(const std::filesystem::path& path, const LLaMA3Checkpoint& checkpoint,
                             DataType dtype = kFloat32);

}  // namespace infini::llmc
