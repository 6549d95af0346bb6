// Internal to the 16-bit tensor-core attention kernels (attention_{forward,backward}_mma.cu):
// FlashAttention-2's building blocks on mma.sync m16n8k16 (bfloat16/float16 operands, float32
// accumulation) with the score tiles kept in registers.
//
// A block of kWarps warps takes kRows rows of its own side (queries forward and for dq, keys
// for dk/dv); warp w owns rows 16 w .. 16 w + 15. The other side is walked in tiles of kRows
// rows, loaded with cp.async into shared memory (two stages: the next tile streams in while
// this one is used). Row tiles (kRows rows of D 16-bit values) are stored row-major with a
// pitch of D + 8 values: 16-byte rows for cp.async, and the 8 rows that one ldmatrix reads
// fall on distinct banks.
//
// Fragments of mma.m16n8k16, g = lane / 4, t = lane % 4:
// - A (16 x 16, rows m, columns k): x[0] (g, 2t..2t+1), x[1] (g+8, 2t..), x[2] (g, 2t+8..),
//   x[3] (g+8, 2t+8..), two 16-bit values per register, the lower column in the low half;
// - B (16 x 8, rows k, columns n): b0 (k 2t..2t+1, n g), b1 (k 2t+8..2t+9, n g);
// - C (16 x 8 float): x[0..1] (g, 2t..2t+1), x[2..3] (g+8, 2t..2t+1).
// Two C tiles side by side (columns 0..7 and 8..15) are, rounded, the A fragment of the next
// product: how score tiles become weights without leaving registers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "attention.cuh"

namespace infini::cuda::detail::mma_tiles {

inline constexpr int kRows = 64;  // rows per tile, either side
inline constexpr int kWarps = 4;  // 16 own rows each
inline constexpr int kThreads = kWarps * 32;
inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;

template <int D>
inline constexpr int kPitch = D + 8;  // 16-bit row tiles
template <int D>
inline constexpr int kTileElements = kRows * kPitch<D>;
template <int D>
inline constexpr std::size_t kTileBytes = sizeof(std::uint16_t) * kTileElements<D>;

struct FragA {
  unsigned x[4];
};
struct FragC {
  float x[4];
};

// c += a b for one 16 x 8 output tile; b0, b1 as in the header.
template <class T>
__device__ void mma(FragC& c, const FragA& a, unsigned b0, unsigned b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c.x[0]), "+f"(c.x[1]), "+f"(c.x[2]), "+f"(c.x[3])
        : "r"(a.x[0]), "r"(a.x[1]), "r"(a.x[2]), "r"(a.x[3]), "r"(b0), "r"(b1));
  } else {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c.x[0]), "+f"(c.x[1]), "+f"(c.x[2]), "+f"(c.x[3])
        : "r"(a.x[0]), "r"(a.x[1]), "r"(a.x[2]), "r"(a.x[3]), "r"(b0), "r"(b1));
  }
}

__device__ inline unsigned shared_address(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }

// Four 8 x 8 matrices of 16-bit values; lane l gives the address of a row of matrix l / 8.
__device__ inline void ldmatrix_x4(unsigned (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row)));
}
__device__ inline void ldmatrix_x4_trans(unsigned (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row)));
}

// The A fragment of rows row0.. and columns col0.. of a row tile.
template <int D>
__device__ FragA load_a(const std::uint16_t* tile, int row0, int col0) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  FragA a;
  ldmatrix_x4(a.x, tile + (row0 + lane % 8 + 8 * (lane / 8 % 2)) * kPitch<D> + col0 + 8 * (lane / 16));
  return a;
}

// B fragments when the tile's rows are the n side (B = tile^T, as keys in q k^T): b[0], b[1]
// for columns n0..n0+7 and b[2], b[3] for n0+8..n0+15, k from k0 (tile columns).
template <int D>
__device__ void load_b_rows_n(unsigned (&b)[4], const std::uint16_t* tile, int n0, int k0) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  ldmatrix_x4(b, tile + (n0 + lane % 8 + 8 * (lane / 16)) * kPitch<D> + k0 + 8 * (lane / 8 % 2));
}

// B fragments when the tile's rows are the k side (B = tile, as values in p v): b[0], b[1] for
// tile columns n0..n0+7 and b[2], b[3] for n0+8..n0+15, k = tile rows from k0.
template <int D>
__device__ void load_b_rows_k(unsigned (&b)[4], const std::uint16_t* tile, int k0, int n0) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  ldmatrix_x4_trans(b, tile + (k0 + lane % 8 + 8 * (lane / 8 % 2)) * kPitch<D> + n0 + 8 * (lane / 16));
}

// Two float32 values rounded to T and packed, the first in the low half.
template <class T>
__device__ unsigned pack(float lo, float hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const unsigned*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const unsigned*>(&v);
  }
}

