// CPU gather through per-dim index tables and its adjoint, the scatter-add along one dim.
// Both write each output element from one thread, in a fixed order: results do not depend
// on the thread count.
module;
#include <cstdint>

#include "../destination_groups.h"
module infini.kernels;
import infini.std;

namespace infini::kernels {
namespace {

// out (contiguous) row by row: row r of the last dim starts at the input offset the
// outer dims' tables give; the last dim reads through its table, or by stride when it
// has none. Rows are cut into pieces of kBlock elements, spread over threads.
void gather_dims_cpu(const Tensor& out, const Tensor& in, const std::vector<DimIndex>& index) {
  const Shape shape = out.shape();
  const std::int64_t nd = static_cast<std::int64_t>(shape.size());
  // offsets[d][j]: what output index j of dim d adds to the input element offset
  std::vector<std::vector<std::int64_t>> offsets(static_cast<std::size_t>(nd));
  for (std::int64_t d = 0; d < nd; ++d) {
    offsets[d].resize(static_cast<std::size_t>(shape[d]));
    for (std::int64_t j = 0; j < shape[d]; ++j) offsets[d][j] = j * in.strides()[d];
  }
  bool last_indexed = false;
  for (const DimIndex& t : index) {
    for (std::size_t j = 0; j < t.index.size(); ++j) offsets[t.dim][j] = t.index[j] * in.strides()[t.dim];
    last_indexed = last_indexed || t.dim == nd - 1;
  }
  dispatch(out.dtype(), [&]<class T>() {
    T* o = static_cast<T*>(out.data_ptr());
    const T* x = static_cast<const T*>(in.data_ptr());
    if (nd == 0) {
      o[0] = x[0];
      return;
    }
    const std::int64_t inner = shape[nd - 1];
    const std::int64_t rows = out.numel() / inner;
    const std::int64_t blocks = (inner + kBlock - 1) / kBlock;  // pieces of a row, so long rows spread too
    const std::int64_t inner_stride = in.strides()[nd - 1];
    const std::int64_t* last = offsets[nd - 1].data();
    auto run = [&](std::int64_t task) {
      const std::int64_t r = task / blocks, j0 = task % blocks * kBlock, j1 = std::min(inner, j0 + kBlock);
      std::int64_t base = 0;
      for (std::int64_t d = nd - 2, rest = r; d >= 0; --d) {
        base += offsets[d][rest % shape[d]];
        rest /= shape[d];
      }
      T* row = o + r * inner;
      const T* src = x + base;
      if (last_indexed) {
        for (std::int64_t j = j0; j < j1; ++j) row[j] = src[last[j]];
      } else {
        for (std::int64_t j = j0; j < j1; ++j) row[j] = src[j * inner_stride];
      }
    };
    const std::int64_t tasks = rows * blocks;
    if (out.numel() < kParallelGrain) {
      for (std::int64_t task = 0; task < tasks; ++task) run(task);
    } else {
#pragma omp parallel for schedule(static)
      for (std::int64_t task = 0; task < tasks; ++task) run(task);
    }
  });
}

// in (outer, m, inner) -> out (outer, n, inner). Output row (o, i) sums the input rows
// (o, j) with index[j] == i, in ascending j, one lane of at most kLanes elements of the
// inner dim at a time. A task covers one lane of `rows_per_task` consecutive output rows
// (several only when rows are shorter than a lane).
void scatter_add_dim_cpu(const Tensor& out, const Tensor& in, std::int64_t dim,
                         const std::vector<std::int64_t>& index) {
  constexpr std::int64_t kLanes = 256;
  const Shape& shape = in.shape();
  std::int64_t outer = 1, inner = 1;
  for (std::int64_t d = 0; d < dim; ++d) outer *= shape[d];
  for (std::int64_t d = dim + 1; d < in.dim(); ++d) inner *= shape[d];
  const std::int64_t m = shape[dim], n = out.shape()[dim];
  const DestinationGroups groups = group_by_destination(index, n);
  const std::vector<std::int64_t>& starts = groups.starts;
  const std::vector<std::int64_t>& sources = groups.sources;
  const std::int64_t lanes = (inner + kLanes - 1) / kLanes;
  const std::int64_t rows = outer * n, rows_per_task = std::max<std::int64_t>(1, kLanes / inner);
  const std::int64_t tasks = (rows + rows_per_task - 1) / rows_per_task * lanes;
  dispatch(out.dtype(), [&]<class T>() {
    using C = compute_t<T>;
    using Acc = std::conditional_t<std::is_floating_point_v<C>, double, std::int64_t>;
    T* y = static_cast<T*>(out.data_ptr());
    const T* x = static_cast<const T*>(in.data_ptr());
    auto run = [&](std::int64_t task) {
      const std::int64_t lane = task % lanes, r0 = task / lanes * rows_per_task;
      const std::int64_t r1 = std::min(rows, r0 + rows_per_task);
      const std::int64_t k0 = lane * kLanes, len = std::min(kLanes, inner - k0);
      if (inner == 1) {  // rows of one element: no lanes
        for (std::int64_t r = r0, o = r0 / n, i = r0 % n; r < r1; ++r) {
          const T* block = x + o * m;
          Acc acc = 0;
          for (std::int64_t p = starts[i]; p < starts[i + 1]; ++p)
            acc += static_cast<Acc>(static_cast<C>(block[sources[p]]));
          y[r] = convert<T>(acc);
          if (++i == n) {
            i = 0;
            ++o;
          }
        }
        return;
      }
      Acc acc[kLanes];
      for (std::int64_t r = r0, o = r0 / n, i = r0 % n; r < r1; ++r) {  // row r is (o, i)
        const T* block = x + o * m * inner + k0;  // input rows of this o
        std::fill_n(acc, len, Acc(0));
        for (std::int64_t p = starts[i]; p < starts[i + 1]; ++p) {
          const T* src = block + sources[p] * inner;
          for (std::int64_t k = 0; k < len; ++k) acc[k] += static_cast<Acc>(static_cast<C>(src[k]));
        }
        T* dst = y + r * inner + k0;
        for (std::int64_t k = 0; k < len; ++k) dst[k] = convert<T>(acc[k]);
        if (++i == n) {
          i = 0;
          ++o;
        }
      }
    };
    if (std::max(outer * m, rows) * inner < kParallelGrain) {
      for (std::int64_t task = 0; task < tasks; ++task) run(task);
    } else {
#pragma omp parallel for schedule(static)
      for (std::int64_t task = 0; task < tasks; ++task) run(task);
    }
  });
}

const bool registered = [] {
  KernelTable<GatherDimsKernel>::set(DeviceType::CPU, &gather_dims_cpu);
  KernelTable<ScatterAddDimKernel>::set(DeviceType::CPU, &scatter_add_dim_cpu);
  return true;
}();

}  // namespace
}  // namespace infini::kernels
