#include "lm_trainer.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sampling.h"
#include "token_batches.h"

import infini.parallel;

namespace samples {

using namespace infini;
using Clock = std::chrono::steady_clock;

void add_train_flags(CLI::App& app, TrainFlags& f) {
  const CLI::IsMember boolean({"0", "1", "false", "true"});  // a bool option's values
  app.add_option("--input_bin", f.input_bin, "training tokens (llm.c token file); required unless --export_llmc");
  app.add_option("--input_val_bin", f.input_val_bin, "validation tokens (llm.c token file)");
  auto* tokenizer_bin = app.add_option("--tokenizer_bin", f.tokenizer_bin, "llm.c tokenizer file, to print generated text");
  app.add_option("--tokenizer", f.tokenizer,
                 "Hugging Face tokenizer.json, or a model directory holding one: generated text starts from its "
                 "document token and is printed through it")
      ->excludes(tokenizer_bin);
  app.add_option("--batch_size", f.batch_size, "sequences per micro-batch")->check(CLI::PositiveNumber);
  app.add_option("--sequence_length", f.sequence_length)->check(CLI::PositiveNumber);
  app.add_option("--total_batch_size", f.total_batch_size,
                 "tokens per optimizer step (a multiple of batch_size * sequence_length; 0: one micro-batch)");
  app.add_option("--num_iteration", f.num_iteration, "optimizer steps")->check(CLI::NonNegativeNumber);
  app.add_option("--learning_rate", f.learning_rate);
  app.add_option("--min_lr", f.min_lr, "cosine schedule: final learning rate");
  app.add_option("--warmup_steps", f.warmup_steps, "linear warmup from learning_rate / warmup_steps")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--lr_schedule", f.lr_schedule, "constant or cosine (after the warmup)")
      ->check(CLI::IsMember({"constant", "cosine"}));
  app.add_option("--weight_decay", f.weight_decay, "AdamW decay of the matrices and embeddings");
  app.add_option("--beta1", f.beta1);
  app.add_option("--beta2", f.beta2);
  app.add_option("--eps", f.eps);
  app.add_option("--grad_clip", f.grad_clip, "maximum gradient norm (0: no clipping)");
  app.add_option("--max_skipped_steps", f.max_skipped_steps,
                 "a step whose loss or gradient norm is NaN/Inf on any rank skips its update on every rank; this "
                 "many in a row stop training with an error (0: no guard, such updates are applied)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--check_numerics", f.check_numerics,
                 "1: check every op's outputs in forward and backward; the first NaN or Inf stops training with an "
                 "error naming the op, its module, the shapes and its inputs' statistics (also INFINI_CHECK_NUMERICS=1)")
      ->check(boolean);
  app.add_option("--dump_numerics", f.dump_numerics,
                 "directory: each rank writes rank_<r>.tsv, statistics of every module's output and every parameter's "
                 "gradient per step, to compare runs");
  app.add_option("--shuffle", f.shuffle, "0: llm.c's sequential order, 1: sequences permuted per epoch")->check(boolean);
  app.add_option("--seed", f.seed, "initialisation, shuffling and sampling");
  app.add_option("--device", f.device,
                 "cpu, or cuda: each rank on GPU (local rank mod the GPUs it sees); groups whose ranks have "
                 "GPUs of their own use NCCL, others MPI through host memory (INFINI_BACKEND=nccl|mpi forces it)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--dtype", f.dtype,
                 "float32; bfloat16: on the CPU matrix products on bfloat16 operands (AMX-BF16 or AVX512-BF16), with "
                 "--device cuda autocast to bfloat16 (float32 master weights); float16: --device cuda only, autocast "
                 "to float16 with dynamic loss scaling (GradScaler)")
      ->check(CLI::IsMember({"float32", "bfloat16", "float16"}));
  app.add_option("--tf32", f.tf32,
                 "1: with --device cuda, float32 matrix products on TF32 tensor cores (set_float32_matmul_precision "
                 "medium; 10-bit mantissa operands, float32 sums)")->check(boolean);
  app.add_option("--cuda_graph", f.cuda_graph,
                 "1: with --device cuda, record the forward and backward passes as a CUDA graph after the first "
                 "step and replay it every step (one micro-step per step, bfloat16 or float32)")->check(boolean);
  app.add_option("--val_loss_every", f.val_loss_every, "steps between validation losses (0: never)");
  app.add_option("--val_batches", f.val_batches, "micro-batches of validation data per evaluation");
  app.add_option("--sample_every", f.sample_every, "steps between generated samples (0: never)");
  app.add_option("--text_length", f.text_length, "tokens per generated sample");
  app.add_option("--top_k", f.top_k, "sampling: the k most likely tokens (0: all)");
  app.add_option("--temperature", f.temperature, "sampling temperature");
  app.add_option("--save", f.save, "directory for checkpoints: each rank writes its pieces of the training state (checkpoint.json and "
                 "shard-*.safetensors), and an llm.c checkpoint of the whole model where the family has one");
  app.add_option("--async_save", f.async_save,
                 "1: --save copies the state to host memory and writes its files on a background thread; the "
                 "checkpoint is published once every rank's are written (training waits only for the copy)")
      ->check(boolean);
  app.add_option("--save_interval", f.save_interval, "steps between checkpoints (0: at the end only)");
  app.add_option("--load", f.load,
                 "resume from this checkpoint directory (saved by --save under any layout: other numbers of ranks, "
                 "--tensor_parallel, --pipeline_parallel, --zero_stage)");
  app.add_option("--export_llmc", f.export_llmc,
                 "with --load: write the checkpoint's model as an llm.c checkpoint to this file and exit without "
                 "training (the model flags must describe the saved model)");
  app.add_option("--hf_out", f.hf_out,
                 "after the last step (with --num_iteration 0: the starting or --load'ed model), write the model as "
                 "a Hugging Face directory (config.json, model.safetensors, as transformers' save_pretrained)");
  app.add_option("--metrics_out", f.metrics_out, "JSON lines file, one object per step");
  app.add_option("--threads", f.threads, "OpenMP threads (0: the default)");
  app.add_option("--zero_stage", f.zero_stage,
                 "under mpirun: 1 shards the optimizer state over the data-parallel ranks (ZeRO-1), 2 the "
                 "gradients too (ZeRO-2: each micro-batch's reduce-scattered, the full gradient never kept), 3 the "
                 "parameters too (ZeRO-3 / FSDP: each block all-gathered just before its forward and its backward, "
                 "released after; in every layout, pipelines included); each rank saves its shard")->check(CLI::Range(0, 3));
  app.add_option("--tensor_parallel", f.tensor_parallel,
                 "under mpirun: ranks each layer is split over (heads, MLP features, vocabulary); the data-parallel "
                 "size is the world size / this")->check(CLI::PositiveNumber);
  app.add_option("--sequence_parallel", f.sequence_parallel,
                 "1: with --tensor_parallel > 1, split the activations between the split layers along the sequence")->check(boolean);
  app.add_option("--pipeline_parallel", f.pipeline_parallel,
                 "under mpirun: pipeline stages the blocks are split over (the data-parallel size is the world size / "
                 "(tensor x pipeline))")->check(CLI::PositiveNumber);
  app.add_option("--virtual_pipeline_parallel", f.virtual_pipeline_parallel,
                 "chunks of blocks per pipeline rank (--pp_schedule interleaved)")->check(CLI::PositiveNumber);
  app.add_option("--pp_schedule", f.pp_schedule, "pipeline schedule: gpipe, 1f1b, interleaved or zb-h1")
      ->check(CLI::IsMember({"gpipe", "1f1b", "interleaved", "zb-h1"}));
  app.add_option("--pipeline_blocks", f.pipeline_blocks,
                 "blocks of each virtual stage, e.g. 1,3 (default: balanced, the first stages one more)")
      ->delimiter(',');
  app.add_option("--activation_checkpointing", f.activation_checkpointing,
                 "none; full: each block keeps only its input for backward and runs again there (less activation "
                 "memory, one more forward pass of the blocks); selective: the attention layers keep only their q/k/v "
                 "projection and recompute the rest of attention")
      ->check(CLI::IsMember({"none", "full", "selective"}));
  auto* lora_rank = app.add_option("--lora_rank", f.lora_rank,
                                   "LoRA: freeze the model and train adapters of this rank (0: full fine-tuning)")
                        ->check(CLI::NonNegativeNumber);
  app.add_option("--lora_alpha", f.lora_alpha, "LoRA: the adapters' updates are scaled by alpha / rank");
  app.add_option("--lora_dropout", f.lora_dropout, "LoRA: dropout on the adapters' input")->check(CLI::Range(0.0, 0.99));
  app.add_option("--lora_targets", f.lora_targets,
                 "LoRA: layers to adapt by transformers' names (GPT-2: c_attn,c_proj,c_fc; LLaMA-3: q_proj,k_proj,"
                 "v_proj,o_proj,gate_proj,up_proj,down_proj; default PEFT's: c_attn / q_proj,v_proj)")
      ->delimiter(',');
  app.add_option("--lora_in", f.lora_in, "LoRA: start from these PEFT adapters (adapter_config.json gives the rank)")
      ->excludes(lora_rank);
  app.add_option("--lora_out", f.lora_out,
                 "LoRA: after the last step, write the adapters here in PEFT's files (adapter_model.safetensors, "
                 "adapter_config.json); --hf_out then writes the model with them merged");
  app.add_option("--profile", f.profile,
                 "directory for Chrome traces of --profile_steps: rank_<r>.json per rank and trace.json merged (ops, "
                 "modules, backward nodes, collectives with bytes, pipeline passes, waits; open in ui.perfetto.dev or "
                 "chrome://tracing)");
  app.add_option("--profile_steps", f.profile_steps, "steps --profile records (default 1: the first is warm-up)")
      ->delimiter(',')->check(CLI::NonNegativeNumber);
}

void prepare_run(const TrainFlags& f) {
  if (f.input_bin.empty() && f.export_llmc.empty()) throw Error("train", "--input_bin is required");
  if (uses_lora(f) && (f.tensor_parallel > 1 || f.pipeline_parallel > 1))
    throw Error("train", concat("LoRA (--lora_rank / --lora_in) trains adapters of the whole model on each rank: "
                                "--tensor_parallel ", f.tensor_parallel, " and --pipeline_parallel ", f.pipeline_parallel,
                                " must be 1 (data parallelism and --zero_stage work)"));
  if (!uses_lora(f) && (!f.lora_out.empty() || !f.lora_targets.empty()))
    throw Error("train", "--lora_out and --lora_targets need --lora_rank or --lora_in");
  if (!f.export_llmc.empty() && f.load.empty())
    throw Error("train", "--export_llmc writes the model of a checkpoint: it needs --load DIR");
  if (f.threads > 0) omp_set_num_threads(f.threads);
  manual_seed(f.seed);
  if (f.device == "cuda") {  // cuda:<local rank mod GPUs>; --dtype bfloat16 / float16 autocast (forward_precision)
    if (f.cuda_graph && (f.check_numerics || numerics::checking() || !f.dump_numerics.empty()))
      throw Error("train", "--cuda_graph 1 with --check_numerics 1 (or INFINI_CHECK_NUMERICS=1) or --dump_numerics: "
                           "they read outputs back to the host during the step, which a graph capture cannot; use "
                           "them without the graph");
    if (cuda_device_count() == 0)
      throw Error("train", cuda_is_built() ? "--device cuda: no CUDA device is available; use --device cpu"
                                           : "--device cuda: no CUDA device: this build of Infini has no CUDA backend; "
                                             "use --device cpu");
    if (f.tf32) set_float32_matmul_precision(MatmulPrecision::kMedium);
    if (f.cuda_graph && f.dtype == "float16")
      throw Error("train", "--cuda_graph 1 with --dtype float16: loss scaling reads each step's overflow check back "
                           "to the host; use bfloat16");
    return;
  }
  if (f.cuda_graph) throw Error("train", "--cuda_graph 1 needs --device cuda");
  if (f.tf32) throw Error("train", "--tf32 1 needs --device cuda (TF32 is a CUDA tensor-core format)");
  if (f.dtype == "float16")
    throw Error("train", "--dtype float16 (autocast with loss scaling) needs --device cuda; on the CPU use bfloat16");
  if (f.dtype == "bfloat16") {  // bfloat16 operands for the matrix products, float32 everywhere else
    if (!has_bfloat16_matmul())
      throw Error("train", "--dtype bfloat16 computes the matrix products on bfloat16 operands with AMX-BF16 tiles or "
                           "AVX512-BF16 instructions, which this CPU (or its OS) does not offer; use --dtype float32");
    set_float32_matmul_precision(MatmulPrecision::kMedium);
  }
}

namespace {

// Appends JSON lines to --metrics_out (nothing without it).
class Metrics {
 public:
  explicit Metrics(const std::string& path) {
    if (path.empty()) return;
    out_.open(path, std::ios::app);
    if (!out_) throw IOError("train", "cannot open " + path);
  }
  void line(const std::string& json) {
    if (out_.is_open()) out_ << json << '\n' << std::flush;
  }

