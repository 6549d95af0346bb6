// Device discovery, raw device memory, synchronous copies and kernels' shared-memory limits.
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "check.cuh"
#include "launch.cuh"

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

std::string pci_bus_id(int device) {
  char id[32] = {};  // "domain:bus:device.function", at most 13 characters
  check(cudaDeviceGetPCIBusId(id, sizeof(id), device), "cudaDeviceGetPCIBusId");
  return id;
}

void* malloc(std::size_t bytes, int device) {
  if (bytes == 0) return nullptr;
  use_device(device);
  void* ptr = nullptr;
  detail::RelaxedCapture relaxed;  // a capture's private pool grows by plain cudaMalloc
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
  if (detail::capturing()) return detail::upload(dst, src, bytes, "copy host to device");  // a graph constant
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy host to device");
}

void copy_device_to_host(void* dst, const void* src, std::size_t bytes, int device) {
  if (bytes == 0) return;
  detail::refuse_capture("a copy from the GPU to the host",
                         "the host would read the value once, at capture time, not after each replay");
  use_device(device);
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy device to host");
}

void copy_device_to_device(void* dst, int dst_device, const void* src, int src_device, std::size_t bytes) {
  if (bytes == 0) return;
  if (dst_device == src_device) {
    use_device(dst_device);
    if (detail::capturing())
      return check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, detail::stream()),
                   "cudaMemcpyAsync device to device");
    check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy device to device");
  } else {
    detail::refuse_capture("a copy between two GPUs", "only the work of the capturing GPU is recorded");
    check(cudaMemcpyPeer(dst, dst_device, src, src_device, bytes), "cudaMemcpyPeer");
  }
}

void synchronize(int device) {
  detail::refuse_capture("synchronize", "waiting for the GPU inside a capture would wait for nothing");
  use_device(device);
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  detail::profile_resolve();
}

}  // namespace infini::cuda

namespace infini::cuda::detail {

bool sync_after_each_op() {
  static const bool sync = [] {
    const char* value = std::getenv("INFINI_CUDA_SYNC");
    return value != nullptr && std::string(value) == "1";
  }();
  return sync;
}

namespace {

std::mutex shared_memory_mutex;
std::map<int, std::size_t> shared_memory_limits;                         // device -> bytes
std::map<std::pair<const void*, int>, std::size_t> shared_memory_allowed;  // (kernel, device) -> bytes

// The device's limit; shared_memory_mutex held.
std::size_t limit_of(int device, const char* op) {
  const auto found = shared_memory_limits.find(device);
  if (found != shared_memory_limits.end()) return found->second;
  int limit = 0;
  check(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), op);
  return shared_memory_limits[device] = static_cast<std::size_t>(limit);
}

}  // namespace

std::size_t dynamic_shared_memory_limit(const char* op) {
  int device = 0;
  check(cudaGetDevice(&device), op);
  const std::lock_guard lock(shared_memory_mutex);
  return limit_of(device, op);
}

bool allow_dynamic_shared_memory(const void* kernel, std::size_t bytes, const char* op) {
  int device = 0;
  check(cudaGetDevice(&device), op);
  const std::lock_guard lock(shared_memory_mutex);
  if (bytes > limit_of(device, op)) return false;
  std::size_t& allowed = shared_memory_allowed[{kernel, device}];
  if (bytes > allowed) {
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)), op);
    allowed = bytes;
  }
  return true;
}

}  // namespace infini::cuda::detail

namespace infini::cuda {

void* event_record(void* stream, int device) {
  use_device(device);
  cudaEvent_t event = nullptr;
  check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
  if (cudaError_t err = cudaEventRecord(event, static_cast<cudaStream_t>(stream)); err != cudaSuccess) {
    cudaEventDestroy(event);
    detail::fail(err, "cudaEventRecord");
  }
  return event;
}

bool event_query(void* event) {
  const cudaError_t err = cudaEventQuery(static_cast<cudaEvent_t>(event));
  if (err == cudaErrorNotReady) return false;
  check(err, "cudaEventQuery");
  return true;
}

void event_destroy(void* event) noexcept {
  cudaEventDestroy(static_cast<cudaEvent_t>(event));
  cudaGetLastError();
}

}  // namespace infini::cuda
