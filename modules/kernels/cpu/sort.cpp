// CPU sort, top-k and unique. Each value becomes an unsigned key whose integer order is the
// value order, with NaN above every number and -0 equal to +0 (PyTorch's rule: ascending
// sorts put NaNs last, descending ones first); f16/bf16 are compared as float. Sorting
// (key, position) pairs lexicographically gives the stable order with a plain std::sort,
// and descending order is the order of the complemented keys. Each slice is handled by
// one thread.
module;
#include <cmath>
#include <cstdint>
module infini.kernels;
import infini.std;

namespace infini::kernels {
namespace {

template <class C>
using KeyType = std::conditional_t<sizeof(C) <= 4, std::uint32_t, std::uint64_t>;

// The order-preserving key of a compute value.
template <class C>
KeyType<C> sort_key(C v) {
  using K = KeyType<C>;
  constexpr K top = K(1) << (sizeof(K) * 8 - 1);
  if constexpr (std::is_floating_point_v<C>) {
    using Bits = std::conditional_t<sizeof(C) == 4, std::uint32_t, std::uint64_t>;
    if (std::isnan(v)) return std::numeric_limits<K>::max();
    const Bits bits = std::bit_cast<Bits>(v == 0 ? C(0) : v);  // -0 -> +0
    return bits & top ? static_cast<K>(~bits) : static_cast<K>(bits | top);
  } else if constexpr (std::is_signed_v<C>) {
    return static_cast<K>(static_cast<std::make_signed_t<K>>(v)) ^ top;
  } else {
    return static_cast<K>(v);
  }
}

// Calls fn(items, out) for every slice of self along dim: items holds (key, position) for
// the slice's elements (keys complemented when `descending`); out points at the slice's
// first element in `out_tensor` (int64; its stride along dim is the caller's to apply).
template <class T, class Fn>
void for_each_slice(const Tensor& out_tensor, const Tensor& self, std::int64_t dim, bool descending, Fn&& fn) {
  using C = compute_t<T>;
  using Item = std::pair<KeyType<C>, std::int64_t>;
  const T* x = static_cast<const T*>(self.data_ptr());
  std::int64_t* out = out_tensor.data_ptr<std::int64_t>();
  const std::int64_t n = self.shape()[dim], xs = self.strides()[dim];
  for_each_position<2>(self.shape(), dim, {self.strides(), out_tensor.strides()},
                       [&](const std::array<std::int64_t, 2>& at, std::int64_t count,
                           const std::array<std::int64_t, 2>& step) {
                         std::vector<Item> items(static_cast<std::size_t>(n));
                         for (std::int64_t j = 0; j < count; ++j) {
                           const T* slice = x + at[0] + j * step[0];
                           for (std::int64_t i = 0; i < n; ++i) {
                             const auto key = sort_key(static_cast<C>(slice[i * xs]));
                             items[i] = {descending ? static_cast<KeyType<C>>(~key) : key, i};
                           }
                           fn(items, out + at[1] + j * step[1]);
                         }
                       });
}

void sort_cpu(const Tensor& indices, const Tensor& self, std::int64_t dim, bool descending) {
  const std::int64_t os = indices.strides()[dim];
  dispatch(self.dtype(), [&]<class T>() {
    for_each_slice<T>(indices, self, dim, descending, [&](auto& items, std::int64_t* out) {
      std::sort(items.begin(), items.end());
      for (std::size_t i = 0; i < items.size(); ++i) out[static_cast<std::int64_t>(i) * os] = items[i].second;
    });
  });
}

// indices has size k along dim; the slices walked are self's.
void topk_cpu(const Tensor& indices, const Tensor& self, std::int64_t dim, std::int64_t k, bool largest, bool sorted) {
  const std::int64_t os = indices.strides()[dim];
  dispatch(self.dtype(), [&]<class T>() {
    for_each_slice<T>(indices, self, dim, largest, [&](auto& items, std::int64_t* out) {
      // The k smallest (key, position) pairs: best values, equal ones by lower index.
      std::nth_element(items.begin(), items.begin() + (k - 1), items.end());
      if (sorted) std::sort(items.begin(), items.begin() + k);
      else std::sort(items.begin(), items.begin() + k, [](const auto& a, const auto& b) { return a.second < b.second; });
      for (std::int64_t i = 0; i < k; ++i) out[i * os] = items[i].second;
    });
  });
}

UniqueOutputs unique_cpu(const Tensor& self, bool sorted) {
  return dispatch(self.dtype(), [&]<class T>() {
    using C = compute_t<T>;
    const T* x = static_cast<const T*>(self.data_ptr());
    const std::int64_t n = self.numel();
    std::vector<std::pair<KeyType<C>, std::int64_t>> items(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) items[i] = {sort_key(static_cast<C>(x[i])), i};
    std::sort(items.begin(), items.end());
    // Groups of equal values are runs of equal keys, except that NaN equals nothing (one
    // group each); the lowest position of a group comes first.
    std::vector<std::int64_t> starts;
    for (std::int64_t i = 0; i < n; ++i)
      if (i == 0 || items[i].first != items[i - 1].first || is_nan(static_cast<C>(x[items[i].second])))
        starts.push_back(i);
    const std::int64_t groups = static_cast<std::int64_t>(starts.size());
    std::vector<std::int64_t> rank(starts.size());  // output slot -> group
    std::iota(rank.begin(), rank.end(), 0);
    if (!sorted)
      std::sort(rank.begin(), rank.end(),
                [&](std::int64_t a, std::int64_t b) { return items[starts[a]].second < items[starts[b]].second; });
    UniqueOutputs result{empty({groups}, {.dtype = self.dtype()}), empty(self.shape(), {.dtype = kInt64}),
                         empty({groups}, {.dtype = kInt64})};
    T* values = static_cast<T*>(result.values.data_ptr());
    std::int64_t* inverse = result.inverse.data_ptr<std::int64_t>();
    std::int64_t* counts = result.counts.data_ptr<std::int64_t>();
    for (std::int64_t r = 0; r < groups; ++r) {
      const std::int64_t g = rank[r], begin = starts[g], end = g + 1 < groups ? starts[g + 1] : n;
      values[r] = x[items[begin].second];
      counts[r] = end - begin;
      for (std::int64_t i = begin; i < end; ++i) inverse[items[i].second] = r;
    }
    return result;
  });
}

const bool registered = [] {
  KernelTable<SortKernel>::set(DeviceType::CPU, &sort_cpu);
  KernelTable<TopkKernel>::set(DeviceType::CPU, &topk_cpu);
  KernelTable<UniqueKernel>::set(DeviceType::CPU, &unique_cpu);
  return true;
}();

}  // namespace
}  // namespace infini::kernels