 private:
  std::ofstream out_;
};

std::string format(const char* fmt, auto... values) {
  std::string text(static_cast<std::size_t>(std::snprintf(nullptr, 0, fmt, values...)), '\0');
  std::snprintf(text.data(), text.size() + 1, fmt, values...);
  return text;
}

// This process's resident memory (Linux: /proc/self/statm's second field, in pages); 0 where
// it cannot be read.
std::int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::int64_t size = 0, resident = 0;
  if (!(statm >> size >> resident)) return 0;
  return resident * static_cast<std::int64_t>(sysconf(_SC_PAGESIZE));
}

// A JSON number, or null for NaN and infinities (which JSON has no numbers for).
std::string json_number(double value, const char* fmt = "%.7f") {
  return std::isfinite(value) ? format(fmt, value) : std::string("null");
}

// Autocast for the forward passes of a --dtype bfloat16 / float16 run on CUDA (matrix
// products and attention in 16 bits, norms, softmax and losses in float32, float32 master
// weights); nothing otherwise.
std::optional<AutocastGuard> forward_precision(const TrainFlags& f) {
  if (f.device != "cuda" || f.dtype == "float32") return std::nullopt;
  return std::optional<AutocastGuard>(std::in_place, DeviceType::CUDA, f.dtype == "bfloat16" ? kBFloat16 : kFloat16);
}

// AdamW with weight decay on matrices and embeddings only (dim >= 2), like llm.c's
// train_gpt2.py; biases and norm weights are not decayed. Under ZeRO-1 the plan gives this
// rank's pieces of the parameters, each decayed as its parameter is.
parallel::MakeOptimizer adamw(const TrainFlags& f) {
  return [&f](const std::vector<parallel::OptimizedTensor>& tensors) -> std::unique_ptr<optim::Optimizer> {
    std::vector<Tensor> decay, no_decay;
    for (const parallel::OptimizedTensor& t : tensors) (t.parameter.dim() >= 2 ? decay : no_decay).push_back(t.tensor);
    const optim::AdamWOptions options{.lr = f.learning_rate, .betas = {f.beta1, f.beta2}, .eps = f.eps,
                                      .weight_decay = f.weight_decay};
    optim::AdamWOptions no_decay_options = options;
    no_decay_options.weight_decay = 0;
    auto adamw = std::make_unique<optim::AdamW>(
        std::vector<optim::ParamGroup<optim::AdamWOptions>>{{decay, options}, {no_decay, no_decay_options}}, options);
    if (f.cuda_graph) adamw->set_capturable(true);  // the graph holds the update too
    return adamw;
  };
}

std::unique_ptr<optim::LRScheduler> make_schedule(optim::Optimizer& optimizer, const TrainFlags& f) {
  if (f.lr_schedule == "cosine" && f.num_iteration > f.warmup_steps)
    return std::make_unique<optim::CosineWithWarmupLR>(optimizer, f.warmup_steps, f.num_iteration,
                                                       f.min_lr);
  const std::int64_t warmup = f.warmup_steps;
  return std::make_unique<optim::LambdaLR>(optimizer, [warmup](std::int64_t step) {
    return step < warmup ? static_cast<double>(step + 1) / static_cast<double>(warmup) : 1.0;
  });
}

// A step whose loss or gradient norm was not finite: said on stderr (rank 0); an Error once
// --max_skipped_steps of them came in a row, or when a CUDA graph applied its update anyway.
void check_non_finite(const parallel::StepResult& result, std::int64_t step, int in_a_row, const TrainFlags& f,
                      bool main_rank) {
  const std::string what = concat("step ", step, ": loss ", result.loss, ", gradient norm ", result.grad_norm);
  if (!result.skipped && f.cuda_graph)
    throw Error("train", concat(what, " is not finite, and the CUDA graph's update was applied with it; stopping "
                                      "before these weights are saved"));
  if (!result.skipped) {  // --max_skipped_steps 0
    if (main_rank) std::fprintf(stderr, "%s is not finite; the update was applied (--max_skipped_steps 0)\n", what.c_str());
    return;
  }
  if (main_rank)
    std::fprintf(stderr, "%s is not finite: the update is skipped on every rank (%d in a row, --max_skipped_steps %d)\n",
                 what.c_str(), in_a_row, f.max_skipped_steps);
  if (in_a_row >= f.max_skipped_steps)
    throw Error("train", concat(what, ": ", in_a_row, " steps in a row had a non-finite loss or gradient norm ",
                                "(--max_skipped_steps ", f.max_skipped_steps, "); stopping. The weights are those "
                                "of the last finite step; no checkpoint was written from these steps"));
}

// The --val_batches micro-batches of the validation tokens, from their start.
std::vector<data::Example> validation_batches(TokenBatches& val, const TrainFlags& f) {
  std::vector<data::Example> batches;
  for (std::int64_t i = 0; i < f.val_batches; ++i) batches.push_back(val.sequences(i * f.batch_size, f.batch_size));
  return batches;
}

// What generation starts from and prints through: an llm.c tokenizer file or a Hugging Face
// tokenizer (--tokenizer_bin / --tokenizer), or neither (ids printed as <id>).
struct SampleText {
  std::optional<llmc::TokenizerFile> llmc;
  std::optional<text::Tokenizer> hf;

