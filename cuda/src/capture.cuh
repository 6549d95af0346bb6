// Internal: the calling thread's CUDA Graph capture (graph.cu), as the kernels see it. While a
// thread captures, stream() is the capture's stream and every op it issues is recorded
// instead of run; the helpers below let an op stay correct under capture:
// - a result an op must read back to check its input is copied into the graph's check
//   slots instead, and the check runs on the host after each replay (defer_check);
// - host data uploaded by an op becomes a constant of the graph (upload);
// - an op that cannot be captured (it sizes its output from a device result, draws random
//   numbers, or copies to the host) says so instead of breaking the capture (refuse_capture).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <functional>

namespace infini::cuda::detail {

// The stream of the calling thread's capture; null (the legacy default stream) when it
// captures nothing.
extern thread_local cudaStream_t capture_stream;

inline bool capturing() noexcept { return capture_stream != nullptr; }

// Throws CudaError "<what> cannot be recorded into a CUDA graph: <why>" while capturing.
void refuse_capture(const char* what, const char* why);

// When capturing: records a copy of `bytes` at device address `src` (written by the ops
// before) into the graph's check slots, and after each replay calls report(host copy),
// which throws CudaError to fail the replay. Returns false when not capturing: the caller
// reads the value back itself.
bool defer_check(const void* src, std::size_t bytes, std::function<void(const void* host)> report);

// Copies `bytes` of host memory to device memory `dst` on stream(). When capturing, the
// bytes are first kept in pinned memory the graph owns, so every replay copies the values
// they had at capture time.
void upload(void* dst, const void* host, std::size_t bytes, const char* what);

// While alive, the calling thread's capture (if any) tolerates the calls CUDA deems unsafe
// during a capture, such as cudaMalloc (PyTorch's allocator does the same).
class RelaxedCapture {
 public:
  RelaxedCapture() noexcept;
  ~RelaxedCapture();
  RelaxedCapture(const RelaxedCapture&) = delete;
  RelaxedCapture& operator=(const RelaxedCapture&) = delete;

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
  bool swapped_ = false;
};

}  // namespace infini::cuda::detail
