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

#include "token_batches.h"
#include "trainer_run.h"

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

// The micro-batches of a step: B sequences of T tokens, micro_steps of them per
// data-parallel rank, tokens_per_step in all. Error naming the flags that do not fit.
struct StepShape {
  std::int64_t B, T, dp, micro_steps, tokens_per_step;
};

StepShape step_shape(const TrainFlags& f, const parallel::Layout& layout) {
  const std::int64_t B = f.batch_size, T = f.sequence_length, dp = layout.dp();
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
  const std::int64_t micro_steps = tokens_per_step / (B * T * dp);
  if (f.cuda_graph && micro_steps > 1)
    throw Error("train", concat("--cuda_graph 1 replays one micro-step per step; --total_batch_size ", tokens_per_step,
                                " needs ", micro_steps, " (use --batch_size ", tokens_per_step / T, ")"));
  return {B, T, dp, micro_steps, tokens_per_step};
}

// What the plan builds on this rank: the factory's model (only this rank's part under pipeline
// parallelism), with its LoRA adapters, kept in `built` for the loop.
parallel::BuildModel build_model(const ModelFactory& make, const TrainFlags& f, const parallel::Layout& layout,
                                 std::optional<LanguageModel>& built) {
  return [&make, &f, &layout, &built](std::shared_ptr<parallel::TensorParallel> tp, const parallel::PartFor& part_for) {
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
      const std::vector<std::string> targets =
          f.lora_targets.empty() ? nn::model_family_of(*built->module).default_lora_targets : f.lora_targets;
      nn::lora::apply(*built->module,
                      {.rank = f.lora_rank, .alpha = f.lora_alpha, .dropout = f.lora_dropout, .targets = targets});
    }
    return staged_model(*built);
  };
}

parallel::PlanOptions plan_options(const TrainFlags& f, const Ranks& ranks, const StepShape& shape) {
  const bool zero = ranks.world && f.zero_stage >= 1;  // ZeRO shards over data-parallel ranks
  const bool autocast = ranks.device.is_cuda() && f.dtype != "float32";
  return {.zero_stage = parallel::zero_stage(zero ? f.zero_stage : 0, "train"),
          .sequence_parallel = f.sequence_parallel,
          .schedule = f.pp_schedule,
          .pipeline_blocks = f.pipeline_blocks,
          .micro_batches = static_cast<int>(shape.micro_steps),
          .grad_clip = f.grad_clip,
          .checkpoint_blocks = f.activation_checkpointing == "full",
          .recompute_attention = f.activation_checkpointing == "selective",
          .device = ranks.device,
          .autocast = autocast ? std::optional(f.dtype == "bfloat16" ? kBFloat16 : kFloat16) : std::nullopt,
          // float16's narrow range: gradients scaled up by a dynamic factor
          .loss_scaling = ranks.device.is_cuda() && f.dtype == "float16",
          .cuda_graph = f.cuda_graph,
          .skip_non_finite = f.max_skipped_steps > 0};
}

// --load: the checkpoint's state (saved under any layout) into the plan, with the LR schedule
// and the RNG unless only exporting; the step it was saved after.
std::int64_t resume(TrainerRun& run) {
  const parallel::DistributedCheckpoint checkpoint = open_checkpoint(run.flags.load);
  // --export_llmc needs only the model (the schedule may have been made for another run length).
  run.plan.load_sharded_state(checkpoint, run.flags.export_llmc.empty() ? run.replicated_state
                                                                         : std::vector<parallel::ReplicatedState>{});
  if (checkpoint.metadata().contains("data_seed")) run.metadata["data_seed"] = checkpoint.metadata().at("data_seed");
  if (run.ranks.main())
    std::printf("resumed from %s at step %lld (saved as %s)\n", run.flags.load.c_str(),
                static_cast<long long>(checkpoint.step()),
                checkpoint.metadata().contains("layout") ? checkpoint.metadata().at("layout").c_str() : "?");
  return checkpoint.step();
}

void print_run(const TrainerRun& run, const StepShape& shape) {
  const std::int64_t num_params = run.plan.whole_model_parameters();  // a collective under a pipeline
  if (!run.ranks.main()) return;
  nn::Module& model = run.plan.module();
  if (uses_lora(run.flags)) {
    std::int64_t adapter_params = 0;
    for (const auto& adapter : nn::lora::adapters(model))
      for (const Tensor& p : adapter->parameters()) adapter_params += p.numel();
    std::printf("LoRA: %zu adapters, %lld trainable parameters (%.3f%% of %lld), base frozen\n",
                nn::lora::adapters(model).size(), static_cast<long long>(adapter_params),
                100.0 * static_cast<double>(adapter_params) / static_cast<double>(num_params),
                static_cast<long long>(num_params));
  }
  std::printf("%lld parameters | %s | %lld tokens per step = %lld micro-batches of %lld x %lld per rank | %s | %d threads%s\n",
              static_cast<long long>(num_params), run.layout_name.c_str(), static_cast<long long>(shape.tokens_per_step),
              static_cast<long long>(shape.micro_steps), static_cast<long long>(shape.B), static_cast<long long>(shape.T),
              (run.ranks.device.str() + (run.flags.cuda_graph ? " (CUDA graph)" : "")).c_str(), omp_get_max_threads(),
              shape.dp > 1 ? " per rank" : "");
}

