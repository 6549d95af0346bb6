// Optimizer and gradient-utility kernels (plain C++ interface): multi-tensor fused SGD and
// Adam(W) updates with the per-element arithmetic of infini/math/sgd_step.h and adam_step.h
// (the CPU's, bit for bit), the float64 gradient norm of clip_grad_norm_ and GradScaler's
// unscale with its Inf/NaN check. Each call covers a whole list of tensors in one or a few
// launches (block-to-chunk tables passed as kernel arguments, like PyTorch's
// multi_tensor_apply); every array is contiguous and on `device`.
#pragma once

#include <cstdint>
#include <span>

#include "infini/cuda/cuda.h"

namespace infini::cuda {

// ---- SGD: modules/nn/optim/fused_update.cppm's SGDUpdate -------------------------------

struct SgdOptions {
  double lr = 0;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
  bool first_momentum_step = false;  // every buffer is new: it starts as the (decayed) grad
};

// numel elements each; momentum_buffer is used only when momentum != 0.
struct SgdTensor {
  void* param = nullptr;
  const void* grad = nullptr;
  void* momentum_buffer = nullptr;
  std::int64_t numel = 0;
};

// Updates every tensor in place; `type` (F16, BF16, F32 or F64) is the type of all of them.
void sgd_update(ElementType type, std::span<const SgdTensor> tensors, const SgdOptions& options, int device);

// ---- Adam / AdamW: fused_update.cppm's AdamUpdate ---------------------------------------

struct AdamOptions {
  double lr = 0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  bool decoupled_weight_decay = false;  // AdamW
  bool amsgrad = false;
  double grad_scale = 1;  // each grad is first multiplied by it, rounded to the storage type
  // Capturable updates (torch.optim.Adam(capturable=True)): set both, and every tensor's
  // device_step, to have the kernels read the learning rate, the grad scale and the steps
  // from device memory when they run (lr, grad_scale and step above are then unused), so a
  // CUDA graph replays the update with their current values. The bias corrections are then
  // computed on the device (its pow may differ from the host's in the last bit).
  const double* device_lr = nullptr;          // one float64
  const double* device_grad_scale = nullptr;  // one float64
};

// numel elements each; max_exp_avg_sq is used only with amsgrad. step (>= 1) is this
// tensor's update number, for its bias corrections.
struct AdamTensor {
  void* param = nullptr;
  const void* grad = nullptr;
  void* exp_avg = nullptr;
  void* exp_avg_sq = nullptr;
  void* max_exp_avg_sq = nullptr;
  std::int64_t numel = 0;
  std::int64_t step = 1;
  const std::int64_t* device_step = nullptr;  // capturable: one int64 (>= 1) on the device
};

void adam_update(ElementType type, std::span<const AdamTensor> tensors, const AdamOptions& options, int device);

// ---- clip_grad_norm_: the norm's sum over every element ---------------------------------

struct NormTensor {
  const void* data = nullptr;
  ElementType type = ElementType::F32;  // F16, BF16, F32 or F64
  std::int64_t numel = 0;
};

// The number of float64 device scratch slots grad_norm_sum needs for `tensors`.
std::int64_t grad_norm_scratch(std::span<const NormTensor> tensors);

// Over every element x of every tensor, |x| = |double(x)| combined in float64: the sum of |x|
// (p == 1), of |x|^2 (p == 2), of pow(|x|, p) (any other finite p > 0), or the largest |x|
// (p infinite; NaN when any element is NaN). 0 for no elements. A fixed reduction order (per
// chunk of each tensor a block tree, then one block over the chunks), so equal inputs give
// equal bits. scratch: grad_norm_scratch(tensors) doubles. Waits for the result.
double grad_norm_sum(std::span<const NormTensor> tensors, double p, double* scratch, int device);
// The same sum left on the device, in scratch[grad_norm_scratch(tensors) - 1], without
// waiting: a CUDA graph can capture it.
void grad_norm_sum_on_device(std::span<const NormTensor> tensors, double p, double* scratch, int device);

// ---- GradScaler.unscale_ ----------------------------------------------------------------

struct UnscaleTensor {
  void* data = nullptr;
  ElementType type = ElementType::F32;  // BF16, F32 or F64
  std::int64_t numel = 0;
};

// x = x * inv_scale for every element, computed in float (float64 for F64) and rounded to the
// storage type; returns whether any element was Inf or NaN before. flag: one device int of
// scratch. Waits for the result.
bool unscale_grads(std::span<const UnscaleTensor> tensors, float inv_scale, int* flag, int device);

}  // namespace infini::cuda
