// CPU scans (cumulative sum and product along one dim). Each line along the dim is
// accumulated in order (float64 for floating types; 64-bit integers otherwise, wrapping
// around on overflow as two's complement int64), so results do not depend on the thread
// count. When the dim is contiguous each line is walked on its own; otherwise up to kLines
// neighbouring lines advance together, one step of the dim at a time, so that memory is
// still walked in order. Blocks of lines are spread over threads.
module;
#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>
module infini.kernels;

namespace infini::kernels {
namespace {

constexpr std::int64_t kLines = 64;

template <class T, class Out>
void scan_typed(const Tensor& out, const Tensor& in, std::int64_t dim, ScanOp op, bool reverse) {
  using C = compute_t<T>;
  using Acc = std::conditional_t<std::is_floating_point_v<C>, double, std::uint64_t>;
  const std::int64_t n = in.shape()[dim];
  const std::int64_t in_step = in.strides()[dim], out_step = out.strides()[dim];
  // The other dims enumerate the lines; the innermost of them is walked in blocks.
  Shape shape;
  Strides in_strides, out_strides;
  for (std::int64_t d = 0; d < in.dim(); ++d) {
    if (d == dim) continue;
    shape.push_back(in.shape()[d]);
    in_strides.push_back(in.strides()[d]);
    out_strides.push_back(out.strides()[d]);
  }
  const StridedLayout<2> lines = coalesce<2>(shape, {in_strides, out_strides});
  const std::int64_t nd = static_cast<std::int64_t>(lines.shape.size());
  const std::int64_t width = nd ? lines.shape.back() : 1;
  const std::int64_t in_across = nd ? lines.strides[0].back() : 0, out_across = nd ? lines.strides[1].back() : 0;
  std::int64_t rows = 1;
  for (std::int64_t d = 0; d + 1 < nd; ++d) rows *= lines.shape[d];
  if (n == 0 || rows * width == 0) return;
  const std::int64_t block = in_step == 1 ? 1 : kLines;  // lines per task
  const std::int64_t blocks = (width + block - 1) / block;
  const T* x = static_cast<const T*>(in.data_ptr());
  Out* o = static_cast<Out*>(out.data_ptr());
  auto run = [&](std::int64_t task) {
    const std::int64_t r = task / blocks, j0 = task % blocks * block, m = std::min(block, width - j0);
    std::int64_t in_offset = j0 * in_across, out_offset = j0 * out_across;
    for (std::int64_t d = nd - 2, rest = r; d >= 0 && rest > 0; --d) {
      const std::int64_t i = rest % lines.shape[d];
      rest /= lines.shape[d];
      in_offset += i * lines.strides[0][d];
      out_offset += i * lines.strides[1][d];
    }
    std::array<Acc, kLines> acc;
    acc.fill(op == ScanOp::Sum ? 0 : 1);
    for (std::int64_t t = 0; t < n; ++t) {
      const std::int64_t k = reverse ? n - 1 - t : t;
      const T* xk = x + in_offset + k * in_step;
      Out* ok = o + out_offset + k * out_step;
      if (op == ScanOp::Sum)
        for (std::int64_t j = 0; j < m; ++j) acc[j] += static_cast<Acc>(static_cast<C>(xk[j * in_across]));
      else
        for (std::int64_t j = 0; j < m; ++j) acc[j] *= static_cast<Acc>(static_cast<C>(xk[j * in_across]));
      for (std::int64_t j = 0; j < m; ++j) ok[j * out_across] = convert<Out>(acc[j]);
    }
  };
  const std::int64_t tasks = rows * blocks;
  const bool parallel = n * rows * width >= kParallelGrain && tasks > 1;
#pragma omp parallel for schedule(static) if (parallel)
  for (std::int64_t task = 0; task < tasks; ++task) run(task);
}

void scan_cpu(const Tensor& out, const Tensor& in, std::int64_t dim, ScanOp op, bool reverse) {
  dispatch(in.dtype(), [&]<class T>() {
    using Out = std::conditional_t<is_float_compute<T>, T, std::int64_t>;
    if (out.dtype() != data_type_of<Out>())
      throw DTypeError("scan", concat("cannot scan ", in.dtype(), " into ", out.dtype(), " (expected ",
                                      data_type_of<Out>(), ")"));
    scan_typed<T, Out>(out, in, dim, op, reverse);
  });
}

const bool registered = [] {
  KernelTable<ScanKernel>::set(DeviceType::CPU, &scan_cpu);
  return true;
}();

}  // namespace
}  // namespace infini::kernels
