// Attention backward, float32 fast path (D, Dv <= 128): the two passes of
// attention_backward.cu (dq with delta, then dk/dv) with FlashAttention-style tiles (layout
// in attention_tiles.cuh). Each tile pair recomputes the scores and the dO . v products;
// every gradient adds the other side's rows in ascending order (the heads of a group in
// order), so results are reproducible; no atomics.
#include <algorithm>
#include <cstdint>
#include <limits>

#include "attention.cuh"
#include "attention_tiles.cuh"
#include "launch.cuh"

namespace infini::cuda::detail {
namespace {

using namespace tiles;

constexpr float kInf = std::numeric_limits<float>::infinity();

// Shared memory (floats) of either pass: transposed tiles of queries and keys (D dims), dO
// and values (Dv), `coefficient_tiles` coefficient tiles (64), and 2 x 64 floats (the dk/dv
// pass's lse and delta of the query tile).
std::size_t backward_shared_floats(const AttentionProblem& p, int coefficient_tiles) {
  return 2 * tile_floats(p.head_dim) + 2 * tile_floats(p.value_dim) + coefficient_tiles * tile_floats(kRows) +
         2 * kRows;
}

// dq (and delta_i = dO_i . o_i) for 64 query rows of one (b, h), over the key tiles.
template <int E>
__global__ void __launch_bounds__(kThreads, 1)
    tiled_dq_kernel(AttentionProblem p, float* dq, float* delta, const float* grad_out, const float* out,
                    const float* lse, float keep_scale) {
  extern __shared__ __align__(16) unsigned char shared[];
  const int D = static_cast<int>(p.head_dim), Dv = static_cast<int>(p.value_dim);
  float* const q_tile = reinterpret_cast<float*>(shared);
  float* const k_tile = q_tile + tile_floats(D);
  float* const go_tile = k_tile + tile_floats(D);
  float* const v_tile = go_tile + tile_floats(Dv);
  float* const ds_tile = v_tile + tile_floats(Dv);
  const int tx = static_cast<int>(threadIdx.x % 16), ty = static_cast<int>(threadIdx.x / 16);
  const float scale = static_cast<float>(p.scale);

  const auto [bh, b, h, i0, keys, values] = query_block<float>(p, kRows);
  const std::int64_t row0 = bh * p.q_len + i0;
  const int rows = static_cast<int>(std::min<std::int64_t>(kRows, p.q_len - i0));

  load_transposed(q_tile, static_cast<const float*>(p.q), row0, rows, D);
  load_transposed(go_tile, grad_out, row0, rows, Dv);
  __syncthreads();
  float row_delta[4], row_lse[4];
  std::int64_t row_keys[4];
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    const int r = 4 * ty + a;
    float partial = 0;  // this lane's dims of dO_r . o_r
    if (r < rows)
      for (int v = tx; v < Dv; v += 16) partial += go_tile[v * kPitch + r] * out[(row0 + r) * Dv + v];
    row_delta[a] = half_warp_sum(partial);
    if (r < rows && tx == 0) delta[row0 + r] = row_delta[a];
    row_lse[a] = r < rows ? lse[row0 + r] : -kInf;
    row_keys[a] = r < rows && isfinite(row_lse[a]) ? keys_of(p, i0 + r) : 0;  // fully masked row: no gradient
  }
  float acc[4][E] = {};
  const std::int64_t block_keys = keys_of(p, i0 + rows - 1);
  for (std::int64_t j0 = 0; j0 < block_keys; j0 += kRows) {
    const int n = static_cast<int>(std::min<std::int64_t>(kRows, block_keys - j0));
    __syncthreads();  // the previous tile has been read
    load_transposed(k_tile, keys, j0, n, D);
    load_transposed(v_tile, values, j0, n, Dv);
    __syncthreads();
    float s[4][4] = {}, dp[4][4] = {}, ds[4][4];
    tile_products(s, q_tile, k_tile, D, tx, ty);
    tile_products(dp, go_tile, v_tile, Dv, tx, ty);
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const std::int64_t i = i0 + 4 * ty + a, j = j0 + 4 * tx + c;
        ds[a][c] = 0;
        if (j < row_keys[a]) {
          const float score = masked_score(p, s[a][c], b, h, i, j);
          if (score != -kInf) {
            const float prob = expf(score - row_lse[a]);
            const float z = keep_factor(p, keep_scale, b, h, i, j);
            ds[a][c] = prob * (z * dp[a][c] - row_delta[a]) * scale;
          }
        }
      }
    store_coefficients(ds_tile, ds, tx, ty);
    __syncthreads();
    accumulate(acc, ds_tile, k_tile, n, D, tx, ty);
  }
  store_rows(dq + row0 * D, acc, rows, D, tx, ty);
}