  std::int64_t start_token(std::int64_t vocab_size) const {
    if (hf) return hf->document_token();
    return llmc && llmc->eot_token ? *llmc->eot_token : vocab_size - 1;
  }
  std::string decode(const std::vector<std::int64_t>& tokens) const {
    std::string text;
    for (const std::int64_t t : tokens) {
      if (hf && t >= 0 && t < hf->vocab_size())
        text += hf->token_bytes(t);
      else if (llmc && t >= 0 && t < static_cast<std::int64_t>(llmc->tokens.size()))
        text += llmc->tokens[static_cast<std::size_t>(t)];
      else
        text += "<" + std::to_string(t) + ">";
    }
    return text;
  }
};

// The ranks of the run. Under mpirun: the world as dp x tp (parallel::Layout); the ranks of a
// tensor-parallel group split every layer, and each data-parallel replica trains on its share
// of each step's sequences. Without a launcher: no process group and the plain
// single-process path.
struct Ranks {
  std::shared_ptr<parallel::ProcessGroup> world;  // null without a launcher
  parallel::Layout layout{1};
  parallel::ParallelGroups groups = {};
  Device device = Device::cpu();  // the rank's GPU: cuda:<local rank mod the GPUs it sees>
  int rank = 0;
  bool main() const { return rank == 0; }
  // Whether this rank is in rank 0's model replica (validation, sampling and the whole-model
  // export run there: collectives over its tensor-parallel group).
  bool main_replica() const { return groups.coord.dp == 0; }
};

// "world: mpi (ranks 0 and 1 share GPU ... through host memory), tp: nccl (...)": how
// each group of this rank moves CUDA tensors.
std::string cuda_backends(const parallel::ParallelGroups& g) {
  std::string text;
  const std::pair<const char*, const parallel::ProcessGroup*> groups[] = {
      {"world", g.world.get()}, {"dp", g.dp.get()}, {"tp", g.tp.get()}, {"pp", g.pp.get()}};
  for (const auto& [label, group] : groups) {
    if (!group || group->size() == 1 || !group->cuda_backend()) continue;
    const parallel::BackendChoice& choice = *group->cuda_backend();
    text += concat(text.empty() ? "" : "; ", label, ": ", parallel::name(choice.backend), " (", choice.reason, ")");
  }
  return text;
}

Ranks join_world(const TrainFlags& f) {
  if (!parallel::launched_by_mpirun()) {
    if (f.tensor_parallel * f.pipeline_parallel > 1)
      throw Error("train", concat("--tensor_parallel ", f.tensor_parallel, " x --pipeline_parallel ", f.pipeline_parallel,
                                  " needs that many ranks: launch with mpirun -np N (N a multiple of ",
                                  f.tensor_parallel * f.pipeline_parallel, ")"));
    Ranks alone;
    if (f.device == "cuda") alone.device = Device::cuda(0);
    return alone;
  }
  auto world = parallel::init_process_group();
  Ranks ranks{.world = world,
              .layout = parallel::Layout(world->size(), f.tensor_parallel, f.pipeline_parallel, f.virtual_pipeline_parallel),
              .device = f.device == "cuda" ? Device::cuda(parallel::local_rank() % cuda_device_count()) : Device::cpu(),
              .rank = world->rank()};
  // Binding the world first binds every group split from it: each chooses NCCL or MPI now.
  if (ranks.device.is_cuda()) world->set_device(ranks.device);
  ranks.groups = parallel::make_parallel_groups(ranks.layout, world);
  if (const std::string backends = cuda_backends(ranks.groups); ranks.main() && !backends.empty())
    std::printf("CUDA tensors between ranks: %s\n", backends.c_str());
  return ranks;
}

// The checkpoint in --load (written under any layout). Error naming the directory when it
// holds none, or an older single-process or per-rank checkpoint.
parallel::DistributedCheckpoint open_checkpoint(const std::string& load) {
  if (!parallel::is_distributed_checkpoint(load))
    throw Error("train", concat("--load ", load, " holds no checkpoint (no checkpoint.json; a save that did not ",
                                "finish never writes one)"));
  return parallel::DistributedCheckpoint(load);
}

// The pipeline's view of this rank's part.
parallel::StagedModel staged_model(const LanguageModel& lm) {
  nn::CausalLM* const model = lm.lm;  // lives as long as lm.module, which the stages hold
  return {.module = lm.module,
          .part = model->part,
          .num_blocks = lm.num_blocks,
          .embed = [model](const Tensor& idx) { return model->embed(idx); },
          .blocks = model->blocks(),
          .head_loss = [model](const Tensor& x, const Tensor& targets) { return model->loss(model->head(x), targets); },
          .logits = [model](const Tensor& x) { return model->tp->gather_vocab(model->head(x)); },
          .tied_parameters = model->tied_parameters()};
}

// `value` of every rank, in rank order (this one's alone without a launcher).
std::vector<double> every_rank(const Ranks& ranks, double value) {
  if (!ranks.world) return {value};
  Tensor t = zeros({ranks.world->size()}, TensorOptions{.dtype = kFloat64});
  t.data_ptr<double>()[ranks.rank] = value;
  ranks.world->all_reduce(t).wait();
  return {t.data_ptr<double>(), t.data_ptr<double>() + t.numel()};
}

// Error unless every parameter of every rank is finite (a collective): a checkpoint is never
// written from NaN or infinite weights.
void check_finite_weights(const Ranks& ranks, const parallel::TrainingPlan& plan, std::int64_t step) {
  NoGradGuard no_grad;
  std::string first_bad;
  const auto gathered = plan.gather_parameters();  // ZeRO-3: every rank's blocks
  for (const auto& [name, p] : plan.module().named_parameters())
    if (first_bad.empty() && any(logical_or(isnan(p), isinf(p))).to(Device::cpu()).item<bool>()) first_bad = name;
  const std::vector<double> bad = every_rank(ranks, first_bad.empty() ? 0.0 : 1.0);
  for (std::size_t r = 0; r < bad.size(); ++r)
    if (bad[r] != 0)
      throw Error("train", concat("after step ", step, " the weights are not finite (rank ", r,
                                  first_bad.empty() || static_cast<int>(r) != ranks.rank ? std::string()
                                                                                          : concat(": ", first_bad),
                                  "); not saving them over the last checkpoint"));
}

// A JSON array of whole numbers.
std::string json_integers(const std::vector<double>& values) {
  std::string text = "[";
  for (std::size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + std::to_string(std::llround(values[i]));
  return text + "]";
}

// --profile: this rank's recorded events to DIR/rank_<r>.json; once every rank has written,
// rank 0 merges them into DIR/trace.json.
void write_profile(const std::string& dir, const Ranks& ranks) {
  const std::filesystem::path root(dir);
  std::filesystem::create_directories(root);
  const parallel::LayoutCoord c = ranks.groups.coord;
  trace::write_chrome_file(root / concat("rank_", ranks.rank, ".json"), trace::take_events(), ranks.rank,
                           concat("rank ", ranks.rank, " (dp ", c.dp, ", tp ", c.tp, ", pp ", c.pp, ")"));
  std::vector<std::filesystem::path> files = {root / "rank_0.json"};
  if (ranks.world) {
    every_rank(ranks, 0);  // a barrier: every file is written
    for (int r = 1; r < ranks.world->size(); ++r) files.push_back(root / concat("rank_", r, ".json"));
  }
  if (!ranks.main()) return;
  trace::merge_chrome_files(files, root / "trace.json");
  std::printf("profile: %s (open it in ui.perfetto.dev or chrome://tracing)\n", (root / "trace.json").c_str());
}

int run_training(const ModelFactory& make, const TrainFlags& f, const Ranks& ranks) {
  const parallel::Layout& layout = ranks.layout;
  const std::string layout_name = layout.str() + (f.sequence_parallel ? " SP" : "");
  const std::int64_t B = f.batch_size, T = f.sequence_length, dp = layout.dp();
  const bool zero = ranks.world && f.zero_stage >= 1;  // ZeRO shards over data-parallel ranks
  if (f.sequence_parallel && layout.tp() == 1)
    throw Error("train", "--sequence_parallel 1 splits the sequence over the tensor-parallel ranks: it needs "
                         "--tensor_parallel > 1");
  if (f.sequence_parallel && T % layout.tp() != 0)
    throw Error("train", concat("--sequence_parallel 1 splits --sequence_length ", T, " over ", layout.tp(),
                                " tensor-parallel ranks: it must be a multiple of ", layout.tp()));
  for (const std::int64_t step : f.profile_steps)
    if (!f.profile.empty() && step >= f.num_iteration)
      throw Error("train", concat("--profile_steps ", step, " is past the run's last step (--num_iteration ",
                                  f.num_iteration, " counts from 0)"));
  if (!f.pipeline_blocks.empty() && layout.pp() == 1)
    throw Error("train", "--pipeline_blocks splits the blocks between pipeline stages: it needs --pipeline_parallel > 1");
  const std::int64_t tokens_per_step = f.total_batch_size > 0 ? f.total_batch_size : B * T * dp;
  if (tokens_per_step % (B * T * dp) != 0)
    throw Error("train", concat("--total_batch_size ", tokens_per_step, " is not a multiple of batch_size * sequence_length",
                                " * data-parallel ranks = ", B, " * ", T, " * ", dp, " = ", B * T * dp));
  // Each micro-step, data-parallel rank r takes sequences (k * dp + r) * B .. + B - 1 of the step's.
  const std::int64_t micro_steps = tokens_per_step / (B * T * dp), sequences_per_step = tokens_per_step / T;
  if (f.cuda_graph && micro_steps > 1)
    throw Error("train", concat("--cuda_graph 1 replays one micro-step per step; --total_batch_size ", tokens_per_step,
                                " needs ", micro_steps, " (use --batch_size ", tokens_per_step / T, ")"));

  // The plan builds this rank's part of the model (only its stages' blocks under pipeline
  // parallelism) and runs every step of it.
  std::optional<LanguageModel> built;
  const parallel::BuildModel build = [&](std::shared_ptr<parallel::TensorParallel> tp, const parallel::PartFor& part_for) {
    const PartFor named_part = [&](std::int64_t num_blocks) {
      try {
        return part_for(num_blocks);
      } catch (const Error& e) {  // before the model is built: name the flags that chose the split
        std::string counts;
        for (const int n : f.pipeline_blocks) counts += (counts.empty() ? "" : ",") + std::to_string(n);
        throw Error("train", concat("--pipeline_parallel ", layout.pp(), " x --virtual_pipeline_parallel ", layout.vpp(),
                                    counts.empty() ? std::string() : " with --pipeline_blocks " + counts,
                                    " for a model of ", num_blocks, " blocks: ", e.what()));
      }
    };
    built = make(std::move(tp), named_part);
    if (!f.lora_in.empty()) {
      nn::lora::load_adapters(*built->module, f.lora_in);
    } else if (f.lora_rank > 0) {
      std::vector<std::string> targets = f.lora_targets;
      if (targets.empty()) targets = nn::model_family_of(*built->module).default_lora_targets;
      nn::lora::apply(*built->module,
                      {.rank = f.lora_rank, .alpha = f.lora_alpha, .dropout = f.lora_dropout, .targets = targets});
    }
    return staged_model(*built);
  };
  const Device device = ranks.device;
  const bool autocast = device.is_cuda() && f.dtype != "float32";
  parallel::TrainingPlan plan(layout, ranks.groups, build,
                              {.zero_stage = zero ? f.zero_stage : 0,
                               .sequence_parallel = f.sequence_parallel,
                               .schedule = f.pp_schedule,
                               .pipeline_blocks = f.pipeline_blocks,
                               .micro_batches = static_cast<int>(micro_steps),
                               .grad_clip = f.grad_clip,
                               .checkpoint_blocks = f.activation_checkpointing == "full",
                               .recompute_attention = f.activation_checkpointing == "selective",
                               .device = device,
                               .autocast = autocast ? std::optional(f.dtype == "bfloat16" ? kBFloat16 : kFloat16)
                                                    : std::nullopt,
                               // float16's narrow range: gradients scaled up by a dynamic factor
                               .loss_scaling = device.is_cuda() && f.dtype == "float16",
                               .cuda_graph = f.cuda_graph,
                               .skip_non_finite = f.max_skipped_steps > 0},
                              adamw(f));
  const LanguageModel& lm = *built;
  if (T > lm.max_seq_len) throw Error("train", concat("--sequence_length ", T, " exceeds the model's ", lm.max_seq_len));

  std::optional<TokenBatches> val_data;
  if (!f.input_val_bin.empty()) val_data.emplace(std::make_shared<llmc::TokenFile>(f.input_val_bin), T, false, f.seed, lm.vocab_size);
  SampleText sample_text;
  if (!f.tokenizer_bin.empty()) sample_text.llmc = llmc::read_tokenizer_file(f.tokenizer_bin);
  if (!f.tokenizer.empty()) {
    sample_text.hf = text::Tokenizer::from_pretrained(f.tokenizer);
    if (sample_text.hf->vocab_size() > lm.vocab_size)  // a model's vocabulary may be padded (Qwen3's 151936)
      throw Error("train", concat("--tokenizer ", f.tokenizer, " has ", sample_text.hf->vocab_size(),
                                  " tokens, more than the model's vocabulary of ", lm.vocab_size));
  }

  nn::Module& model = plan.module();
  parallel::PipelineRunner* const pipeline = plan.pipeline();
  auto schedule = make_schedule(plan.optimizer(), f);
  // Saved with the model and optimizer: the schedule, and the default generator (rank 0's).
  const std::vector<parallel::ReplicatedState> replicated_state = {
      {"scheduler", [&] { return schedule->state_dict(); }, [&](const StateDict& s) { schedule->load_state_dict(s); }},
      {"rng", [] { return io::generator_state_dict(default_generator()); },
       [](const StateDict& s) { io::load_generator_state_dict(default_generator(), s); }}};
  std::int64_t saved_step = 0;
  // The batch order (a resumed run keeps its own) and the layout, informational.
  std::map<std::string, std::string> run_metadata = {
      {"data_seed", std::to_string(f.seed)}, {"layout", layout_name}, {"zero_stage", std::to_string(zero ? f.zero_stage : 0)}};
  if (!f.load.empty()) {
    const parallel::DistributedCheckpoint checkpoint = open_checkpoint(f.load);
    // --export_llmc needs only the model (the schedule may have been made for another run length).
    plan.load_sharded_state(checkpoint, f.export_llmc.empty() ? replicated_state : std::vector<parallel::ReplicatedState>{});
    saved_step = checkpoint.step();
    if (checkpoint.metadata().contains("data_seed")) run_metadata["data_seed"] = checkpoint.metadata().at("data_seed");
    if (ranks.main())
      std::printf("resumed from %s at step %lld (saved as %s)\n", f.load.c_str(), static_cast<long long>(saved_step),
                  checkpoint.metadata().contains("layout") ? checkpoint.metadata().at("layout").c_str() : "?");
  }
  // The whole model as an llm.c checkpoint or a Hugging Face directory (written by rank 0;
  // collective over its replica).
  auto export_model = [&](const std::filesystem::path& path, ModelFormat format) {
    const auto gathered = plan.gather_parameters();  // ZeRO-3: every rank's blocks
    if (!ranks.main_replica()) return;
    if (pipeline) {  // the stages' parts gathered on rank 0
      const nn::Named<Tensor> whole = pipeline->gather_parameters();
      if (ranks.main()) lm.write_model(path, format, whole);
    } else {
      lm.export_model(path, format, ranks.main());
    }
  };
  const auto export_llmc = [&](const std::filesystem::path& path) { export_model(path, ModelFormat::kLlmc); };
  // LoRA: the adapters (every rank's blocks of them under ZeRO-3) in PEFT's files, and folded
  // into the base weights before a final export.
  const auto save_adapters = [&](const std::filesystem::path& dir) {
    const auto gathered = plan.gather_parameters();
    if (ranks.main()) nn::lora::save_adapters(model, dir);
  };
  const auto merge_adapters = [&] {
    if (!uses_lora(f)) return;
    const auto gathered = plan.gather_parameters();
    nn::lora::merge(model);
  };
  if (!f.export_llmc.empty()) {
    merge_adapters();
    export_llmc(f.export_llmc);
    if (ranks.main()) std::printf("wrote step %lld's model to %s\n", static_cast<long long>(saved_step), f.export_llmc.c_str());
    return 0;
  }
  // Every rank writes its own pieces of the state (replicated ones once) into --save; the
  // checkpoint appears only once every rank's are written. With --async_save the files are
  // written on a background thread and published at the first step boundary after they are
  // all written (or before the next save, or at the end). Then the llm.c export.
  const std::uint64_t data_seed = std::stoull(run_metadata.at("data_seed"));
  TokenBatches train_data(std::make_shared<llmc::TokenFile>(f.input_bin), T, f.shuffle, data_seed, lm.vocab_size);
  Metrics metrics(ranks.main() ? f.metrics_out : std::string());
  std::optional<parallel::AsyncCheckpointSave> pending;
  auto publish = [&] {
    pending->commit();
    if (ranks.main()) std::printf("saved step %lld to %s\n", static_cast<long long>(pending->step()), f.save.c_str());
    pending.reset();
  };
  auto save = [&](std::int64_t step) {
    check_finite_weights(ranks, plan, step - 1);
    if (pending) publish();
    const auto start = Clock::now();
    if (f.async_save) {
      pending.emplace(f.save, step, plan.sharded_state(replicated_state), ranks.world,
                      parallel::DistributedSaveOptions{.metadata = run_metadata});
    } else {
      parallel::save_distributed_checkpoint(f.save, step, plan.sharded_state(replicated_state), ranks.world,
                                            {.metadata = run_metadata});
    }
    const double save_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    const auto export_start = Clock::now();
    if (uses_lora(f))  // the base model is the one started from: the adapters are what changed
      save_adapters(std::filesystem::path(f.save) / "adapter");
    else if (!lm.llmc_name().empty())
      export_llmc(std::filesystem::path(f.save) / lm.llmc_name());
    const double export_ms = std::chrono::duration<double, std::milli>(Clock::now() - export_start).count();
    // How long training waited for the checkpoint (with --async_save, for the host copy).
    metrics.line(format("{\"step\": %lld, \"save_ms\": %.3f, \"export_ms\": %.3f, \"async\": %s}",
                        static_cast<long long>(step), save_ms, export_ms, f.async_save ? "true" : "false"));
    if (ranks.main() && !pending) std::printf("saved step %lld to %s\n", static_cast<long long>(step), f.save.c_str());
  };

  // The whole model's parameters, and this rank's own (its part, tensor-parallel shards).
  const std::int64_t num_params = plan.whole_model_parameters();
  std::int64_t rank_params = 0;
  for (const Tensor& p : model.parameters()) rank_params += p.numel();
  const std::vector<double> rank_parameters = every_rank(ranks, static_cast<double>(rank_params));
  if (ranks.main() && uses_lora(f)) {
    std::int64_t adapter_params = 0;
    for (const auto& adapter : nn::lora::adapters(model))
      for (const Tensor& p : adapter->parameters()) adapter_params += p.numel();
    std::printf("LoRA: %zu adapters, %lld trainable parameters (%.3f%% of %lld), base frozen\n",
                nn::lora::adapters(model).size(), static_cast<long long>(adapter_params),
                100.0 * static_cast<double>(adapter_params) / static_cast<double>(num_params),
                static_cast<long long>(num_params));
  }
  if (ranks.main())
    std::printf("%lld parameters | %s | %lld tokens per step = %lld micro-batches of %lld x %lld per rank | %s | %d threads%s\n",
                static_cast<long long>(num_params), layout_name.c_str(), static_cast<long long>(tokens_per_step),
                static_cast<long long>(micro_steps), static_cast<long long>(B), static_cast<long long>(T),
                (device.str() + (f.cuda_graph ? " (CUDA graph)" : "")).c_str(), omp_get_max_threads(),
                dp > 1 ? " per rank" : "");
  double total_ms = 0, last_loss = 0;
  std::int64_t timed_steps = 0;
  Generator sample_rng(f.seed);
  // The tokens fed to generation go to the model's device.
  const CachedLogitsFn sample_logits = [&lm, &f, pipeline, device](const Tensor& tokens, nn::KVCache& cache) {
    if (pipeline) return pipeline->logits(tokens).to(kFloat32);  // the whole window each time (no cache)
    const auto autocast = forward_precision(f);
    return lm.logits_cached(tokens.to(device), cache).to(kFloat32);
  };
  // --check_numerics and --dump_numerics name modules by their paths in this rank's model.
  if (f.check_numerics) numerics::set_checking(true);
  std::optional<numerics::NumericsDump> dump;
  if (!f.dump_numerics.empty()) dump.emplace(f.dump_numerics, ranks.rank);
  if (numerics::checking() || dump) model.label_modules();  // checking: the flag or INFINI_CHECK_NUMERICS=1
  // Each clock reading below follows a wait for the device: times cover its work, not only
  // the launches (validation, sampling and saving end by reading results back).
  const std::int64_t first_step = saved_step;
  int skipped_in_a_row = 0;  // steps with a non-finite loss or gradient norm
  for (std::int64_t step = first_step; step < f.num_iteration; ++step) {
    const auto start = Clock::now();
    std::vector<data::Example> batches;  // this data-parallel rank's micro-batches
    for (std::int64_t k = 0; k < micro_steps; ++k)
      batches.push_back(train_data.sequences(step * sequences_per_step + (k * dp + ranks.groups.coord.dp) * B, B));
    const bool profiled = !f.profile.empty() && std::find(f.profile_steps.begin(), f.profile_steps.end(), step) !=
                                                    f.profile_steps.end();
    trace::set_recording(profiled);
    if (dump) dump->begin_step(step);
    const parallel::StepResult result = plan.step(batches);
    if (dump) dump->end_step(model.named_parameters());
    trace::set_recording(false);
    const double lr = schedule->get_last_lr()[0];
    if (result.skipped && !result.non_finite && ranks.main())
      std::printf("step %lld: non-finite gradients, update skipped; loss scale now %g\n", static_cast<long long>(step),
                  plan.scaler().get_scale());
    schedule->step();
    const auto end = Clock::now();
    const double ms = std::chrono::duration<double, std::milli>(end - start).count();
    const double tokens_per_s = static_cast<double>(tokens_per_step) / (ms / 1000.0);
    const std::int64_t peak = memory_stats(device).peak_allocated_bytes;
    const double norm = result.grad_norm;
    last_loss = result.loss;
    if (step > first_step || f.num_iteration - first_step == 1) {  // the first step warms caches up
      total_ms += ms;
      ++timed_steps;
    }
    if (ranks.main()) {
      std::printf("step %lld/%lld | %s | loss %.4f | lr %.2e | norm %.2f | %.1f ms | %.0f tok/s | peak %.1f GiB\n",
                  static_cast<long long>(step), static_cast<long long>(f.num_iteration), layout_name.c_str(), last_loss,
                  lr, norm, ms, tokens_per_s, static_cast<double>(peak) / (1 << 30));
      std::fflush(stdout);
    }
    metrics.line(format("{\"step\": %lld, \"loss\": %s, \"lr\": %.6e, \"grad_norm\": %s, \"ms\": %.3f, "
                        "\"tokens_per_s\": %.1f, \"peak_bytes\": %lld, \"forward_ms\": %.3f, \"backward_ms\": %.3f, "
                        "\"optimizer_ms\": %.3f, \"activation_bytes\": %lld, \"allocated_bytes\": %lld, "
                        "\"rss_bytes\": %lld, \"skipped\": %s}",
                        static_cast<long long>(step), json_number(last_loss).c_str(), lr,
                        json_number(norm, "%.6f").c_str(), ms, tokens_per_s, static_cast<long long>(peak),
                        result.forward_ms, result.backward_ms, result.update_ms,
                        static_cast<long long>(result.activation_bytes),
                        static_cast<long long>(memory_stats(device).allocated_bytes),
                        static_cast<long long>(resident_bytes()), result.skipped ? "true" : "false"));
    skipped_in_a_row = result.non_finite ? skipped_in_a_row + 1 : 0;
    if (result.non_finite) check_non_finite(result, step, skipped_in_a_row, f, ranks.main());
    const std::int64_t done = step + 1;  // steps taken
    const bool last = done == f.num_iteration;
    const bool validate = val_data && f.val_loss_every > 0 && (done % f.val_loss_every == 0 || last);
    const bool sample = f.sample_every > 0 && (done % f.sample_every == 0 || last);
    // Validation and sampling run the whole model on every rank of the main replica (through
    // the stages under pipeline parallelism).
    if ((ranks.main_replica() || f.zero_stage == 3) && validate) {  // ZeRO-3: a collective over dp
      model.eval();
      const double val_loss = plan.loss(validation_batches(*val_data, f));
      if (ranks.main()) std::printf("step %lld | val loss %.4f\n", static_cast<long long>(step), val_loss);
      metrics.line(format("{\"step\": %lld, \"val_loss\": %.7f}", static_cast<long long>(step), val_loss));
    }
    // Every rank of the main replica samples the same tokens from the same whole logits (under
    // ZeRO-3 from the parameters every data-parallel rank gathers).
    const auto gathered = sample ? std::optional(plan.gather_parameters()) : std::nullopt;
    if (ranks.main_replica() && sample) {
      model.eval();
      std::vector<std::int64_t> tokens = {sample_text.start_token(lm.vocab_size)};
      generate(tokens, f.text_length, sample_logits, lm.vocab_size, lm.max_seq_len, f.top_k, f.temperature,
               sample_rng, /*use_cache=*/!pipeline);
      if (ranks.main()) std::printf("---\n%s\n---\n", sample_text.decode({tokens.begin() + 1, tokens.end()}).c_str());
    }
    if (!f.save.empty() && ((f.save_interval > 0 && done % f.save_interval == 0) || last)) save(done);
    else if (pending && pending->written_everywhere()) publish();
  }
  if (pending) publish();
  if (!f.lora_out.empty()) {
    save_adapters(f.lora_out);
    if (ranks.main()) std::printf("wrote the LoRA adapters to %s\n", f.lora_out.c_str());
  }
  if (!f.hf_out.empty()) {
    merge_adapters();
    export_model(f.hf_out, ModelFormat::kHuggingFace);
    if (ranks.main()) std::printf("wrote the model to %s\n", f.hf_out.c_str());
  }
  if (!f.profile.empty()) write_profile(f.profile, ranks);
  const double mean_ms = timed_steps > 0 ? total_ms / static_cast<double>(timed_steps) : 0;
  // Every rank's parameters and peak bytes (its part of the model under pipeline parallelism).
  const std::vector<double> rank_peaks =
      every_rank(ranks, static_cast<double>(memory_stats(device).peak_allocated_bytes));
  std::int64_t optimizer_bytes = 0;  // this rank's optimizer state (AdamW: two moments per trained element)
  for (const auto& [name, t] : plan.optimizer().state_dict()) optimizer_bytes += t.numel() * static_cast<std::int64_t>(itemsize(t.dtype()));
  metrics.line(format("{\"summary\": {\"layout\": \"%s\", \"steps\": %lld, \"final_loss\": %s, \"mean_ms\": %.3f, "
                      "\"tokens_per_s\": %.1f, \"peak_bytes\": %lld, \"peak_bytes_max\": %lld, \"parameters\": %lld, "
                      "\"rank_parameters\": %s, \"rank_peak_bytes\": %s, \"optimizer_bytes\": %lld}}",
                      layout_name.c_str(), static_cast<long long>(f.num_iteration), json_number(last_loss).c_str(), mean_ms,
                      mean_ms > 0 ? static_cast<double>(tokens_per_step) / (mean_ms / 1000.0) : 0.0,
                      static_cast<long long>(memory_stats(device).peak_allocated_bytes),
                      std::llround(*std::max_element(rank_peaks.begin(), rank_peaks.end())),
                      static_cast<long long>(num_params), json_integers(rank_parameters).c_str(),
                      json_integers(rank_peaks).c_str(), static_cast<long long>(optimizer_bytes)));
  if (ranks.main())
    std::printf("done: %s, %lld steps, mean %.1f ms/step after the first, optimizer state %lld bytes on rank 0\n",
                layout_name.c_str(), static_cast<long long>(f.num_iteration), mean_ms,
                static_cast<long long>(optimizer_bytes));
  return 0;
}

}  // namespace

int train(const ModelFactory& make, const TrainFlags& f) {
  const Ranks ranks = join_world(f);
  if (!ranks.world) return run_training(make, f, ranks);
  try {
    return run_training(make, f, ranks);
  } catch (const std::exception& e) {  // the other ranks may wait in a collective: end the job
    std::fprintf(stderr, "rank %d: %s\n", ranks.rank, e.what());
    parallel::abort_job(1);
  }
}

}  // namespace samples
