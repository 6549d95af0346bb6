// multinomial: category draws from rows of unnormalised probabilities, equal to the CPU
// kernel's (modules/kernels/cpu/index_multinomial.cpp) for the same Philox counters.
//  1. check_rows: one block per row reduces (any non-finite or negative, count of positive
//     entries, last non-zero category); the first failing row (integer atomicMin) and its
//     counts come back to the host, which returns it before anything is drawn.
//  2. With replacement: running_sums forms each row's CDF as the CPU does, one double add
//     after another in category order (one thread per row, fed through shared memory), so
//     every CDF value is bit-identical; draw_with_replacement then binary-searches the
//     first CDF value above u * total (std::upper_bound), capped at the last non-zero one.
//  3. Without replacement: exponential_keys gives category c of row r the key -log(u) / p_c
//     (inf for p_c = 0); a stable segmented sort of (key, c) per row, then the first
//     `samples` categories of each row are the draw (the CPU's partial_sort of (key, c)).
#include <cub/block/block_reduce.cuh>
#include <cub/device/device_segmented_sort.cuh>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "element_types.cuh"
#include "infini/cuda/random.h"
#include "infini/math/philox.h"
#include "infini/math/random_transforms.h"
#include "launch.cuh"
#include "strided.cuh"

namespace infini::cuda {
namespace {

using Kind = MultinomialProblem::Kind;

constexpr int kRowThreads = 256;  // threads of the per-row blocks
constexpr int kChunk = 2048;      // probabilities staged in shared memory per step of a row's CDF

// What check_rows finds in one row.
struct RowStats {
  std::int64_t positive = 0;  // entries > 0
  std::int64_t last = 0;      // the last category with a non-zero entry (0 when none)
  Kind kind = Kind::None;
};

// A partial row reduction: any bad entry, positive count, last non-zero category.
struct Partial {
  int bad;
  std::int64_t positive;
  std::int64_t last;
};
struct CombinePartials {
  __device__ Partial operator()(const Partial& a, const Partial& b) const {
    return {a.bad | b.bad, a.positive + b.positive, a.last > b.last ? a.last : b.last};
  }
};

template <class T>
__device__ double weight(T p) {
  return static_cast<double>(detail::widen(p));
}

// probs (rows, categories). stats[r] for every row; *first_bad = the least failing row
// (it starts at ~0: none). `needed` positive entries per row (samples without replacement).
template <class T>
__global__ void check_rows_kernel(const T* probs, std::int64_t rows, std::int64_t categories, std::int64_t needed,
                                  RowStats* stats, unsigned long long* first_bad) {
  using Reduce = cub::BlockReduce<Partial, kRowThreads>;
  __shared__ typename Reduce::TempStorage temp;
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* p = probs + r * categories;
    Partial mine{0, 0, 0};
    for (std::int64_t c = threadIdx.x; c < categories; c += kRowThreads) {
      const double w = weight(p[c]);
      mine.bad |= !isfinite(w) || w < 0;
      mine.positive += w > 0;
      if (w != 0) mine.last = c;
    }
    const Partial row = Reduce(temp).Reduce(mine, CombinePartials{});
    if (threadIdx.x == 0) {
      // Non-negative finite weights sum to 0 exactly when none is positive.
      const Kind kind = row.bad                 ? Kind::NotFiniteOrNegative
                        : row.positive == 0     ? Kind::ZeroSum
                        : row.positive < needed ? Kind::TooFewPositive
                                                : Kind::None;
      stats[r] = {row.positive, row.last, kind};
      if (kind != Kind::None) atomicMin(first_bad, static_cast<unsigned long long>(r));
    }
    __syncthreads();  // temp is reused for the next row
  }
}

// cdf (rows, categories): cdf[r][c] = ((p[r][0] + p[r][1]) + ...) + p[r][c] in double, in
// that order. Thread 0 of the row's block adds; the others stage and store.
template <class T>
__global__ void running_sums_kernel(const T* probs, std::int64_t rows, std::int64_t categories, double* cdf) {
  __shared__ double chunk[kChunk];
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* p = probs + r * categories;
    double* out = cdf + r * categories;
    double total = 0;
    for (std::int64_t base = 0; base < categories; base += kChunk) {
      const int n = static_cast<int>(std::min<std::int64_t>(kChunk, categories - base));
      for (int i = threadIdx.x; i < n; i += blockDim.x) chunk[i] = weight(p[base + i]);
      __syncthreads();
      if (threadIdx.x == 0)
        for (int i = 0; i < n; ++i) chunk[i] = total += chunk[i];
      __syncthreads();
      for (int i = threadIdx.x; i < n; i += blockDim.x) out[base + i] = chunk[i];
      __syncthreads();
    }
  }
}

