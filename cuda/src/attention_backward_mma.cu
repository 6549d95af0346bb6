// Attention backward for bfloat16/float16 on tensor cores (layout in attention_mma.cuh),
// the two passes of attention_backward.cu without atomics:
// - dq: a block takes 64 query rows, writes delta_i = dO_i . o_i (float32) and walks the key
//   tiles: scores and dO . v on WMMA, then per element p = exp(s - lse) and
//   ds = p (dP - delta) in float32, rounded to the input type, and dq += ds k on WMMA.
// - dk/dv: a block takes 64 key rows of one key/value head and walks the query tiles of every
//   query head of its group, in order: dv += p^T dO and dk += ds^T q.
// Every gradient is accumulated in float32 fragments in a fixed order, so results are
// reproducible. No mask or dropout (attention_runs_in_16_bit).
#include <algorithm>
#include <cstdint>
#include <limits>

#include "attention.cuh"
#include "attention_mma.cuh"
#include "launch.cuh"

namespace infini::cuda::detail {
namespace {

using namespace mma_tiles;

constexpr float kInf = std::numeric_limits<float>::infinity();

// Above D = 64 the dk/dv pass keeps its dv sums in shared memory (a third float scratch per
// warp): dk and dv together would take all 255 registers.
template <int D>
inline constexpr bool kDvInShared = D > 64;

// Four row tiles, per warp two float scratches (three for kDvInShared) and two weight tiles,
// and the query tile's lse and delta (2 x 64 floats).
template <int D>
constexpr std::size_t backward_shared_bytes() {
  return 4 * kTileBytes<D> + kWarps * ((kDvInShared<D> ? 3 : 2) * kScratchBytes<D> + 2 * kWeightBytes) +
         2 * kRows * sizeof(float);
}

struct WarpSpace {
  float* scores;   // (16, 64) float
  float* dots;     // (16, 64) float: dO . v
  void* weights;   // (16, 64) of T
  void* dweights;  // (16, 64) of T
  float* dv_sums;  // (16, D) float, for kDvInShared
};
template <int D>
__device__ WarpSpace warp_space(unsigned char* shared, int warp) {
  constexpr std::size_t kWarpBytes = (kDvInShared<D> ? 3 : 2) * kScratchBytes<D> + 2 * kWeightBytes;
  unsigned char* base = shared + 4 * kTileBytes<D> + warp * kWarpBytes;
  unsigned char* weights = base + 2 * kScratchBytes<D>;
  return {reinterpret_cast<float*>(base), reinterpret_cast<float*>(base + kScratchBytes<D>), weights,
          weights + kWeightBytes, reinterpret_cast<float*>(weights + 2 * kWeightBytes)};
}

// dq (scaled) and delta for 64 query rows of one (b, h).
template <class T, int D>
__global__ void __launch_bounds__(kThreads, 1) mma_dq_kernel(AttentionProblem p, T* dq, float* delta, const T* grad_out,
                                                          const T* out, const float* lse) {
  extern __shared__ __align__(128) unsigned char shared[];
  T* const q_tile = reinterpret_cast<T*>(shared);
  T* const go_tile = q_tile + kRows * kPitch<D>;
  T* const k_tile = go_tile + kRows * kPitch<D>;
  T* const v_tile = k_tile + kRows * kPitch<D>;
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const WarpSpace ws = warp_space<D>(shared, warp);
  T* const ds_weights = static_cast<T*>(ws.dweights);
  const int r = lane / 2, half = lane % 2;

  const auto [bh, i0, rows, keys, values] = query_tile<T, D>(p);
  load_rows<T, D>(q_tile, static_cast<const T*>(p.q), bh * p.q_len + i0, rows);
  load_rows<T, D>(go_tile, grad_out, bh * p.q_len + i0, rows);
  __syncthreads();

  const std::int64_t i = i0 + 16 * warp + r;
  const bool in_range = i < p.q_len;
  float row_delta = 0;  // dO_i . o_i, the lane pair's halves added
  if (in_range) {
    const T* go = go_tile + (16 * warp + r) * kPitch<D> + half * (D / 2);
    const T* o = out + (bh * p.q_len + i) * D + half * (D / 2);
    for (int e = 0; e < D / 2; ++e) row_delta += widen(go[e]) * widen(o[e]);
  }
  row_delta += __shfl_xor_sync(kAllLanes, row_delta, 1);
  if (in_range && half == 0) delta[bh * p.q_len + i] = row_delta;
  const float row_lse = in_range ? lse[bh * p.q_len + i] * kLog2e : -kInf;
  const std::int64_t row_keys = in_range && row_lse != -kInf ? keys_of(p, i) : 0;
  const std::int64_t block_keys = keys_of(p, i0 + rows - 1);
  const float score_scale = static_cast<float>(p.scale) * kLog2e;
  Acc grad[D / 16];
  zero<D>(grad);
  // Above D = 64, dO's fragments are read per tile: kept too, with dq's sums, they would not
  // fit in the registers.
  const OwnRows<T, D> queries(q_tile + 16 * warp * kPitch<D>);
  const T* const own_grads_out = go_tile + 16 * warp * kPitch<D>;
  struct NoRows {};
  const auto grads_out = [&] {
    if constexpr (D > 64) return NoRows{};
    else return OwnRows<T, D>(own_grads_out);
  }();

  for (std::int64_t j0 = 0; j0 < block_keys; j0 += kRows) {
    const int n = static_cast<int>(std::min<std::int64_t>(kRows, block_keys - j0));
    __syncthreads();
    load_rows<T, D>(k_tile, keys, j0, n);
    load_rows<T, D>(v_tile, values, j0, n);
    __syncthreads();
    pair_products<T, D>(ws.scores, queries, k_tile);
    if constexpr (D > 64) pair_products<T, D>(ws.dots, own_grads_out, v_tile);
    else pair_products<T, D>(ws.dots, grads_out, v_tile);
    __syncwarp();
    const float* s = ws.scores + r * kScratchPitch<D> + half * 32;
    const float* dp = ws.dots + r * kScratchPitch<D> + half * 32;
    T* const w = ds_weights + r * kWeightPitch + half * 32;
#pragma unroll 8
    for (int c = 0; c < 32; ++c) {
      const bool kept = j0 + half * 32 + c < row_keys;
      const float weight = kept ? exp2f(s[c] * score_scale - row_lse) : 0.0f;
      w[c] = convert<T>(kept ? weight * (dp[c] - row_delta) : 0.0f);
    }
    __syncwarp();
    add_weighted_rows<T, D>(grad, ds_weights, k_tile);
  }
  store<D>(ws.scores, grad);
  __syncwarp();
  if (in_range) write_row_half<T, D>(dq + bh * p.q_len * D, i, ws.scores, r, half, static_cast<float>(p.scale));
}

// dk (scaled) and dv for 64 key rows of one (b, key/value head).
template <class T, int D>
__global__ void __launch_bounds__(kThreads, 1) mma_dkv_kernel(AttentionProblem p, T* dk, T* dv, const float* delta,
                                                           const T* grad_out, const float* lse) {
  extern __shared__ __align__(128) unsigned char shared[];
  T* const k_tile = reinterpret_cast<T*>(shared);
  T* const v_tile = k_tile + kRows * kPitch<D>;
  T* const q_tile = v_tile + kRows * kPitch<D>;
  T* const go_tile = q_tile + kRows * kPitch<D>;
  float* const tile_lse = reinterpret_cast<float*>(shared + backward_shared_bytes<D>() - 2 * kRows * sizeof(float));
  float* const tile_delta = tile_lse + kRows;
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const WarpSpace ws = warp_space<D>(shared, warp);
  T* const p_weights = static_cast<T*>(ws.weights);
  T* const ds_weights = static_cast<T*>(ws.dweights);
  const int r = lane / 2, half = lane % 2;

  const std::int64_t group = blockIdx.x / tiles_of(p.kv_len), b = group / p.kv_heads, kv = group % p.kv_heads;
  const std::int64_t j0 = static_cast<std::int64_t>(blockIdx.x % tiles_of(p.kv_len)) * kRows;
  const int rows = static_cast<int>(std::min<std::int64_t>(kRows, p.kv_len - j0));
  load_rows<T, D>(k_tile, static_cast<const T*>(p.k), group * p.kv_len + j0, rows);
  load_rows<T, D>(v_tile, static_cast<const T*>(p.v), group * p.kv_len + j0, rows);

  const std::int64_t j = j0 + 16 * warp + r;
  const float score_scale = static_cast<float>(p.scale) * kLog2e;
  // Causal: query rows below j0 see none of these keys.
  const std::int64_t first_query = p.causal ? std::min(j0, p.q_len) / kRows * kRows : 0;
  const std::int64_t group_heads = p.heads / p.kv_heads;
  __syncthreads();  // the key and value tiles are written
  const OwnRows<T, D> own_keys(k_tile + 16 * warp * kPitch<D>), own_values(v_tile + 16 * warp * kPitch<D>);
  Acc grad_k[D / 16];
  zero<D>(grad_k);
  if constexpr (kDvInShared<D>) {
    for (int e = lane; e < 16 * kScratchPitch<D>; e += 32) ws.dv_sums[e] = 0;
  }
  Acc grad_v[kDvInShared<D> ? 1 : D / 16];
  if constexpr (!kDvInShared<D>) zero<D>(grad_v);

  for (std::int64_t g = 0; g < group_heads; ++g) {
    const std::int64_t bh = b * p.heads + kv * group_heads + g;
    for (std::int64_t i0 = first_query; i0 < p.q_len; i0 += kRows) {
      const int n = static_cast<int>(std::min<std::int64_t>(kRows, p.q_len - i0));
      __syncthreads();
      load_rows<T, D>(q_tile, static_cast<const T*>(p.q), bh * p.q_len + i0, n);
      load_rows<T, D>(go_tile, grad_out, bh * p.q_len + i0, n);
      for (int t = static_cast<int>(threadIdx.x); t < kRows; t += kThreads) {
        tile_lse[t] = t < n ? lse[bh * p.q_len + i0 + t] * kLog2e : -kInf;
        tile_delta[t] = t < n ? delta[bh * p.q_len + i0 + t] : 0.0f;
      }
      __syncthreads();
      pair_products<T, D>(ws.scores, own_keys, q_tile);
      pair_products<T, D>(ws.dots, own_values, go_tile);
      __syncwarp();
      const float* s = ws.scores + r * kScratchPitch<D> + half * 32;
      const float* dp = ws.dots + r * kScratchPitch<D> + half * 32;
      T* const pw = p_weights + r * kWeightPitch + half * 32;
      T* const dw = ds_weights + r * kWeightPitch + half * 32;
#pragma unroll 8
      for (int c = 0; c < 32; ++c) {
        const int q = half * 32 + c;
        const std::int64_t i = i0 + q;
        const bool kept = j < p.kv_len && q < n && tile_lse[q] != -kInf && (!p.causal || j <= i);
        const float weight = kept ? exp2f(s[c] * score_scale - tile_lse[q]) : 0.0f;
        pw[c] = convert<T>(weight);
        dw[c] = convert<T>(kept ? weight * (dp[c] - tile_delta[q]) : 0.0f);
      }
      __syncwarp();
      if constexpr (kDvInShared<D>) add_weighted_rows_in_place<T, D>(ws.dv_sums, p_weights, go_tile);
      else add_weighted_rows<T, D>(grad_v, p_weights, go_tile);
      add_weighted_rows<T, D>(grad_k, ds_weights, q_tile);
    }
  }
  const bool in_range = j < p.kv_len;
  store<D>(ws.scores, grad_k);
  __syncwarp();
  if (in_range) write_row_half<T, D>(dk + group * p.kv_len * D, j, ws.scores, r, half, static_cast<float>(p.scale));
  __syncwarp();
  const float* dv_sums = ws.dv_sums;
  if constexpr (!kDvInShared<D>) {
    store<D>(ws.scores, grad_v);
    dv_sums = ws.scores;
  }
  __syncwarp();
  if (in_range) write_row_half<T, D>(dv + group * p.kv_len * D, j, dv_sums, r, half, 1.0f);
}

}  // namespace

bool attention_backward_mma(void* dq, void* dk, void* dv, void* delta, const void* grad_out, const void* out,
                            const void* lse, const AttentionProblem& p, const char* op) {
  if (!attention_runs_in_16_bit(p)) return false;
  with_head_dim(p.head_dim, [&]<int D>() {
    visit_16_bit(p.type, [&](auto zero_value) {
      using T = decltype(zero_value);
      constexpr std::size_t bytes = backward_shared_bytes<D>();
      auto* const d = static_cast<float*>(delta);
      const auto* const go = static_cast<const T*>(grad_out);
      const auto* const l = static_cast<const float*>(lse);
      if (p.batch > 0 && p.heads > 0 && p.q_len > 0) {
        allow_shared_memory(mma_dq_kernel<T, D>, bytes, p, op);
        mma_dq_kernel<T, D><<<blocks_for(p.batch * p.heads, p.q_len, op), kThreads, bytes, stream()>>>(
            p, static_cast<T*>(dq), d, go, static_cast<const T*>(out), l);
      }
      if (p.batch > 0 && p.kv_heads > 0 && p.kv_len > 0) {
        allow_shared_memory(mma_dkv_kernel<T, D>, bytes, p, op);
        mma_dkv_kernel<T, D><<<blocks_for(p.batch * p.kv_heads, p.kv_len, op), kThreads, bytes, stream()>>>(
            p, static_cast<T*>(dk), static_cast<T*>(dv), d, go, l);
      }
    });
  });
  return true;
}

}  // namespace infini::cuda::detail
