// Fused layer norm over rows (plain C++ interface); semantics as in
// modules/kernels/layer_norm.cppm.
#pragma once

#include <cstdint>

#include "infini/cuda/cuda.h"

namespace infini::cuda {

// rows x cols contiguous of `type` (F32 or F64); weight/bias (cols) of `type` or null.
struct LayerNormRows {
  ElementType type = ElementType::F32;
  std::int64_t rows = 0, cols = 0;
  const void* x = nullptr;
  const void* weight = nullptr;
  const void* bias = nullptr;
};

// y (rows, cols) of y_type, mean and rstd (rows) of `type`. y_type is `type`, or for F32 rows
// also F16 or BF16 (the float32 result rounded once).
void layer_norm_forward(void* y, ElementType y_type, void* mean, void* rstd, const LayerNormRows& rows, double eps,
                        int device);

// Elements of scratch layer_norm_backward needs (of `type`) when it sums dweight or dbias.
std::int64_t layer_norm_backward_scratch(const LayerNormRows& rows);

// dx (rows, cols) from dy (rows, cols, of dy_type: `type`, or for F32 rows also F16 or BF16,
// read exactly) and the forward's mean and rstd, plus dx_add (rows, cols) of `type` where not
// null (the sum rounded once, as a separate add gives: a residual's gradient); dweight and dbias
// (cols, either may be null) are column sums over fixed chunks of rows, the chunks' sums
// added in a fixed order (layer_norm.cu), so two runs give the same bits. Which of its two
// paths sums a chunk depends on the rows fitting the GPU's shared memory, so near that limit
// GPUs of other kinds may differ in the last bits.
void layer_norm_backward(void* dx, void* dweight, void* dbias, const void* dy, ElementType dy_type, const void* dx_add,
                         const void* mean, const void* rstd, void* scratch, const LayerNormRows& rows, int device);

}  // namespace infini::cuda
