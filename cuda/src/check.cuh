// Internal: turn CUDA runtime errors into infini::cuda::CudaError.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "capture.cuh"
#include "infini/cuda/cuda.h"

namespace infini::cuda::detail {

// Clears the runtime's last-error state (a non-sticky error would otherwise be reported
// again by the next cudaGetLastError) and throws "<what>: <error text> (<error name>)".
[[noreturn]] inline void fail(cudaError_t err, const std::string& what) {
  cudaGetLastError();
  throw CudaError(what + ": " + cudaGetErrorString(err) + " (" + cudaGetErrorName(err) + ")");
}

inline void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) fail(err, what);
}

// True when INFINI_CUDA_PROFILE=1 (op_profile.cu); profile_start records where an op's
// launches begin.
bool profiling_ops();
void profile_start();

// Makes `device` current for the calling thread (every op calls it before its launches).
inline void use_device(int device) {
  if (cudaError_t err = cudaSetDevice(device); err != cudaSuccess)
    fail(err, "cudaSetDevice(" + std::to_string(device) + ")");
  if (profiling_ops() && !capturing()) profile_start();
}

}  // namespace infini::cuda::detail
