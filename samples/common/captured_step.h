// --cuda_graph 1: a whole training step (forward, backward, the gradient norm and clipping
// coefficient, the capturable AdamW update) recorded once as a CUDA graph and replayed every
// step after, so the GPU runs it without waiting for the host to launch each kernel. The
// batch goes into tensors made before the capture (the graph's inputs); the loss and the
// gradient norm are tensors the capture made, written again by every replay.
#pragma once

#include <functional>
#include <memory>

import infini.nn;

namespace samples {

class CapturedStep {
 public:
  struct Outputs {
    infini::Tensor loss, grad_norm;  // on the device
  };
  // step(inputs, targets) runs one training step on the batch (the optimizer capturable, its
  // state made by an earlier step) and returns its outputs.
  using Step = std::function<Outputs(const infini::Tensor& inputs, const infini::Tensor& targets)>;

  explicit CapturedStep(infini::Device device) : device_(device) {}

  // The first call captures `step` on this batch (every parameter's grad must be unset, so
  // that the capture makes them) and replays it; later calls copy the batch into the graph's
  // inputs and replay. Returns the outputs, valid until the next call.
  Outputs run(const infini::Tensor& inputs, const infini::Tensor& targets, const Step& step);
  bool is_captured() const noexcept { return graph_ != nullptr; }

 private:
  infini::Device device_;
  std::unique_ptr<infini::CudaGraph> graph_;
  infini::Tensor inputs_, targets_;
  Outputs outputs_;
};

}  // namespace samples
