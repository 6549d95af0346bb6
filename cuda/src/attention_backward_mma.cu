// Attention backward for bfloat16/float16 on tensor cores (building blocks in
// attention_mma.cuh), the two passes of attention_backward.cu without atomics, score tiles in
// registers:
// - dq: a block takes 64 query rows, writes delta_i = dO_i . o_i (float32) and walks the key
//   tiles: s = q k^T and dP = dO v^T, then per element p = exp(s - lse) and
//   ds = p (dP - delta) in float32, rounded to the input type, and dq += ds k.
// - dk/dv: a block takes 64 key rows of one key/value head and walks the query tiles of every
//   query head of its group, in order: s^T = k q^T and dP^T = v dO^T, then dv += p^T dO and
//   dk += ds^T q.
// Every gradient is accumulated in float32 in a fixed order, so results are reproducible. No
// mask or dropout (attention_runs_in_16_bit).
#include <algorithm>
#include <cstdint>
#include <limits>

#include "attention.cuh"
#include "attention_mma.cuh"
#include "element_types.cuh"
#include "launch.cuh"

namespace infini::cuda::detail {
namespace {

using namespace mma_tiles;

constexpr float kInf = std::numeric_limits<float>::infinity();

// Above D = 64 the own rows are read from shared memory at each use: held in registers next
// to two gradients of (16, D) floats they would not fit.
template <int D>
inline constexpr bool kHoldOwn = D <= 64;

// The dk/dv pass takes a query tile in parts of this many columns: for D = 128 a whole tile's
// score and score-gradient fragments would not fit next to the two gradients.
template <int D>
inline constexpr int kQueryColumns = D > 64 ? 32 : kRows;

// Both passes: two own row tiles, two stages of two tiles of the other side, and two float
// rows (lse and delta) per stage.
template <int D>
constexpr std::size_t backward_shared_bytes() {
  return 6 * kTileBytes<D> + 4 * kRows * sizeof(float);
}

// dq (scaled) and delta for 64 query rows of one (b, h).
template <class T, int D>
__global__ void __launch_bounds__(kThreads) mma_dq_kernel(AttentionProblem p, T* dq, float* delta, const T* grad_out,
                                                          const T* out, const float* lse) {
  extern __shared__ __align__(128) unsigned char shared[];
  auto* const q_tile = reinterpret_cast<std::uint16_t*>(shared);
  auto* const go_tile = q_tile + kTileElements<D>;
  auto* const stages = go_tile + kTileElements<D>;  // stage s: key tile 2 s, value tile 2 s + 1
  float* const row_lse = reinterpret_cast<float*>(stages + 4 * kTileElements<D>);  // log2 units
  float* const row_delta = row_lse + kRows;
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const int g = lane / 4, t = lane % 4;

  const QueryTile q = query_tile(p);
  const std::int64_t b = q.b, h = q.h, bh = q.bh, i0 = q.i0;
  const KeyValueTiles<D> tiles(p, stages, q);
  load_rows_async<D>(q_tile, row_of(static_cast<const std::uint16_t*>(p.q), p.q_rows, b, h, i0), p.q_rows.row, q.rows);
  load_rows_async<D>(go_tile, row_of(grad_out, p.grad_out_rows, b, h, i0), p.grad_out_rows.row, q.rows);
  cp_async_commit();
  if (tiles.count > 0) tiles.load(0);
  cp_async_commit();
  cp_async_wait<1>();  // the query and output-gradient tiles have arrived
  __syncthreads();

  {  // delta and lse of the warp's rows, a lane pair per row
    const int r = lane / 2, half = lane % 2;
    const std::int64_t i = i0 + 16 * warp + r;
    float d = 0;
    if (i < p.q_len) {
      const T* go = reinterpret_cast<const T*>(go_tile + (16 * warp + r) * kPitch<D>) + half * (D / 2);
      const T* o = row_of(out, p.out_rows, b, h, i) + half * (D / 2);
#pragma unroll 8
      for (int e = 0; e < D / 2; ++e) d += widen(go[e]) * widen(o[e]);
    }
    d += __shfl_xor_sync(kAllLanes, d, 1);
    if (half == 0) {
      row_delta[16 * warp + r] = d;
      row_lse[16 * warp + r] = i < p.q_len ? lse[bh * p.q_len + i] * kLog2e : -kInf;
      if (i < p.q_len) delta[bh * p.q_len + i] = d;
    }
  }
  __syncwarp();
  float own_lse[2], own_delta[2];  // this thread's rows g and g + 8 of the warp's 16
  std::int64_t row_keys[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    own_lse[r] = row_lse[16 * warp + g + 8 * r];
    own_delta[r] = row_delta[16 * warp + g + 8 * r];
    const std::int64_t i = i0 + 16 * warp + g + 8 * r;
    row_keys[r] = i < p.q_len ? keys_of(p, i) : 0;
  }
  const std::int64_t warp_keys = keys_of(p, i0 + 16 * warp);  // the fewest any of its rows sees
  const float score_scale = static_cast<float>(p.scale) * kLog2e;
  const OwnRows<D, kHoldOwn<D>> own_queries(q_tile, warp), own_grads(go_tile, warp);
  FragC grad[D / 8];
  zero(grad);

  for (int tile = 0; tile < tiles.count; ++tile) {
    tiles.arrive(tile);
    FragC s[kRows / 8], dp[kRows / 8];
    zero(s);
    zero(dp);
    add_row_products<T, D, kRows>(s, own_queries, tiles.key_tile(tile));
    add_row_products<T, D, kRows>(dp, own_grads, tiles.value_tile(tile));
    const std::int64_t j0 = static_cast<std::int64_t>(tile) * kRows;
    const bool partial = j0 + kRows > warp_keys;
#pragma unroll
    for (int n = 0; n < kRows / 8; ++n)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int r = c / 2;
        const bool kept = own_lse[r] != -kInf && (!partial || j0 + 8 * n + 2 * t + c % 2 < row_keys[r]);
        const float weight = kept ? exp2f(s[n].x[c] * score_scale - own_lse[r]) : 0.0f;
        s[n].x[c] = weight * (dp[n].x[c] - own_delta[r]);  // ds
      }
    add_weighted_rows<T, D, kRows>(grad, s, tiles.key_tile(tile));
    __syncthreads();  // this stage has been read before the next iteration refills it
  }
  const std::int64_t first = i0 + 16 * warp;
  store_rows<T, D>(row_of(dq, p.dq_rows, b, h, first), p.dq_rows.row, p.q_len - first, grad,
                   static_cast<float>(p.scale), q_tile, warp);
}

// dk (scaled) and dv for 64 key rows of one (b, key/value head), over every query head of its
// group.
template <class T, int D>
__global__ void __launch_bounds__(kThreads) mma_dkv_kernel(AttentionProblem p, T* dk, T* dv, const float* delta,
                                                           const T* grad_out, const float* lse) {
  extern __shared__ __align__(128) unsigned char shared[];
  auto* const k_tile = reinterpret_cast<std::uint16_t*>(shared);
  auto* const v_tile = k_tile + kTileElements<D>;
  auto* const stages = v_tile + kTileElements<D>;  // stage s: query tile 2 s, output-gradient tile 2 s + 1
  float* const stage_rows = reinterpret_cast<float*>(stages + 4 * kTileElements<D>);  // per stage lse, delta
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const int g = lane / 4, t = lane % 4;

  const std::int64_t group = blockIdx.x / tiles_of(p.kv_len);  // b * kv_heads + key/value head
  const std::int64_t b = group / p.kv_heads, kv = group % p.kv_heads;
  const std::int64_t j0 = static_cast<std::int64_t>(blockIdx.x % tiles_of(p.kv_len)) * kRows;
  const int n_keys = static_cast<int>(std::min<std::int64_t>(kRows, p.kv_len - j0));
  const std::int64_t group_heads = p.heads / p.kv_heads;
  // Causal: query rows below j0 see none of these keys.
  const std::int64_t first_query = p.causal ? std::min(j0, p.q_len) / kRows * kRows : 0;
  const int query_tiles = static_cast<int>(tiles_of(p.q_len) - first_query / kRows);
  const int steps = static_cast<int>(group_heads) * query_tiles;
  auto query_rows = [&](int step) { return first_query + static_cast<std::int64_t>(step % query_tiles) * kRows; };
  auto load_queries = [&](int step) {
    const std::int64_t h = kv * group_heads + step / query_tiles, bh = b * p.heads + h, i0 = query_rows(step);
    const int n = static_cast<int>(std::min<std::int64_t>(kRows, p.q_len - i0));
    std::uint16_t* stage = stages + (step % 2) * 2 * kTileElements<D>;
    load_rows_async<D>(stage, row_of(static_cast<const std::uint16_t*>(p.q), p.q_rows, b, h, i0), p.q_rows.row, n);
    load_rows_async<D>(stage + kTileElements<D>, row_of(grad_out, p.grad_out_rows, b, h, i0), p.grad_out_rows.row, n);
    float* rows = stage_rows + (step % 2) * 2 * kRows;
    for (int r = static_cast<int>(threadIdx.x); r < kRows; r += kThreads) {
      rows[r] = r < n ? lse[bh * p.q_len + i0 + r] * kLog2e : -kInf;
      rows[kRows + r] = r < n ? delta[bh * p.q_len + i0 + r] : 0.0f;
    }
  };
  load_rows_async<D>(k_tile, row_of(static_cast<const std::uint16_t*>(p.k), p.k_rows, b, kv, j0), p.k_rows.row, n_keys);
  load_rows_async<D>(v_tile, row_of(static_cast<const std::uint16_t*>(p.v), p.v_rows, b, kv, j0), p.v_rows.row, n_keys);
  cp_async_commit();
  if (steps > 0) load_queries(0);
  cp_async_commit();
  cp_async_wait<1>();  // the key and value tiles have arrived
  __syncthreads();

  const float score_scale = static_cast<float>(p.scale) * kLog2e;
  const OwnRows<D, kHoldOwn<D>> own_keys(k_tile, warp), own_values(v_tile, warp);
  FragC grad_k[D / 8], grad_v[D / 8];
  zero(grad_k);
  zero(grad_v);
  std::int64_t key_row[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) key_row[r] = j0 + 16 * warp + g + 8 * r;

  for (int step = 0; step < steps; ++step) {
    if (step + 1 < steps) load_queries(step + 1);
    cp_async_commit();
    cp_async_wait<1>();  // this step's tiles have arrived
    __syncthreads();
    const std::uint16_t* q_tile = stages + (step % 2) * 2 * kTileElements<D>;
    const std::uint16_t* go_tile = q_tile + kTileElements<D>;
    const float* tile_lse = stage_rows + (step % 2) * 2 * kRows;
    const float* tile_delta = tile_lse + kRows;
    const std::int64_t i0 = query_rows(step);
#pragma unroll 1
    for (int c0 = 0; c0 < kRows; c0 += kQueryColumns<D>) {
      constexpr int N = kQueryColumns<D>;
      const std::uint16_t* queries = q_tile + c0 * kPitch<D>;
      const std::uint16_t* grads = go_tile + c0 * kPitch<D>;
      FragC s[N / 8], dp[N / 8];  // s^T and dP^T: own key rows, query columns c0..
      zero(s);
      zero(dp);
      add_row_products<T, D, N>(s, own_keys, queries);
      add_row_products<T, D, N>(dp, own_values, grads);
#pragma unroll
      for (int n = 0; n < N / 8; ++n)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int q = c0 + 8 * n + 2 * t + c % 2;
          const std::int64_t j = key_row[c / 2];
          const float row_lse = tile_lse[q];
          const bool kept = row_lse != -kInf && j < p.kv_len && (!p.causal || j <= i0 + q);
          const float weight = kept ? exp2f(s[n].x[c] * score_scale - row_lse) : 0.0f;
          s[n].x[c] = weight;
          dp[n].x[c] = weight * (dp[n].x[c] - tile_delta[q]);  // ds
        }
      add_weighted_rows<T, D, N>(grad_v, s, grads);
      add_weighted_rows<T, D, N>(grad_k, dp, queries);
    }
    __syncthreads();  // this stage has been read before the next iteration refills it
  }
  const std::int64_t first = j0 + 16 * warp;
  store_rows<T, D>(row_of(dk, p.dk_rows, b, kv, first), p.dk_rows.row, p.kv_len - first, grad_k,
                   static_cast<float>(p.scale), k_tile, warp);
  store_rows<T, D>(row_of(dv, p.dv_rows, b, kv, first), p.dv_rows.row, p.kv_len - first, grad_v, 1.0f, v_tile, warp);
}

}  // namespace

bool attention_backward_mma(void* dq, void* dk, void* dv, void* delta, const void* grad_out, const void* out,
                            const void* lse, const AttentionProblem& p, const char* op) {
  if (!attention_runs_in_16_bit(p)) return false;
  if (!rows_aligned(p.q, p.q_rows) || !rows_aligned(p.k, p.k_rows) || !rows_aligned(p.v, p.v_rows) ||
      !rows_aligned(out, p.out_rows) || !rows_aligned(grad_out, p.grad_out_rows) || !rows_aligned(dq, p.dq_rows) ||
      !rows_aligned(dk, p.dk_rows) || !rows_aligned(dv, p.dv_rows))
    throw CudaError(std::string(op) + ": the tensor-core kernels need 16-byte aligned rows");
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
