// Fused scaled dot-product attention on the GPU (plain C++ interface).
#pragma once

#include <cstdint>

#include "infini/cuda/cuda.h"

namespace infini::cuda {

// Where the rows of a (B, H, T, D) operand lie: row (b, h, i) starts at element
// b * batch + h * head + i * row of its pointer, and its D values are contiguous.
struct RowLayout {
  std::int64_t batch = 0, head = 0, row = 0;
  friend bool operator==(const RowLayout&, const RowLayout&) = default;
};
// The layout of a contiguous (B, heads, len, dim) tensor.
inline RowLayout contiguous_rows(std::int64_t heads, std::int64_t len, std::int64_t dim) {
  return {heads * len * dim, len * dim, dim};
}

// q (B, H, Tq, D), k (B, Hkv, Tk, D), v (B, Hkv, Tk, Dv) of `type` (F32 or F64, or BF16/F16
// for the problems attention_runs_in_16_bit takes), and the out, grad_out, dq, dk, dv of the
// calls below, lie as their RowLayouts say. The tensor-core kernels take any layout whose
// rows are 16-byte aligned (so (B, T, H, D) tensors are read and written in place); the
// others need contiguous operands and throw CudaError otherwise. Query head h reads
// key/value head h / (H / Hkv). mask (optional): element
// (b, h, i, j) at mask + b*s0 + h*s1 + i*s2 + j*s3 (strides in elements, 0 to broadcast),
// bool (false = masked out) or additive of `type`. causal keeps keys j <= i. Dropout keeps
// weight (b, h, i, j) when the Philox uniform of counter offset + ((b H + h) Tq + i) Tk + j
// under `seed` is >= dropout_p, and scales the kept ones by (type)(1 / (1 - dropout_p)).
struct AttentionProblem {
  ElementType type = ElementType::F32;
  std::int64_t batch = 0, heads = 0, kv_heads = 1, q_len = 0, kv_len = 0, head_dim = 0, value_dim = 0;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  RowLayout q_rows, k_rows, v_rows, out_rows, grad_out_rows, dq_rows, dk_rows, dv_rows;
  const void* mask = nullptr;
  bool mask_is_bool = false;
  std::int64_t mask_strides[4] = {};
  double scale = 1;
  bool causal = false;
  double dropout_p = 0;
  std::uint64_t seed = 0, offset = 0;
};

// Whether the tensor-core kernels take `problem` in its 16-bit type: BF16 or F16, no mask,
// no dropout, D == Dv, one of 16, 32, 64, 128. Their lse and delta are float32; scores,
// softmax and gradients accumulate in float32, and the weights and score gradients are
// rounded to the 16-bit type before they multiply values, keys or queries (FlashAttention-2's
// numerics). modules/kernels/attention.cpp mirrors this rule.
bool attention_runs_in_16_bit(const AttentionProblem& problem);

// out (B, H, Tq, Dv) (out_rows) and lse (B, H, Tq) contiguous of `type` (lse float32 for 16-bit). A row with no key left
// (all masked) gets out NaN and lse -inf. The key/query tiles live in shared memory, which
// bounds D + Dv (on an H100/H200, about 1190 for float32 and 590 for float64 including the
// backward); larger ones throw CudaError.
void attention_forward(void* out, void* lse, const AttentionProblem& problem, int device);

// dq, dk, dv (shaped like q, k, v) are overwritten with the gradients for grad_out and the
// forward's out and lse (B, H, Tq rows, contiguous); rows whose lse is not
// finite contribute nothing. delta: scratch of B*H*Tq elements of `type` (float32 for 16-bit).
void attention_backward(void* dq, void* dk, void* dv, void* delta, const void* grad_out, const void* out,
                        const void* lse, const AttentionProblem& problem, int device);

}  // namespace infini::cuda
