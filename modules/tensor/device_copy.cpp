// Byte copies between devices (memcpy on the host, cudaMemcpy through cuda/ otherwise) and
// waiting for a device.
module;
#include <cstdint>
#include <cstring>
#if INFINI_HAS_CUDA
#include "infini/cuda/cuda.h"
#endif
module infini.tensor;

namespace infini {

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, std::int64_t nbytes) {
  if (nbytes <= 0) return;
  const auto n = static_cast<std::size_t>(nbytes);
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memmove(dst, src, n);
    return;
  }
#if INFINI_HAS_CUDA
  try {
    if (src_device.is_cpu()) return cuda::copy_host_to_device(dst, src, n, dst_device.index);
    if (dst_device.is_cpu()) return cuda::copy_device_to_host(dst, src, n, src_device.index);
    return cuda::copy_device_to_device(dst, dst_device.index, src, src_device.index, n);
  } catch (const cuda::CudaError& e) {
    throw DeviceError("copy", concat("copying ", nbytes, " bytes from ", src_device, " to ", dst_device, ": ", e.what()));
  }
#else
  throw DeviceError("copy", concat("cannot copy from ", src_device, " to ", dst_device,
                                   ": this build of Infini has no CUDA backend"));
#endif
}

void synchronize(Device device) {
  if (device.is_cpu()) return;
#if INFINI_HAS_CUDA
  if (device.index < 0 || device.index >= cuda_device_count())
    throw DeviceError("synchronize", concat("cannot use ", device, ": ", cuda_device_count(), " CUDA device(s) available"));
  try {
    cuda::synchronize(device.index);
  } catch (const cuda::CudaError& e) {
    throw DeviceError("synchronize", concat("on ", device, ": ", e.what()));
  }
#else
  throw DeviceError("synchronize", concat("cannot use ", device, ": this build of Infini has no CUDA backend"));
#endif
}

}  // namespace infini
