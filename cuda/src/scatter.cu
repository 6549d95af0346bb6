// scatter along one dim: self[p with dim replaced by index[p]] = mode(., src[p]), the
// updates of each element applied one after the other in index order, so results match
// the CPU's bit for bit and never depend on scheduling.
//
// A "position" is a coordinate of index's shape without dim; all updates of one element of
// self come from one position. Three plans, all applying each element's updates in order
// from a single thread:
//  - per position: one thread walks dim at one position (many positions, or few updates);
//  - one index per slice (index_add_, index_copy_, index_select's backward: index is
//    constant across positions): the dim's (index, i) pairs are stable-sorted by index,
//    and one thread per (run of equal indices, position) applies the run;
//  - otherwise: all (position, index) keys are stable-sorted with their source positions,
//    and one thread per run of equal keys applies it.
#include <cub/device/device_radix_sort.cuh>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "element_types.cuh"
#include "index_common.cuh"

namespace infini::cuda {
namespace {

using detail::SharedShape;
using detail::offsets_of;

// Positions at or above which one thread per position keeps the device busy.
constexpr std::int64_t kManyPositions = 16384;

// mode(a, v) as the CPU computes it: in compute_t<T> (float for f16/bf16), rounded once;
// integers wrap (computed unsigned); max/min propagate NaN, keeping the first NaN.
template <class T>
__device__ T combine(ScatterMode mode, T a, T v) {
  using C = detail::compute_t<T>;
  using U = std::conditional_t<sizeof(T) <= 4, std::uint32_t, std::uint64_t>;
  const C ca = detail::widen(a), cv = detail::widen(v);
  switch (mode) {
    case ScatterMode::Copy: return v;
    case ScatterMode::Add:
      if constexpr (std::is_same_v<T, bool>) return a || v;
      else if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<U>(a) + static_cast<U>(v));
      else return detail::convert<T>(ca + cv);
    case ScatterMode::Multiply:
      if constexpr (std::is_same_v<T, bool>) return a && v;
      else if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<U>(a) * static_cast<U>(v));
      else return detail::convert<T>(ca * cv);
    case ScatterMode::Amax:
      return detail::is_nan(ca) || detail::is_nan(cv) || cv > ca ? (detail::is_nan(ca) ? a : v) : a;
    case ScatterMode::Amin:
      return detail::is_nan(ca) || detail::is_nan(cv) || cv < ca ? (detail::is_nan(ca) ? a : v) : a;
  }
  return a;
}

// Shapes shared by the kernels: `pos` walks the positions of self, src and index (operands
// 0, 1, 2); along dim there are n updates, self has `size` entries, and the arrays step ys,
// ss and is.
struct Scatter {
  SharedShape<3> pos;
  std::int64_t positions, n, size, ys, ss, is;
};

__device__ inline std::int64_t wrap(std::int64_t k, std::int64_t size) { return k < 0 ? k + size : k; }

// One thread per position, walking dim in order.
template <class T>
__global__ void scatter_positions_kernel(Scatter s, T* y, const T* src, const std::int64_t* ix, ScatterMode mode) {
  for (std::int64_t p = detail::first_index(); p < s.positions; p += detail::grid_step()) {
    std::int64_t o[3];
    offsets_of(s.pos, p, o);
    for (std::int64_t i = 0; i < s.n; ++i) {
      T* a = y + o[0] + wrap(ix[o[2] + i * s.is], s.size) * s.ys;
      *a = combine(mode, *a, src[o[1] + i * s.ss]);
    }
  }
}

// Sorted (key, value) pairs: entry j starts a run of equal keys when it is the first or its
// key differs from the one before; the run ends at the first entry of another key (or count).
__device__ inline bool starts_run(const std::uint64_t* keys, std::int64_t j) {
  return j == 0 || keys[j - 1] != keys[j];
}
__device__ inline std::int64_t run_end(const std::uint64_t* keys, std::int64_t j, std::int64_t count) {
  std::int64_t end = j + 1;
  while (end < count && keys[end] == keys[j]) ++end;
  return end;
}

