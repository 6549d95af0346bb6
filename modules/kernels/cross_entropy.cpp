// Argument checks and layout preparation for the fused cross-entropy kernels.
module;
#include <cstdint>
module infini.kernels;
import infini.std;

namespace infini::kernels {
namespace {

constexpr std::string_view kOp = "cross_entropy";

void check(const Tensor& logits, const Tensor& target) {
  if (logits.dim() != 2 || target.dim() != 1 || target.shape()[0] != logits.shape()[0])
    throw ShapeError(kOp, concat("expected logits (N, C) and target (N), got ", logits.shape(), " and ",
                                 target.shape()));
  if (!is_floating_point(logits.dtype()))
    throw DTypeError(kOp,
                     concat("fused logits must be float64, float32, bfloat16 or float16, got ", logits.dtype()));
  if (target.dtype() != kInt64) throw DTypeError(kOp, concat("target must be int64 class indices, got ", target.dtype()));
  if (target.device() != logits.device())
    throw DeviceError(kOp, concat("logits on ", logits.device(), " but target on ", target.device()));
}

// The dtype of the loss rows and their gradient: float32 for 16-bit logits (computed in
// float32), else the logits'.
DataType loss_dtype(const Tensor& logits) { return logits.dtype() == kFloat64 ? kFloat64 : kFloat32; }

// The logits with unit class stride (rows may keep any stride).
Tensor unit_class_stride(const Tensor& logits) {
  return logits.shape()[1] <= 1 || logits.strides()[1] == 1 ? logits : logits.contiguous();
}

}  // namespace

CrossEntropyRows cross_entropy_forward(const Tensor& logits, const Tensor& target, std::int64_t ignore_index) {
  NoGradGuard no_grad;
  check(logits, target);
  const std::int64_t n = logits.shape()[0];
  CrossEntropyRows r{empty({n}, {.dtype = loss_dtype(logits), .device = logits.device()}),
                     empty({n}, {.dtype = kFloat64, .device = logits.device()})};
  KernelTable<CrossEntropyForwardKernel>::call(logits.device(), r.loss, r.lse, unit_class_stride(logits),
                                               target.contiguous(), ignore_index);
  return r;
}

Tensor cross_entropy_backward(const Tensor& grad_loss, const Tensor& logits, const Tensor& lse, const Tensor& target,
                              std::int64_t ignore_index, std::int64_t padded_classes) {
  NoGradGuard no_grad;
  check(logits, target);
  if (grad_loss.shape() != target.shape() || lse.shape() != target.shape())
    throw ShapeError(kOp, concat("expected grad_loss and lse of shape ", target.shape(), ", got ", grad_loss.shape(),
                                 " and ", lse.shape()));
  if (lse.dtype() != kFloat64) throw DTypeError(kOp, concat("lse must be float64, got ", lse.dtype()));
  if (padded_classes < logits.shape()[1])
    throw ShapeError(kOp, concat("padded_classes ", padded_classes, " is fewer than the logits' ", logits.shape()[1],
                                 " classes"));
  Tensor grad = empty({logits.shape()[0], padded_classes}, {.dtype = logits.dtype(), .device = logits.device()});
  KernelTable<CrossEntropyBackwardKernel>::call(logits.device(), grad, grad_loss.to(loss_dtype(logits)).contiguous(),
                                                unit_class_stride(logits), lse.contiguous(), target.contiguous(),
                                                ignore_index);
  return grad;
}

}  // namespace infini::kernels
