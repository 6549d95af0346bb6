// Internal: the stream every kernel runs on, and the check after each launch.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <initializer_list>
#include <string>

#include "capture.cuh"
#include "check.cuh"

namespace infini::cuda::detail {

// The stream Infini's kernels, copies and fills are issued on: the legacy default stream
// of the current device, so they are ordered with each other and with the synchronous
// cudaMemcpy of host transfers; while the calling thread captures a CUDA graph, the
// capture's stream (capture.cuh).
inline cudaStream_t stream() { return capture_stream; }

// True when INFINI_CUDA_SYNC=1: every op then waits for its kernels, so an asynchronous
// error is reported by the op that caused it.
bool sync_after_each_op();

// With INFINI_CUDA_PROFILE=1 every op's times are added up under its name and variant, and
// the table is printed at exit (op_profile.cu).
void profile_mark(const char* op, std::initializer_list<long long> variant);
// Adds host-only work of an op (a cuBLASLt plan lookup, ...) to the profile as its own row.
void profile_host(const char* what, double ms);
// Reads back the profile's pending events (called by synchronize).
void profile_resolve();

// The most dynamic shared memory a block may have on the current device (read once per device).
std::size_t dynamic_shared_memory_limit(const char* op);

// Lets `kernel` launch with `bytes` of dynamic shared memory on the current device; false, with
// nothing changed, when that is over the device's limit. The attribute is set once per kernel,
// device and size, so repeated launches make no driver call.
bool allow_dynamic_shared_memory(const void* kernel, std::size_t bytes, const char* op);

// Call after an op's launches: a launch error (bad configuration, too much shared memory)
// is reported now, naming `op`; in INFINI_CUDA_SYNC mode so is an error while running.
// `variant`: numbers that tell the op's kinds apart in the profile (an op enum, element
// types, sizes).
inline void after_launch(const char* op, std::initializer_list<long long> variant = {}) {
  if (cudaError_t err = cudaGetLastError(); err != cudaSuccess) fail(err, std::string(op) + " kernel launch");
  if (capturing()) return;  // nothing ran: nothing to wait for or time
  if (sync_after_each_op())
    if (cudaError_t err = cudaStreamSynchronize(stream()); err != cudaSuccess)
      fail(err, std::string(op) + " kernel (INFINI_CUDA_SYNC=1)");
  if (profiling_ops()) profile_mark(op, variant);
}

}  // namespace infini::cuda::detail
