// Fused cross-entropy of logit rows against class indices (plain C++ interface).
#pragma once

#include <cstdint>

#include "infini/cuda/cuda.h"

namespace infini::cuda {

// logits: rows x classes of `type` (F64, F32, BF16 or F16), element [i, c] at
// logits + i * row_stride + c;
// target: rows int64 class indices, each in [0, classes) or equal to ignore_index.
struct CrossEntropyRows {
  ElementType type = ElementType::F32;
  std::int64_t rows = 0, classes = 0, row_stride = 0;
  const void* logits = nullptr;
  const std::int64_t* target = nullptr;
  std::int64_t ignore_index = -100;
};

// The first row whose target is neither in [0, classes) nor ignore_index (row -1: none).
struct BadTarget {
  std::int64_t row = -1;
  std::int64_t target = 0;
};

// lse[i] = log(sum_c exp(logits[i, c])) in float64 (-inf for 0 classes) and
// loss[i] = lse[i] - logits[i, target[i]] (0 where ignored or out of range) in `type`, or
// float32 for 16-bit logits (computed in float32).
// scratch: one device int64 the kernel records the first bad row in; the result is read
// back (this synchronizes with the stream).
BadTarget cross_entropy_forward(void* loss, double* lse, const CrossEntropyRows& rows, std::int64_t* scratch,
                                int device);

// grad_logits (rows, width) contiguous of `type`, width >= classes: column c < classes gets
// grad_loss[i] * (exp(logits[i, c] - lse[i]) - [c == target[i]]), rows with an ignored or
// out-of-range target 0, rounded once into `type`; columns from `classes` on (padding) 0.
// grad_loss (rows) of the loss's type, lse (rows) float64.
void cross_entropy_backward(void* grad_logits, std::int64_t width, const void* grad_loss, const double* lse,
                            const CrossEntropyRows& rows, int device);

}  // namespace infini::cuda
