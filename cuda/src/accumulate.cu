// accumulate: dst[i] += src[i] over strided arrays of one shape and type, where dst may
// address one element from several indices (stride 0 or overlapping views). Each element's
// additions then happen one after another in row-major order of the index space, like the
// CPU kernel (modules/kernels/cpu/accumulate.cpp), without atomics:
//   - dst without overlap: one thread per index;
//   - overlap only through stride-0 dims: one thread per dst element, summing its indices
//     of the stride-0 dims in row-major order;
//   - any other overlap: one thread, every index in row-major order (rare).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "elementwise.cuh"
#include "infini/cuda/elementwise.h"
#include "launch.cuh"

namespace infini::cuda {
namespace {

using detail::SharedShape;

// dst + x in T: bool is `or`, integers wrap, f16/bf16 add in float and round.
template <class T>
__device__ T plus(T dst, T x) {
  if constexpr (std::is_same_v<T, bool>) return dst || x;
  else if constexpr (detail::is_float_compute<T>) return detail::convert<T>(detail::widen(dst) + detail::widen(x));
  else return detail::add_wrap(dst, x);
}

// Every index addresses its own dst element: dst[o] += src[o'] in any order.
template <class T>
__global__ void accumulate_distinct(T* dst, const T* src, SharedShape<2> shape, std::int64_t n) {
  for (std::int64_t i = detail::first_index(); i < n; i += detail::grid_step()) {
    std::int64_t off[2];
    detail::offsets_of(shape, i, off);
    dst[off[0]] = plus(dst[off[0]], src[off[1]]);
  }
}

// `outer`: the dims where dst's stride is non-zero (distinct dst elements), strides of dst
// and src; `inner`: the stride-0 dims of dst with src's strides. Thread per outer index,
// adding its inner_n src elements in row-major order.
template <class T>
__global__ void accumulate_reduce(T* dst, const T* src, SharedShape<2> outer, std::int64_t outer_n,
                                  SharedShape<1> inner, std::int64_t inner_n) {
  for (std::int64_t i = detail::first_index(); i < outer_n; i += detail::grid_step()) {
    std::int64_t off[2];
    detail::offsets_of(outer, i, off);
    T sum = dst[off[0]];
    for (std::int64_t j = 0; j < inner_n; ++j) {
      std::int64_t at[1];
      detail::offsets_of(inner, j, at);
      sum = plus(sum, src[off[1] + at[0]]);
    }
    dst[off[0]] = sum;
  }
}

// One thread: every index in row-major order.
template <class T>
__global__ void accumulate_serial(T* dst, const T* src, SharedShape<2> shape, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t off[2];
    detail::offsets_of(shape, i, off);
    dst[off[0]] = plus(dst[off[0]], src[off[1]]);
  }
}

// True when two indices of the (stride, size) dims may address one element: sorted by
// stride, each dim must step past everything the smaller ones reach.
bool may_overlap(std::vector<std::pair<std::int64_t, std::int64_t>> dims) {
  std::sort(dims.begin(), dims.end());
  std::int64_t reach = 1;
  for (const auto& [stride, size] : dims) {
    if (stride < reach) return true;
    reach = stride * (size - 1) + reach;
  }
  return false;
}

template <class T>
void launch(const StridedArray& dst, const StridedArray& src, std::int64_t n) {
  T* d = static_cast<T*>(dst.data);
  const T* s = static_cast<const T*>(src.data);
  std::vector<std::pair<std::int64_t, std::int64_t>> all, nonzero;  // (stride, size) of dims of size > 1
  for (int k = 0; k < dst.ndim; ++k) {
    if (dst.sizes[k] <= 1) continue;
    all.emplace_back(dst.strides[k], dst.sizes[k]);
    if (dst.strides[k] != 0) nonzero.emplace_back(dst.strides[k], dst.sizes[k]);
  }
  const StridedArray* arrays[2] = {&dst, &src};
  if (!may_overlap(all)) {
    accumulate_distinct<T><<<detail::blocks_for(n), detail::kThreads, 0, detail::stream()>>>(
        d, s, detail::shared_shape(arrays), n);
  } else if (!may_overlap(nonzero)) {
    SharedShape<2> outer;
    SharedShape<1> inner;
    std::int64_t outer_n = 1, inner_n = 1;
    for (int k = 0; k < dst.ndim; ++k) {
      if (dst.strides[k] == 0) {
        inner.sizes[inner.ndim] = dst.sizes[k];
        inner.strides[0][inner.ndim++] = src.strides[k];
        inner_n *= dst.sizes[k];
      } else {
        outer.sizes[outer.ndim] = dst.sizes[k];
        outer.strides[0][outer.ndim] = dst.strides[k];
        outer.strides[1][outer.ndim++] = src.strides[k];
        outer_n *= dst.sizes[k];
      }
    }
    accumulate_reduce<T><<<detail::blocks_for(outer_n), detail::kThreads, 0, detail::stream()>>>(
        d, s, outer, outer_n, inner, inner_n);
  } else {
    accumulate_serial<T><<<1, 1, 0, detail::stream()>>>(d, s, detail::shared_shape(arrays), n);
  }
}

}  // namespace

void accumulate(const StridedArray& dst, const StridedArray& src, int device) {
  const std::int64_t n = detail::numel(dst);
  if (src.ndim != dst.ndim || !std::equal(dst.sizes, dst.sizes + dst.ndim, src.sizes))
    throw CudaError("accumulate: dst and src sizes differ");
  if (src.type != dst.type) throw CudaError("accumulate: dst and src types differ");
  if (n == 0) return;
  detail::use_device(device);
  StridedArray d = dst, s = src;
  detail::coalesce({&d, &s});
  detail::visit(dst.type, "accumulate", [&](auto tag) { launch<typename decltype(tag)::type>(d, s, n); });
  detail::after_launch("accumulate_", {static_cast<int>(dst.type), n, d.ndim});
}

}  // namespace infini::cuda
