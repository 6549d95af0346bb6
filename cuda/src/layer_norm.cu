// Fused layer norm: a warp per row, each row read in 32-lane strides (coalesced) and summed
// with a fixed butterfly, so results are reproducible. Statistics and sums are taken in the
// element type (float32 or float64); float32 rows may write y, and read dy, in float16 or
// bfloat16 (autocast's input to the next product, and its gradient).
//
// The backward adds a residual's gradient to dx where given (dx_add: pre-norm blocks, whose
// input also feeds the residual sum). Its affine gradients are column sums over fixed chunks
// of 32 rows, then over the chunks:
// - A block of 8 warps takes a chunk, 4 rows per warp: each warp writes its rows' dx and adds
//   their terms of the sums (dy * x_hat, dy) to a shared slice of its own, then the block adds
//   the 8 slices in warp order. The rows are read from global memory once (GPT-2's 768
//   columns need 48 KiB of slices per block).
// - Rows too wide for the slices take two kernels: a warp per row for dx, and a thread per
//   column for each chunk's sums, reading the rows again.
// - The chunks' sums are added by a block per 32 columns whose 16 thread rows each take every
//   16th chunk in order, then add their 16 results in order (GPT-2's 16384 rows are 512
//   chunks: one thread per column adding them all took most of the backward's time).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "element_types.cuh"
#include "infini/cuda/layer_norm.h"
#include "infini/math/rounded.h"
#include "launch.cuh"
#include "strided.cuh"
#include "warp_shuffle.cuh"

namespace infini::cuda {
namespace {

constexpr int kRowsPerBlock = 8;  // warps per block, a row each
constexpr int kChunkRows = 32;
constexpr int kChunkRowsPerWarp = kChunkRows / kRowsPerBlock;  // in backward_fused_kernel
constexpr int kColumnThreads = 256;
constexpr int kSumColumns = 32;  // column_sums_kernel's block: 32 columns x 16 chunk strides
constexpr int kSumStrides = 16;
using detail::warp_sum;

__device__ inline double rsqrt_of(double x) { return rsqrt(x); }
__device__ inline float rsqrt_of(float x) { return 1.0f / sqrtf(x); }

template <class T, class Y>
__global__ void forward_kernel(Y* y, T* mean, T* rstd, const T* x, const T* weight, const T* bias, std::int64_t rows,
                               std::int64_t cols, T eps) {
  const std::int64_t i = std::int64_t{blockIdx.x} * kRowsPerBlock + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (i >= rows) return;
  const T* row = x + i * cols;
  T sum = 0;
  for (std::int64_t j = lane; j < cols; j += 32) sum += row[j];
  const T m = warp_sum(sum) / static_cast<T>(cols);
  T squares = 0;
  for (std::int64_t j = lane; j < cols; j += 32) {
    const T d = row[j] - m;
    squares += d * d;
  }
  const T r = rsqrt_of(warp_sum(squares) / static_cast<T>(cols) + eps);
  if (lane == 0) {
    mean[i] = m;
    rstd[i] = r;
  }
  Y* out = y + i * cols;
  for (std::int64_t j = lane; j < cols; j += 32) {
    T v = (row[j] - m) * r;
    if (weight != nullptr) v *= weight[j];
    if (bias != nullptr) v += bias[j];
    out[j] = detail::convert<Y>(v);
  }
}

// dx of row i, by one warp, plus dx_add's row where dx_add is not null (a separate add). With
// Sums, also adds the row's dy * x_hat and dy to w_sum[j] and b_sum[j] (the lane's columns).
template <bool Sums, class T, class G>
__device__ void backward_row(T* dx, const G* dy, const T* dx_add, const T* x, const T* mean, const T* rstd,
                             const T* weight, std::int64_t i, std::int64_t cols, T* w_sum, T* b_sum) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const G* g_row = dy + i * cols;
  const T* x_row = x + i * cols;
  const T m = mean[i], r = rstd[i];
  T g_sum = 0, gx_sum = 0;
  for (std::int64_t j = lane; j < cols; j += 32) {
    const T d = detail::widen(g_row[j]), g = weight != nullptr ? d * weight[j] : d;
    g_sum += g;
    gx_sum += g * ((x_row[j] - m) * r);
  }
  const T g_mean = warp_sum(g_sum) / static_cast<T>(cols), gx_mean = warp_sum(gx_sum) / static_cast<T>(cols);
  T* out = dx + i * cols;
  const T* add_row = dx_add != nullptr ? dx_add + i * cols : nullptr;
  for (std::int64_t j = lane; j < cols; j += 32) {
    const T d = detail::widen(g_row[j]), x_hat = (x_row[j] - m) * r;
    const T g = weight != nullptr ? d * weight[j] : d;
    const T value = r * (g - g_mean - x_hat * gx_mean);
    out[j] = add_row != nullptr ? math::add_rn(add_row[j], value) : value;
    if constexpr (Sums) {
      w_sum[j] += d * x_hat;
      b_sum[j] += d;
    }
  }
}

template <class T, class G>
__global__ void backward_rows_kernel(T* dx, const G* dy, const T* dx_add, const T* x, const T* mean, const T* rstd,
                                     const T* weight, std::int64_t rows, std::int64_t cols) {
  const std::int64_t i = std::int64_t{blockIdx.x} * kRowsPerBlock + threadIdx.x / 32;
  T* const none = nullptr;
  if (i < rows) backward_row<false>(dx, dy, dx_add, x, mean, rstd, weight, i, cols, none, none);
}

// Shared memory of backward_fused_kernel: a slice of 2 * cols sums per warp.
template <class T>
std::size_t fused_shared_bytes(std::int64_t cols) {
  return static_cast<std::size_t>(kRowsPerBlock) * 2 * static_cast<std::size_t>(cols) * sizeof(T);
}

// dx, and partial[chunk][0][j] = sum of dy * x_hat, partial[chunk][1][j] = sum of dy over
// the chunk's rows: block c takes chunks c, c + gridDim.x, ...; warp w its rows 4 w .. 4 w + 3
// in order, summed in its slice; then the slices are added in warp order.
template <class T, class G>
__global__ void __launch_bounds__(kRowsPerBlock * 32)
    backward_fused_kernel(T* dx, T* partial, const G* dy, const T* dx_add, const T* x, const T* mean, const T* rstd,
                          const T* weight, std::int64_t rows, std::int64_t cols) {
  extern __shared__ __align__(16) unsigned char shared[];
  T* const slices = reinterpret_cast<T*>(shared);  // [warp][2][cols]
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  T* const w_sum = slices + std::int64_t{2} * warp * cols;
  T* const b_sum = w_sum + cols;
  for (std::int64_t chunk = blockIdx.x; chunk * kChunkRows < rows; chunk += gridDim.x) {
    for (std::int64_t j = lane; j < cols; j += 32) w_sum[j] = b_sum[j] = 0;  // the lane's own columns
    const std::int64_t first = chunk * kChunkRows + std::int64_t{kChunkRowsPerWarp} * warp;
    for (std::int64_t i = first; i < std::min(rows, first + kChunkRowsPerWarp); ++i)
      backward_row<true>(dx, dy, dx_add, x, mean, rstd, weight, i, cols, w_sum, b_sum);
    __syncthreads();
    for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      T w = 0, b = 0;
      for (int k = 0; k < kRowsPerBlock; ++k) {
        w += slices[(2 * k) * cols + j];
        b += slices[(2 * k + 1) * cols + j];
      }
      partial[(chunk * 2) * cols + j] = w;
      partial[(chunk * 2 + 1) * cols + j] = b;
    }
    __syncthreads();  // the slices are read before the next chunk clears them
  }
}

