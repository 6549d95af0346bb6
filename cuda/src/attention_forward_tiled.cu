// Attention forward, float32 fast path (D, Dv <= 128): FlashAttention-style tiles (layout
// in attention_tiles.cuh). A block takes 64 query rows of one (b, h) and walks the keys in
// tiles of 64 with an online softmax per row: the tile's row maxima and sums reduce over a
// half warp in a fixed butterfly, and the output adds the tile's keys in order, so results
// are reproducible. Semantics as in attention_forward.cu and modules/kernels/cpu/attention.cpp.
#include <algorithm>
#include <cstdint>
#include <limits>

#include "attention.cuh"
#include "attention_tiles.cuh"
#include "launch.cuh"

namespace infini::cuda::detail {
namespace {

using namespace tiles;

// Shared memory (floats): transposed tiles of the queries (D dims), keys (D), values (Dv)
// and the tile's weights (64).
std::size_t forward_shared_floats(const AttentionProblem& p) {
  return tile_floats(p.head_dim) * 2 + tile_floats(p.value_dim) + tile_floats(kRows);
}

// E: output dims per thread (Dv <= 16 E).
template <int E>
__global__ void __launch_bounds__(kThreads) tiled_forward_kernel(AttentionProblem p, float* out, float* lse,
                                                                  float keep_scale) {
  extern __shared__ __align__(16) unsigned char shared[];
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const int D = static_cast<int>(p.head_dim), Dv = static_cast<int>(p.value_dim);
  float* const q_tile = reinterpret_cast<float*>(shared);
  float* const k_tile = q_tile + tile_floats(D);
  float* const v_tile = k_tile + tile_floats(D);
  float* const weights = v_tile + tile_floats(Dv);
  const int tx = static_cast<int>(threadIdx.x % 16), ty = static_cast<int>(threadIdx.x / 16);

  const auto [bh, b, h, i0, keys, values] = query_block<float>(p, kRows);
  const std::int64_t row0 = bh * p.q_len + i0;
  const int rows = static_cast<int>(std::min<std::int64_t>(kRows, p.q_len - i0));

  load_transposed(q_tile, static_cast<const float*>(p.q), row0, rows, D);
  float acc[4][E], running_max[4], total[4];
  std::int64_t row_keys[4];
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    const std::int64_t i = i0 + 4 * ty + a;
    row_keys[a] = i < p.q_len ? keys_of(p, i) : 0;
    running_max[a] = -kInf;
    total[a] = 0;
#pragma unroll
    for (int e = 0; e < E; ++e) acc[a][e] = 0;
  }
  const std::int64_t block_keys = keys_of(p, i0 + rows - 1);
  for (std::int64_t j0 = 0; j0 < block_keys; j0 += kRows) {
    const int n = static_cast<int>(std::min<std::int64_t>(kRows, block_keys - j0));
    __syncthreads();  // the previous tile has been read (and the query tile written)
    load_transposed(k_tile, keys, j0, n, D);
    load_transposed(v_tile, values, j0, n, Dv);
    __syncthreads();
    float s[4][4] = {}, w[4][4];
    tile_products(s, q_tile, k_tile, D, tx, ty);
#pragma unroll
    for (int a = 0; a < 4; ++a) {
      const std::int64_t i = i0 + 4 * ty + a;
      float tile_max = -kInf;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const std::int64_t j = j0 + 4 * tx + c;
        s[a][c] = j < row_keys[a] ? masked_score(p, s[a][c], b, h, i, j) : -kInf;
        tile_max = fmaxf(tile_max, s[a][c]);
      }
      const float new_max = fmaxf(running_max[a], half_warp_max(tile_max));
      if (new_max > running_max[a]) {  // rescale what was accumulated under the old max
        const float scale = expf(running_max[a] - new_max);
        total[a] *= scale;
#pragma unroll
        for (int e = 0; e < E; ++e) acc[a][e] *= scale;
        running_max[a] = new_max;
      }
      float sum = 0;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const bool masked = s[a][c] == -kInf;
        const float weight = masked ? 0.0f : expf(s[a][c] - running_max[a]);
        sum += weight;
        w[a][c] = masked ? 0.0f : weight * keep_factor(p, keep_scale, b, h, i, j0 + 4 * tx + c);
      }
      total[a] += half_warp_sum(sum);
    }
    store_coefficients(weights, w, tx, ty);
    __syncthreads();
    accumulate(acc, weights, v_tile, n, Dv, tx, ty);
  }
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    const bool any = total[a] > 0;  // a row with no key left: NaN output, lse -inf
    const float inv = any ? 1.0f / total[a] : std::numeric_limits<float>::quiet_NaN();
#pragma unroll
    for (int e = 0; e < E; ++e) acc[a][e] *= inv;
    if (tx == 0 && 4 * ty + a < rows) lse[row0 + 4 * ty + a] = any ? running_max[a] + logf(total[a]) : -kInf;
  }
  store_rows(out + row0 * Dv, acc, rows, Dv, tx, ty);
}

template <int E>
void launch_tiled(float* out, float* lse, const AttentionProblem& p, const char* op) {
  const std::size_t bytes = sizeof(float) * forward_shared_floats(p);
  allow_shared_memory(tiled_forward_kernel<E>, bytes, p, op);
  tiled_forward_kernel<E><<<tiles::blocks_for(p.batch * p.heads, p.q_len, op), kThreads, bytes, stream()>>>(
      p, out, lse, keep_scale_of<float>(p));
}

}  // namespace

bool attention_forward_tiled(void* out, void* lse, const AttentionProblem& p, const char* op) {
  if (p.type != ElementType::F32 || p.head_dim > kMaxDim || p.value_dim > kMaxDim) return false;
  auto* o = static_cast<float*>(out);
  auto* l = static_cast<float*>(lse);
  if (p.value_dim <= 64) launch_tiled<4>(o, l, p, op);
  else launch_tiled<8>(o, l, p, op);
  return true;
}

}  // namespace infini::cuda::detail
