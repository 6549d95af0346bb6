// Fused optimizer updates: one pass over a parameter updates it and its state together
// (PyTorch's single-tensor formulas, see fused_update.cpp), in place and without autograd
// history, bumping the versions of the tensors written as any in-place op does. Usable on
// their own, e.g. on the shards of a distributed optimizer.
// Requirements (Error otherwise): every tensor on the param's device (CPU or CUDA), param
// floating point, grad and state tensors of the param's shape and dtype, state tensors
// contiguous. A non-contiguous param
// is updated through a contiguous copy that is copied back; float16/bfloat16 are computed
// in float32 and rounded to the storage type wherever PyTorch's ops store a value.
export module infini.nn:fused_update;
import infini.std;
import infini.autograd;

export namespace infini::optim {

struct SGDUpdate {
  double lr = 0;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
  // The momentum buffer is new: it starts as the (weight-decayed) grad, undampened.
  bool first_momentum_step = false;
};
// param (any shape) -= lr * update; momentum_buffer (param's shape) is read and written when
// momentum != 0 (it may be undefined otherwise).
void sgd_update_(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SGDUpdate& update);

struct AdamUpdate {
  double lr = 0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  bool decoupled_weight_decay = false;  // AdamW: param *= 1 - lr * weight_decay
  bool amsgrad = false;
  std::int64_t step = 1;  // this update's number, from 1 (bias corrections use it)
  double grad_scale = 1;  // the grad is first multiplied by it, rounded as mul_ would
};
// max_exp_avg_sq is read and written when amsgrad (it may be undefined otherwise).
void adam_update_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                  const Tensor& max_exp_avg_sq, const AdamUpdate& update);

// A capturable update's scalars (torch.optim.Adam(capturable=True)): one-element tensors on
// the parameter's device, read when the update runs rather than when it is launched, so a
// CUDA graph replays it with their current values. They replace AdamUpdate's lr, step and
// grad_scale. On CUDA the bias corrections are then computed on the device, whose pow may
// differ from the host's in the last bit.
struct AdamScalarTensors {
  Tensor lr;          // float64
  Tensor step;        // int64, this update's number (>= 1)
  Tensor grad_scale;  // float64
};
void adam_update_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                  const Tensor& max_exp_avg_sq, const AdamUpdate& update, const AdamScalarTensors& scalars);

// One parameter of a multi-tensor Adam update: the single-tensor overloads' tensors and
// this parameter's update number (>= 1): `step` for host scalars, `device_step` (a
// one-element int64 tensor on its device, as AdamScalarTensors::step) for a capturable
// update.
struct AdamTensors {
  Tensor param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq;
  std::int64_t step = 1;
  Tensor device_step;
};
// Updates distinct parameters as one adam_update_ call each would, each with its own step
// (update.step is unused); on CUDA the contiguous parameters of one dtype and device share
// multi-tensor launches (PyTorch's fused/foreach Adam), in place of a launch each.
void adam_update_(std::span<const AdamTensors> params, const AdamUpdate& update);
// Capturable: lr and grad_scale as AdamScalarTensors' (shared), each parameter's device_step.
void adam_update_(std::span<const AdamTensors> params, const AdamUpdate& update, const Tensor& lr,
                  const Tensor& grad_scale);

}  // namespace infini::optim
