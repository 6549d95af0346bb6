// Internal to the reductions: the split of a reduction into kept ("outer") and reduced
// ("inner") dims, and the kernels that fold each output's inner elements with a Fold:
//
//   struct Fold {
//     using T = ...;    // input storage type
//     using Acc = ...;  // accumulator (arithmetic, or a struct with shuffled(), see warp_shuffle.cuh)
//     __device__ Acc identity() const;
//     __device__ Acc add(Acc a, T x, std::int64_t i) const;  // x is inner element i
//     __device__ Acc combine(Acc a, Acc b) const;            // two partials (see below)
//     __device__ void store(const ReducePlan& p, std::int64_t k, Acc a) const;  // output k
//   };
//
// Each output is folded by a group of threads: a warp or a block over a row of inner
// elements ("rows", the reduced dims are the contiguous ones), or 8 threads of a column tile
// of 32 neighbouring outputs ("columns", the kept dims are the contiguous ones, e.g. a sum over
// the rows of an (N, C) tensor). Thread t of a group folds inner elements t, t + group, ... in
// order; the group's partials are combined in a fixed tree (so a partial covers interleaved
// elements: a fold whose result depends on element order, like argmax's first index, makes
// combine() order-free). Long reductions with few outputs are cut into segments whose
// results go to a workspace and are combined by a second pass.
// Every choice depends on the shape only, so results are the same bits on every run.
#pragma once

#include <cuda/std/limits>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "infini/cuda/reduce.h"
#include "grid_math.cuh"
#include "launch.cuh"
#include "strided.cuh"
#include "warp_shuffle.cuh"

