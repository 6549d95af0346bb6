// Attention backward, general case (float64, or head dims over 128: float32 with D, Dv <= 128
// takes attention_backward_tiled.cu), recomputing each probability from q, k and the
// forward's lse as in modules/kernels/cpu/attention.cpp, in two kernels with one writer per
// output row (no atomics): dq_kernel (one warp per query row, walking key tiles) also stores
// delta_i = dO_i . o_i; dkv_kernel (one warp per key row, walking the query tiles of every
// query head of its key/value head) reads it. For a kept (unmasked) pair (i, j):
//   p = exp(s_ij - lse_i), z = dropout factor, ds = p (z dO_i . v_j - delta_i) scale,
//   dq_i += ds k_j,  dk_j += ds q_i,  dv_j += p z dO_i (when z != 0).
#include <algorithm>
#include <cstdint>
#include <limits>

#include "attention.cuh"
#include "launch.cuh"

namespace infini::cuda {
namespace {

using namespace detail;

// dq_kernel's shared memory (elements of T): per warp its ds of the tile (kTile), its query
// row (D), its dO row (Dv) and its dq accumulator (D); the key and value tiles with pitches
// D + 1 and Dv + 1 (lanes read different rows).
std::size_t dq_shared_elements(const AttentionProblem& p) {
  const auto D = static_cast<std::size_t>(p.head_dim), Dv = static_cast<std::size_t>(p.value_dim);
  return kWarpsPerBlock * (kTile + 2 * D + Dv) + kTile * (D + 1) + kTile * (Dv + 1);
}

template <class T>
__global__ void dq_kernel(AttentionProblem p, T* dq, T* delta, const T* grad_out, const T* out, const T* lse,
                          T keep_scale) {
  extern __shared__ __align__(16) unsigned char shared[];
  const std::int64_t D = p.head_dim, Dv = p.value_dim;
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  T* const base = reinterpret_cast<T*>(shared);
  T* const ds_row = base + warp * kTile;
  T* const q_row = base + kWarpsPerBlock * kTile + warp * D;
  T* const go_row = base + kWarpsPerBlock * (kTile + D) + warp * Dv;
  T* const acc = base + kWarpsPerBlock * (kTile + D + Dv) + warp * D;
  T* const k_tile = base + kWarpsPerBlock * (kTile + 2 * D + Dv);
  T* const v_tile = k_tile + kTile * (D + 1);

  const auto [bh, b, h, i0, keys, values] = query_block<T>(p, kWarpsPerBlock);
  const std::int64_t i = i0 + warp;
  const bool has_row = i < p.q_len;
  const std::int64_t row = bh * p.q_len + i;
  const T scale = static_cast<T>(p.scale);

  for (std::int64_t d = lane; d < D; d += 32) {
    q_row[d] = has_row ? static_cast<const T*>(p.q)[row * D + d] : T(0);
    acc[d] = 0;
  }
  T partial = 0;  // this lane's part of delta = dO_i . o_i
  for (std::int64_t d = lane; d < Dv; d += 32) {
    go_row[d] = has_row ? grad_out[row * Dv + d] : T(0);
    if (has_row) partial += go_row[d] * out[row * Dv + d];
  }
  const T row_delta = warp_sum(partial);
  const T l = has_row ? lse[row] : -std::numeric_limits<T>::infinity();
  if (has_row && lane == 0) delta[row] = row_delta;
  const std::int64_t block_keys = keys_of(p, std::min(i0 + kWarpsPerBlock, p.q_len) - 1);
  const std::int64_t row_keys = has_row && isfinite(l) ? keys_of(p, i) : 0;  // fully masked row: no gradient
  for (std::int64_t j0 = 0; j0 < block_keys; j0 += kTile) {
    const int n = static_cast<int>(std::min<std::int64_t>(kTile, block_keys - j0));
    __syncthreads();  // the previous tile has been read (and the rows written)
    load_tile(k_tile, static_cast<int>(D + 1), keys, j0, n, D);
    load_tile(v_tile, static_cast<int>(Dv + 1), values, j0, n, Dv);
    __syncthreads();
    const std::int64_t j = j0 + lane;
    bool used = false;
    T ds = 0;
    if (j < row_keys) {
      const T s = masked_score(p, dot(q_row, k_tile + lane * (D + 1), D), b, h, i, j);
      if (s != -std::numeric_limits<T>::infinity()) {
        const T prob = exp(s - l);
        const T z = keep_factor(p, keep_scale, b, h, i, j);
        ds = prob * (z * dot(go_row, v_tile + lane * (Dv + 1), Dv) - row_delta) * scale;
        used = true;
      }
    }
    const unsigned used_lanes = __ballot_sync(kAllLanes, used);
    ds_row[lane] = ds;
    __syncwarp();
    for (std::int64_t d = lane; d < D; d += 32) {
      T a = acc[d];
      for (int jj = 0; jj < n; ++jj)
        if (used_lanes >> jj & 1u) a += ds_row[jj] * k_tile[jj * (D + 1) + d];
      acc[d] = a;
    }
  }
  if (has_row)
    for (std::int64_t d = lane; d < D; d += 32) dq[row * D + d] = acc[d];
}

// dkv_kernel's shared memory (elements of T): per warp its ds and p z of the tile (2 kTile),
// its key and value rows (D + Dv) and their gradients' accumulators (D + Dv); the query and
// dO tiles with pitches D + 1 and Dv + 1, and the tile's lse and delta (2 kTile).
std::size_t dkv_shared_elements(const AttentionProblem& p) {
  const auto D = static_cast<std::size_t>(p.head_dim), Dv = static_cast<std::size_t>(p.value_dim);
  return kWarpsPerBlock * (2 * kTile + 2 * (D + Dv)) + kTile * (D + 1) + kTile * (Dv + 1) + 2 * kTile;
}

template <class T>
__global__ void dkv_kernel(AttentionProblem p, T* dk, T* dv, const T* delta, const T* grad_out, const T* lse,
                           T keep_scale) {
  extern __shared__ __align__(16) unsigned char shared[];
  const std::int64_t D = p.head_dim, Dv = p.value_dim;
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  T* const base = reinterpret_cast<T*>(shared);
  T* const ds_row = base + warp * kTile;
  T* const pz_row = base + kWarpsPerBlock * kTile + warp * kTile;
  T* const k_row = base + kWarpsPerBlock * 2 * kTile + warp * D;
  T* const v_row = base + kWarpsPerBlock * (2 * kTile + D) + warp * Dv;
  T* const dk_acc = base + kWarpsPerBlock * (2 * kTile + D + Dv) + warp * D;
  T* const dv_acc = base + kWarpsPerBlock * (2 * kTile + 2 * D + Dv) + warp * Dv;
  T* const q_tile = base + kWarpsPerBlock * (2 * kTile + 2 * (D + Dv));
  T* const go_tile = q_tile + kTile * (D + 1);
  T* const lse_tile = go_tile + kTile * (Dv + 1);
  T* const delta_tile = lse_tile + kTile;

  const auto [bhk, b, hk, j0] = block_rows(p.kv_len, p.kv_heads, kWarpsPerBlock);  // bhk = b * Hkv + hk
  const std::int64_t group = p.heads / p.kv_heads, j = j0 + warp;
  const bool has_row = j < p.kv_len;
  const std::int64_t kv_row = bhk * p.kv_len + j;
  const T scale = static_cast<T>(p.scale);

  for (std::int64_t d = lane; d < D; d += 32) {
    k_row[d] = has_row ? static_cast<const T*>(p.k)[kv_row * D + d] : T(0);
    dk_acc[d] = 0;
  }
  for (std::int64_t d = lane; d < Dv; d += 32) {
    v_row[d] = has_row ? static_cast<const T*>(p.v)[kv_row * Dv + d] : T(0);
    dv_acc[d] = 0;
  }
  // Causal: only queries i >= j see key j, so the block starts at its first key.
  const std::int64_t first_query = p.causal ? std::min(j0, p.q_len) : 0;
  for (std::int64_t h = hk * group; h < (hk + 1) * group; ++h) {
    const std::int64_t bh = b * p.heads + h;
    const T* const queries = static_cast<const T*>(p.q) + bh * p.q_len * D;
    const T* const grads = grad_out + bh * p.q_len * Dv;
    for (std::int64_t i0 = first_query; i0 < p.q_len; i0 += kTile) {
      const int n = static_cast<int>(std::min<std::int64_t>(kTile, p.q_len - i0));
      __syncthreads();  // the previous tile has been read (and the rows written)
      load_tile(q_tile, static_cast<int>(D + 1), queries, i0, n, D);
      load_tile(go_tile, static_cast<int>(Dv + 1), grads, i0, n, Dv);
      for (int e = static_cast<int>(threadIdx.x); e < n; e += blockDim.x) {
        lse_tile[e] = lse[bh * p.q_len + i0 + e];
        delta_tile[e] = delta[bh * p.q_len + i0 + e];
      }
      __syncthreads();
      const std::int64_t i = i0 + lane;
      bool used = false, kept = false;
      T ds = 0, pz = 0;
      if (has_row && lane < n && isfinite(lse_tile[lane]) && j < keys_of(p, i)) {
        const T s = masked_score(p, dot(q_tile + lane * (D + 1), k_row, D), b, h, i, j);
        if (s != -std::numeric_limits<T>::infinity()) {
          const T prob = exp(s - lse_tile[lane]);
          const T z = keep_factor(p, keep_scale, b, h, i, j);
          pz = prob * z;
          ds = prob * (z * dot(go_tile + lane * (Dv + 1), v_row, Dv) - delta_tile[lane]) * scale;
          used = true;
          kept = z != 0;
        }
      }
      const unsigned used_lanes = __ballot_sync(kAllLanes, used);
      const unsigned kept_lanes = __ballot_sync(kAllLanes, kept);
      ds_row[lane] = ds;
      pz_row[lane] = pz;
      __syncwarp();
      for (std::int64_t d = lane; d < D; d += 32) {
        T a = dk_acc[d];
        for (int ii = 0; ii < n; ++ii)
          if (used_lanes >> ii & 1u) a += ds_row[ii] * q_tile[ii * (D + 1) + d];
        dk_acc[d] = a;
      }
      for (std::int64_t d = lane; d < Dv; d += 32) {
        T a = dv_acc[d];
        for (int ii = 0; ii < n; ++ii)
          if (kept_lanes >> ii & 1u) a += pz_row[ii] * go_tile[ii * (Dv + 1) + d];
        dv_acc[d] = a;
      }
    }
  }
  if (!has_row) return;
  for (std::int64_t d = lane; d < D; d += 32) dk[kv_row * D + d] = dk_acc[d];
  for (std::int64_t d = lane; d < Dv; d += 32) dv[kv_row * Dv + d] = dv_acc[d];
}

}  // namespace

void attention_backward(void* dq, void* dk, void* dv, void* delta, const void* grad_out, const void* out,
                        const void* lse, const AttentionProblem& p, int device) {
  constexpr const char* op = "scaled_dot_product_attention_backward";
  use_device(device);
  if (attention_backward_mma(dq, dk, dv, delta, grad_out, out, lse, p, op))
    return after_launch(op, {static_cast<int>(p.type), 2});
  detail::require_contiguous(p, true, op);
  if (attention_backward_tiled(dq, dk, dv, delta, grad_out, out, lse, p, op))
    return after_launch(op, {static_cast<int>(p.type), 1});
  visit_attention_type(p.type, op, [&](auto zero) {
    using T = decltype(zero);
    const auto keep_scale = keep_scale_of<T>(p);
    if (p.batch > 0 && p.heads > 0 && p.q_len > 0) {
      const std::size_t bytes = sizeof(T) * dq_shared_elements(p);
      allow_shared_memory(dq_kernel<T>, bytes, p, op);
      dq_kernel<T><<<row_blocks(p.batch * p.heads, p.q_len, op), kBlockThreads, bytes, stream()>>>(
          p, static_cast<T*>(dq), static_cast<T*>(delta), static_cast<const T*>(grad_out),
          static_cast<const T*>(out), static_cast<const T*>(lse), keep_scale);
    }
    if (p.batch > 0 && p.kv_heads > 0 && p.kv_len > 0) {
      const std::size_t bytes = sizeof(T) * dkv_shared_elements(p);
      allow_shared_memory(dkv_kernel<T>, bytes, p, op);
      dkv_kernel<T><<<row_blocks(p.batch * p.kv_heads, p.kv_len, op), kBlockThreads, bytes, stream()>>>(
          p, static_cast<T*>(dk), static_cast<T*>(dv), static_cast<const T*>(delta),
          static_cast<const T*>(grad_out), static_cast<const T*>(lse), keep_scale);
    }
  });
  after_launch(op);
}

}  // namespace infini::cuda
