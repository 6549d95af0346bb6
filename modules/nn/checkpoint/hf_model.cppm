// Hugging Face model directories, as transformers' save_pretrained writes them and
// from_pretrained reads them: config.json, and the weights in model.safetensors or split into
// model-0000k-of-0000n.safetensors shards that model.safetensors.index.json lists; float32,
// bfloat16 or float16 on disk. They are read into, and written from, llm.c's layout
// (llmc::GPT2Checkpoint: llm.c's names, per-layer tensors stacked, weights (out, in)), which
// every Infini GPT-2 and LLaMA-3 loads and exports. docs/formats.md gives the mappings.
//
//   llmc::GPT2Checkpoint ckpt = hf::read_gpt2("gpt2");  // GPT2LMHeadModel's directory
//   nn::GPT2 model(nn::GPT2Config::from_llmc(ckpt.config));
//   model->load_llmc_tensors(ckpt.tensors);
//   hf::write_gpt2("out", {ckpt.config, model->llmc_tensors()}, {.dtype = kBFloat16});
export module infini.nn:hf_model;
import infini.std;
import infini.tensor;
import :llmc_checkpoint;

export namespace infini::hf {

struct WriteOptions {
  DataType dtype = kFloat32;  // on disk: float32, bfloat16 or float16 (rounded to nearest even)
  // Weights of more bytes than this are split into shards of at most this many bytes (a larger
  // tensor gets a shard of its own), in state-dict order, listed by the index file.
  std::int64_t max_shard_bytes = 5'000'000'000;  // transformers' default, "5GB"
};

// transformers' GPT2LMHeadModel. Names with or without the "transformer." prefix; Conv1D
// weights (in, out) transposed to llm.c's (out, in); wte padded with zero rows to a multiple
// of 128 (Vp, as llm.c pads). The causal-mask buffers older files hold (h.<l>.attn.bias,
// h.<l>.attn.masked_bias) are skipped; lm_head.weight, when present, must equal wte (GPT-2's
// head is tied). IOError naming the directory and the file, key or tensors: a missing or
// unreadable file; a config.json key missing or of the wrong type, or a value Infini's GPT-2
// cannot run (another model_type or activation, n_inner other than 4 n_embd, a layer-norm
// epsilon other than 1e-5, an untied head); missing, unexpected or misshapen tensors (all of
// them named), dtypes other than the three above; an index that disagrees with its shards.
llmc::GPT2Checkpoint read_gpt2(const std::filesystem::path& dir);
// config.json's model only (the sizes read_gpt2 gives), IOError as read_gpt2's.
llmc::GPT2Config read_gpt2_config(const std::filesystem::path& dir);

// Writes config.json, the weights and, when sharded, the index into `dir` (created if need
// be), each file atomically (config.json last): the names with the "transformer." prefix and
// no lm_head.weight (tied), as save_pretrained writes them; the first V rows of wte. The
// tensors must match gpt2_layout(checkpoint.config) in order, names and shapes (Error or
// ShapeError naming the tensor); DTypeError for another dtype on disk. A model.safetensors or
// index file of the other layout left in `dir` is removed once the new files are in place.
void write_gpt2(const std::filesystem::path& dir, const llmc::GPT2Checkpoint& checkpoint, WriteOptions options = {});

// transformers' LlamaForCausalLM: model.embed_tokens, model.layers.<l>.{input_layernorm,
// self_attn.{q,k,v,o}_proj, post_attention_layernorm, mlp.{gate,up,down}_proj}, model.norm,
// lm_head (absent when tie_word_embeddings; llm.c's wlmhead is then a copy of wte). q_proj and
// k_proj rows are in rotate-half order (convert_llama_weights_to_hf.py permutes them): they
// are put back in interleaved pairs, Meta's and Infini's RoPE order. From config.json:
// hidden_size, num_attention_heads, num_key_value_heads (default: the heads), head_dim (if
// given, hidden_size / heads), num_hidden_layers, vocab_size, max_position_embeddings,
// rms_norm_eps (default 1e-6), rope_theta (default 10000), rope_scaling (null, or LLaMA-3.1's
// rope_type "llama3" with its factor, low_freq_factor, high_freq_factor and
// original_max_position_embeddings: 3.1's 8, 1, 4, 8192, 3.2's factor 32; kept in
// llmc::LLaMA3Config::rope_scaling, which llm.c's file cannot hold),
// intermediate_size (>= 8 hidden_size / 3 in integers: it becomes multiple_of, with no
// multiplier), hidden_act "silu", no attention or MLP biases. IOError as read_gpt2's.
llmc::LLaMA3Checkpoint read_llama3(const std::filesystem::path& dir);
// config.json's model only (the sizes read_llama3 gives), IOError as read_llama3's.
llmc::LLaMA3Config read_llama3_config(const std::filesystem::path& dir);

// Writes LlamaForCausalLM's directory as write_gpt2 does (q_proj and k_proj in rotate-half
// order); tie_word_embeddings and no lm_head.weight when wlmhead equals wte bit for bit.
void write_llama3(const std::filesystem::path& dir, const llmc::LLaMA3Checkpoint& checkpoint,
                  WriteOptions options = {});

}  // namespace infini::hf

namespace infini::hf {
// Not exported (shared with :lora). HF's q_proj / k_proj rows (per head: the first halves of
// the rotary pairs, then the second halves, for rotate-half RoPE) -> interleaved pairs (Meta's
// and Infini's order), and back. w: (rows, cols), rows a multiple of 2 heads.
Tensor interleaved_pairs(const Tensor& w, std::int64_t heads);
Tensor rotate_half_rows(const Tensor& w, std::int64_t heads);
}  // namespace infini::hf
