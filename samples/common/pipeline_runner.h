// The trainers' pipeline-parallel step: the model's blocks split over the pipeline group's
// ranks (virtual stages of Megatron's interleaved mapping), a schedule run on a
// parallel::ModelStage per step, then the gradients finished: the tied embedding summed
// between the first and last stage, everything averaged over the data-parallel group.
// Every rank holds the whole model; each trains the parameters of its stages.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lm_trainer.h"

import infini.parallel;

namespace samples {

class PipelineRunner {
 public:
  // Collective over the world (makes the embedding group). block_counts: blocks of each
  // virtual stage (empty: balanced). Error if the schedule cannot run the shape, the dry run on
  // the simulator fails or the counts do not fit the model.
  PipelineRunner(const LanguageModel& lm, const infini::parallel::ParallelGroups& groups,
                 const infini::parallel::Layout& layout, const std::string& schedule, int micro_batches,
                 const std::vector<int>& block_counts = {});

  // One step over `micro_batches` (this data-parallel rank's); returns the sum of their
  // losses on the ranks of the last stage (0 elsewhere). Gradients accumulate.
  double step(const std::vector<infini::data::Example>& micro_batches);
  // After step: sums the tied parameters' gradients between the first and last stage and
  // averages every gradient over the data-parallel group.
  void finish_gradients();
  // The 2-norm of the whole model's gradients: each parameter counted on the rank that owns
  // it, tensor-parallel shards summed (tp may be null). Collective over the world.
  double grad_norm(const std::vector<infini::Tensor>& params, const infini::parallel::TensorParallel* tp) const;
  // Every parameter from the pipeline rank that trains it, so that this rank's whole model is
  // current (before an export, validation or sampling). Collective over the pipeline group.
  void share_weights();

  const infini::parallel::PipelineShape& shape() const { return shape_; }
  bool last_stage() const { return groups_.coord.pp == shape_.stages - 1; }

 private:
  const LanguageModel& lm_;
  infini::parallel::ParallelGroups groups_;
  infini::parallel::PipelineShape shape_;
  infini::parallel::Schedule schedule_;
  infini::parallel::PipelineModel model_;
  std::vector<std::pair<int, int>> blocks_of_stage_;
  std::shared_ptr<infini::parallel::ProcessGroup> embedding_group_;  // pp ranks 0 and p - 1 (null elsewhere)
  std::vector<int> owner_;  // pipeline rank training each of lm_.module's parameters
};

}  // namespace samples
