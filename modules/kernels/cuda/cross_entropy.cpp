// The CUDA fused cross-entropy kernels as entries of CrossEntropy{Forward,Backward}Kernel.
module;
#include <cstdint>

#include "infini/cuda/cross_entropy.h"
#include "infini/cuda/cuda.h"
module infini.kernels;
import :cuda_arrays;

namespace infini::kernels {
namespace {

using cuda_glue::run;

// logits (N, C) with unit class stride, target (N) int64 contiguous (the raw op's promise).
cuda::CrossEntropyRows rows_of(const Tensor& logits, const Tensor& target, std::int64_t ignore_index) {
  cuda::CrossEntropyRows r;
  r.type = cuda_glue::element_type(logits.dtype());
  r.rows = logits.shape()[0];
  r.classes = logits.shape()[1];
  r.row_stride = logits.strides()[0];
  r.logits = logits.data_ptr();
  r.target = static_cast<const std::int64_t*>(target.data_ptr());
  r.ignore_index = ignore_index;
  return r;
}

void forward_cuda(const Tensor& loss, const Tensor& lse, const Tensor& logits, const Tensor& target,
                  std::int64_t ignore_index) {
  const cuda::CrossEntropyRows rows = rows_of(logits, target, ignore_index);
  const Tensor scratch = empty({1}, {.dtype = kInt64, .device = logits.device()});
  const cuda::BadTarget bad = run("cross_entropy", logits.device(), [&] {
    return cuda::cross_entropy_forward(loss.data_ptr(), static_cast<double*>(lse.data_ptr()), rows,
                                       static_cast<std::int64_t*>(scratch.data_ptr()), logits.device().index);
  });
  if (bad.row >= 0)
    throw IndexError("cross_entropy", concat("target ", bad.target, " at row ", bad.row, " is out of bounds for ",
                                             rows.classes, " classes (ignore_index ", ignore_index, ")"));
}

void backward_cuda(const Tensor& grad_logits, const Tensor& grad_loss, const Tensor& logits, const Tensor& lse,
                   const Tensor& target, std::int64_t ignore_index) {
  const cuda::CrossEntropyRows rows = rows_of(logits, target, ignore_index);
  run("cross_entropy_backward", logits.device(), [&] {
    cuda::cross_entropy_backward(grad_logits.data_ptr(), grad_logits.shape()[1], grad_loss.data_ptr(),
                                 static_cast<const double*>(lse.data_ptr()), rows, logits.device().index);
  });
}

const bool registered = [] {
  KernelTable<CrossEntropyForwardKernel>::set(DeviceType::CUDA, &forward_cuda);
  KernelTable<CrossEntropyBackwardKernel>::set(DeviceType::CUDA, &backward_cuda);
  return true;
}();

}  // namespace
}  // namespace infini::kernels
