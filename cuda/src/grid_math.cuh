// Internal to the reductions and scans: grid sizes and element offsets.
#pragma once

#include <algorithm>
#include <cstdint>

#include "infini/cuda/cuda.h"
#include "strided.cuh"

namespace infini::cuda::detail {

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// A grid of `blocks` blocks, at least 1 and at most kMaxBlocks (grid-stride loops do the rest).
inline unsigned grid_for(std::int64_t blocks) {
  return static_cast<unsigned>(std::clamp<std::int64_t>(blocks, 1, kMaxBlocks));
}

// offset_of (strided.cuh) with its dim loop kept rolled: unrolled, the 64-bit divisions made
// ptxas spill registers in the reduction kernels.
__device__ inline std::int64_t offset_in(const StridedArray& a, std::int64_t i) {
  std::int64_t offset = 0;
#pragma unroll 1
  for (int d = a.ndim - 1; d > 0; --d) {
    offset += i % a.sizes[d] * a.strides[d];
    i /= a.sizes[d];
  }
  return a.ndim > 0 ? offset + i * a.strides[0] : offset;
}

}  // namespace infini::cuda::detail
