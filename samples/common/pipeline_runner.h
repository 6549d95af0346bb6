// The trainers' pipeline-parallel step: the model's blocks split over the pipeline group's
// ranks (virtual stages of Megatron's interleaved mapping), a schedule run on a
// parallel::ModelStage per step, then the gradients finished: the tied embedding summed
// between the first and last stage, everything averaged over the data-parallel group.
// Each rank builds and holds only its part of the model (parallel::stage_part): its stages'
// blocks, the embedding on the first, the head on the last. Validation, generation and the
// llm.c export run through the stages.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lm_trainer.h"

import infini.parallel;

namespace samples {

// The block ranges of the virtual stages of `layout` for a model of `num_blocks` blocks
// (block_counts: blocks of each virtual stage; empty: balanced).
std::vector<std::pair<int, int>> pipeline_blocks(const infini::parallel::Layout& layout, std::int64_t num_blocks,
                                                 const std::vector<int>& block_counts);

class PipelineRunner {
 public:
  // lm: this rank's part, as stage_part gave it for these blocks_of_stage. Collective over the
  // world (makes the embedding group). Error if the schedule cannot run the shape or the dry
  // run on the simulator fails.
  // tp: the model's tensor-parallel layers (null without).
  PipelineRunner(const LanguageModel& lm, const infini::parallel::ParallelGroups& groups,
                 const infini::parallel::Layout& layout, std::shared_ptr<infini::parallel::TensorParallel> tp,
                 const std::string& schedule, int micro_batches, std::vector<std::pair<int, int>> blocks_of_stage);

  // One step over `micro_batches` (this data-parallel rank's); returns the sum of their
  // losses on the ranks of the last stage (0 elsewhere). Gradients accumulate.
  double step(const std::vector<infini::data::Example>& micro_batches);
  // After step: sums the tied parameters' gradients between the first and last stage and
  // averages every gradient over the data-parallel group.
  void finish_gradients();
  // The 2-norm of the whole model's gradients: each parameter counted once (the tied ones on
  // the first stage), tensor-parallel shards summed (tp may be null). Collective over the world.
  double grad_norm() const;
  // The mean loss of `batches` through the stages (no gradients), on every rank of the
  // pipeline group. Collective over it.
  double loss(const std::vector<infini::data::Example>& batches) const;
  // idx (1, T) -> the logits (1, T, Vp) of every vocabulary column, on every rank of the
  // pipeline group (generation). Collective over it.
  infini::Tensor logits(const infini::Tensor& idx) const;
  // The whole model's parameters (whole tensors, by name) on pipeline rank 0, from every
  // stage's part; empty elsewhere. Collective over the pipeline and tensor-parallel groups.
  infini::nn::Named<infini::Tensor> gather_parameters() const;

  const infini::parallel::PipelineShape& shape() const { return shape_; }
  bool last_stage() const { return groups_.coord.pp == shape_.stages - 1; }

 private:
  const LanguageModel& lm_;
  infini::parallel::ParallelGroups groups_;
  std::shared_ptr<infini::parallel::TensorParallel> tp_;
  infini::parallel::PipelineShape shape_;
  infini::parallel::Schedule schedule_;
  infini::parallel::PipelineModel model_;
  std::vector<std::pair<int, int>> blocks_of_stage_;
  std::shared_ptr<infini::parallel::ProcessGroup> embedding_group_;  // pp ranks 0 and p - 1 (null elsewhere)
};

}  // namespace samples
