// Internal: helpers shared by the elementwise and indexing kernels over StridedArrays
// (host-side shape work, device-side index math).
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>

#include "infini/cuda/cuda.h"

namespace infini::cuda::detail {

inline constexpr int kThreads = 256;     // threads per block
inline constexpr int kMaxBlocks = 65535;  // grid-stride loops cover the rest

// Number of elements of `a` (1 for ndim == 0).
inline std::int64_t numel(const StridedArray& a) {
  if (a.ndim < 0 || a.ndim > kMaxDims) throw CudaError("StridedArray: ndim out of range");
  std::int64_t n = 1;
  for (int d = 0; d < a.ndim; ++d) n *= a.sizes[d];
  return n;
}

inline unsigned blocks_for(std::int64_t numel) {
  return static_cast<unsigned>(std::min<std::int64_t>((numel + kThreads - 1) / kThreads, kMaxBlocks));
}

// Rewrites arrays that share one shape (sizes) into an equivalent shape with fewer dims:
// size-1 dims are dropped and dim d is merged into the kept dim before it when every array
// has stride[before] == stride[d] * size[d]. A contiguous array becomes 1-D (or 0-D), so the
// kernels' per-element div/mod index math shrinks accordingly. Row-major element order is kept.
inline void coalesce(std::initializer_list<StridedArray*> arrays) {
  const int ndim = (*arrays.begin())->ndim;
  int kept = 0;
  for (int d = 0; d < ndim; ++d) {
    const std::int64_t size = (*arrays.begin())->sizes[d];
    if (size == 1) continue;
    const bool merge = kept > 0 && std::all_of(arrays.begin(), arrays.end(), [&](const StridedArray* a) {
      return a->strides[kept - 1] == a->strides[d] * size;
    });
    for (StridedArray* a : arrays) {
      const int to = merge ? kept - 1 : kept;
      a->sizes[to] = merge ? a->sizes[to] * size : size;
      a->strides[to] = a->strides[d];
    }
    if (!merge) ++kept;
  }
  for (StridedArray* a : arrays) a->ndim = kept;
}

// The offset (in elements) of the element with row-major linear index i in `a`.
__device__ inline std::int64_t offset_of(const StridedArray& a, std::int64_t i) {
  std::int64_t offset = 0;
  for (int d = a.ndim - 1; d > 0; --d) {
    offset += i % a.sizes[d] * a.strides[d];
    i /= a.sizes[d];
  }
  return a.ndim > 0 ? offset + i * a.strides[0] : offset;
}

// N arrays of one shape (a kernel parameter): sizes and each array's strides, in elements.
// narrow: every linear index fits in 31 bits, so offsets_of unravels in 32-bit arithmetic
// (a 64-bit division costs several times a 32-bit one).
template <int N>
struct SharedShape {
  int ndim = 0;
  bool narrow = false;
  std::int64_t sizes[kMaxDims] = {};
  std::int64_t strides[N][kMaxDims] = {};
};

// The shape of arrays[0] (all must have it) with each array's strides.
template <int N>
SharedShape<N> shared_shape(const StridedArray* const (&arrays)[N]) {
  SharedShape<N> s;
  s.ndim = arrays[0]->ndim;
  for (int d = 0; d < s.ndim; ++d) {
    s.sizes[d] = arrays[0]->sizes[d];
    for (int k = 0; k < N; ++k) s.strides[k][d] = arrays[k]->strides[d];
  }
  s.narrow = numel(*arrays[0]) < (std::int64_t{1} << 31);
  return s;
}

// off[k] = offset of the element with row-major index i in array k; the index is unravelled
// once for all arrays.
template <int N, class I>
__device__ inline void unravel(const SharedShape<N>& s, I i, std::int64_t (&off)[N]) {
#pragma unroll
  for (int k = 0; k < N; ++k) off[k] = 0;
  for (int d = s.ndim - 1; d > 0; --d) {
    const I size = static_cast<I>(s.sizes[d]);
    const I q = i / size, r = i - q * size;
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] += static_cast<std::int64_t>(r) * s.strides[k][d];
    i = q;
  }
  if (s.ndim > 0) {
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] += static_cast<std::int64_t>(i) * s.strides[k][0];
  }
}
template <int N>
__device__ inline void offsets_of(const SharedShape<N>& s, std::int64_t i, std::int64_t (&off)[N]) {
  if (s.narrow) unravel(s, static_cast<std::uint32_t>(i), off);
  else unravel(s, i, off);
}

// Grid-stride loop bounds: for (i = first_index(); i < n; i += grid_step()).
__device__ inline std::int64_t first_index() { return std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; }
__device__ inline std::int64_t grid_step() { return std::int64_t{gridDim.x} * blockDim.x; }

}  // namespace infini::cuda::detail
