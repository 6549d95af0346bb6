// CPU gather / scatter along one dim, and the index range check. A gather writes each
// output element once and runs over all of them in parallel. A scatter walks the indexed
// dim in order at each position of the other dims (for_each_position), so its updates of
// one element happen in index order on one thread: the last copy wins, reductions
// accumulate in order, and threads never share an output element.
module;
#include <cstdint>
module infini.kernels;
import infini.std;

namespace infini::kernels {
namespace {

// dst[j * ds] = src[j * ss], j < n; unit strides take a loop the compiler vectorises.
template <class T>
void copy_run(T* dst, std::int64_t ds, const T* src, std::int64_t ss, std::int64_t n) {
  if (ds == 1 && ss == 1) std::copy(src, src + n, dst);
  else
    for (std::int64_t j = 0; j < n; ++j) dst[j * ds] = src[j * ss];
}

// dst[j * ds] = combine(dst[j * ds], src[j * ss]), j < n.
template <class T, class Combine>
void combine_run(T* dst, std::int64_t ds, const T* src, std::int64_t ss, std::int64_t n, Combine combine) {
  if (ds == 1 && ss == 1)
    for (std::int64_t j = 0; j < n; ++j) dst[j] = combine(dst[j], src[j]);
  else
    for (std::int64_t j = 0; j < n; ++j) dst[j * ds] = combine(dst[j * ds], src[j * ss]);
}

std::optional<std::int64_t> index_range_cpu(const Tensor& index, std::int64_t lo, std::int64_t hi) {
  const Tensor flat = index.contiguous();
  const std::int64_t* p = flat.data_ptr<std::int64_t>();
  const std::int64_t n = flat.numel();
  constexpr std::int64_t kChunk = 65536;
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<std::int64_t> first_bad(static_cast<std::size_t>(chunks), -1);  // per chunk, a position
  auto scan = [&](std::int64_t c) {
    for (std::int64_t i = c * kChunk, end = std::min(n, (c + 1) * kChunk); i < end; ++i)
      if (p[i] < lo || p[i] >= hi) {
        first_bad[c] = i;
        return;
      }
  };
  if (chunks == 1) {
    scan(0);
  } else {
#pragma omp parallel for schedule(static)
    for (std::int64_t c = 0; c < chunks; ++c) scan(c);
  }
  for (std::int64_t i : first_bad)
    if (i >= 0) return p[i];
  return std::nullopt;
}

// Every output element is written once, so a gather runs over all of out's elements (self's
// stride along dim left out of the row walk and added per element).
void gather_cpu(const Tensor& out, const Tensor& self, std::int64_t dim, const Tensor& index) {
  dispatch(self.dtype(), [&]<class T>() {
    T* o = static_cast<T*>(out.data_ptr());
    const T* x = static_cast<const T*>(self.data_ptr());
    const std::int64_t* ix = index.data_ptr<std::int64_t>();
    const std::int64_t size = self.shape()[dim], xs = self.strides()[dim];
    Strides self_strides = self.strides();
    self_strides[dim] = 0;
    for_each_row<3>(out.shape(), {out.strides(), self_strides, index.strides()},
                    [&](const std::array<std::int64_t, 3>& at, std::int64_t n, const std::array<std::int64_t, 3>& step) {
                      if (step[2] == 0) {  // one index for the whole run (index_select): a strided row copy
                        std::int64_t k = ix[at[2]];
                        if (k < 0) k += size;
                        copy_run(o + at[0], step[0], x + at[1] + k * xs, step[1], n);
                        return;
                      }
                      for (std::int64_t j = 0; j < n; ++j) {
                        std::int64_t k = ix[at[2] + j * step[2]];
                        if (k < 0) k += size;
                        o[at[0] + j * step[0]] = x[at[1] + j * step[1] + k * xs];
                      }
                    });
  });
}

// a <- combine(a, v) for every (index, src) pair, position by position, dim in order.
template <class T, class Combine>
void scatter_typed(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& src, Combine combine) {
  T* y = static_cast<T*>(self.data_ptr());
  const T* s = static_cast<const T*>(src.data_ptr());
  const std::int64_t* ix = index.data_ptr<std::int64_t>();
  const std::int64_t n = index.shape()[dim], size = self.shape()[dim];
  const std::int64_t ys = self.strides()[dim], ss = src.strides()[dim], is = index.strides()[dim];
  for_each_position<3>(index.shape(), dim, {self.strides(), src.strides(), index.strides()},
                       [&](const std::array<std::int64_t, 3>& at, std::int64_t count,
                           const std::array<std::int64_t, 3>& step) {
                         for (std::int64_t i = 0; i < n; ++i) {
                           const T* from = s + at[1] + i * ss;
                           if (step[2] == 0) {  // one index for the block (index_add_, index_copy_)
                             std::int64_t k = ix[at[2] + i * is];
                             if (k < 0) k += size;
                             combine_run(y + at[0] + k * ys, step[0], from, step[1], count, combine);
                             continue;
                           }
                           for (std::int64_t j = 0; j < count; ++j) {
                             std::int64_t k = ix[at[2] + i * is + j * step[2]];
                             if (k < 0) k += size;
                             T& a = y[at[0] + k * ys + j * step[0]];
                             a = combine(a, from[j * step[1]]);
                           }
                         }
                       });
}

void scatter_cpu(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& src, ScatterMode mode) {
  dispatch(self.dtype(), [&]<class T>() {
    using C = compute_t<T>;  // f16/bf16 combine in float, rounded once per update
    switch (mode) {
      case ScatterMode::Copy:
        return scatter_typed<T>(self, dim, index, src, [](T, T v) { return v; });
      case ScatterMode::Add:
        return scatter_typed<T>(self, dim, index, src,
                                [](T a, T v) { return static_cast<T>(static_cast<C>(a) + static_cast<C>(v)); });
      case ScatterMode::Multiply:
        return scatter_typed<T>(self, dim, index, src,
                                [](T a, T v) { return static_cast<T>(static_cast<C>(a) * static_cast<C>(v)); });
      case ScatterMode::Amax:  // NaN propagates
        return scatter_typed<T>(self, dim, index, src, [](T a, T v) {
          const C ca = static_cast<C>(a), cv = static_cast<C>(v);
          return is_nan(ca) || is_nan(cv) || cv > ca ? (is_nan(ca) ? a : v) : a;
        });
      case ScatterMode::Amin:
        return scatter_typed<T>(self, dim, index, src, [](T a, T v) {
          const C ca = static_cast<C>(a), cv = static_cast<C>(v);
          return is_nan(ca) || is_nan(cv) || cv < ca ? (is_nan(ca) ? a : v) : a;
        });
    }
  });
}

const bool registered = [] {
  KernelTable<IndexRangeKernel>::set(DeviceType::CPU, &index_range_cpu);
  KernelTable<GatherKernel>::set(DeviceType::CPU, &gather_cpu);
  KernelTable<ScatterKernel>::set(DeviceType::CPU, &scatter_cpu);
  return true;
}();

}  // namespace
}  // namespace infini::kernels
