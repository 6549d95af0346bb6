// Internal to the float32 tiled attention kernels (attention_{forward,backward}_tiled.cu):
// the block shape and the shared-memory tile products.
//
// A block of 256 threads takes 64 rows of its own side (queries forward and for dq, keys
// for dk/dv) and walks the other side in tiles of 64 rows. Thread (ty, tx) = (t / 16, t % 16)
// holds a 4 x 4 block of each tile's pair values in registers: own rows 4 ty + a, other rows
// 4 tx + c; and a 4 x E block of its own rows' results: dims tx + 16 e. The 16 lanes of a
// half warp share ty, so a reduction over the other side's rows is a half-warp butterfly.
// Row tiles are stored transposed in shared memory, element (row r, dim d) at
// [d * kPitch + r], so that a thread reads its 4 rows of one dim as one float4.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "attention.cuh"

namespace infini::cuda::detail::tiles {

inline constexpr int kRows = 64;       // rows per tile, either side
inline constexpr int kThreads = 256;
inline constexpr int kPitch = kRows + 4;  // keeps float4 alignment; spreads the dims over banks
inline constexpr int kMaxDim = 128;       // D and Dv the tiled kernels take

// Floats of a transposed tile of `dims` dims.
__host__ __device__ inline std::size_t tile_floats(std::int64_t dims) {
  return static_cast<std::size_t>(dims) * kPitch;
}

// Copies rows [row0, row0 + n) of a contiguous (.., width) matrix into the transposed tile.
// Rows n.. of the tile keep what they held: callers never use the values computed from them.
__device__ inline void load_transposed(float* tile, const float* src, std::int64_t row0, int n, int width) {
  const float* from = src + row0 * width;
  for (int e = static_cast<int>(threadIdx.x); e < n * width; e += kThreads)
    tile[e % width * kPitch + e / width] = from[e];
}

// s[a][c] += x[4 ty + a] . y[4 tx + c] over `dims` dims, x and y transposed tiles.
__device__ inline void tile_products(float (&s)[4][4], const float* x, const float* y, int dims, int tx, int ty) {
  for (int d = 0; d < dims; ++d) {
    const float4 xa = *reinterpret_cast<const float4*>(x + d * kPitch + 4 * ty);
    const float4 yc = *reinterpret_cast<const float4*>(y + d * kPitch + 4 * tx);
    const float xs[4] = {xa.x, xa.y, xa.z, xa.w}, ys[4] = {yc.x, yc.y, yc.z, yc.w};
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
      for (int c = 0; c < 4; ++c) s[a][c] += xs[a] * ys[c];
  }
}

// Stores the thread's coefficients coef[a][c] of (own row 4 ty + a, other row 4 tx + c) into
// the transposed coefficient tile (other row c's coefficients at [c * kPitch + own row]).
__device__ inline void store_coefficients(float* tile, const float (&coef)[4][4], int tx, int ty) {
#pragma unroll
  for (int c = 0; c < 4; ++c)
    *reinterpret_cast<float4*>(tile + (4 * tx + c) * kPitch + 4 * ty) =
        make_float4(coef[0][c], coef[1][c], coef[2][c], coef[3][c]);
}

// acc[a][e] += sum_{c < n} coef(own row 4 ty + a, other row c) * rows(other row c, dim
// tx + 16 e) for dims below `width`, in ascending c; rows is a transposed tile. A zero
// coefficient (a pair left out) adds nothing, even against an infinite element.
template <int E>
__device__ void accumulate(float (&acc)[4][E], const float* coef, const float* rows, int n, int width, int tx,
                           int ty) {
  for (int c = 0; c < n; ++c) {
    const float4 wa = *reinterpret_cast<const float4*>(coef + c * kPitch + 4 * ty);
    const float w[4] = {wa.x, wa.y, wa.z, wa.w};
    float x[E];
#pragma unroll
    for (int e = 0; e < E; ++e) x[e] = tx + 16 * e < width ? rows[(tx + 16 * e) * kPitch + c] : 0.0f;
#pragma unroll
    for (int a = 0; a < 4; ++a)
      if (w[a] != 0)
#pragma unroll
        for (int e = 0; e < E; ++e) acc[a][e] = fmaf(w[a], x[e], acc[a][e]);
  }
}

// Writes the thread's results for own rows 4 ty + a < rows to dst, a (.., width) matrix
// whose row 0 is own row 0.
template <int E>
__device__ void store_rows(float* dst, const float (&acc)[4][E], int rows, int width, int tx, int ty) {
#pragma unroll
  for (int a = 0; a < 4; ++a)
#pragma unroll
    for (int e = 0; e < E; ++e)
      if (4 * ty + a < rows && tx + 16 * e < width)
        dst[static_cast<std::int64_t>(4 * ty + a) * width + tx + 16 * e] = acc[a][e];
}

// Reductions over the 16 lanes of a half warp (all 32 lanes take part); the same bits on
// every lane.
__device__ inline float half_warp_max(float x) {
  for (unsigned o = 8; o > 0; o /= 2) x = fmaxf(x, __shfl_xor_sync(kAllLanes, x, o));
  return x;
}
__device__ inline float half_warp_sum(float x) {
  for (unsigned o = 8; o > 0; o /= 2) x += __shfl_xor_sync(kAllLanes, x, o);
  return x;
}

// One launch's grid: `groups` groups of `rows` rows, kRows per block.
inline unsigned blocks_for(std::int64_t groups, std::int64_t rows, const char* op) {
  const std::int64_t blocks = groups * ((rows + kRows - 1) / kRows);
  if (blocks > 0x7fffffff) throw CudaError(std::string(op) + ": too many rows for one launch");
  return static_cast<unsigned>(blocks);
}

}  // namespace infini::cuda::detail::tiles