// Applies the updates update(r) of the sorted run [j, end) to *a: the last one wins (Copy),
// else they combine in order.
template <class T, class Update>
__device__ void apply_run(T* a, std::int64_t j, std::int64_t end, ScatterMode mode, Update update) {
  if (mode == ScatterMode::Copy) {
    *a = update(end - 1);
    return;
  }
  T acc = *a;
  for (std::int64_t r = j; r < end; ++r) acc = combine(mode, acc, update(r));
  *a = acc;
}

// keys[i] = index along dim (wrapped), values[i] = i: the index of one slice (index is
// constant across positions, so position 0's is every position's).
__global__ void slice_keys_kernel(Scatter s, const std::int64_t* ix, std::uint64_t* keys, std::int64_t* values) {
  for (std::int64_t i = detail::first_index(); i < s.n; i += detail::grid_step()) {
    keys[i] = static_cast<std::uint64_t>(wrap(ix[i * s.is], s.size));
    values[i] = i;
  }
}

// Thread (j, p), p fastest so that neighbours touch neighbouring elements: when entry j of
// the sorted keys starts a run, applies the run's updates in order to self's element
// (position p, index keys[j]).
template <class T>
__global__ void apply_slices_kernel(Scatter s, T* y, const T* src, const std::uint64_t* keys,
                                    const std::int64_t* values, ScatterMode mode) {
  const std::int64_t total = s.n * s.positions;
  for (std::int64_t t = detail::first_index(); t < total; t += detail::grid_step()) {
    const std::int64_t j = t / s.positions, p = t - j * s.positions;
    if (!starts_run(keys, j)) continue;
    std::int64_t o[3];
    offsets_of(s.pos, p, o);
    T* a = y + o[0] + static_cast<std::int64_t>(keys[j]) * s.ys;
    apply_run(a, j, run_end(keys, j, s.n), mode, [&](std::int64_t r) { return src[o[1] + values[r] * s.ss]; });
  }
}

// keys[e] = p * size + index (wrapped), values[e] = e, for update e = p * n + i (position p,
// step i along dim): sorting keeps each element's updates in step order.
__global__ void update_keys_kernel(Scatter s, const std::int64_t* ix, std::uint64_t* keys, std::int64_t* values) {
  const std::int64_t total = s.n * s.positions;
  for (std::int64_t e = detail::first_index(); e < total; e += detail::grid_step()) {
    const std::int64_t p = e / s.n, i = e - p * s.n;
    std::int64_t o[3];
    offsets_of(s.pos, p, o);
    keys[e] = static_cast<std::uint64_t>(p * s.size + wrap(ix[o[2] + i * s.is], s.size));
    values[e] = e;
  }
}

// One thread per sorted entry j: when it starts a run of equal keys, applies the run.
template <class T>
__global__ void apply_updates_kernel(Scatter s, T* y, const T* src, const std::uint64_t* keys,
                                     const std::int64_t* values, ScatterMode mode) {
  const std::int64_t total = s.n * s.positions;
  for (std::int64_t j = detail::first_index(); j < total; j += detail::grid_step()) {
    if (!starts_run(keys, j)) continue;
    const auto key = static_cast<std::int64_t>(keys[j]);
    const std::int64_t p = key / s.size, k = key - p * s.size;
    std::int64_t o[3];
    offsets_of(s.pos, p, o);
    T* a = y + o[0] + k * s.ys;
    const T* from = src + o[1];
    apply_run(a, j, run_end(keys, j, total), mode, [&](std::int64_t r) { return from[(values[r] - p * s.n) * s.ss]; });
  }
}

