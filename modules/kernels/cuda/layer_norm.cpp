// The CUDA fused layer-norm kernels as entries of LayerNorm{Forward,Backward}Kernel.
module;
#include <cstdint>

#include "infini/cuda/cuda.h"
#include "infini/cuda/layer_norm.h"
module infini.kernels;
import :cuda_arrays;

namespace infini::kernels {
namespace {

using cuda_glue::run;

const void* data_or_null(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

// x (N, C) contiguous, weight/bias (C) contiguous or undefined (the raw op's promise).
cuda::LayerNormRows rows_of(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return {.type = cuda_glue::element_type(x.dtype()),
          .rows = x.shape()[0],
          .cols = x.shape()[1],
          .x = x.data_ptr(),
          .weight = data_or_null(weight),
          .bias = data_or_null(bias)};
}

void forward_cuda(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& weight,
                  const Tensor& bias, double eps) {
  const cuda::LayerNormRows rows = rows_of(x, weight, bias);
  run(LayerNormForwardKernel::name, x.device(), [&] {
    cuda::layer_norm_forward(y.data_ptr(), cuda_glue::element_type(y.dtype()), mean.data_ptr(), rstd.data_ptr(), rows,
                             eps, x.device().index);
  });
}

void backward_cuda(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dy, const Tensor& dx_add,
                   const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& weight) {
  const cuda::LayerNormRows rows = rows_of(x, weight, Tensor());
  const bool sums = dweight.defined() || dbias.defined();
  const Tensor scratch = sums ? empty({cuda::layer_norm_backward_scratch(rows)}, {.dtype = x.dtype(), .device = x.device()})
                              : Tensor();
  run(LayerNormBackwardKernel::name, x.device(), [&] {
    cuda::layer_norm_backward(dx.data_ptr(), dweight.defined() ? dweight.data_ptr() : nullptr,
                              dbias.defined() ? dbias.data_ptr() : nullptr, dy.data_ptr(),
                              cuda_glue::element_type(dy.dtype()), data_or_null(dx_add), mean.data_ptr(),
                              rstd.data_ptr(), sums ? scratch.data_ptr() : nullptr, rows, x.device().index);
  });
}

const bool registered = [] {
  KernelTable<LayerNormForwardKernel>::set(DeviceType::CUDA, &forward_cuda);
  KernelTable<LayerNormBackwardKernel>::set(DeviceType::CUDA, &backward_cuda);
  return true;
}();

}  // namespace
}  // namespace infini::kernels
