// The CUDA sliding-window kernels (im2col, col2im, max_pool_indices) as entries of the
// kernel tables.
module;
#include <cstddef>
#include <cstdint>

#include "infini/cuda/conv.h"
module infini.kernels;
import :cuda_arrays;

namespace infini::kernels {
namespace {

using cuda_glue::element_type;
using cuda_glue::run;

// g's windows over x (N, C, *in), spatial dims right-aligned into three like the CPU kernels.
cuda::Windows3 windows_of(const Tensor& x, const WindowGeometry& g) {
  cuda::Windows3 w;
  const std::size_t lead = 3 - g.kernel.size();
  for (std::size_t d = 0; d < g.kernel.size(); ++d) {
    w.in[lead + d] = x.size(2 + static_cast<std::int64_t>(d));
    w.kernel[lead + d] = g.kernel[d];
    w.stride[lead + d] = g.stride[d];
    w.padding[lead + d] = g.padding[d];
    w.dilation[lead + d] = g.dilation[d];
    w.out[lead + d] = g.out[d];
  }
  w.planes = x.size(0) * x.size(1);
  return w;
}

void im2col_cuda(const Tensor& columns, const Tensor& x, const WindowGeometry& g) {
  run("im2col", x.device(), [&] {
    cuda::im2col(columns.data_ptr(), x.data_ptr(), element_type(x.dtype()), windows_of(x, g), x.device().index);
  });
}

void col2im_cuda(const Tensor& x, const Tensor& columns, const WindowGeometry& g) {
  run("col2im", x.device(), [&] {
    cuda::col2im(x.data_ptr(), columns.data_ptr(), element_type(x.dtype()), windows_of(x, g), x.device().index);
  });
}

void max_pool_indices_cuda(const Tensor& indices, const Tensor& x, const WindowGeometry& g) {
  run("max_pool_indices", x.device(), [&] {
    cuda::max_pool_indices(indices.data_ptr<std::int64_t>(), x.data_ptr(), element_type(x.dtype()),
                           windows_of(x, g), x.device().index);
  });
}

const bool registered = [] {
  KernelTable<Im2colKernel>::set(DeviceType::CUDA, &im2col_cuda);
  KernelTable<Col2imKernel>::set(DeviceType::CUDA, &col2im_cuda);
  KernelTable<MaxPoolIndicesKernel>::set(DeviceType::CUDA, &max_pool_indices_cuda);
  return true;
}();

}  // namespace
}  // namespace infini::kernels
