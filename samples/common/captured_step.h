// --cuda_graph 1: the forward and backward passes of a training step recorded once as a CUDA
// graph and replayed every step after, so the GPU runs them without waiting for the host to
// launch each kernel. The batch goes into tensors made before the capture (the graph's
// inputs); the loss and the parameters' grads are tensors the capture made, written again by
// every replay. The optimizer step stays outside the graph (a few fused launches).
#pragma once

#include <functional>
#include <memory>

import infini.nn;

namespace samples {

class CapturedStep {
 public:
  // forward_backward(inputs, targets) computes the loss, calls backward, and returns the loss.
  using ForwardBackward = std::function<infini::Tensor(const infini::Tensor& inputs, const infini::Tensor& targets)>;

  explicit CapturedStep(infini::Device device) : device_(device) {}

  // The first call captures forward_backward on this batch (every parameter's grad must be
  // unset, so that the capture makes them) and replays it; later calls copy the batch into the
  // graph's inputs and replay. Returns the loss, valid until the next call.
  infini::Tensor run(const infini::Tensor& inputs, const infini::Tensor& targets, const ForwardBackward& forward_backward);
  bool is_captured() const noexcept { return graph_ != nullptr; }

 private:
  infini::Device device_;
  std::unique_ptr<infini::CudaGraph> graph_;
  infini::Tensor inputs_, targets_, loss_;
};

}  // namespace samples