// out (rows, samples): sample s of row r uses counter offset + r * samples + s.
__global__ void draw_with_replacement_kernel(const double* cdf, const RowStats* stats, std::int64_t rows,
                                             std::int64_t categories, std::int64_t samples, PhiloxCounters counters,
                                             std::int64_t* out) {
  const std::int64_t n = rows * samples;
  for (std::int64_t i = detail::first_index(); i < n; i += detail::grid_step()) {
    const std::int64_t r = i / samples;
    const double* row = cdf + r * categories;
    const double u = math::uniform53(math::philox4x32(counters.seed, counters.offset + static_cast<std::uint64_t>(i)));
    const double target = u * row[categories - 1];
    std::int64_t lo = 0, hi = categories;  // the first c with target < row[c]
    while (lo < hi) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      if (target < row[mid]) hi = mid;
      else lo = mid + 1;
    }
    // u * total may round up to total: the last category with weight.
    out[i] = lo < stats[r].last ? lo : stats[r].last;
  }
}

// keys, values (rows, categories): category c of row r (counter offset + r * categories + c)
// gets the key -log(u) / p (inf for p = 0), u in (0, 1], as the bits of that non-negative
// double (-0 as +0), so unsigned order is numeric order; values[r][c] = c.
template <class T>
__global__ void exponential_keys_kernel(const T* probs, std::int64_t n, std::int64_t categories,
                                        PhiloxCounters counters, std::uint64_t* keys, std::int64_t* values) {
  for (std::int64_t i = detail::first_index(); i < n; i += detail::grid_step()) {
    const double w = weight(probs[i]);
    const auto r = math::philox4x32(counters.seed, counters.offset + static_cast<std::uint64_t>(i));
    const double u = 1.0 - math::uniform53(r);
    const double key = w > 0 ? -log(u) / w : std::numeric_limits<double>::infinity();
    keys[i] = key == 0 ? 0 : static_cast<std::uint64_t>(__double_as_longlong(key));
    values[i] = i % categories;
  }
}

// out[r][s] = sorted[r][s]: the first `samples` categories of each sorted row.
__global__ void first_samples_kernel(const std::int64_t* sorted, std::int64_t rows, std::int64_t categories,
                                     std::int64_t samples, std::int64_t* out) {
  const std::int64_t n = rows * samples;
  for (std::int64_t i = detail::first_index(); i < n; i += detail::grid_step())
    out[i] = sorted[i / samples * categories + i % samples];
}

// Segment r of the sort: [r * categories, (r + 1) * categories).
struct RowStart {
  std::int64_t categories;
  __host__ __device__ std::int64_t operator()(std::int64_t r) const { return r * categories; }
};

unsigned row_blocks(std::int64_t rows) {
  return static_cast<unsigned>(std::min<std::int64_t>(rows, detail::kMaxBlocks));
}

template <class T>
MultinomialProblem first_failing_row(const T* probs, std::int64_t rows, std::int64_t categories, std::int64_t needed,
                                     RowStats* stats, const Allocate& allocate) {
  auto* first_bad = static_cast<unsigned long long*>(allocate(sizeof(unsigned long long)));
  detail::check(cudaMemsetAsync(first_bad, 0xff, sizeof(unsigned long long), detail::stream()),
                "multinomial: cudaMemsetAsync");
  check_rows_kernel<T>
      <<<row_blocks(rows), kRowThreads, 0, detail::stream()>>>(probs, rows, categories, needed, stats, first_bad);
  detail::after_launch("multinomial");
  unsigned long long bad = 0;
  detail::check(cudaMemcpyAsync(&bad, first_bad, sizeof(bad), cudaMemcpyDeviceToHost, detail::stream()),
                "multinomial: cudaMemcpyAsync");
  detail::check(cudaStreamSynchronize(detail::stream()), "multinomial: cudaStreamSynchronize");
  if (bad >= static_cast<unsigned long long>(rows)) return {};
  RowStats row;
  detail::check(cudaMemcpyAsync(&row, stats + bad, sizeof(row), cudaMemcpyDeviceToHost, detail::stream()),
                "multinomial: cudaMemcpyAsync");
  detail::check(cudaStreamSynchronize(detail::stream()), "multinomial: cudaStreamSynchronize");
  return {row.kind, static_cast<std::int64_t>(bad), row.positive};
}

