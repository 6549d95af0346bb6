// Device discovery, raw device memory and synchronous copies.
#include <string>

#include "check.cuh"

namespace infini::cuda {

using detail::check;
using detail::use_device;

int device_count() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // no driver / no device: clear the error and report none
    return 0;
  }
  return count;
}

void* malloc(std::size_t bytes, int device) {
  if (bytes == 0) return nullptr;
  use_device(device);
  void* ptr = nullptr;
  if (cudaError_t err = cudaMalloc(&ptr, bytes); err != cudaSuccess)
    detail::fail(err, "cudaMalloc of " + std::to_string(bytes) + " bytes on device " + std::to_string(device));
  return ptr;
}

void free(void* ptr, int device) noexcept {
  if (ptr == nullptr) return;
  // Errors cannot be reported from here (e.g. at exit, after the runtime has shut down).
  if (cudaSetDevice(device) == cudaSuccess) cudaFree(ptr);
  cudaGetLastError();
}

void copy_host_to_device(void* dst, const void* src, std::size_t bytes, int device) {
  if (bytes == 0) return;
  use_device(device);
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy host to device");
}

void copy_device_to_host(void* dst, const void* src, std::size_t bytes, int device) {
  if (bytes == 0) return;
  use_device(device);
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy device to host");
}

void copy_device_to_device(void* dst, int dst_device, const void* src, int src_device, std::size_t bytes) {
  if (bytes == 0) return;
  if (dst_device == src_device) {
    use_device(dst_device);
    check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy device to device");
  } else {
    check(cudaMemcpyPeer(dst, dst_device, src, src_device, bytes), "cudaMemcpyPeer");
  }
}

void synchronize(int device) {
  use_device(device);
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

}  // namespace infini::cuda
