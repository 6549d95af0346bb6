// Automatic mixed precision (torch.autocast): inside an AutocastGuard's scope, ops on
// floating tensors of one device type run in the precision PyTorch's autocast gives them.
//
//   lower precision  matmul, mm, bmm, mv, dot, outer, baddbmm, addmm, addmv, addbmm,
//                    linear, conv1d/2d/3d, conv_transpose1d/2d/3d, prelu and
//                    scaled_dot_product_attention cast float32 inputs to the guard's
//                    dtype (bfloat16 or float16) and return that dtype. einsum's products
//                    go through matmul and so run lower as well.
//   float32          softmax, log_softmax, logsumexp, cross_entropy, nll_loss, mse_loss,
//                    huber_loss, kl_div, binary_cross_entropy(_with_logits), layer_norm,
//                    rms_norm, group_norm, batch_norm and cdist cast bfloat16/float16
//                    inputs to float32 and return float32 (batch_norm runs in its
//                    input's dtype in PyTorch; here it computes in float32, so float32
//                    running statistics and weights meet a float32 input; the running
//                    statistics are never cast, so their in-place updates land).
//   everything else  runs in its inputs' dtype; elementwise ops promote, so a float32
//                    residual plus a bfloat16 branch is float32.
//
// float64 tensors are never cast, nor tensors of another device type. An op cast by
// autocast runs its body with autocast off, so the ops it is built from keep its
// precision. Backward passes run with autocast off: each op's backward computes in the
// dtypes its forward saw, and the gradient of a cast input is cast back (a float32
// weight gets a float32 gradient). Casts of leaf tensors that require grad (parameters)
// are cached until the outermost guard ends: a weight used twice is cast once.
export module infini.autograd:autocast;
import infini.std;
import infini.kernels;

export namespace infini {

// Autocast on (or off, with enabled = false) for tensors of `device` while alive, as
// `with torch.autocast(device_type, dtype, enabled)`. dtype is bfloat16 or float16
// (DTypeError otherwise). Guards nest; each restores what it replaced.
class AutocastGuard {
 public:
  AutocastGuard(DeviceType device, DataType dtype, bool enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  DeviceType device_;
  bool was_enabled_;
  DataType was_dtype_;
};

// Whether autocast is on for tensors of `device` on this thread, and its dtype there
// (PyTorch's defaults when no guard set one: bfloat16 on CPU, float16 on CUDA).
bool is_autocast_enabled(DeviceType device);
DataType autocast_dtype(DeviceType device);

}  // namespace infini

// Used by the ops of the lists above and by the engine (not exported).
namespace infini {

enum class CastPolicy : std::uint8_t { kLowerPrecision, kFloat32 };

// At the top of an op of a policy's list:
//   if (const AutocastRegion cast(CastPolicy::kFloat32, x); cast) return op(cast(x), ...);
// Active when autocast is on for `first`'s device type and this thread is not already
// inside an autocast op or a backward pass; while alive it turns autocast off, so the
// recursive call runs the op's body on the cast inputs.
class AutocastRegion {
 public:
  AutocastRegion(CastPolicy policy, const Tensor& first);
  ~AutocastRegion();
  AutocastRegion(const AutocastRegion&) = delete;
  AutocastRegion& operator=(const AutocastRegion&) = delete;
  explicit operator bool() const { return active_; }
  // t in the policy's dtype when it is an eligible floating tensor; else t (undefined too).
  Tensor operator()(const Tensor& t) const;
  std::optional<Tensor> operator()(const std::optional<Tensor>& t) const;

 private:
  bool active_ = false;
  CastPolicy policy_;
  DeviceType device_ = DeviceType::CPU;
};

// Autocast off on this thread while alive (the engine holds one during a backward pass).
class AutocastSuspension {
 public:
  AutocastSuspension();
  ~AutocastSuspension();
  AutocastSuspension(const AutocastSuspension&) = delete;
  AutocastSuspension& operator=(const AutocastSuspension&) = delete;

 private:
  bool was_suspended_;
};

}  // namespace infini