template <class T>
void draw_with_replacement(std::int64_t* out, const T* probs, std::int64_t rows, std::int64_t categories,
                           std::int64_t samples, PhiloxCounters counters, const RowStats* stats,
                           const Allocate& allocate) {
  auto* cdf = static_cast<double*>(allocate(sizeof(double) * static_cast<std::size_t>(rows * categories)));
  running_sums_kernel<T><<<row_blocks(rows), kRowThreads, 0, detail::stream()>>>(probs, rows, categories, cdf);
  draw_with_replacement_kernel<<<detail::blocks_for(rows * samples), detail::kThreads, 0, detail::stream()>>>(
      cdf, stats, rows, categories, samples, counters, out);
}

template <class T>
void draw_without_replacement(std::int64_t* out, const T* probs, std::int64_t rows, std::int64_t categories,
                              std::int64_t samples, PhiloxCounters counters, const Allocate& allocate) {
  const std::int64_t n = rows * categories;
  const std::size_t bytes = sizeof(std::uint64_t) * static_cast<std::size_t>(n);
  auto* keys = static_cast<std::uint64_t*>(allocate(bytes));
  auto* sorted_keys = static_cast<std::uint64_t*>(allocate(bytes));
  auto* values = static_cast<std::int64_t*>(allocate(bytes));
  auto* sorted_values = static_cast<std::int64_t*>(allocate(bytes));
  exponential_keys_kernel<T><<<detail::blocks_for(n), detail::kThreads, 0, detail::stream()>>>(
      probs, n, categories, counters, keys, values);
  const auto starts = thrust::make_transform_iterator(thrust::counting_iterator<std::int64_t>(0), RowStart{categories});
  std::size_t temp_bytes = 0;
  detail::check(cub::DeviceSegmentedSort::StableSortPairs(nullptr, temp_bytes, keys, sorted_keys, values,
                                                           sorted_values, n, rows, starts, starts + 1,
                                                           detail::stream()),
                "multinomial: segmented sort size");
  detail::check(cub::DeviceSegmentedSort::StableSortPairs(allocate(temp_bytes), temp_bytes, keys, sorted_keys, values,
                                                           sorted_values, n, rows, starts, starts + 1,
                                                           detail::stream()),
                "multinomial: segmented sort");
  first_samples_kernel<<<detail::blocks_for(rows * samples), detail::kThreads, 0, detail::stream()>>>(
      sorted_values, rows, categories, samples, out);
}

}  // namespace

MultinomialProblem multinomial(std::int64_t* out, const void* probs, ElementType type, std::int64_t rows,
                               std::int64_t categories, std::int64_t samples, bool replacement,
                               PhiloxCounters counters, const Allocate& allocate, int device) {
  if (rows == 0) return {};
  detail::refuse_capture("multinomial", "each replay would draw the same samples");
  detail::use_device(device);
  return detail::visit_floating(type, "multinomial", [&](auto tag) -> MultinomialProblem {
    using T = typename decltype(tag)::type;
    const T* p = static_cast<const T*>(probs);
    auto* stats = static_cast<RowStats*>(allocate(sizeof(RowStats) * static_cast<std::size_t>(rows)));
    // Every row is checked before any is drawn from.
    const MultinomialProblem problem =
        first_failing_row(p, rows, categories, replacement ? 1 : samples, stats, allocate);
    if (problem.kind != Kind::None || samples == 0) return problem;
    if (replacement) draw_with_replacement(out, p, rows, categories, samples, counters, stats, allocate);
    else draw_without_replacement(out, p, rows, categories, samples, counters, allocate);
    detail::after_launch("multinomial");
    return {};
  });
}

}  // namespace infini::cuda
