// Batched matrix products on the GPU through cuBLASLt, and the batched SVD (plain C++
// interface).
#pragma once

#include <cstdint>

#include "infini/cuda/cuda.h"

namespace infini::cuda {

// The matrices of one GEMM operand: element [r, c] of matrix i lies at element offset
// i * batch_stride + (col_major ? r + c * ld : r * ld + c) from data. ld is at least the
// length of the unit-stride dim (1 when that is 0); batch_stride may be 0 (broadcast).
struct GemmMatrix {
  const void* data = nullptr;
  std::int64_t ld = 1;
  bool col_major = false;
  std::int64_t batch_stride = 0;
};

// out[i] = alpha * a[i] @ b[i] + beta * out[i] for i < batch, with a[i] (m, k), b[i] (k, n)
// and out[i] (m, n) row-major at out + i * m * n (out is one contiguous (batch, m, n) block
// that overlaps neither a nor b). type is F64, F32, BF16 or F16, the same for all three;
// 16-bit products are summed in float32 on tensor cores, each result rounded once. beta == 0
// ignores out's old values (NaN included); k == 0 leaves beta * out. A non-null bias (n
// elements of `type`) needs alpha == 1 and beta == 0: out[i] = a[i] @ b[i] + bias, the bias
// added to every row in float32 before the rounding (cuBLASLt's bias epilogue where it has
// one, else written into out first and the product added with beta = 1). allow_tf32 lets
// float32 products round their operands to TF32 (tensor cores); float64 ignores it.
// Deterministic: the same problem on the same GPU gives the same bits.
struct GemmProblem {
  ElementType type = ElementType::F32;
  std::int64_t batch = 1, m = 0, n = 0, k = 0;
  GemmMatrix a, b;
  void* out = nullptr;
  double alpha = 1, beta = 0;
  const void* bias = nullptr;
  bool allow_tf32 = false;
};
void gemm(const GemmProblem& problem, int device);

// out = a @ b for a single product (batch 1, alpha 1, beta 0, no bias, k > 0) and row_sums[r]
// = sum over k of a[r, k] (m elements of `type`, 16-byte aligned) in one cuBLASLt call, the
// sums taken by its bias-gradient epilogue (BGRADB): linear's weight gradient g^T @ x with
// its bias gradient, the column sums of g. False, nothing computed, when the problem does not
// qualify or no algorithm has that epilogue. Deterministic like gemm. NVIDIA does not
// document the epilogues' arithmetic; the CUDA tests bound these sums, and the GELU
// epilogues below, as float32 math rounded once.
bool gemm_with_row_sums(const GemmProblem& problem, void* row_sums, int device);

// A bfloat16 or float16 single product with a bias (batch 1, alpha 1, beta 0, k > 0, bias
// 16-byte aligned) and GELU in cuBLASLt's GELU_AUX_BIAS epilogue: pre = a @ b + bias and
// out = gelu(pre) (GELU's tanh approximation); pre is an (m, n) row-major matrix of `type`
// like out, 16-byte aligned, n a multiple of 8 (cuBLASLt's aux rows). A linear layer and its
// GELU in one pass, pre kept for the backward. False, nothing computed, when the problem
// does not qualify (float32 among them: its GELU stays the accurate composed one), no
// algorithm has that epilogue, or the environment sets INFINI_CUDA_GELU_EPILOGUE=0.
// Deterministic like gemm.
bool gemm_bias_gelu(const GemmProblem& problem, void* pre, int device);

// out = (a @ b) * gelu'(pre) elementwise for a single product without a bias, with pre as in
// gemm_bias_gelu: cuBLASLt's DGELU epilogue, the derivative of GELU's tanh approximation
// (the input gradient of a GELU whose output fed the next linear layer). False, nothing
// computed, as in gemm_bias_gelu.
bool gemm_gelu_grad(const GemmProblem& problem, const void* pre, int device);

// The SVD of `batch` contiguous row-major (m, n) matrices a of `type` (F32 or F64), k =
// min(m, n): u (batch, m, full ? m : k), s (batch, k), vh (batch, full ? n : k, n) of that
// type and status (batch) int32 (infini/math/jacobi_svd.h's SvdStatus), all contiguous, by
// the one-sided Jacobi of infini/math/jacobi_svd.h, one thread per matrix. work: batch *
// math::jacobi_svd_workspace(m, n, full) doubles of device memory, overwritten.
struct SvdProblem {
  ElementType type = ElementType::F32;
  std::int64_t batch = 0, m = 0, n = 0;
  bool full = false;
  const void* a = nullptr;
  void *u = nullptr, *s = nullptr, *vh = nullptr;
  std::int32_t* status = nullptr;
  double* work = nullptr;
};
void svd(const SvdProblem& problem, int device);

}  // namespace infini::cuda
