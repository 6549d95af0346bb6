// CUDA kernels (compiled by nvcc in cuda/) wrapped as entries of infini.tensor's tables.
// Built only when the CUDA backend is.
module;
#include <array>
#include <cstdint>
#include <cstring>
#include "infini/cuda/cuda.h"
module infini.kernels;

namespace infini::kernels {
namespace {

// The coalesced views of `tensors` (same shape) as cuda::StridedArray.
template <std::size_t N>
std::array<cuda::StridedArray, N> to_arrays(std::string_view op, const std::array<const Tensor*, N>& tensors) {
  std::array<Strides, N> strides;
  for (std::size_t k = 0; k < N; ++k) strides[k] = tensors[k]->strides();
  const StridedLayout<N> layout = coalesce(tensors[0]->shape(), strides);
  if (layout.shape.size() > static_cast<std::size_t>(cuda::kMaxDims))
    throw ShapeError(op, concat("CUDA kernels take at most ", cuda::kMaxDims, " non-mergeable dims; shape ",
                                tensors[0]->shape(), " has ", layout.shape.size()));
  std::array<cuda::StridedArray, N> arrays;
  for (std::size_t k = 0; k < N; ++k) {
    arrays[k].data = tensors[k]->data_ptr();
    arrays[k].type = static_cast<cuda::ElementType>(tensors[k]->dtype());
    arrays[k].ndim = static_cast<int>(layout.shape.size());
    for (std::size_t d = 0; d < layout.shape.size(); ++d) {
      arrays[k].sizes[d] = layout.shape[d];
      arrays[k].strides[d] = layout.strides[k][d];
    }
  }
  return arrays;
}

template <class Fn>
void run(std::string_view op, Device device, Fn&& fn) {
  try {
    fn();
  } catch (const cuda::CudaError& e) {
    throw DeviceError(op, concat("on ", device, ": ", e.what()));
  }
}

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

static_assert(static_cast<int>(cuda::ElementType::F64) == static_cast<int>(DataType::Float64) &&
              static_cast<int>(cuda::ElementType::BF16) == static_cast<int>(DataType::BFloat16));

const bool registered = [] {
  KernelTable<CopyKernel>::set(DeviceType::CUDA, &copy_cuda);
  KernelTable<FillKernel>::set(DeviceType::CUDA, &fill_cuda);
  return true;
}();

}  // namespace
}  // namespace infini::kernels
