// Attention forward for bfloat16/float16 on tensor cores (layout in attention_mma.cuh):
// FlashAttention-2's loop. A block takes 64 query rows of one (b, h); per key tile each warp
// forms its 16 x 64 scores on WMMA, takes the online softmax per row in float32 (exp2 of
// scaled scores), rounds the weights to the input type and adds weights x values on WMMA
// into float32 rows it rescales as the running maximum grows. Sums run in a fixed order, so
// results are reproducible. No mask or dropout (attention_runs_in_16_bit).
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

template <int D>
constexpr std::size_t forward_shared_bytes() {
  return 3 * kTileBytes<D> + kWarps * (kScratchBytes<D> + kWeightBytes);
}

// out (B, H, Tq, D) of T, lse (B, H, Tq) float32 (natural log of the scaled scores' sum).
template <class T, int D>
__global__ void __launch_bounds__(kThreads) mma_forward_kernel(AttentionProblem p, T* out, float* lse) {
  extern __shared__ __align__(128) unsigned char shared[];
  T* const q_tile = reinterpret_cast<T*>(shared);
  T* const k_tile = q_tile + kRows * kPitch<D>;
  T* const v_tile = k_tile + kRows * kPitch<D>;
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  float* const scratch = reinterpret_cast<float*>(shared + 3 * kTileBytes<D> + warp * kScratchBytes<D>);
  T* const weights = reinterpret_cast<T*>(shared + 3 * kTileBytes<D> + kWarps * kScratchBytes<D> + warp * kWeightBytes);
  const int r = lane / 2, half = lane % 2;  // own row (of the warp's 16) and half of the columns

  const auto [bh, i0, rows, keys, values] = query_tile<T, D>(p);
  load_rows<T, D>(q_tile, static_cast<const T*>(p.q), bh * p.q_len + i0, rows);

  const std::int64_t i = i0 + 16 * warp + r;
  const std::int64_t row_keys = i < p.q_len ? keys_of(p, i) : 0;
  const std::int64_t block_keys = keys_of(p, i0 + rows - 1);
  const float score_scale = static_cast<float>(p.scale) * kLog2e;  // scores in log2 units
  float acc[D / 2], running_max = -kInf, total = 0;
#pragma unroll
  for (int e = 0; e < D / 2; ++e) acc[e] = 0;
  Acc tile_out[D / 16];

  for (std::int64_t j0 = 0; j0 < block_keys; j0 += kRows) {
    const int n = static_cast<int>(std::min<std::int64_t>(kRows, block_keys - j0));
    __syncthreads();  // the previous tiles have been read (and the query tile written)
    load_rows<T, D>(k_tile, keys, j0, n);
    load_rows<T, D>(v_tile, values, j0, n);
    __syncthreads();
    pair_products<T, D>(scratch, q_tile + 16 * warp * kPitch<D>, k_tile);
    __syncwarp();
    const float* s = scratch + r * kScratchPitch<D> + half * 32;
    float tile_max = -kInf;
#pragma unroll 8
    for (int c = 0; c < 32; ++c)
      if (j0 + half * 32 + c < row_keys) tile_max = fmaxf(tile_max, s[c] * score_scale);
    tile_max = fmaxf(tile_max, __shfl_xor_sync(kAllLanes, tile_max, 1));
    const float new_max = fmaxf(running_max, tile_max);
    // Until the row has seen a key, new_max is -inf and every weight 0.
    const float rescale = running_max == -kInf ? 0.0f : exp2f(running_max - new_max);
    float sum = 0;
    T* const w = weights + r * kWeightPitch + half * 32;
#pragma unroll 8
    for (int c = 0; c < 32; ++c) {
      const float weight = j0 + half * 32 + c < row_keys ? exp2f(s[c] * score_scale - new_max) : 0.0f;
      w[c] = convert<T>(weight);
      sum += weight;
    }
    total = total * rescale + sum + __shfl_xor_sync(kAllLanes, sum, 1);
    running_max = new_max;
#pragma unroll
    for (int e = 0; e < D / 2; ++e) acc[e] *= rescale;
    __syncwarp();
    zero<D>(tile_out);
    add_weighted_rows<T, D>(tile_out, weights, v_tile);
    store<D>(scratch, tile_out);
    __syncwarp();
    const float* o = scratch + r * kScratchPitch<D> + half * (D / 2);
#pragma unroll
    for (int e = 0; e < D / 2; ++e) acc[e] += o[e];
    __syncwarp();  // the scratch is read before the next scores overwrite it
  }
  if (i >= p.q_len) return;
  const bool any = total > 0;  // a row with no key: NaN output, lse -inf
  const float inv = any ? 1.0f / total : std::numeric_limits<float>::quiet_NaN();
  T* const to = out + (bh * p.q_len + i) * D + half * (D / 2);
#pragma unroll
  for (int e = 0; e < D / 2; ++e) to[e] = convert<T>(acc[e] * inv);
  if (half == 0) lse[bh * p.q_len + i] = any ? (running_max + log2f(total)) * kLn2 : -kInf;
}

}  // namespace

bool attention_forward_mma(void* out, void* lse, const AttentionProblem& p, const char* op) {
  if (!attention_runs_in_16_bit(p)) return false;
  with_head_dim(p.head_dim, [&]<int D>() {
    visit_16_bit(p.type, [&](auto zero) {
      using T = decltype(zero);
      constexpr std::size_t bytes = forward_shared_bytes<D>();
      allow_shared_memory(mma_forward_kernel<T, D>, bytes, p, op);
      mma_forward_kernel<T, D><<<blocks_for(p.batch * p.heads, p.q_len, op), kThreads, bytes, stream()>>>(p, static_cast<T*>(out), static_cast<float*>(lse));
    });
  });
  return true;
}

}  // namespace infini::cuda::detail
