// A pipeline stage of pipeline_lab's real mode: no model, only time. Each forward / backward
// takes its configured compute time (sleeping on the rank's io_context, or spinning the CPU)
// and the activations and gradients are real messages of --message_bytes between the ranks
// of the pipeline group, every receive of the step posted before it starts.
#pragma once

#include <chrono>
#include <coroutine>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

import infini.parallel;

namespace pipeline_lab {

class SyntheticStage final : public infini::parallel::PipelineStage {
 public:
  // Posts every receive of the step at once.
  SyntheticStage(std::shared_ptr<infini::parallel::ProcessGroup> group, infini::parallel::PipelineShape shape,
                 infini::parallel::PipelineCosts costs, bool spin);

  int rank() const override { return rank_; }
  const infini::parallel::PipelineShape& shape() const override { return shape_; }
  infini::parallel::Task forward(int micro, int chunk) override;
  infini::parallel::Task backward(int micro, int chunk) override;
  infini::parallel::Task backward_input(int micro, int chunk) override;
  infini::parallel::Task backward_weight(int micro, int chunk) override;

  // After the schedule: waits for the sends and checks every op ran.
  infini::parallel::Task finish();
  // The ops run, seconds since construction.
  const std::vector<infini::parallel::TimelineEvent>& events() const { return events_; }

 private:
  using Key = std::tuple<bool, int, int>;  // gradient?, micro-batch, receiving virtual stage
  infini::parallel::Task input_gradient(infini::parallel::PipelineOp op, int micro, int chunk, double seconds);
  infini::parallel::Task compute(infini::parallel::PipelineOp op, int micro, int chunk, double seconds);
  // The pre-posted receive of `key` (to co_await).
  infini::parallel::Work received(const Key& key) const;
  void send(Key key, int to);
  int tag(const Key& key) const;

  std::shared_ptr<infini::parallel::ProcessGroup> group_;
  int rank_;
  infini::parallel::PipelineShape shape_;
  infini::parallel::PipelineCosts costs_;
  bool spin_;
  infini::parallel::ScheduleChecker checker_;
  std::chrono::steady_clock::time_point start_;
  infini::Tensor payload_;  // what every send carries
  std::map<Key, std::pair<infini::Tensor, infini::parallel::Work>> receives_;
  std::vector<infini::parallel::Work> sends_;
  std::vector<infini::parallel::TimelineEvent> events_;
};

}  // namespace pipeline_lab
