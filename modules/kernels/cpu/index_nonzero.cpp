// CPU nonzero: chunks of the (contiguous) input count their nonzero elements in parallel,
// a prefix sum gives each chunk its first output row, and the chunks then write their
// coordinates in parallel (walking runs of the last dim), so rows come out in row-major
// order whatever the thread count.
module;
#include <cstdint>
module infini.kernels;
import infini.std;

namespace infini::kernels {
namespace {

Tensor nonzero_cpu(const Tensor& self) {
  return dispatch(self.dtype(), [&]<class T>() {
    using C = compute_t<T>;
    const T* x = static_cast<const T*>(self.data_ptr());
    const std::int64_t n = self.numel(), ndim = self.dim();
    constexpr std::int64_t kChunk = 65536;
    const std::int64_t chunks = (n + kChunk - 1) / kChunk;
    auto is_set = [&](std::int64_t i) { return static_cast<C>(x[i]) != C(0); };  // NaN counts as nonzero
    std::vector<std::int64_t> first_row(static_cast<std::size_t>(chunks) + 1, 0);
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (std::int64_t c = 0; c < chunks; ++c) {
      std::int64_t count = 0;
      for (std::int64_t i = c * kChunk, end = std::min(n, (c + 1) * kChunk); i < end; ++i) count += is_set(i);
      first_row[c + 1] = count;
    }
    for (std::int64_t c = 0; c < chunks; ++c) first_row[c + 1] += first_row[c];
    Tensor out = empty({first_row[chunks], ndim}, {.dtype = kInt64});
    std::int64_t* coords = out.data_ptr<std::int64_t>();
    const Shape& shape = self.shape();
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (std::int64_t c = 0; c < chunks; ++c) {
      if (ndim == 0) continue;  // a 0-d input: rows of no coordinates
      std::int64_t* row = coords + first_row[c] * ndim;
      const std::int64_t begin = c * kChunk, end = std::min(n, (c + 1) * kChunk);
      // Walk runs along the last dim; the other coordinates step once per run.
      std::vector<std::int64_t> at(static_cast<std::size_t>(ndim));  // coordinates of element i
      for (std::int64_t d = ndim - 1, rest = begin; d >= 0; --d) {
        at[d] = rest % shape[d];
        rest /= shape[d];
      }
      const std::int64_t last = shape[ndim - 1];
      for (std::int64_t i = begin; i < end;) {
        const std::int64_t run = std::min(end - i, last - at[ndim - 1]);
        for (std::int64_t t = 0; t < run; ++t) {
          if (!is_set(i + t)) continue;
          std::copy(at.begin(), at.end() - 1, row);
          row[ndim - 1] = at[ndim - 1] + t;
          row += ndim;
        }
        i += run;
        at[ndim - 1] += run;
        for (std::int64_t d = ndim - 1; d > 0 && at[d] == shape[d]; --d) {
          at[d] = 0;
          ++at[d - 1];
        }
      }
    }
    return out;
  });
}

const bool registered = [] {
  KernelTable<NonzeroKernel>::set(DeviceType::CPU, &nonzero_cpu);
  return true;
}();

}  // namespace
}  // namespace infini::kernels
