// Internal to the 16-bit tensor-core attention kernels (attention_{forward,backward}_mma.cu):
// the block shape, tile loads and the warp's tile products on WMMA 16x16x16 fragments
// (bfloat16/float16 operands, float32 accumulation).
//
// A block of 4 warps takes 64 rows of its own side (queries forward and for dq, keys for
// dk/dv); warp w owns rows 16 w .. 16 w + 15. The other side is walked in tiles of 64 rows.
// Row tiles (64 rows of D 16-bit values) are stored row-major with a pitch of D + 8 values,
// which keeps every fragment pointer 32-byte aligned and staggers rows across banks. Each
// warp has float32 scratch (16 x max(64, D)) for the pair values and products it works on
// per element, and a 16-bit weight tile (16 x 64) that feeds its next products. In the
// per-element work lane l takes own row l / 2 and half l % 2 of the columns.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cstdint>

#include "attention.cuh"
#include "element_types.cuh"

namespace infini::cuda::detail::mma_tiles {

namespace wmma = nvcuda::wmma;

inline constexpr int kRows = 64;  // rows per tile, either side
inline constexpr int kWarps = 4;  // 16 own rows each
inline constexpr int kThreads = kWarps * 32;
inline constexpr int kWeightPitch = kRows + 8;  // 16-bit (16, 64) weight tiles
inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;

template <int D>
inline constexpr int kPitch = D + 8;  // 16-bit row tiles
template <int D>
inline constexpr int kScratchPitch = (D > kRows ? D : kRows) + 4;  // float (16, max(64, D)) scratch

template <class T>
using RowA = wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major>;
template <class T>
using RowB = wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major>;
template <class T>
using ColB = wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major>;
using Acc = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

// Bytes of one row tile / of one warp's float scratch / of one weight tile.
template <int D>
inline constexpr std::size_t kTileBytes = sizeof(std::uint16_t) * kRows * kPitch<D>;
template <int D>
inline constexpr std::size_t kScratchBytes = sizeof(float) * 16 * kScratchPitch<D>;
inline constexpr std::size_t kWeightBytes = sizeof(std::uint16_t) * 16 * kWeightPitch;

// Copies rows [row0, row0 + n) of a contiguous (.., D) matrix into a row tile, in 16-byte
// pieces, and zeroes tile rows n..63 (their products must be finite: they meet zero weights).
template <class T, int D>
__device__ void load_rows(T* tile, const T* src, std::int64_t row0, int n) {
  constexpr int kPieces = D / 8;  // 8 values per 16 bytes
  const uint4* from = reinterpret_cast<const uint4*>(src + row0 * D);
  for (int e = static_cast<int>(threadIdx.x); e < kRows * kPieces; e += kThreads) {
    const int r = e / kPieces, c = e % kPieces;
    *reinterpret_cast<uint4*>(tile + r * kPitch<D> + c * 8) = r < n ? from[r * kPieces + c] : make_uint4(0, 0, 0, 0);
  }
}

// The warp's 16 own rows (own points at the first, in a row tile) as D / 16 fragments, loaded
// once and kept in registers for every tile of the other side.
template <class T, int D>
struct OwnRows {
  RowA<T> part[D / 16];
  __device__ explicit OwnRows(const T* own) {
#pragma unroll
    for (int k = 0; k < D / 16; ++k) wmma::load_matrix_sync(part[k], own + k * 16, kPitch<D>);
  }
};

// out[r][c] = sum_d own[r][d] other[c][d] for the warp's 16 own rows and the 64 rows of the
// other tile: a (16, 64) float block at out (scratch pitch).
template <class T, int D>
__device__ void pair_products(float* out, const OwnRows<T, D>& own, const T* other) {
#pragma unroll
  for (int c = 0; c < kRows / 16; ++c) {
    Acc acc;
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll
    for (int k = 0; k < D / 16; ++k) {
      ColB<T> b;
      wmma::load_matrix_sync(b, other + c * 16 * kPitch<D> + k * 16, kPitch<D>);
      wmma::mma_sync(acc, own.part[k], b, acc);
    }
    wmma::store_matrix_sync(out + c * 16, acc, kScratchPitch<D>, wmma::mem_row_major);
  }
}
// The same with the own rows read from their row tile for this call only (fewer live
// registers across the caller's loop).
template <class T, int D>
__device__ void pair_products(float* out, const T* own, const T* other) {
  pair_products<T, D>(out, OwnRows<T, D>(own), other);
}

// acc[c] += weights (16, 64) x rows (64, D), output dims 16 c .. 16 c + 15; the 64 rows are
// added in four steps of 16, in order.
template <class T, int D>
__device__ void add_weighted_rows(Acc (&acc)[D / 16], const T* weights, const T* rows) {
#pragma unroll
  for (int k = 0; k < kRows / 16; ++k) {
    RowA<T> a;
    wmma::load_matrix_sync(a, weights + k * 16, kWeightPitch);
#pragma unroll
    for (int c = 0; c < D / 16; ++c) {
      RowB<T> b;
      wmma::load_matrix_sync(b, rows + k * 16 * kPitch<D> + c * 16, kPitch<D>);
      wmma::mma_sync(acc[c], a, b, acc[c]);
    }
  }
}

// The same product added to (16, D) float sums kept in the warp's shared memory (scratch
// pitch), one output block of 16 dims at a time: fewer live registers.
template <class T, int D>
__device__ void add_weighted_rows_in_place(float* sums, const T* weights, const T* rows) {
#pragma unroll 1
  for (int c = 0; c < D / 16; ++c) {
    Acc acc;
    wmma::load_matrix_sync(acc, sums + c * 16, kScratchPitch<D>, wmma::mem_row_major);
#pragma unroll
    for (int k = 0; k < kRows / 16; ++k) {
      RowA<T> a;
      RowB<T> b;
      wmma::load_matrix_sync(a, weights + k * 16, kWeightPitch);
      wmma::load_matrix_sync(b, rows + k * 16 * kPitch<D> + c * 16, kPitch<D>);
      wmma::mma_sync(acc, a, b, acc);
    }
    wmma::store_matrix_sync(sums + c * 16, acc, kScratchPitch<D>, wmma::mem_row_major);
  }
}

template <int D>
__device__ void zero(Acc (&acc)[D / 16]) {
#pragma unroll
  for (int c = 0; c < D / 16; ++c) wmma::fill_fragment(acc[c], 0.0f);
}

// The (16, D) accumulators into the warp's scratch, row-major.
template <int D>
__device__ void store(float* scratch, const Acc (&acc)[D / 16]) {
#pragma unroll
  for (int c = 0; c < D / 16; ++c) wmma::store_matrix_sync(scratch + c * 16, acc[c], kScratchPitch<D>, wmma::mem_row_major);
}

// Writes scratch row r (D floats, times `factor`) as row `row` of a contiguous (.., D)
// matrix; the lane pair of row r writes half each.
template <class T, int D>
__device__ void write_row_half(T* dst, std::int64_t row, const float* scratch, int r, int half, float factor) {
  const float* from = scratch + r * kScratchPitch<D> + half * (D / 2);
  T* to = dst + row * D + half * (D / 2);
#pragma unroll 8
  for (int e = 0; e < D / 2; ++e) to[e] = convert<T>(from[e] * factor);
}

// Calls f.template operator()<D>() for the head dims the kernels are built for.
template <class F>
bool with_head_dim(std::int64_t d, F&& f) {
  switch (d) {
    case 16: f.template operator()<16>(); return true;
    case 32: f.template operator()<32>(); return true;
    case 64: f.template operator()<64>(); return true;
    case 128: f.template operator()<128>(); return true;
    default: return false;
  }
}

// Calls f(T{}) with T __nv_bfloat16 or __half.
template <class F>
void visit_16_bit(ElementType type, F&& f) {
  if (type == ElementType::BF16) f(__nv_bfloat16{});
  else f(__half{});
}

// Tiles of 64 rows over `rows` rows.
__host__ __device__ inline std::int64_t tiles_of(std::int64_t rows) { return (rows + kRows - 1) / kRows; }

// The query rows of this block (forward and dq pass): (b, h) with bh = b H + h, `rows` rows
// from i0 on, and the keys and values (kv_len, D) of h's key/value head.
template <class T, int D>
struct QueryTile {
  std::int64_t bh, i0;
  int rows;
  const T* keys;
  const T* values;
};
template <class T, int D>
__device__ QueryTile<T, D> query_tile(const AttentionProblem& p) {
  const std::int64_t bh = blockIdx.x / tiles_of(p.q_len), b = bh / p.heads, h = bh % p.heads;
  const std::int64_t kv_head = b * p.kv_heads + h / (p.heads / p.kv_heads);
  const std::int64_t i0 = static_cast<std::int64_t>(blockIdx.x % tiles_of(p.q_len)) * kRows;
  return {bh, i0, static_cast<int>(kRows < p.q_len - i0 ? kRows : p.q_len - i0),
          static_cast<const T*>(p.k) + kv_head * p.kv_len * D, static_cast<const T*>(p.v) + kv_head * p.kv_len * D};
}

// One launch's grid: `groups` groups of `rows` rows, a block per tile; block x takes tile
// x % tiles_of(rows) of group x / tiles_of(rows).
inline unsigned blocks_for(std::int64_t groups, std::int64_t rows, const char* op) {
  const std::int64_t blocks = groups * tiles_of(rows);
  if (blocks > 0x7fffffff) throw CudaError(std::string(op) + ": too many rows for one launch");
  return static_cast<unsigned>(blocks);
}

}  // namespace infini::cuda::detail::mma_tiles