// dk and dv for 64 key rows of one (b, hk), over the query tiles of each head of the group.
template <int E>
__global__ void __launch_bounds__(kThreads, 1)
    tiled_dkv_kernel(AttentionProblem p, float* dk, float* dv, const float* delta, const float* grad_out,
                     const float* lse, float keep_scale) {
  extern __shared__ __align__(16) unsigned char shared[];
  const int D = static_cast<int>(p.head_dim), Dv = static_cast<int>(p.value_dim);
  float* const k_tile = reinterpret_cast<float*>(shared);
  float* const q_tile = k_tile + tile_floats(D);
  float* const v_tile = q_tile + tile_floats(D);
  float* const go_tile = v_tile + tile_floats(Dv);
  float* const pz_tile = go_tile + tile_floats(Dv);
  float* const ds_tile = pz_tile + tile_floats(kRows);
  float* const lse_tile = ds_tile + tile_floats(kRows);
  float* const delta_tile = lse_tile + kRows;
  const int tx = static_cast<int>(threadIdx.x % 16), ty = static_cast<int>(threadIdx.x / 16);
  const float scale = static_cast<float>(p.scale);

  const auto [bhk, b, hk, j0] = block_rows(p.kv_len, p.kv_heads, kRows);  // bhk = b * Hkv + hk
  const std::int64_t group = p.heads / p.kv_heads, row0 = bhk * p.kv_len + j0;
  const int rows = static_cast<int>(std::min<std::int64_t>(kRows, p.kv_len - j0));

  load_transposed(k_tile, static_cast<const float*>(p.k), row0, rows, D);
  load_transposed(v_tile, static_cast<const float*>(p.v), row0, rows, Dv);
  float dk_acc[4][E] = {}, dv_acc[4][E] = {};
  // Causal: only queries i >= j see key j, so the block starts at its first key.
  const std::int64_t first_query = p.causal ? std::min(j0, p.q_len) : 0;
  for (std::int64_t h = hk * group; h < (hk + 1) * group; ++h) {
    const std::int64_t bh = b * p.heads + h;
    for (std::int64_t i0 = first_query; i0 < p.q_len; i0 += kRows) {
      const int n = static_cast<int>(std::min<std::int64_t>(kRows, p.q_len - i0));
      __syncthreads();  // the previous tile has been read (and the key/value tiles written)
      load_transposed(q_tile, static_cast<const float*>(p.q), bh * p.q_len + i0, n, D);
      load_transposed(go_tile, grad_out, bh * p.q_len + i0, n, Dv);
      for (int e = static_cast<int>(threadIdx.x); e < n; e += kThreads) {
        lse_tile[e] = lse[bh * p.q_len + i0 + e];
        delta_tile[e] = delta[bh * p.q_len + i0 + e];
      }
      __syncthreads();
      float s[4][4] = {}, dp[4][4] = {}, pz[4][4], ds[4][4];
      tile_products(s, k_tile, q_tile, D, tx, ty);
      tile_products(dp, v_tile, go_tile, Dv, tx, ty);
#pragma unroll
      for (int a = 0; a < 4; ++a)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int qi = 4 * tx + c;
          const std::int64_t j = j0 + 4 * ty + a, i = i0 + qi;
          pz[a][c] = 0;
          ds[a][c] = 0;
          if (4 * ty + a < rows && qi < n && isfinite(lse_tile[qi]) && j < keys_of(p, i)) {
            const float score = masked_score(p, s[a][c], b, h, i, j);
            if (score != -kInf) {
              const float prob = expf(score - lse_tile[qi]);
              const float z = keep_factor(p, keep_scale, b, h, i, j);
              pz[a][c] = prob * z;
              ds[a][c] = prob * (z * dp[a][c] - delta_tile[qi]) * scale;
            }
          }
        }
      store_coefficients(pz_tile, pz, tx, ty);
      store_coefficients(ds_tile, ds, tx, ty);
      __syncthreads();
      accumulate(dv_acc, pz_tile, go_tile, n, Dv, tx, ty);
      accumulate(dk_acc, ds_tile, q_tile, n, D, tx, ty);
    }
  }
  store_rows(dk + row0 * D, dk_acc, rows, D, tx, ty);
  store_rows(dv + row0 * Dv, dv_acc, rows, Dv, tx, ty);
}

template <int E>
void launch_tiled(float* dq, float* dk, float* dv, float* delta, const float* grad_out, const float* out,
                  const float* lse, const AttentionProblem& p, const char* op) {
  const auto keep_scale = keep_scale_of<float>(p);
  if (p.batch > 0 && p.heads > 0 && p.q_len > 0) {
    const std::size_t bytes = sizeof(float) * backward_shared_floats(p, 1);
    allow_shared_memory(tiled_dq_kernel<E>, bytes, p, op);
    tiled_dq_kernel<E><<<blocks_for(p.batch * p.heads, p.q_len, op), kThreads, bytes, stream()>>>(
        p, dq, delta, grad_out, out, lse, keep_scale);
  }
  if (p.batch > 0 && p.kv_heads > 0 && p.kv_len > 0) {
    const std::size_t bytes = sizeof(float) * backward_shared_floats(p, 2);
    allow_shared_memory(tiled_dkv_kernel<E>, bytes, p, op);
    tiled_dkv_kernel<E><<<blocks_for(p.batch * p.kv_heads, p.kv_len, op), kThreads, bytes, stream()>>>(
        p, dk, dv, delta, grad_out, lse, keep_scale);
  }
}

}  // namespace

bool attention_backward_tiled(void* dq, void* dk, void* dv, void* delta, const void* grad_out, const void* out,
                              const void* lse, const AttentionProblem& p, const char* op) {
  if (p.type != ElementType::F32 || p.head_dim > kMaxDim || p.value_dim > kMaxDim) return false;
  auto run = [&](auto launch) {
    launch(static_cast<float*>(dq), static_cast<float*>(dk), static_cast<float*>(dv), static_cast<float*>(delta),
           static_cast<const float*>(grad_out), static_cast<const float*>(out), static_cast<const float*>(lse), p, op);
  };
  if (std::max(p.head_dim, p.value_dim) <= 64) run(launch_tiled<4>);
  else run(launch_tiled<8>);
  return true;
}

}  // namespace infini::cuda::detail