namespace infini::cuda::detail {

// A reduction of `in` into `out` (in's rank, size 1 on the reduced dims).
struct ReducePlan {
  StridedArray outer_in;   // kept dims: sizes and in's strides (coalesced with outer_out)
  StridedArray outer_out;  // kept dims: the same sizes and out's strides
  StridedArray inner;      // reduced dims: sizes and in's strides (coalesced)
  std::int64_t outputs = 0;  // elements of out
  std::int64_t length = 0;   // inner elements folded into each output
  std::int64_t segments = 1;        // pieces of the inner elements folded separately
  std::int64_t segment_length = 0;  // inner elements per segment (the last may be shorter)
};

inline ReducePlan plan_reduction(const StridedArray& out, const StridedArray& in, const char* op) {
  if (out.ndim != in.ndim || in.ndim < 0 || in.ndim > kMaxDims)
    throw CudaError(std::string(op) + ": out and in ranks differ");
  ReducePlan p;
  p.outer_in.data = p.inner.data = in.data;
  p.outer_in.type = p.inner.type = in.type;
  p.outer_out.data = out.data;
  p.outer_out.type = out.type;
  for (int d = 0; d < in.ndim; ++d) {
    if (out.sizes[d] == 1 && in.sizes[d] != 1) {
      p.inner.sizes[p.inner.ndim] = in.sizes[d];
      p.inner.strides[p.inner.ndim++] = in.strides[d];
    } else {
      if (out.sizes[d] != in.sizes[d]) throw CudaError(std::string(op) + ": out's sizes are not in's keepdim sizes");
      const int o = p.outer_in.ndim++;
      p.outer_in.sizes[o] = p.outer_out.sizes[o] = in.sizes[d];
      p.outer_in.strides[o] = in.strides[d];
      p.outer_out.strides[o] = out.strides[d];
    }
  }
  p.outer_out.ndim = p.outer_in.ndim;
  coalesce({&p.outer_in, &p.outer_out});
  coalesce({&p.inner});
  p.outputs = numel(p.outer_in);
  p.length = numel(p.inner);
  return p;
}

// The identity of max (kMax) or min in compute type C: -inf/+inf, or the integer limits.
template <class C, bool kMax>
__device__ C extreme_identity() {
  using L = ::cuda::std::numeric_limits<C>;
  if constexpr (std::is_floating_point_v<C>) return kMax ? -L::infinity() : L::infinity();
  else return kMax ? L::lowest() : L::max();
}

// Output k of the plan as an lvalue of type Out.
template <class Out>
__device__ Out& output_at(const ReducePlan& p, std::int64_t k) {
  return static_cast<Out*>(p.outer_out.data)[offset_in(p.outer_out, k)];
}

// Folds inner elements first, first + step, ... (< end) of output k into acc, in order.
template <class Fold>
__device__ typename Fold::Acc fold_inner(const ReducePlan& p, const Fold& fold, std::int64_t k, std::int64_t first,
                                         std::int64_t end, int step, typename Fold::Acc acc) {
  using T = typename Fold::T;
  const T* x = static_cast<const T*>(p.outer_in.data) + offset_in(p.outer_in, k);
  if (p.inner.ndim <= 1) {  // (ndim 0: a single element at offset 0)
    const std::int64_t stride = p.inner.ndim == 1 ? p.inner.strides[0] : 0;
#pragma unroll 4
    for (std::int64_t i = first; i < end; i += step) acc = fold.add(acc, x[i * stride], i);
  } else {
    for (std::int64_t i = first; i < end; i += step) acc = fold.add(acc, x[offset_in(p.inner, i)], i);
  }
  return acc;
}

// The combination of acc over lanes 0..kLanes-1 of the warp, in a fixed tree; valid in lane 0.
template <int kLanes, class Fold>
__device__ typename Fold::Acc combine_lanes(const Fold& fold, typename Fold::Acc acc) {
#pragma unroll
  for (int delta = kLanes / 2; delta > 0; delta /= 2) acc = fold.combine(acc, shuffle_down(acc, delta));
  return acc;
}

// The result of segment s of output k: stored, or parked in partial[k][s] for the second pass.
template <class Fold>
__device__ void finish_segment(const ReducePlan& p, const Fold& fold, typename Fold::Acc* partial, std::int64_t k,
                               std::int64_t s, const typename Fold::Acc& acc) {
  if (partial) partial[k * p.segments + s] = acc;
  else fold.store(p, k, acc);
}

// Rows: a group of G threads (a warp, or the whole block) per (output, segment).
template <class Fold, int G>
__global__ void reduce_rows_kernel(const __grid_constant__ ReducePlan p, const Fold fold,
                                   typename Fold::Acc* partial) {
  using Acc = typename Fold::Acc;
  constexpr int kGroups = kThreads / G, kWarps = kThreads / 32;
  [[maybe_unused]] __shared__ Acc warp_acc[kWarps];
  const int t = threadIdx.x % G, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const std::int64_t items = p.outputs * p.segments;
  // Uniform over each group (over the block when G is the block).
  for (std::int64_t item = std::int64_t{blockIdx.x} * kGroups + threadIdx.x / G; item < items;
       item += std::int64_t{gridDim.x} * kGroups) {
    const std::int64_t k = item / p.segments, s = item % p.segments;
    const std::int64_t begin = s * p.segment_length, end = std::min(p.length, begin + p.segment_length);
    Acc acc = combine_lanes<32>(fold, fold_inner(p, fold, k, begin + t, end, G, fold.identity()));
    if constexpr (G > 32) {
      if (lane == 0) warp_acc[warp] = acc;
      __syncthreads();
      if (warp == 0) acc = combine_lanes<kWarps>(fold, lane < kWarps ? warp_acc[lane] : fold.identity());
      __syncthreads();  // warp_acc is reused by the next item
    }
    if (t == 0) finish_segment(p, fold, partial, k, s, acc);
  }
}

inline constexpr int kTileWidth = 32;                      // columns: outputs per tile
inline constexpr int kTileSlices = kThreads / kTileWidth;  // columns: threads per output

// Columns: a block per (tile of kTileWidth neighbouring outputs along the kept dims' last
// dim, segment); kTileSlices threads per output, each folding every kTileSlices-th element.
template <class Fold>
__global__ void reduce_columns_kernel(const __grid_constant__ ReducePlan p, const Fold fold,
                                      typename Fold::Acc* partial) {
  using Acc = typename Fold::Acc;
  __shared__ Acc slice_acc[kTileSlices][kTileWidth];
  const int tx = threadIdx.x % kTileWidth, ty = threadIdx.x / kTileWidth;
  const std::int64_t width = p.outer_in.sizes[p.outer_in.ndim - 1];
  const std::int64_t tiles_per_row = (width + kTileWidth - 1) / kTileWidth;
  const std::int64_t items = p.outputs / width * tiles_per_row * p.segments;
  for (std::int64_t item = blockIdx.x; item < items; item += gridDim.x) {  // uniform over the block
    const std::int64_t s = item % p.segments, tile = item / p.segments;
    const std::int64_t c = tile % tiles_per_row * kTileWidth + tx;
    const std::int64_t k = tile / tiles_per_row * width + c;
    const std::int64_t begin = s * p.segment_length, end = std::min(p.length, begin + p.segment_length);
    const Acc none = fold.identity();
    slice_acc[ty][tx] = c < width ? fold_inner(p, fold, k, begin + ty, end, kTileSlices, none) : none;
    __syncthreads();
#pragma unroll
    for (int half = kTileSlices / 2; half > 0; half /= 2) {
      if (ty < half) slice_acc[ty][tx] = fold.combine(slice_acc[ty][tx], slice_acc[ty + half][tx]);
      __syncthreads();
    }
    if (ty == 0 && c < width) finish_segment(p, fold, partial, k, s, slice_acc[0][tx]);
    __syncthreads();  // slice_acc is reused by the next item
  }
}

// Second pass: a warp per output combines its segments' results partial[k][0..segments).
template <class Fold>
__global__ void reduce_partials_kernel(const __grid_constant__ ReducePlan p, const Fold fold,
                                       const typename Fold::Acc* partial) {
  using Acc = typename Fold::Acc;
  constexpr int kWarps = kThreads / 32;
  const int lane = threadIdx.x % 32;
  for (std::int64_t k = std::int64_t{blockIdx.x} * kWarps + threadIdx.x / 32; k < p.outputs;
       k += std::int64_t{gridDim.x} * kWarps) {
    Acc acc = fold.identity();
    for (std::int64_t s = lane; s < p.segments; s += 32) acc = fold.combine(acc, partial[k * p.segments + s]);
    acc = combine_lanes<32>(fold, acc);
    if (lane == 0) fold.store(p, k, acc);
  }
}

// Long reductions are split until pass 1 has about this many blocks, with at least
// kMinPerThread elements per thread and segment.
inline constexpr std::int64_t kTargetBlocks = 1024;
inline constexpr std::int64_t kMinPerThread = 16;

// Reduces every output of p with `fold` (launches only; the caller checks the launch).
template <class Fold>
void run_reduction(ReducePlan p, const Fold& fold, const ReduceWorkspace& workspace) {
  using Acc = typename Fold::Acc;
  if (p.outputs == 0) return;
  // Columns when the kept dims' last dim is wide and closer packed than the reduced elements.
  const int last = p.outer_in.ndim - 1;
  const std::int64_t width = last >= 0 ? p.outer_in.sizes[last] : 1;
  const std::int64_t inner_step = p.inner.ndim > 0 ? std::llabs(p.inner.strides[p.inner.ndim - 1]) : INT64_MAX;
  const bool columns = width >= 16 && std::llabs(p.outer_in.strides[last]) < inner_step;
  const bool block_rows = !columns && p.length > 1024;  // else a warp per row
  const std::int64_t readers = columns ? kTileSlices : block_rows ? kThreads : 32;  // threads per output
  const std::int64_t blocks = columns ? p.outputs / width * ceil_div(width, kTileWidth)
                                      : ceil_div(p.outputs, kThreads / readers);
  std::int64_t segments = 1;
  if (blocks < kTargetBlocks)
    segments = std::clamp<std::int64_t>(p.length / (readers * kMinPerThread), 1, ceil_div(kTargetBlocks, blocks));
  p.segment_length = p.length;
  if (segments > 1) {
    p.segment_length = ceil_div(ceil_div(p.length, segments), readers) * readers;
    segments = ceil_div(p.length, p.segment_length);
  }
  p.segments = segments;
  Acc* partial = segments > 1 ? static_cast<Acc*>(workspace(sizeof(Acc) * p.outputs * segments)) : nullptr;
  // Blocks for every (group of outputs, segment); warp rows go 8 to a block.
  const unsigned grid =
      grid_for(columns || block_rows ? blocks * segments : ceil_div(p.outputs * segments, kThreads / 32));
  if (columns) reduce_columns_kernel<Fold><<<grid, kThreads, 0, stream()>>>(p, fold, partial);
  else if (block_rows) reduce_rows_kernel<Fold, kThreads><<<grid, kThreads, 0, stream()>>>(p, fold, partial);
  else reduce_rows_kernel<Fold, 32><<<grid, kThreads, 0, stream()>>>(p, fold, partial);
  if (partial) {
    const unsigned finish_grid = grid_for(ceil_div(p.outputs, kThreads / 32));
    reduce_partials_kernel<Fold><<<finish_grid, kThreads, 0, stream()>>>(p, fold, partial);
  }
}

}  // namespace infini::cuda::detail
