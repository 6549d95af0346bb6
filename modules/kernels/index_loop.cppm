// Iteration for ops that walk one dim in order at every position of the others (gather,
// scatter, sort): the non-`dim` coordinates are coalesced like for_each_row's, split into
// blocks and spread over OpenMP threads; the callee walks `dim` itself. One position is
// always handled by one thread, start to end of the dim, so a scatter's writes into one
// element happen in index order and no two threads ever write the same element.
module;
#include <omp.h>
export module infini.kernels:index_loop;
import infini.std;
import infini.tensor;
import :strided_loop;

export namespace infini::kernels {

// Calls block(offsets, count, steps) for blocks of positions of `shape` with `dim` left out:
// position j of a block starts at offsets[k] + j * steps[k] in operand k; the callee reaches
// element i along dim by adding i * strides[k][dim]. Blocks may run concurrently.
template <std::size_t N, class Block>
void for_each_position(Shape shape, std::int64_t dim, const std::array<Strides, N>& strides, Block&& block) {
  const std::int64_t length = shape[dim];
  shape[dim] = 1;
  std::int64_t positions = 1;
  for (std::int64_t s : shape) positions *= s;
  if (positions == 0 || length == 0) return;
  const StridedLayout<N> layout = coalesce(shape, strides);
  const std::int64_t ndim = static_cast<std::int64_t>(layout.shape.size());
  const std::int64_t inner = ndim ? layout.shape.back() : 1;
  std::array<std::int64_t, N> steps{};
  for (std::size_t k = 0; k < N; ++k) steps[k] = ndim ? layout.strides[k].back() : 0;
  // Rows are split into blocks only as far as needed for about four tasks per thread, and
  // never below 64 positions, so that blocks stay long contiguous runs.
  const std::int64_t rows = positions / inner;
  const std::int64_t wanted = (4 * static_cast<std::int64_t>(omp_get_max_threads()) + rows - 1) / rows;
  const std::int64_t most = std::max<std::int64_t>(1, inner / 64);
  const std::int64_t split = std::clamp<std::int64_t>(wanted, std::max<std::int64_t>(1, (inner + kBlock - 1) / kBlock), most);
  const std::int64_t block_size = (inner + split - 1) / split;
  const std::int64_t blocks_per_row = (inner + block_size - 1) / block_size;
  const std::int64_t tasks = rows * blocks_per_row;
  auto run = [&](std::int64_t task) {
    const std::int64_t r = task / blocks_per_row;
    const std::int64_t j0 = task % blocks_per_row * block_size;
    std::array<std::int64_t, N> offsets{};
    for (std::size_t k = 0; k < N; ++k) offsets[k] = j0 * steps[k];
    for (std::int64_t d = ndim - 2, rest = r; d >= 0 && rest > 0; --d) {
      const std::int64_t i = rest % layout.shape[d];
      rest /= layout.shape[d];
      for (std::size_t k = 0; k < N; ++k) offsets[k] += i * layout.strides[k][d];
    }
    block(offsets, std::min(block_size, inner - j0), steps);
  };
  if (positions * length < kParallelGrain || tasks == 1) {
    for (std::int64_t task = 0; task < tasks; ++task) run(task);
    return;
  }
#pragma omp parallel for schedule(static)
  for (std::int64_t task = 0; task < tasks; ++task) run(task);
}

}  // namespace infini::kernels
