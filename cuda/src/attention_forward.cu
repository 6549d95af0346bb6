// Attention forward, general case (float64, or head dims over 128: float32 with D, Dv <= 128
// takes attention_forward_tiled.cu): one warp per query row, kWarpsPerBlock rows of one
// (b, h) per block sharing each tile of kTile keys/values in shared memory; an online
// softmax as in modules/kernels/cpu/attention.cpp (running max, rescaled total and
// accumulator).
#include <algorithm>
#include <cstdint>
#include <limits>

#include "attention.cuh"
#include "launch.cuh"

namespace infini::cuda {
namespace {

using namespace detail;

// Shared memory (elements of T): per warp its weights of the tile (kTile), its query row
// (D) and its output accumulator (Dv); the key tile (kTile rows, pitch D + 1 so that lanes
// reading different rows hit different banks) and the value tile (kTile x Dv).
std::size_t shared_elements(const AttentionProblem& p) {
  const auto D = static_cast<std::size_t>(p.head_dim), Dv = static_cast<std::size_t>(p.value_dim);
  return kWarpsPerBlock * (kTile + D + Dv) + kTile * (D + 1) + kTile * Dv;
}

// out row i = sum_j w_ij v_j / sum_j e_ij and lse_i = max + log(sum_j e_ij) with
// e_ij = exp(s_ij - max) over the keys not masked out and w_ij = e_ij * dropout factor.
// Lane l of a warp scores key j0 + l of the tile; each lane then owns output dims
// d = lane, lane + 32, ... and adds the tile's weighted values in key order.
template <class T>
__global__ void forward_kernel(AttentionProblem p, T* out, T* lse, T keep_scale) {
  extern __shared__ __align__(16) unsigned char shared[];
  const std::int64_t D = p.head_dim, Dv = p.value_dim;
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  T* const base = reinterpret_cast<T*>(shared);
  T* const weights = base + warp * kTile;
  T* const q_row = base + kWarpsPerBlock * kTile + warp * D;
  T* const acc = base + kWarpsPerBlock * (kTile + D) + warp * Dv;
  T* const k_tile = base + kWarpsPerBlock * (kTile + D + Dv);
  T* const v_tile = k_tile + kTile * (D + 1);

  const auto [bh, b, h, i0, keys, values] = query_block<T>(p, kWarpsPerBlock);
  const std::int64_t i = i0 + warp;
  const bool has_row = i < p.q_len;
  const std::int64_t row = bh * p.q_len + i;

  for (std::int64_t d = lane; d < D; d += 32) q_row[d] = has_row ? static_cast<const T*>(p.q)[row * D + d] : T(0);
  for (std::int64_t d = lane; d < Dv; d += 32) acc[d] = 0;
  const std::int64_t block_keys = keys_of(p, std::min(i0 + kWarpsPerBlock, p.q_len) - 1);
  const std::int64_t row_keys = has_row ? keys_of(p, i) : 0;
  T running_max = -std::numeric_limits<T>::infinity(), total = 0;
  for (std::int64_t j0 = 0; j0 < block_keys; j0 += kTile) {
    const int n = static_cast<int>(std::min<std::int64_t>(kTile, block_keys - j0));
    __syncthreads();  // the previous tile has been read (and the query rows written)
    load_tile(k_tile, static_cast<int>(D + 1), keys, j0, n, D);
    load_tile(v_tile, static_cast<int>(Dv), values, j0, n, Dv);
    __syncthreads();
    const std::int64_t j = j0 + lane;
    T s = -std::numeric_limits<T>::infinity();
    if (j < row_keys) s = masked_score(p, dot(q_row, k_tile + lane * (D + 1), D), b, h, i, j);
    const T new_max = fmax(running_max, warp_max(s));
    if (new_max > running_max) {  // rescale what was accumulated under the old max
      const T c = exp(running_max - new_max);
      total *= c;
      for (std::int64_t d = lane; d < Dv; d += 32) acc[d] *= c;
      running_max = new_max;
    }
    const bool masked = s == -std::numeric_limits<T>::infinity();
    const T weight = masked ? T(0) : exp(s - running_max);
    total += warp_sum(weight);
    weights[lane] = masked ? T(0) : weight * keep_factor(p, keep_scale, b, h, i, j);
    __syncwarp();
    for (std::int64_t d = lane; d < Dv; d += 32) {
      T a = acc[d];
      for (int jj = 0; jj < n; ++jj)
        if (const T w = weights[jj]; w != 0) a += w * v_tile[jj * Dv + d];
      acc[d] = a;
    }
  }
  if (!has_row) return;
  // A row with no key left has no distribution: NaN, like PyTorch's reference implementation.
  const bool any = total > 0;
  const T inv = any ? T(1) / total : std::numeric_limits<T>::quiet_NaN();
  for (std::int64_t d = lane; d < Dv; d += 32) out[row * Dv + d] = acc[d] * inv;
  if (lane == 0) lse[row] = any ? running_max + log(total) : -std::numeric_limits<T>::infinity();
}

}  // namespace

bool attention_runs_in_16_bit(const AttentionProblem& p) {
  const bool sixteen_bit = p.type == ElementType::BF16 || p.type == ElementType::F16;
  const bool head_dim = p.head_dim == 16 || p.head_dim == 32 || p.head_dim == 64 || p.head_dim == 128;
  return sixteen_bit && head_dim && p.value_dim == p.head_dim && p.mask == nullptr && p.dropout_p == 0;
}

void detail::require_contiguous(const AttentionProblem& p, bool backward, const char* op) {
  const RowLayout q = contiguous_rows(p.heads, p.q_len, p.head_dim);
  const RowLayout k = contiguous_rows(p.kv_heads, p.kv_len, p.head_dim);
  const RowLayout v = contiguous_rows(p.kv_heads, p.kv_len, p.value_dim);
  const RowLayout o = contiguous_rows(p.heads, p.q_len, p.value_dim);
  bool ok = p.q_rows == q && p.k_rows == k && p.v_rows == v && p.out_rows == o;
  if (backward) ok = ok && p.grad_out_rows == o && p.dq_rows == q && p.dk_rows == k && p.dv_rows == v;
  if (!ok) throw CudaError(std::string(op) + ": this problem's kernel needs contiguous (B, H, T, D) operands");
}

void attention_forward(void* out, void* lse, const AttentionProblem& p, int device) {
  constexpr const char* op = "scaled_dot_product_attention";
  if (p.batch == 0 || p.heads == 0 || p.q_len == 0) return;
  use_device(device);
  if (attention_forward_mma(out, lse, p, op)) return after_launch(op, {static_cast<int>(p.type), 2});
  detail::require_contiguous(p, false, op);
  if (attention_forward_tiled(out, lse, p, op)) return after_launch(op, {static_cast<int>(p.type), 1});
  visit_attention_type(p.type, op, [&](auto zero) {
    using T = decltype(zero);
    const std::size_t bytes = sizeof(T) * shared_elements(p);
    allow_shared_memory(forward_kernel<T>, bytes, p, op);
    forward_kernel<T><<<row_blocks(p.batch * p.heads, p.q_len, op), kBlockThreads, bytes, stream()>>>(
        p, static_cast<T*>(out), static_cast<T*>(lse), keep_scale_of<T>(p));
  });
  after_launch(op);
}

}  // namespace infini::cuda