// The A fragment (16 x 16, columns 16 kk..) made of C tiles 2 kk and 2 kk + 1, rounded to T.
template <class T>
__device__ FragA weights_fragment(const FragC* c, int kk) {
  const FragC& lo = c[2 * kk];
  const FragC& hi = c[2 * kk + 1];
  return {{pack<T>(lo.x[0], lo.x[1]), pack<T>(lo.x[2], lo.x[3]), pack<T>(hi.x[0], hi.x[1]), pack<T>(hi.x[2], hi.x[3])}};
}

// acc (16 x N) += own (16 x D) other^T, other a tile whose rows are the N columns; own(k) gives
// the A fragment of own columns 16 k.. (held in registers, or read from shared memory).
template <class T, int D, int N, class Own>
__device__ void add_row_products(FragC (&acc)[N / 8], const Own& own, const std::uint16_t* other) {
#pragma unroll
  for (int k = 0; k < D / 16; ++k) {
    const FragA a = own(k);
#pragma unroll
    for (int n = 0; n < N / 16; ++n) {
      unsigned b[4];
      load_b_rows_n<D>(b, other, 16 * n, 16 * k);
      mma<T>(acc[2 * n], a, b[0], b[1]);
      mma<T>(acc[2 * n + 1], a, b[2], b[3]);
    }
  }
}

// The warp's own 16 rows of a row tile as A fragments: held in registers (kHold, loaded once)
// or read from the tile at each use (fewer live registers for large D).
template <int D, bool kHold>
struct OwnRows {
  FragA held[kHold ? D / 16 : 1];
  const std::uint16_t* tile;
  int warp;
  __device__ OwnRows(const std::uint16_t* tile_, int warp_) : tile(tile_), warp(warp_) {
    if constexpr (kHold) {
#pragma unroll
      for (int k = 0; k < D / 16; ++k) held[k] = load_a<D>(tile, 16 * warp, 16 * k);
    }
  }
  __device__ FragA operator()(int k) const {
    if constexpr (kHold) return held[k];
    else return load_a<D>(tile, 16 * warp, 16 * k);
  }
};

// acc (16 x D) += weights (16 x N, C tiles rounded to T) rows, rows a tile of N rows of D.
template <class T, int D, int N>
__device__ void add_weighted_rows(FragC (&acc)[D / 8], const FragC (&weights)[N / 8], const std::uint16_t* rows) {
#pragma unroll
  for (int kk = 0; kk < N / 16; ++kk) {
    const FragA a = weights_fragment<T>(weights, kk);
#pragma unroll
    for (int n = 0; n < D / 16; ++n) {
      unsigned b[4];
      load_b_rows_k<D>(b, rows, 16 * kk, 16 * n);
      mma<T>(acc[2 * n], a, b[0], b[1]);
      mma<T>(acc[2 * n + 1], a, b[2], b[3]);
    }
  }
}

template <int N>
__device__ void zero(FragC (&acc)[N]) {
#pragma unroll
  for (int n = 0; n < N; ++n) acc[n] = {{0, 0, 0, 0}};
}

__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most `pending` committed groups of this thread are in flight.
template <int pending>
__device__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(pending) : "memory");
}

// Starts copying rows 0..n-1 of a (.., D) matrix (first row at src, rows `stride` values
// apart) into a row tile, and zeroes tile rows n..kRows-1 (their products meet zero weights
// and must be finite). All threads of the block take part.
template <int D>
__device__ void load_rows_async(std::uint16_t* tile, const void* src, std::int64_t stride, int n) {
  constexpr int kPieces = D / 8;  // 16 bytes each
  for (int e = static_cast<int>(threadIdx.x); e < kRows * kPieces; e += kThreads) {
    const int r = e / kPieces, c = e % kPieces;
    const bool valid = r < n;
    const auto* from = static_cast<const std::uint16_t*>(src) + (valid ? r * stride + c * 8 : 0);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(tile + r * kPitch<D> + c * 8)),
                 "l"(from), "r"(valid ? 16 : 0)
                 : "memory");
  }
}

// Row (b, h, i) of an operand laid out as `rows` says (attention.h).
template <class P>
__device__ P* row_of(P* base, const RowLayout& rows, std::int64_t b, std::int64_t h, std::int64_t i) {
  return base + b * rows.batch + h * rows.head + i * rows.row;
}

