// The training loop of the lm trainer (samples/lm; also built as gpt2 and llama3): flags, llm.c batch order,
// gradient accumulation, AdamW with a warmup + constant or cosine schedule, gradient
// clipping, validation, sampling, metrics and checkpoints.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

import infini.nn;

namespace samples {

struct TrainFlags {
  std::string input_bin, input_val_bin, tokenizer_bin, tokenizer;
  std::int64_t batch_size = 4, sequence_length = 64, total_batch_size = 0;  // 0: batch_size * sequence_length
  std::int64_t num_iteration = 10;
  double learning_rate = 1e-4, min_lr = 0;
  std::int64_t warmup_steps = 0;
  std::string lr_schedule = "cosine";
  double weight_decay = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, grad_clip = 1.0;
  bool shuffle = false;  // sequences permuted per epoch (else llm.c's sequential order)
  std::uint64_t seed = 42;
  std::string device = "cpu", dtype = "float32";
  bool tf32 = false;  // CUDA float32 matrix products on TF32 tensor cores
  bool cuda_graph = false;  // forward + backward captured once as a CUDA graph and replayed
  std::int64_t val_loss_every = 0, val_batches = 20, sample_every = 0, text_length = 64, top_k = 40;
  double temperature = 1.0;
  std::string save, load, metrics_out;
  std::string export_llmc;  // with --load: write its model as an llm.c file and exit
  std::string hf_out;       // after the last step: the model as a Hugging Face directory
  std::int64_t save_interval = 0;
  bool async_save = false;  // checkpoint files written on a background thread
  int threads = 0;
  // Steps in a row whose loss or gradient norm is not finite (each skipped on every rank)
  // before training stops with an error; 0: no guard (such updates are applied).
  int max_skipped_steps = 5;
  bool check_numerics = false;  // the precision checker: the first NaN/Inf an op makes is an error naming it
  std::string dump_numerics;    // directory: per-rank statistics of every module output and gradient per step
  // under mpirun: 1 shards optimizer state over the data-parallel ranks, 2 gradients too, 3 parameters too
  int zero_stage = 0;
  int tensor_parallel = 1;    // ranks each layer is split over (mpirun); dp = world / (tensor x pipeline)
  bool sequence_parallel = false;  // activations between the tensor-parallel regions split along the sequence
  int pipeline_parallel = 1;  // pipeline stages (mpirun), the blocks split between them
  int virtual_pipeline_parallel = 1;  // chunks of blocks per pipeline rank (interleaved schedule)
  std::string pp_schedule = "1f1b";   // gpipe, 1f1b, interleaved or zb-h1
  std::vector<int> pipeline_blocks;   // blocks of each virtual stage (empty: balanced)
  // full: every block recomputed in backward; selective: attention from its q/k/v projection
  std::string activation_checkpointing = "none";
  // LoRA (PEFT's LoraConfig): adapters of rank lora_rank (0: none) on lora_targets (empty: PEFT's
  // default, GPT-2 c_attn, LLaMA-3 q_proj,v_proj), the base weights frozen; or those of lora_in.
  std::int64_t lora_rank = 0;
  double lora_alpha = 8, lora_dropout = 0;
  std::vector<std::string> lora_targets;
  std::string lora_in, lora_out;  // PEFT adapter directories to start from / to write at the end
  std::string profile;                      // directory for Chrome traces of profile_steps
  std::vector<std::int64_t> profile_steps = {1};
};

// LoRA adapters, made (--lora_rank) or loaded (--lora_in).
inline bool uses_lora(const TrainFlags& f) { return f.lora_rank > 0 || !f.lora_in.empty(); }

void add_train_flags(CLI::App& app, TrainFlags& flags);
// Threads, the global seed (model initialisation draws from it), and flag checks.
void prepare_run(const TrainFlags& flags);

// What a model export writes: an llm.c checkpoint file, or a Hugging Face model directory.
enum class ModelFormat { kLlmc, kHuggingFace };

// What the loop needs of a model (this rank's part of it under pipeline parallelism): a causal
// LM of a registered model family (nn::model_family).
struct LanguageModel {
  std::shared_ptr<infini::nn::Module> module;
  infini::nn::CausalLM* lm;                 // module as a causal LM
  const infini::nn::ModelFamily* family;   // its family: exports and rebuilds
  std::int64_t vocab_size, max_seq_len;
  std::int64_t num_blocks;     // of the whole model

  // (B, t) after the cache's positions -> (B, t, columns), through the KV cache (text
  // generation; whole model).
  infini::Tensor logits_cached(const infini::Tensor& idx, infini::nn::KVCache& cache) const {
    return lm->forward_cached(idx, cache);
  }
  // Gathers the whole model (every rank of a tensor-parallel group calls it) and, with `write`,
  // writes it in `format`. Whole model only (of a pipeline: write_model).
  void export_model(const std::filesystem::path& path, ModelFormat format, bool write) const;
  // Writes the whole model whose parameters `named` holds (every one, whole tensors, by name)
  // in `format` (the pipeline's export, after gathering the stages' parts).
  void write_model(const std::filesystem::path& path, ModelFormat format,
                   const infini::nn::Named<infini::Tensor>& named) const;
  // The llm.c file --save writes beside the checkpoint ("gpt2.bin"); empty for a family
  // without llm.c files.
  std::string llmc_name() const;
};

// The loop's view of `model`. Error naming its type unless it is a causal LM of a registered family.
LanguageModel language_model(std::shared_ptr<infini::nn::Module> model);

// The part of a model of `num_blocks` blocks this rank builds (the whole model, unless pipelined).
using PartFor = std::function<infini::nn::ModelPart(std::int64_t num_blocks)>;
// Makes the model: with the single-process layers when tp is null, else split by tp; the part
// part_for says.
using ModelFactory =
    std::function<LanguageModel(std::shared_ptr<infini::nn::TensorParallelLayers> tp, const PartFor& part_for)>;

// A model of `like`'s family and config, split by tp (null: one process), holding `part` and
// `named`'s weights (whole tensors by parameter name: this rank's shards of those tp splits),
// built without drawing from the default generator: a split run starts from the
// single-process weights. Error naming a parameter `named` lacks.
std::shared_ptr<infini::nn::Module> model_from(const infini::nn::Module& like,
                                               std::shared_ptr<infini::nn::TensorParallelLayers> tp,
                                               const infini::nn::ModelPart& part,
                                               const infini::nn::Named<infini::Tensor>& named);
// `whole` (one process: the whole model) as `part` split by tp (null: one process); `whole`
// itself when that is all of it on one process.
std::shared_ptr<infini::nn::Module> split_model(std::shared_ptr<infini::nn::Module> whole,
                                                std::shared_ptr<infini::nn::TensorParallelLayers> tp,
                                                const infini::nn::ModelPart& part);
// The factory of a trainer whose model `make` builds on one process (the part part_for gives:
// a random init builds only that part), split by the layout's tp.
ModelFactory factory(std::function<std::shared_ptr<infini::nn::Module>(const PartFor& part_for)> make);

// Runs the training with the model `make` returns (under mpirun, split as --tensor_parallel
// says); returns the process exit code.
int train(const ModelFactory& make, const TrainFlags& flags);

}  // namespace samples
