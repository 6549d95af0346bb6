// unique and nonzero: the two ops whose result size is known only after a first pass on
// the device; the count is read back, the caller allocates, a second pass writes.
//
// unique: (key, position) pairs are stable-sorted; a group starts where the key changes or
// at a NaN (NaNs are all distinct); an inclusive scan of the group starts numbers the
// groups. A group's value is its first element (lowest position). In first-occurrence
// order, group g's rank is the number of groups whose first position is lower: a scan
// over positions marked as first positions.
//
// nonzero: cub::DeviceSelect picks the positions of the nonzero elements in order; each
// one's coordinates are then unravelled into its row.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include <algorithm>
#include <cstdint>

#include "element_types.cuh"
#include "index_common.cuh"
#include "sort_keys.cuh"

namespace infini::cuda {
namespace {

using detail::SortKey;

template <class T>
__global__ void unique_keys_kernel(const T* x, std::int64_t n, SortKey<T>* keys, std::int64_t* positions) {
  for (std::int64_t i = detail::first_index(); i < n; i += detail::grid_step()) {
    keys[i] = detail::sort_key(x[i]);
    positions[i] = i;
  }
}

// starts[j] = 1 where sorted entry j starts a group, else 0.
template <class T>
__global__ void group_starts_kernel(const T* x, std::int64_t n, const SortKey<T>* keys, const std::int64_t* positions,
                                    std::int64_t* starts) {
  for (std::int64_t j = detail::first_index(); j < n; j += detail::grid_step())
    starts[j] = j == 0 || keys[j] != keys[j - 1] || detail::is_nan(detail::widen(x[positions[j]])) ? 1 : 0;
}

// first[g] = the sorted index where group g starts (group[j]: 1 + the group of entry j);
// first[groups] = n.
__global__ void group_bounds_kernel(std::int64_t n, std::int64_t groups, const std::int64_t* group,
                                    std::int64_t* first) {
  for (std::int64_t j = detail::first_index(); j < n; j += detail::grid_step()) {
    if (j == 0 || group[j] != group[j - 1]) first[group[j] - 1] = j;
    if (j == 0) first[groups] = n;
  }
}

// marks[position] = 1 for the first position of every group (marks zeroed before).
__global__ void mark_first_kernel(std::int64_t groups, const std::int64_t* first, const std::int64_t* positions,
                                  std::int64_t* marks) {
  for (std::int64_t g = detail::first_index(); g < groups; g += detail::grid_step()) marks[positions[first[g]]] = 1;
}

// For group g at output slot r (g itself when sorted; else, with `marked` the inclusive sum
// of the first-position marks, marked[first position] - 1): its value, its count, and
// rank_of[g] = r.
template <class T>
__global__ void group_outputs_kernel(const T* x, std::int64_t groups, const std::int64_t* first,
                                     const std::int64_t* positions, const std::int64_t* marked, T* values,
                                     std::int64_t* counts, std::int64_t* rank_of) {
  for (std::int64_t g = detail::first_index(); g < groups; g += detail::grid_step()) {
    const std::int64_t where = positions[first[g]];
    const std::int64_t r = marked ? marked[where] - 1 : g;
    values[r] = x[where];
    counts[r] = first[g + 1] - first[g];
    rank_of[g] = r;
  }
}

// inverse[position of sorted entry j] = the slot of its group.
__global__ void inverse_kernel(std::int64_t n, const std::int64_t* group, const std::int64_t* positions,
                               const std::int64_t* rank_of, std::int64_t* inverse) {
  for (std::int64_t j = detail::first_index(); j < n; j += detail::grid_step())
    inverse[positions[j]] = rank_of[group[j] - 1];
}

// out[j] = carry + out[j] for j < n, carry being the previous chunk's last sum.
__global__ void add_carry_kernel(std::int64_t n, const std::int64_t* carry, std::int64_t* out) {
  for (std::int64_t j = detail::first_index(); j < n; j += detail::grid_step()) out[j] += *carry;
}

// out[j] = in[0] + ... + in[j], j < n. CUB scans chunks of up to 2^30 entries (its 32-bit
// offset kernels, which keep to registers); each later chunk then adds the sum before it.
void inclusive_sum(const std::int64_t* in, std::int64_t* out, std::int64_t n, const DeviceAlloc& alloc) {
  constexpr std::int64_t kChunk = std::int64_t{1} << 30;
  for (std::int64_t begin = 0; begin < n; begin += kChunk) {
    const int length = static_cast<int>(std::min(kChunk, n - begin));
    detail::cub_run(alloc, "unique: cub::DeviceScan::InclusiveSum", [&](void* temp, std::size_t& bytes) {
      return cub::DeviceScan::InclusiveSum(temp, bytes, in + begin, out + begin, length, detail::stream());
    });
    if (begin > 0)
      add_carry_kernel<<<detail::blocks_for(length), detail::kThreads, 0, detail::stream()>>>(length, out + begin - 1,
                                                                                           out + begin);
  }
}

template <class T>
void unique_typed(const T* x, std::int64_t n, bool sorted, std::int64_t* inverse,
                  const std::function<UniqueBuffers(std::int64_t)>& outputs, const DeviceAlloc& alloc) {
  using K = SortKey<T>;
  const unsigned blocks = detail::blocks_for(n);
  const cudaStream_t stream = detail::stream();
  K* keys = detail::scratch<K>(alloc, n);
  K* sorted_keys = detail::scratch<K>(alloc, n);
  auto* positions = detail::scratch<std::int64_t>(alloc, n);
  auto* sorted_positions = detail::scratch<std::int64_t>(alloc, n);
  unique_keys_kernel<T><<<blocks, detail::kThreads, 0, stream>>>(x, n, keys, positions);
  detail::cub_run(alloc, "unique: cub::DeviceRadixSort::SortPairs", [&](void* temp, std::size_t& bytes) {
    return cub::DeviceRadixSort::SortPairs(temp, bytes, keys, sorted_keys, positions, sorted_positions, n, 0,
                                           static_cast<int>(sizeof(K) * 8), stream);
  });
  auto* starts = detail::scratch<std::int64_t>(alloc, n);
  auto* group = detail::scratch<std::int64_t>(alloc, n);
  group_starts_kernel<T><<<blocks, detail::kThreads, 0, stream>>>(x, n, sorted_keys, sorted_positions, starts);
  inclusive_sum(starts, group, n, alloc);
  detail::after_launch("unique");
  std::int64_t groups = 0;
  detail::read_back(&groups, group + (n - 1), 1, "unique: reading the number of values");
  const UniqueBuffers out = outputs(groups);

  auto* first = detail::scratch<std::int64_t>(alloc, groups + 1);
  group_bounds_kernel<<<blocks, detail::kThreads, 0, stream>>>(n, groups, group, first);
  std::int64_t* marked = nullptr;  // first-occurrence order: inclusive sum of the marks
  if (!sorted) {
    std::int64_t* marks = starts;  // reused: n entries
    detail::check(cudaMemsetAsync(marks, 0, static_cast<std::size_t>(n) * sizeof(std::int64_t), stream), "unique");
    mark_first_kernel<<<detail::blocks_for(groups), detail::kThreads, 0, stream>>>(groups, first, sorted_positions,
                                                                                    marks);
    marked = detail::scratch<std::int64_t>(alloc, n);
    inclusive_sum(marks, marked, n, alloc);
  }
  auto* rank_of = detail::scratch<std::int64_t>(alloc, groups);
  group_outputs_kernel<T><<<detail::blocks_for(groups), detail::kThreads, 0, stream>>>(
      x, groups, first, sorted_positions, marked, static_cast<T*>(out.values), out.counts, rank_of);
  inverse_kernel<<<blocks, detail::kThreads, 0, stream>>>(n, group, sorted_positions, rank_of, inverse);
}

// Whether element i of x is nonzero in its compute type (NaN is).
template <class T>
struct IsSet {
  const T* x;
  __device__ bool operator()(std::int64_t i) const { return detail::widen(x[i]) != detail::compute_t<T>(0); }
};

// coords[r] = the coordinates (row-major over `shape`'s sizes) of position picked[r].
__global__ void unravel_kernel(StridedArray shape, std::int64_t count, const std::int64_t* picked,
                               std::int64_t* coords) {
  for (std::int64_t r = detail::first_index(); r < count; r += detail::grid_step()) {
    std::int64_t i = picked[r];
    std::int64_t* row = coords + r * shape.ndim;
    for (int d = shape.ndim - 1; d >= 0; --d) {
      row[d] = i % shape.sizes[d];
      i /= shape.sizes[d];
    }
  }
}

}  // namespace

void unique(const void* x, ElementType type, std::int64_t n, bool sorted, std::int64_t* inverse,
            const std::function<UniqueBuffers(std::int64_t groups)>& outputs, const DeviceAlloc& alloc, int device) {
  if (n == 0) {
    outputs(0);
    return;
  }
  detail::use_device(device);
  detail::visit(type, "unique", [&](auto tag) {
    using T = typename decltype(tag)::type;
    unique_typed<T>(static_cast<const T*>(x), n, sorted, inverse, outputs, alloc);
  });
  detail::after_launch("unique");
}

void nonzero(const StridedArray& self, const std::function<std::int64_t*(std::int64_t count)>& output,
             const DeviceAlloc& alloc, int device) {
  const std::int64_t n = detail::numel(self);
  if (n == 0) {
    output(0);
    return;
  }
  detail::use_device(device);
  auto* picked = detail::scratch<std::int64_t>(alloc, n);
  auto* count_on_device = detail::scratch<std::int64_t>(alloc, 1);
  detail::visit(self.type, "nonzero", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const IsSet<T> is_set{static_cast<const T*>(self.data)};
    detail::cub_run(alloc, "nonzero: cub::DeviceSelect::If", [&](void* temp, std::size_t& bytes) {
      return cub::DeviceSelect::If(temp, bytes, thrust::counting_iterator<std::int64_t>(0), picked, count_on_device, n,
                                   is_set, detail::stream());
    });
  });
  detail::after_launch("nonzero");
  std::int64_t count = 0;
  detail::read_back(&count, count_on_device, 1, "nonzero: reading the number of nonzero elements");
  std::int64_t* coords = output(count);
  if (count == 0 || self.ndim == 0) return;
  unravel_kernel<<<detail::blocks_for(count), detail::kThreads, 0, detail::stream()>>>(self, count, picked, coords);
  detail::after_launch("nonzero");
}

}  // namespace infini::cuda