// The run: the plan builds this rank's part of the model and runs each step; the components
// (trainer_run.h) do everything around the steps, each at its own time. Each clock reading
// follows a wait for the device (plan.step ends by reading the loss back).
int run_training(const ModelFactory& make, const TrainFlags& f, const Ranks& ranks) {
  const StepShape shape = step_shape(f, ranks.layout);
  std::optional<LanguageModel> built;
  parallel::TrainingPlan plan(ranks.layout, ranks.groups, build_model(make, f, ranks.layout, built),
                              plan_options(f, ranks, shape), adamw(f));
  const LanguageModel& lm = *built;
  if (shape.T > lm.max_seq_len)
    throw Error("train", concat("--sequence_length ", shape.T, " exceeds the model's ", lm.max_seq_len));
  auto schedule = make_schedule(plan.optimizer(), f);
  Metrics metrics(ranks.main() ? f.metrics_out : std::string());
  const bool zero = ranks.world && f.zero_stage >= 1;
  TrainerRun run{
      .flags = f, .ranks = ranks, .plan = plan, .lm = lm, .metrics = metrics,
      .layout_name = ranks.layout.str() + (f.sequence_parallel ? " SP" : ""),
      .tokens_per_step = shape.tokens_per_step,
      // Saved with the model and optimizer: the schedule, and the default generator (rank 0's).
      .replicated_state = {{"scheduler", [&] { return schedule->state_dict(); },
                            [&](const StateDict& s) { schedule->load_state_dict(s); }},
                           {"rng", [] { return io::generator_state_dict(default_generator()); },
                            [](const StateDict& s) { io::load_generator_state_dict(default_generator(), s); }}},
      // The batch order (a resumed run keeps its own) and the layout, informational.
      .metadata = {{"data_seed", std::to_string(f.seed)}, {"layout", ranks.layout.str() + (f.sequence_parallel ? " SP" : "")},
                   {"zero_stage", std::to_string(zero ? f.zero_stage : 0)}}};
  const std::int64_t first_step = f.load.empty() ? 0 : resume(run);
  if (!f.export_llmc.empty()) {
    run.merge_adapters();
    run.export_model(f.export_llmc, ModelFormat::kLlmc);
    if (ranks.main()) std::printf("wrote step %lld's model to %s\n", static_cast<long long>(first_step), f.export_llmc.c_str());
    return 0;
  }
  TokenBatches train_data(std::make_shared<llmc::TokenFile>(f.input_bin), shape.T, f.shuffle,
                          std::stoull(run.metadata.at("data_seed")), lm.vocab_size);
  print_run(run, shape);
  if (f.check_numerics) numerics::set_checking(true);
  std::vector<std::unique_ptr<TrainerComponent>> components;
  for (auto* const make_component : {&profiler, &numerics_dump, &non_finite_guard, &validator, &sampler,
                                     &checkpointer, &final_export})
    if (auto component = (*make_component)(run)) components.push_back(std::move(component));
  components.insert(components.begin(), step_log(run, first_step));
  // --check_numerics and --dump_numerics name modules by their paths in this rank's model.
  if (numerics::checking() || !f.dump_numerics.empty()) plan.module().label_modules();
  const std::int64_t sequences_per_step = shape.tokens_per_step / shape.T;
  for (std::int64_t step = first_step; step < f.num_iteration; ++step) {
    const auto start = Clock::now();
    std::vector<data::Example> batches;  // this data-parallel rank's micro-batches: each micro-step k,
    for (std::int64_t k = 0; k < shape.micro_steps; ++k)  // rank r takes sequences (k * dp + r) * B .. + B - 1
      batches.push_back(train_data.sequences(step * sequences_per_step + (k * shape.dp + ranks.groups.coord.dp) * shape.B,
                                             shape.B));
    for (const auto& component : components) component->before_step(step);
    const parallel::StepResult result = plan.step(batches);
    const double lr = schedule->get_last_lr()[0];
    schedule->step();
    const StepReport report{.step = step, .done = step + 1, .last = step + 1 == f.num_iteration, .result = result,
                            .ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count(), .lr = lr};
    for (const auto& component : components) component->after_step(report);
  }
  for (auto it = components.rbegin(); it != components.rend(); ++it) (*it)->finish();
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
