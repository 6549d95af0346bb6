// Attention forward for bfloat16/float16 on tensor cores (building blocks in
// attention_mma.cuh): FlashAttention-2's loop. A block takes 64 query rows of one (b, h);
// per key tile each warp forms its 16 x 64 scores in registers, takes the online softmax per
// row in float32 (exp2 of scaled scores), rounds the weights to the input type and adds
// weights x values into float32 rows it rescales as the running maximum grows. A row's sums
// run in a fixed order, so results are reproducible. No mask or dropout
// (attention_runs_in_16_bit).
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

// The query tile and two stages of (key tile, value tile).
template <int D>
constexpr std::size_t forward_shared_bytes() {
  return 5 * kTileBytes<D>;
}

// out (B, H, Tq, D) of T (p.out_rows), lse (B, H, Tq) float32 (natural log of the scaled
// scores' sum).
template <class T, int D>
__global__ void __launch_bounds__(kThreads) mma_forward_kernel(AttentionProblem p, T* out, float* lse) {
  extern __shared__ __align__(128) unsigned char shared[];
  auto* const q_tile = reinterpret_cast<std::uint16_t*>(shared);
  auto* const stages = q_tile + kTileElements<D>;  // stage s: key tile 2 s, value tile 2 s + 1
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const int g = lane / 4, t = lane % 4;

  const QueryTile q = query_tile(p);
  const std::int64_t b = q.b, h = q.h, bh = q.bh, i0 = q.i0;
  const KeyValueTiles<D> tiles(p, stages, q);
  load_rows_async<D>(q_tile, row_of(static_cast<const std::uint16_t*>(p.q), p.q_rows, b, h, i0), p.q_rows.row, q.rows);
  cp_async_commit();
  if (tiles.count > 0) tiles.load(0);
  cp_async_commit();
  cp_async_wait<1>();  // the query tile has arrived
  __syncthreads();
  const OwnRows<D, true> own_queries(q_tile, warp);

  // This thread's rows: g and g + 8 of the warp's 16 (r = 0, 1).
  std::int64_t row_keys[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const std::int64_t i = i0 + 16 * warp + g + 8 * r;
    row_keys[r] = i < p.q_len ? keys_of(p, i) : 0;
  }
  const std::int64_t warp_keys = keys_of(p, i0 + 16 * warp);  // the fewest any of its rows sees
  const float score_scale = static_cast<float>(p.scale) * kLog2e;  // scores in log2 units
  float running_max[2] = {-kInf, -kInf}, total[2] = {0, 0};  // total: this thread's columns only
  FragC acc[D / 8];
  zero(acc);

  for (int tile = 0; tile < tiles.count; ++tile) {
    tiles.arrive(tile);
    FragC s[kRows / 8];
    zero(s);
    add_row_products<T, D, kRows>(s, own_queries, tiles.key_tile(tile));

    const std::int64_t j0 = static_cast<std::int64_t>(tile) * kRows;
    const bool partial = j0 + kRows > warp_keys;  // some of these keys are hidden from some rows
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float tile_max = -kInf;
#pragma unroll
      for (int n = 0; n < kRows / 8; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& x = s[n].x[2 * r + e];
          x = !partial || j0 + 8 * n + 2 * t + e < row_keys[r] ? x * score_scale : -kInf;
          tile_max = fmaxf(tile_max, x);
        }
      tile_max = fmaxf(tile_max, __shfl_xor_sync(kAllLanes, tile_max, 1));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(kAllLanes, tile_max, 2));
      const float new_max = fmaxf(running_max[r], tile_max);
      // Until the row has seen a key, new_max is -inf and every weight 0.
      const float base = new_max == -kInf ? 0.0f : new_max;
      const float rescale = exp2f(running_max[r] - base);
      running_max[r] = new_max;
      float sum = 0;
#pragma unroll
      for (int n = 0; n < kRows / 8; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& x = s[n].x[2 * r + e];
          x = exp2f(x - base);
          sum += x;
        }
      total[r] = total[r] * rescale + sum;
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        acc[n].x[2 * r] *= rescale;
        acc[n].x[2 * r + 1] *= rescale;
      }
    }
    add_weighted_rows<T, D, kRows>(acc, s, tiles.value_tile(tile));
    __syncthreads();  // this stage has been read before the next iteration refills it
  }

  float inverse[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    total[r] += __shfl_xor_sync(kAllLanes, total[r], 1);
    total[r] += __shfl_xor_sync(kAllLanes, total[r], 2);
    const bool any = total[r] > 0;  // a row with no key: NaN output, lse -inf
    inverse[r] = any ? 1.0f / total[r] : std::numeric_limits<float>::quiet_NaN();
    const std::int64_t i = i0 + 16 * warp + g + 8 * r;
    if (t == 0 && i < p.q_len) lse[bh * p.q_len + i] = any ? (running_max[r] + log2f(total[r])) * kLn2 : -kInf;
  }
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    acc[n].x[0] *= inverse[0];
    acc[n].x[1] *= inverse[0];
    acc[n].x[2] *= inverse[1];
    acc[n].x[3] *= inverse[1];
  }
  const std::int64_t first = i0 + 16 * warp;
  store_rows<T, D>(row_of(out, p.out_rows, b, h, first), p.out_rows.row, p.q_len - first, acc, 1.0f, q_tile, warp);
}

}  // namespace

bool attention_forward_mma(void* out, void* lse, const AttentionProblem& p, const char* op) {
  if (!attention_runs_in_16_bit(p)) return false;
  if (!rows_aligned(p.q, p.q_rows) || !rows_aligned(p.k, p.k_rows) || !rows_aligned(p.v, p.v_rows) ||
      !rows_aligned(out, p.out_rows))
    throw CudaError(std::string(op) + ": the tensor-core kernels need 16-byte aligned rows");
  with_head_dim(p.head_dim, [&]<int D>() {
    visit_16_bit(p.type, [&](auto zero) {
      using T = decltype(zero);
      constexpr std::size_t bytes = forward_shared_bytes<D>();
      allow_shared_memory(mma_forward_kernel<T, D>, bytes, p, op);
      mma_forward_kernel<T, D><<<blocks_for(p.batch * p.heads, p.q_len, op), kThreads, bytes, stream()>>>(
          p, static_cast<T*>(out), static_cast<float*>(lse));
    });
  });
  return true;
}

}  // namespace infini::cuda::detail
