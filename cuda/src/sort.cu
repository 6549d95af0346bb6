// sort and top-k along one dim. Every slice's elements become (key, position) pairs laid
// out slice after slice (keys complemented for a descending order); a stable radix sort
// (segmented when there are several slices) orders them by key and, for equal keys, by
// position: the CPU's order. Top-k takes each sorted slice's first k positions, sorted
// again by position when the result is to be in index order.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_sort.cuh>

#include <cstdint>

#include "index_common.cuh"
#include "sort_keys.cuh"

namespace infini::cuda {
namespace {

using detail::SharedShape;
using detail::SortKey;

// Pair e = s * n + i (slice s, position i along dim): keys[e] = key of x's element there
// (complemented when `complement`), values[e] = i. `at` walks x with dim last.
template <class T>
__global__ void slice_keys_kernel(SharedShape<1> at, std::int64_t total, std::int64_t n, bool complement, const T* x,
                                  SortKey<T>* keys, std::int64_t* values) {
  for (std::int64_t e = detail::first_index(); e < total; e += detail::grid_step()) {
    std::int64_t o[1];
    detail::offsets_of(at, e, o);
    const SortKey<T> key = detail::sort_key(x[o[0]]);
    keys[e] = complement ? static_cast<SortKey<T>>(~key) : key;
    values[e] = e % n;
  }
}

// offsets[s] = s * n for s <= slices: slice s is [offsets[s], offsets[s + 1]).
__global__ void segment_offsets_kernel(std::int64_t slices, std::int64_t n, std::int64_t* offsets) {
  for (std::int64_t s = detail::first_index(); s <= slices; s += detail::grid_step()) offsets[s] = s * n;
}

// out at pair e = s * k + i (`at` walks out with dim last) = from[s * length + i]: the first
// k entries of every slice of `length` entries.
__global__ void take_kernel(SharedShape<1> at, std::int64_t total, std::int64_t k, std::int64_t length,
                            const std::int64_t* from, std::int64_t* out) {
  for (std::int64_t e = detail::first_index(); e < total; e += detail::grid_step()) {
    std::int64_t o[1];
    detail::offsets_of(at, e, o);
    const std::int64_t s = e / k;
    out[o[0]] = from[s * length + (e - s * k)];
  }
}

// A contiguous 1-d walk over n elements.
SharedShape<1> contiguous(std::int64_t n) {
  SharedShape<1> at;
  at.ndim = 1;
  at.sizes[0] = n;
  at.strides[0][0] = 1;
  return at;
}

std::int64_t* segment_offsets(std::int64_t slices, std::int64_t n, const DeviceAlloc& alloc) {
  auto* offsets = detail::scratch<std::int64_t>(alloc, slices + 1);
  segment_offsets_kernel<<<detail::blocks_for(slices + 1), detail::kThreads, 0, detail::stream()>>>(slices, n, offsets);
  return offsets;
}

// The positions of every slice of self along dim in stable sorted order (scratch, slice
// after slice).
template <class T>
const std::int64_t* sorted_positions(const StridedArray& self, int dim, bool descending, const DeviceAlloc& alloc) {
  using K = SortKey<T>;
  const std::int64_t total = detail::numel(self), n = self.sizes[dim], slices = total / n;
  K* keys = detail::scratch<K>(alloc, total);
  K* keys_out = detail::scratch<K>(alloc, total);
  auto* values = detail::scratch<std::int64_t>(alloc, total);
  auto* values_out = detail::scratch<std::int64_t>(alloc, total);
  const SharedShape<1> at = detail::joint_strides<1>({detail::dim_last(self, dim)});
  slice_keys_kernel<T><<<detail::blocks_for(total), detail::kThreads, 0, detail::stream()>>>(
      at, total, n, descending, static_cast<const T*>(self.data), keys, values);
  if (slices == 1) {
    detail::cub_run(alloc, "sort: cub::DeviceRadixSort::SortPairs", [&](void* temp, std::size_t& bytes) {
      return cub::DeviceRadixSort::SortPairs(temp, bytes, keys, keys_out, values, values_out, total, 0,
                                             static_cast<int>(sizeof(K) * 8), detail::stream());
    });
  } else {
    const std::int64_t* offsets = segment_offsets(slices, n, alloc);
    detail::cub_run(alloc, "sort: cub::DeviceSegmentedSort::StableSortPairs", [&](void* temp, std::size_t& bytes) {
      return cub::DeviceSegmentedSort::StableSortPairs(temp, bytes, keys, keys_out, values, values_out, total, slices,
                                                       offsets, offsets + 1, detail::stream());
    });
  }
  return values_out;
}

// Sorts each slice of k positions (distinct, in [0, n)) of `positions` ascending, into scratch.
const std::int64_t* sort_each_slice(const std::int64_t* positions, std::int64_t slices, std::int64_t k,
                                    std::int64_t n, const DeviceAlloc& alloc) {
  const std::int64_t total = slices * k;
  // Positions are non-negative: their order as unsigned integers is theirs.
  const auto* keys = reinterpret_cast<const std::uint64_t*>(positions);
  auto* keys_out = detail::scratch<std::uint64_t>(alloc, total);
  if (slices == 1) {
    detail::cub_run(alloc, "topk: cub::DeviceRadixSort::SortKeys", [&](void* temp, std::size_t& bytes) {
      return cub::DeviceRadixSort::SortKeys(temp, bytes, keys, keys_out, total, 0,
                                            detail::bits_for(static_cast<std::uint64_t>(n - 1)), detail::stream());
    });
  } else {
    const std::int64_t* offsets = segment_offsets(slices, k, alloc);
    detail::cub_run(alloc, "topk: cub::DeviceSegmentedSort::SortKeys", [&](void* temp, std::size_t& bytes) {
      return cub::DeviceSegmentedSort::SortKeys(temp, bytes, keys, keys_out, total, slices, offsets, offsets + 1,
                                                detail::stream());
    });
  }
  return reinterpret_cast<const std::int64_t*>(keys_out);
}

}  // namespace

void sort(const StridedArray& indices, const StridedArray& self, int dim, bool descending, const DeviceAlloc& alloc,
          int device) {
  const std::int64_t total = detail::numel(self);
  if (total == 0) return;
  detail::use_device(device);
  const std::int64_t n = self.sizes[dim];
  const std::int64_t* order = detail::visit(self.type, "sort", [&](auto tag) {
    return sorted_positions<typename decltype(tag)::type>(self, dim, descending, alloc);
  });
  const SharedShape<1> out = detail::joint_strides<1>({detail::dim_last(indices, dim)});
  take_kernel<<<detail::blocks_for(total), detail::kThreads, 0, detail::stream()>>>(
      out, total, n, n, order, static_cast<std::int64_t*>(indices.data));
  detail::after_launch("sort");
}

void topk(const StridedArray& indices, const StridedArray& self, int dim, std::int64_t k, bool largest, bool sorted,
          const DeviceAlloc& alloc, int device) {
  const std::int64_t total = detail::numel(indices);
  if (total == 0) return;
  detail::use_device(device);
  const std::int64_t n = self.sizes[dim], slices = total / k;
  const std::int64_t* order = detail::visit(self.type, "topk", [&](auto tag) {
    return sorted_positions<typename decltype(tag)::type>(self, dim, largest, alloc);
  });
  std::int64_t length = n;  // entries per slice of `order`
  if (!sorted) {  // the best k of each slice, in ascending position order
    auto* best = detail::scratch<std::int64_t>(alloc, total);
    take_kernel<<<detail::blocks_for(total), detail::kThreads, 0, detail::stream()>>>(contiguous(total), total, k, n,
                                                                                      order, best);
    order = sort_each_slice(best, slices, k, n, alloc);
    length = k;
  }
  const SharedShape<1> out = detail::joint_strides<1>({detail::dim_last(indices, dim)});
  take_kernel<<<detail::blocks_for(total), detail::kThreads, 0, detail::stream()>>>(
      out, total, k, length, order, static_cast<std::int64_t*>(indices.data));
  detail::after_launch("topk");
}

}  // namespace infini::cuda
