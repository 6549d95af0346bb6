// Internal to the attention kernels: block shape, the score / mask / dropout of one
// (b, h, i, j) element exactly as modules/kernels/cpu/attention.cpp evaluates them, warp
// reductions in a fixed butterfly, and the shared-memory set-up of a launch.
//
// The general kernels (attention_forward.cu, attention_backward.cu) give each warp one row
// (a query row forward and for dq, a key row for dk/dv) and walk the other side in tiles of
// kTile rows staged in shared memory, lane l taking row l of the tile; the float32 tiled
// kernels are laid out in attention_tiles.cuh. All sums run in a fixed order, so results
// are reproducible.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "check.cuh"
#include "infini/cuda/attention.h"
#include "infini/math/philox.h"
#include "launch.cuh"
#include "warp_shuffle.cuh"

namespace infini::cuda::detail {

inline constexpr int kWarpsPerBlock = 8;  // rows per block
inline constexpr int kTile = 32;          // rows of the other side per shared-memory tile
inline constexpr int kBlockThreads = kWarpsPerBlock * 32;
inline constexpr unsigned kAllLanes = 0xffffffffu;

// a[0] b[0] + ... + a[n-1] b[n-1], in that order.
template <class T>
__device__ T dot(const T* a, const T* b, std::int64_t n) {
  T s = 0;
  for (std::int64_t d = 0; d < n; ++d) s += a[d] * b[d];
  return s;
}

// The largest non-NaN value (-inf when there is none).
template <class T>
__device__ T warp_max(T x) {
  for (int o = 16; o > 0; o /= 2) x = fmax(x, __shfl_xor_sync(kAllLanes, x, o));
  return x;
}

// The number of keys query row i sees.
__device__ inline std::int64_t keys_of(const AttentionProblem& p, std::int64_t i) {
  return p.causal ? (p.kv_len < i + 1 ? p.kv_len : i + 1) : p.kv_len;
}

// The rows that block blockIdx.x takes when each block takes `per_block` consecutive rows of
// one (b, head): `rows` rows per head, `heads` heads; group = b * heads + head, its rows from
// `first` on.
struct BlockRows {
  std::int64_t group, b, head, first;
};
__device__ inline BlockRows block_rows(std::int64_t rows, std::int64_t heads, int per_block) {
  const std::int64_t row_groups = (rows + per_block - 1) / per_block;
  const std::int64_t group = blockIdx.x / row_groups;
  return {group, group / heads, group % heads, blockIdx.x % row_groups * per_block};
}

// A block of query rows of (b, h) (bh = b * H + h, rows from i0 on) and the keys (kv_len, D)
// and values (kv_len, Dv) of the key/value head of h.
template <class T>
struct QueryBlock {
  std::int64_t bh, b, h, i0;
  const T* keys;
  const T* values;
};
template <class T>
__device__ QueryBlock<T> query_block(const AttentionProblem& p, int per_block) {
  const BlockRows r = block_rows(p.q_len, p.heads, per_block);
  const std::int64_t hk = r.head / (p.heads / p.kv_heads);
  const std::int64_t kv_rows = (r.b * p.kv_heads + hk) * p.kv_len;
  return {r.group, r.b, r.head, r.first, static_cast<const T*>(p.k) + kv_rows * p.head_dim,
          static_cast<const T*>(p.v) + kv_rows * p.value_dim};
}

// The scaled score of (b, h, i, j) from its dot product, with the mask applied: -inf when
// masked out.
template <class T>
__device__ T masked_score(const AttentionProblem& p, T dot_qk, std::int64_t b, std::int64_t h, std::int64_t i,
                          std::int64_t j) {
  T s = static_cast<T>(p.scale) * dot_qk;
  if (p.mask != nullptr) {
    const std::int64_t at =
        b * p.mask_strides[0] + h * p.mask_strides[1] + i * p.mask_strides[2] + j * p.mask_strides[3];
    if (p.mask_is_bool) {
      if (!static_cast<const bool*>(p.mask)[at]) return -INFINITY;
    } else {
      s += static_cast<const T*>(p.mask)[at];
    }
  }
  return s;
}

// The dropout factor of weight (b, h, i, j): 0 or keep_scale = (T)(1 / (1 - p)).
template <class T>
__device__ T keep_factor(const AttentionProblem& p, T keep_scale, std::int64_t b, std::int64_t h, std::int64_t i,
                         std::int64_t j) {
  if (p.dropout_p == 0) return 1;
  const auto element = static_cast<std::uint64_t>(((b * p.heads + h) * p.q_len + i) * p.kv_len + j);
  const math::Philox4 w = math::philox4x32(p.seed, p.offset + element);
  const double u = static_cast<double>(w.w[0] >> 8) * 0x1p-24;
  return u >= p.dropout_p ? keep_scale : T(0);
}

// The dropout factor of a kept weight, (T)(1 / (1 - p)), computed on the host.
template <class T>
T keep_scale_of(const AttentionProblem& p) {
  return static_cast<T>(1 / (1 - p.dropout_p));
}

// Copies rows [row0, row0 + n) of a contiguous (rows, width) matrix into a shared tile with
// row pitch `pitch`, all threads of the block taking part.
template <class T>
__device__ void load_tile(T* tile, int pitch, const T* src, std::int64_t row0, int n, std::int64_t width) {
  const int w = static_cast<int>(width);
  const T* from = src + row0 * width;
  for (int e = threadIdx.x; e < n * w; e += blockDim.x) tile[e / w * pitch + e % w] = from[e];
}

// Makes `kernel` accept `bytes` of dynamic shared memory, or throws naming the dims.
template <class Kernel>
void allow_shared_memory(Kernel kernel, std::size_t bytes, const AttentionProblem& p, const char* op) {
  if (!allow_dynamic_shared_memory(reinterpret_cast<const void*>(kernel), bytes, op))
    throw CudaError(std::string(op) + ": head dims D = " + std::to_string(p.head_dim) +
                    ", Dv = " + std::to_string(p.value_dim) + " need " + std::to_string(bytes) +
                    " bytes of shared memory per block; this GPU has " +
                    std::to_string(dynamic_shared_memory_limit(op)));
}

// Calls f(T{}) with T float or double, the element type of the problem.
template <class F>
void visit_attention_type(ElementType type, const char* op, F&& f) {
  if (type == ElementType::F32) return f(float{});
  if (type == ElementType::F64) return f(double{});
  throw CudaError(std::string(op) + ": expected float32 or float64 tensors");
}

// Runs the float32 tiled forward (attention_forward_tiled.cu) when it takes the problem
// (float32, D and Dv at most 128); false otherwise.
bool attention_forward_tiled(void* out, void* lse, const AttentionProblem& p, const char* op);
// Likewise the float32 tiled backward (attention_backward_tiled.cu).
bool attention_backward_tiled(void* dq, void* dk, void* dv, void* delta, const void* grad_out, const void* out,
                              const void* lse, const AttentionProblem& p, const char* op);

// Runs the 16-bit tensor-core forward (attention_forward_mma.cu) when the problem is one
// attention_runs_in_16_bit takes; false otherwise.
bool attention_forward_mma(void* out, void* lse, const AttentionProblem& p, const char* op);
// Likewise the 16-bit backward (attention_backward_mma.cu).
bool attention_backward_mma(void* dq, void* dk, void* dv, void* delta, const void* grad_out, const void* out,
                            const void* lse, const AttentionProblem& p, const char* op);

// Throws unless the operands are contiguous (the float32/float64 kernels' layout): q, k, v and
// out, and for the backward also grad_out, dq, dk and dv.
void require_contiguous(const AttentionProblem& p, bool backward, const char* op);

// Blocks of kWarpsPerBlock rows over `groups` groups of `rows` rows each.
inline unsigned row_blocks(std::int64_t groups, std::int64_t rows, const char* op) {
  const std::int64_t blocks = groups * ((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  if (blocks > 0x7fffffff) throw CudaError(std::string(op) + ": too many rows for one launch");
  return static_cast<unsigned>(blocks);
}

}  // namespace infini::cuda::detail