// Stable radix sort of `count` (key, value) pairs on the keys' low `bits` bits; returns the
// sorted pairs (in scratch).
std::pair<std::uint64_t*, std::int64_t*> sort_pairs(const std::uint64_t* keys, const std::int64_t* values,
                                                    std::int64_t count, int bits, const DeviceAlloc& alloc) {
  auto* keys_out = detail::scratch<std::uint64_t>(alloc, count);
  auto* values_out = detail::scratch<std::int64_t>(alloc, count);
  detail::cub_run(alloc, "scatter: cub::DeviceRadixSort::SortPairs", [&](void* temp, std::size_t& bytes) {
    return cub::DeviceRadixSort::SortPairs(temp, bytes, keys, keys_out, values, values_out, count, 0, bits,
                                           detail::stream());
  });
  return {keys_out, values_out};
}

template <class T>
void run_scatter(const Scatter& s, bool one_index_per_slice, void* self, const void* source, const std::int64_t* ix,
                 ScatterMode mode, const DeviceAlloc& alloc) {
  T* y = static_cast<T*>(self);
  const T* src = static_cast<const T*>(source);
  const std::int64_t total = s.n * s.positions;
  if (s.n == 1 || (!one_index_per_slice && (s.positions >= kManyPositions || s.n <= 8))) {
    scatter_positions_kernel<T>
        <<<detail::blocks_for(s.positions), detail::kThreads, 0, detail::stream()>>>(s, y, src, ix, mode);
    return;
  }
  if (one_index_per_slice) {
    auto* keys = detail::scratch<std::uint64_t>(alloc, s.n);
    auto* values = detail::scratch<std::int64_t>(alloc, s.n);
    slice_keys_kernel<<<detail::blocks_for(s.n), detail::kThreads, 0, detail::stream()>>>(s, ix, keys, values);
    const auto [sorted_keys, sorted_values] =
        sort_pairs(keys, values, s.n, detail::bits_for(static_cast<std::uint64_t>(s.size - 1)), alloc);
    apply_slices_kernel<T><<<detail::blocks_for(total), detail::kThreads, 0, detail::stream()>>>(
        s, y, src, sorted_keys, sorted_values, mode);
    return;
  }
  auto* keys = detail::scratch<std::uint64_t>(alloc, total);
  auto* values = detail::scratch<std::int64_t>(alloc, total);
  update_keys_kernel<<<detail::blocks_for(total), detail::kThreads, 0, detail::stream()>>>(s, ix, keys, values);
  const auto [sorted_keys, sorted_values] =
      sort_pairs(keys, values, total, detail::bits_for(static_cast<std::uint64_t>(s.positions * s.size - 1)), alloc);
  apply_updates_kernel<T><<<detail::blocks_for(total), detail::kThreads, 0, detail::stream()>>>(
      s, y, src, sorted_keys, sorted_values, mode);
}

}  // namespace

void scatter(const StridedArray& self, int dim, const StridedArray& index, const StridedArray& src, ScatterMode mode,
             const DeviceAlloc& alloc, int device) {
  if (detail::numel(index) == 0) return;
  detail::use_device(device);
  Scatter s;
  s.pos = detail::joint_strides<3>(
      {detail::without_dim(self, dim), detail::without_dim(src, dim), detail::without_dim(index, dim)});
  s.positions = 1;
  bool one_index_per_slice = true;
  for (int d = 0; d < s.pos.ndim; ++d) {
    s.positions *= s.pos.sizes[d];
    one_index_per_slice = one_index_per_slice && s.pos.strides[2][d] == 0;
  }
  s.n = index.sizes[dim];
  s.size = self.sizes[dim];
  s.ys = self.strides[dim];
  s.ss = src.strides[dim];
  s.is = index.strides[dim];
  const auto* ix = static_cast<const std::int64_t*>(index.data);
  detail::visit(self.type, "scatter", [&](auto tag) {
    run_scatter<typename decltype(tag)::type>(s, one_index_per_slice, self.data, src.data, ix, mode, alloc);
  });
  detail::after_launch("scatter");
}

}  // namespace infini::cuda