// Writes the warp's 16 x D float sums times `factor` as rows 0..15 of dst (rows `stride`
// values apart; rows >= count skipped), through the warp's own 16 rows of `stage` (a row tile
// no other warp reads now) so that global writes are 16 bytes wide.
template <class T, int D>
__device__ void store_rows(T* dst, std::int64_t stride, std::int64_t count, const FragC (&acc)[D / 8], float factor,
                           std::uint16_t* stage, int warp) {
  const int lane = static_cast<int>(threadIdx.x % 32), g = lane / 4, t = lane % 4;
  std::uint16_t* own = stage + 16 * warp * kPitch<D>;
  __syncwarp();  // the warp's reads of these rows are done
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    *reinterpret_cast<unsigned*>(own + g * kPitch<D> + 8 * n + 2 * t) =
        pack<T>(acc[n].x[0] * factor, acc[n].x[1] * factor);
    *reinterpret_cast<unsigned*>(own + (g + 8) * kPitch<D> + 8 * n + 2 * t) =
        pack<T>(acc[n].x[2] * factor, acc[n].x[3] * factor);
  }
  __syncwarp();
  constexpr int kPieces = D / 8;
  for (int e = lane; e < 16 * kPieces; e += 32) {
    const int r = e / kPieces, c = e % kPieces;
    if (r < count)
      *reinterpret_cast<uint4*>(dst + r * stride + c * 8) =
          *reinterpret_cast<const uint4*>(own + r * kPitch<D> + c * 8);
  }
}

// Whether every row of an operand starts 16 bytes aligned (the kernels copy rows in 16-byte
// pieces): an aligned pointer and strides that are multiples of 8 values.
inline bool rows_aligned(const void* base, const RowLayout& rows) {
  return reinterpret_cast<std::uintptr_t>(base) % 16 == 0 && rows.batch % 8 == 0 && rows.head % 8 == 0 &&
         rows.row % 8 == 0;
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

// Tiles of kRows rows over `rows` rows.
__host__ __device__ inline std::int64_t tiles_of(std::int64_t rows) { return (rows + kRows - 1) / kRows; }

// One launch's grid: `groups` groups of `rows` rows, a block per tile; block x takes tile
// x % tiles_of(rows) of group x / tiles_of(rows).
inline unsigned blocks_for(std::int64_t groups, std::int64_t rows, const char* op) {
  const std::int64_t blocks = groups * tiles_of(rows);
  if (blocks > 0x7fffffff) throw CudaError(std::string(op) + ": too many rows for one launch");
  return static_cast<unsigned>(blocks);
}

// The query rows of this block (forward and dq pass): (b, h), bh = b H + h, `rows` rows from
// i0 on, and the first key and value rows of h's key/value head.
struct QueryTile {
  std::int64_t b, h, bh, i0;
  int rows;
  const std::uint16_t* keys;
  const std::uint16_t* values;
};
__device__ inline QueryTile query_tile(const AttentionProblem& p) {
  const std::int64_t bh = blockIdx.x / tiles_of(p.q_len), b = bh / p.heads, h = bh % p.heads;
  const std::int64_t kv_head = h / (p.heads / p.kv_heads);
  const std::int64_t i0 = static_cast<std::int64_t>(blockIdx.x % tiles_of(p.q_len)) * kRows;
  return {b, h, bh, i0, static_cast<int>(kRows < p.q_len - i0 ? kRows : p.q_len - i0),
          row_of(static_cast<const std::uint16_t*>(p.k), p.k_rows, b, kv_head, 0),
          row_of(static_cast<const std::uint16_t*>(p.v), p.v_rows, b, kv_head, 0)};
}

// The key and value tiles a query block walks (forward and dq pass): the keys its last row
// sees, streamed through two stages of (key tile, value tile) at `stages`.
template <int D>
struct KeyValueTiles {
  const AttentionProblem& p;  // the kernel's parameter
  std::uint16_t* stages;
  const std::uint16_t* keys;
  const std::uint16_t* values;
  std::int64_t block_keys;
  int count;
  __device__ KeyValueTiles(const AttentionProblem& p_, std::uint16_t* stages_, const QueryTile& q)
      : p(p_), stages(stages_), keys(q.keys), values(q.values), block_keys(keys_of(p_, q.i0 + q.rows - 1)),
        count(static_cast<int>(tiles_of(block_keys))) {}
  __device__ const std::uint16_t* key_tile(int tile) const { return stages + (tile % 2) * 2 * kTileElements<D>; }
  __device__ const std::uint16_t* value_tile(int tile) const { return key_tile(tile) + kTileElements<D>; }
  // Starts copying tile `tile` into its stage (every thread of the block takes part).
  __device__ void load(int tile) const {
    const std::int64_t j0 = static_cast<std::int64_t>(tile) * kRows;
    const int n = static_cast<int>(block_keys - j0 < kRows ? block_keys - j0 : kRows);
    std::uint16_t* stage = stages + (tile % 2) * 2 * kTileElements<D>;
    load_rows_async<D>(stage, keys + j0 * p.k_rows.row, p.k_rows.row, n);
    load_rows_async<D>(stage + kTileElements<D>, values + j0 * p.v_rows.row, p.v_rows.row, n);
  }
  // Starts the next tile's copy and waits until tile `tile` has arrived, for the whole block.
  __device__ void arrive(int tile) const {
    if (tile + 1 < count) load(tile + 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
  }
};

}  // namespace infini::cuda::detail::mma_tiles
