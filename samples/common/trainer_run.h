// The parts of a training run (samples/common): the run's shared state (TrainerRun) and the
// components the loop calls around each step, each deciding its own "when" from the flags:
// the step log and summary, the non-finite guard, validation, sampling, checkpoints, the final
// exports, profiling and the numerics dump (torchtitan's trainer: a short loop over
// components). run_training (lm_trainer.cpp) builds the plan and runs the loop over them.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lm_trainer.h"

import infini.parallel;

namespace samples {

// The ranks of the run. Under mpirun: the world as dp x tp x pp (parallel::Layout); without a
// launcher: no process group and the plain single-process path.
struct Ranks {
  std::shared_ptr<infini::parallel::ProcessGroup> world;  // null without a launcher
  infini::parallel::Layout layout{1};
  infini::parallel::ParallelGroups groups = {};
  infini::Device device = infini::Device::cpu();  // the rank's GPU: cuda:<local rank mod the GPUs it sees>
  int rank = 0;
  bool main() const { return rank == 0; }
  // Whether this rank is in rank 0's model replica (validation, sampling and the whole-model
  // export run there: collectives over its tensor-parallel and pipeline groups).
  bool main_replica() const { return groups.coord.dp == 0; }
};

// Appends JSON lines to --metrics_out (nothing without it).
class Metrics {
 public:
  explicit Metrics(const std::string& path);
  void line(const std::string& json);

 private:
  std::ofstream out_;
};

// What every component shares: the flags, the ranks, the plan and the model, the metrics file
// and what a checkpoint saves besides the plan's state.
struct TrainerRun {
  const TrainFlags& flags;
  const Ranks& ranks;
  infini::parallel::TrainingPlan& plan;
  const LanguageModel& lm;
  Metrics& metrics;
  std::string layout_name;             // "DP=2 TP=1 PP=2" (+ " SP")
  std::int64_t tokens_per_step;
  std::vector<infini::parallel::ReplicatedState> replicated_state;  // the LR schedule, the RNG
  std::map<std::string, std::string> metadata;                      // saved with each checkpoint

  // The whole model as an llm.c file or a Hugging Face directory, written by rank 0 (a
  // collective over its replica; under ZeRO-3 over the data-parallel ranks too).
  void export_model(const std::filesystem::path& path, ModelFormat format) const;
  // LoRA: the adapters in PEFT's files (rank 0), and folded into the base weights.
  void save_adapters(const std::filesystem::path& dir) const;
  void merge_adapters() const;
};

// One step's outcome, as the components see it.
struct StepReport {
  std::int64_t step;  // the step taken (0-based)
  std::int64_t done;  // steps taken: step + 1
  bool last;          // the run's last step
  const infini::parallel::StepResult& result;
  double ms;  // the step's wall time
  double lr;  // its learning rate
};

// A part of the run that decides its own "when". The loop calls before_step and after_step
// of every component in order, and finish in reverse order after the last step.
class TrainerComponent {
 public:
  virtual ~TrainerComponent() = default;
  virtual void before_step(std::int64_t /*step*/) {}
  virtual void after_step(const StepReport& /*report*/) {}
  virtual void finish() {}
};

// The console line and --metrics_out line of each step, and the run's summary at the end
// (mean time after the first step, tokens/s, peak bytes of every rank, parameters).
std::unique_ptr<TrainerComponent> step_log(TrainerRun& run, std::int64_t first_step);
// --profile: records the --profile_steps and writes every rank's Chrome trace, merged.
std::unique_ptr<TrainerComponent> profiler(TrainerRun& run);
// --dump_numerics: per-rank statistics of every module output and gradient per step.
std::unique_ptr<TrainerComponent> numerics_dump(TrainerRun& run);
// --max_skipped_steps: stops the run after that many non-finite steps in a row.
std::unique_ptr<TrainerComponent> non_finite_guard(TrainerRun& run);
// --input_val_bin with --val_loss_every: the validation loss.
std::unique_ptr<TrainerComponent> validator(TrainerRun& run);
// --sample_every: generated text, printed through --tokenizer / --tokenizer_bin.
std::unique_ptr<TrainerComponent> sampler(TrainerRun& run);
// --save / --save_interval / --async_save: the distributed checkpoint and the family's llm.c
// export (or the LoRA adapters) beside it.
std::unique_ptr<TrainerComponent> checkpointer(TrainerRun& run);
// --lora_out and --hf_out after the last step.
std::unique_ptr<TrainerComponent> final_export(TrainerRun& run);

// `value` of every rank, in rank order (this one's alone without a launcher).
std::vector<double> every_rank(const Ranks& ranks, double value);
// printf into a string.
std::string format(const char* fmt, auto... values) {
  std::string text(static_cast<std::size_t>(std::snprintf(nullptr, 0, fmt, values...)), '\0');
  std::snprintf(text.data(), text.size() + 1, fmt, values...);
  return text;
}

}  // namespace samples
