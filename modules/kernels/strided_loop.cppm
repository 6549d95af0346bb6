// Elementwise iteration over N strided operands of one shape. Dims are coalesced
// (size-1 dims dropped, neighbours merged where every operand is contiguous across them),
// then the innermost dim is handed to the kernel in pieces of at most kBlock elements,
// spread over OpenMP threads when there is enough work.
export module infini.kernels:strided_loop;
import infini.std;
import infini.tensor;

export namespace infini::kernels {

template <std::size_t N>
struct StridedLayout {
  Shape shape;                   // coalesced; empty for a single element
  std::array<Strides, N> strides;  // per operand, in elements
};

template <std::size_t N>
StridedLayout<N> coalesce(const Shape& shape, const std::array<Strides, N>& strides) {
  StridedLayout<N> out;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !out.shape.empty();
    for (std::size_t k = 0; k < N && merge; ++k) merge = out.strides[k].back() == strides[k][d] * shape[d];
    if (merge) {
      out.shape.back() *= shape[d];
      for (std::size_t k = 0; k < N; ++k) out.strides[k].back() = strides[k][d];
    } else {
      out.shape.push_back(shape[d]);
      for (std::size_t k = 0; k < N; ++k) out.strides[k].push_back(strides[k][d]);
    }
  }
  return out;
}

inline constexpr std::int64_t kParallelGrain = 32768;  // elements below which one thread does the work
inline constexpr std::int64_t kBlock = 16384;          // elements of a row one task handles

// Calls row(offsets, n, inner_strides) for pieces of the innermost rows: element j of a
// piece is at offsets[k] + j * inner_strides[k] of operand k. Pieces may run concurrently.
template <std::size_t N, class Row>
void for_each_row(const Shape& shape, const std::array<Strides, N>& strides, Row&& row) {
  const StridedLayout<N> layout = coalesce(shape, strides);
  std::int64_t numel = 1;
  for (std::int64_t s : shape) numel *= s;
  if (numel == 0) return;
  const std::int64_t ndim = static_cast<std::int64_t>(layout.shape.size());
  const std::int64_t inner = ndim ? layout.shape.back() : 1;
  std::array<std::int64_t, N> inner_strides{};
  for (std::size_t k = 0; k < N; ++k) inner_strides[k] = ndim ? layout.strides[k].back() : 0;
  const std::int64_t blocks_per_row = (inner + kBlock - 1) / kBlock;
  const std::int64_t tasks = numel / inner * blocks_per_row;
  auto run = [&](std::int64_t task) {
    const std::int64_t r = task / blocks_per_row;
    const std::int64_t j0 = task % blocks_per_row * kBlock;
    std::array<std::int64_t, N> offsets{};
    for (std::size_t k = 0; k < N; ++k) offsets[k] = j0 * inner_strides[k];
    for (std::int64_t d = ndim - 2, rest = r; d >= 0 && rest > 0; --d) {
      const std::int64_t i = rest % layout.shape[d];
      rest /= layout.shape[d];
      for (std::size_t k = 0; k < N; ++k) offsets[k] += i * layout.strides[k][d];
    }
    row(offsets, std::min(kBlock, inner - j0), inner_strides);
  };
  if (numel < kParallelGrain || tasks == 1) {
    for (std::int64_t task = 0; task < tasks; ++task) run(task);
    return;
  }
#pragma omp parallel for schedule(static)
  for (std::int64_t task = 0; task < tasks; ++task) run(task);
}

}  // namespace infini::kernels