// The partial sums of backward_fused_kernel in row order, a thread per column, for rows too
// wide for its slices; block (column block, first chunk), the chunks gridDim.y apart.
template <class T, class G>
__global__ void column_partials_kernel(T* partial, const G* dy, const T* x, const T* mean, const T* rstd,
                                       std::int64_t rows, std::int64_t cols) {
  const std::int64_t j = std::int64_t{blockIdx.x} * kColumnThreads + threadIdx.x;
  if (j >= cols) return;
  for (std::int64_t chunk = blockIdx.y; chunk * kChunkRows < rows; chunk += gridDim.y) {
    T w = 0, b = 0;
    const std::int64_t end = std::min(rows, (chunk + 1) * kChunkRows);
#pragma unroll 8
    for (std::int64_t i = chunk * kChunkRows; i < end; ++i) {
      const T g = detail::widen(dy[i * cols + j]);
      w += g * ((x[i * cols + j] - mean[i]) * rstd[i]);
      b += g;
    }
    partial[(chunk * 2) * cols + j] = w;
    partial[(chunk * 2 + 1) * cols + j] = b;
  }
}

// dweight[j], dbias[j]: the chunks' partials of column j added in a fixed order. Thread
// (x, y) of block b takes column b * 32 + x and adds chunks y, y + 16, ... in order; thread
// row 0 then adds the 16 thread rows' sums in order.
template <class T>
__global__ void column_sums_kernel(T* dweight, T* dbias, const T* partial, std::int64_t chunks, std::int64_t cols) {
  __shared__ T sums[2][kSumStrides][kSumColumns];
  const int x = static_cast<int>(threadIdx.x), y = static_cast<int>(threadIdx.y);
  const std::int64_t j = std::int64_t{blockIdx.x} * kSumColumns + x;
  T w = 0, b = 0;
  if (j < cols) {
#pragma unroll 4
    for (std::int64_t chunk = y; chunk < chunks; chunk += kSumStrides) {
      w += partial[(chunk * 2) * cols + j];
      b += partial[(chunk * 2 + 1) * cols + j];
    }
  }
  sums[0][y][x] = w;
  sums[1][y][x] = b;
  __syncthreads();
  if (y != 0 || j >= cols) return;
  for (int k = 1; k < kSumStrides; ++k) {
    w += sums[0][k][x];
    b += sums[1][k][x];
  }
  if (dweight != nullptr) dweight[j] = w;
  if (dbias != nullptr) dbias[j] = b;
}

