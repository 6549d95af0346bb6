// The CUDA copy and fill kernels as entries of infini.tensor's tables.
module;
#include <cstdint>
#include <cstring>
#include "infini/cuda/cuda.h"
module infini.kernels;
import infini.std;
import :cuda_arrays;

namespace infini::kernels {
namespace {

using cuda_glue::run;
using cuda_glue::to_arrays;

void copy_cuda(const Tensor& dst, const Tensor& src) {
  const auto arrays = to_arrays<2>("copy_", {&dst, &src});
  run("copy_", dst.device(), [&] { cuda::copy(arrays[0], arrays[1], dst.device().index); });
}

void fill_cuda(const Tensor& dst, const Scalar& value) {
  unsigned char bytes[8] = {};
  dispatch(dst.dtype(), [&]<class T>() {
    const T v = value.to<T>();
    std::memcpy(bytes, &v, sizeof(T));
  });
  const auto arrays = to_arrays<1>("fill_", {&dst});
  run("fill_", dst.device(), [&] { cuda::fill(arrays[0], bytes, dst.device().index); });
}

const bool registered = [] {
  KernelTable<CopyKernel>::set(DeviceType::CUDA, &copy_cuda);
  KernelTable<FillKernel>::set(DeviceType::CUDA, &fill_cuda);
  return true;
}();

}  // namespace
}  // namespace infini::kernels
