// Plain C++ interface to the CUDA sliding-window kernels behind convolution and pooling:
// im2col, its adjoint col2im, and the max-pool argmax (contracts: modules/kernels/conv.cppm).
#pragma once

#include <cstdint>

#include "infini/cuda/cuda.h"

namespace infini::cuda {

// The windows over `planes` (N * C) planes of an input with 1 to 3 spatial dims, right-aligned
// into three (a leading dim that is not there has in = kernel = stride = dilation = out = 1,
// padding = 0). Output position o_d reads input position o_d stride_d - padding_d +
// k_d dilation_d for k_d in [0, kernel_d); positions outside [0, in_d) are padding.
struct Windows3 {
  std::int64_t planes = 0;
  std::int64_t in[3] = {1, 1, 1};
  std::int64_t kernel[3] = {1, 1, 1};
  std::int64_t stride[3] = {1, 1, 1};
  std::int64_t padding[3] = {0, 0, 0};
  std::int64_t dilation[3] = {1, 1, 1};
  std::int64_t out[3] = {1, 1, 1};
};

// columns (planes, *kernel, *out) = x (planes, *in) at each window position, 0 in the
// padding. Both contiguous, of `type` (any).
void im2col(void* columns, const void* x, ElementType type, const Windows3& w, int device);

// x (planes, *in) = the sum of the columns (planes, *kernel, *out) taken from each position,
// added in kernel-position order and rounded to `type` after each addition (integers wrap);
// deterministic (one thread per x element, no atomics). Both contiguous, of `type` (any).
void col2im(void* x, const void* columns, ElementType type, const Windows3& w, int device);

// indices (planes, *out), int64: the row-major position in the (*in) plane of the first
// maximum (or first NaN) among each window's elements inside x (planes, *in) of `type`
// (any); -1 for a window without one. Both contiguous.
void max_pool_indices(std::int64_t* indices, const void* x, ElementType type, const Windows3& w, int device);

}  // namespace infini::cuda