// Calls f(T{}, S{}) for rows of `type` (T float or double) and `other` (y's or dy's type):
// T's, or for float rows also float16/bfloat16.
template <class F>
void visit_types(ElementType type, ElementType other, const char* op, F&& f) {
  if (type == ElementType::F64 && other == ElementType::F64) return f(double{}, double{});
  if (type == ElementType::F32 && other == ElementType::F32) return f(float{}, float{});
  if (type == ElementType::F32 && other == ElementType::BF16) return f(float{}, __nv_bfloat16{});
  if (type == ElementType::F32 && other == ElementType::F16) return f(float{}, __half{});
  throw CudaError(std::string(op) + ": expected float64 rows, or float32 rows with float32, float16 or bfloat16 " +
                  "outputs and gradients");
}

unsigned row_blocks(std::int64_t rows, const char* op) {
  const std::int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  if (blocks > 0x7fffffff) throw CudaError(std::string(op) + ": too many rows for one launch");
  return static_cast<unsigned>(blocks);
}

std::int64_t chunks_of(std::int64_t rows) { return (rows + kChunkRows - 1) / kChunkRows; }

unsigned grid_of(std::int64_t blocks) { return static_cast<unsigned>(std::min<std::int64_t>(blocks, 0x7fffffff)); }

}  // namespace

void layer_norm_forward(void* y, ElementType y_type, void* mean, void* rstd, const LayerNormRows& p, double eps,
                        int device) {
  constexpr const char* op = "layer_norm";
  if (p.rows == 0) return;
  detail::use_device(device);
  visit_types(p.type, y_type, op, [&](auto zero, auto y_zero) {
    using T = decltype(zero);
    using Y = decltype(y_zero);
    forward_kernel<T, Y><<<row_blocks(p.rows, op), kRowsPerBlock * 32, 0, detail::stream()>>>(
        static_cast<Y*>(y), static_cast<T*>(mean), static_cast<T*>(rstd), static_cast<const T*>(p.x),
        static_cast<const T*>(p.weight), static_cast<const T*>(p.bias), p.rows, p.cols, static_cast<T>(eps));
  });
  detail::after_launch(op, {static_cast<int>(p.type), static_cast<int>(y_type)});
}

std::int64_t layer_norm_backward_scratch(const LayerNormRows& p) { return chunks_of(p.rows) * 2 * p.cols; }

void layer_norm_backward(void* dx, void* dweight, void* dbias, const void* dy, ElementType dy_type, const void* dx_add,
                         const void* mean, const void* rstd, void* scratch, const LayerNormRows& p, int device) {
  constexpr const char* op = "layer_norm_backward";
  detail::use_device(device);
  visit_types(p.type, dy_type, op, [&](auto zero, auto g_zero) {
    using T = decltype(zero);
    using G = decltype(g_zero);
    auto* const out = static_cast<T*>(dx);
    const auto* g = static_cast<const G*>(dy);
    const auto* add = static_cast<const T*>(dx_add);
    const auto* x = static_cast<const T*>(p.x);
    const auto* m = static_cast<const T*>(mean);
    const auto* r = static_cast<const T*>(rstd);
    const auto* w = static_cast<const T*>(p.weight);
    auto rows_kernel = [&] {
      backward_rows_kernel<T, G><<<row_blocks(p.rows, op), kRowsPerBlock * 32, 0, detail::stream()>>>(
          out, g, add, x, m, r, w, p.rows, p.cols);
    };
    if ((dweight == nullptr && dbias == nullptr) || p.cols == 0) {
      if (p.rows > 0) rows_kernel();
      return;
    }
    const std::int64_t chunks = chunks_of(p.rows);
    auto* partial = static_cast<T*>(scratch);
    const std::size_t shared = fused_shared_bytes<T>(p.cols);
    if (chunks > 0 &&
        detail::allow_dynamic_shared_memory(reinterpret_cast<const void*>(backward_fused_kernel<T, G>), shared, op)) {
      backward_fused_kernel<T, G><<<grid_of(chunks), kRowsPerBlock * 32, shared, detail::stream()>>>(
          out, partial, g, add, x, m, r, w, p.rows, p.cols);
    } else if (chunks > 0) {
      rows_kernel();
      const auto column_blocks = static_cast<unsigned>((p.cols + kColumnThreads - 1) / kColumnThreads);
      column_partials_kernel<T, G><<<dim3(column_blocks, static_cast<unsigned>(std::min<std::int64_t>(chunks, 65535))),
                                  kColumnThreads, 0, detail::stream()>>>(partial, g, x, m, r, p.rows, p.cols);
    }
    const auto sum_blocks = static_cast<unsigned>((p.cols + kSumColumns - 1) / kSumColumns);
    column_sums_kernel<T><<<sum_blocks, dim3(kSumColumns, kSumStrides), 0, detail::stream()>>>(
        static_cast<T*>(dweight), static_cast<T*>(dbias), partial, chunks, p.cols);
  });
  detail::after_launch(op, {static_cast<int>(p.type), static_cast<int>(dy_type), dx_add != nullptr});
}

}  // namespace infini::cuda
