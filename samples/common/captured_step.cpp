// See captured_step.h.
#include "captured_step.h"

namespace samples {

using namespace infini;

CapturedStep::Outputs CapturedStep::run(const Tensor& inputs, const Tensor& targets, const Step& step) {
  if (!graph_) {
    inputs_ = inputs.to(device_);
    targets_ = targets.to(device_);
    auto graph = std::make_unique<CudaGraph>();
    graph->capture_begin(device_);
    outputs_ = step(inputs_, targets_);  // an error abandons the capture with `graph`
    graph->capture_end();
    graph_ = std::move(graph);
  } else {
    inputs_.copy_(inputs);
    targets_.copy_(targets);
  }
  graph_->replay();
  return outputs_;
}

}  // namespace samples
