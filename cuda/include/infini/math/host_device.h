// INFINI_HD marks per-element math shared by the CPU kernels (compiled by clang as plain
// C++) and the CUDA kernels (nvcc): __host__ __device__ under nvcc, nothing otherwise.
#pragma once

#if defined(__CUDACC__)
#define INFINI_HD __host__ __device__
#else
#define INFINI_HD
#endif
