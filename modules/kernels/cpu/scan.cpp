// CPU scans along one dim: cumulative sum, product and log-sum-exp (ScanKernel), and the
// running max/min with the index where it was reached (ArgScanKernel). Each line along the
// dim is accumulated in order (float64 for floating types; 64-bit integers otherwise,
// wrapping around on overflow as two's complement int64), so results do not depend on the
// thread count. When the dim is contiguous each line is walked on its own; otherwise up to
// kLines neighbouring lines advance together, one step of the dim at a time, so that memory
// is still walked in order. Blocks of lines are spread over threads.
module;
#include <cmath>
#include <cstdint>
module infini.kernels;
import infini.std;

namespace infini::kernels {
namespace {

constexpr std::int64_t kLines = 64;

// One block of neighbouring lines along the scanned dim: m lines; line j's element k of
// operand i is at offset[i] + j * across[i] + k * step[i].
template <std::size_t N>
struct LineBlock {
  std::int64_t m;
  std::array<std::int64_t, N> offset, across, step;
};

// Calls block(LineBlock) for every block of lines along `dim` of the operands t (all of
// one shape), in parallel when there is enough work.
template <std::size_t N, class Block>
void for_each_line_block(const std::array<Tensor, N>& t, std::int64_t dim, Block&& block) {
  const std::int64_t n = t[0].shape()[dim];
  // The other dims enumerate the lines; the innermost of them is walked in blocks.
  Shape shape;
  std::array<Strides, N> strides;
  std::array<std::int64_t, N> step;
  for (std::size_t i = 0; i < N; ++i) step[i] = t[i].strides()[dim];
  for (std::int64_t d = 0; d < t[0].dim(); ++d) {
    if (d == dim) continue;
    shape.push_back(t[0].shape()[d]);
    for (std::size_t i = 0; i < N; ++i) strides[i].push_back(t[i].strides()[d]);
  }
  const StridedLayout<N> lines = coalesce<N>(shape, strides);
  const std::int64_t nd = static_cast<std::int64_t>(lines.shape.size());
  const std::int64_t width = nd ? lines.shape.back() : 1;
  std::int64_t rows = 1;
  for (std::int64_t d = 0; d + 1 < nd; ++d) rows *= lines.shape[d];
  if (n == 0 || rows * width == 0) return;
  const std::int64_t per_block = step[0] == 1 ? 1 : kLines;  // lines per task
  const std::int64_t blocks = (width + per_block - 1) / per_block;
  auto run = [&](std::int64_t task) {
    const std::int64_t r = task / blocks, j0 = task % blocks * per_block;
    LineBlock<N> b{std::min(per_block, width - j0), {}, {}, step};
    for (std::size_t i = 0; i < N; ++i) {
      b.across[i] = nd ? lines.strides[i].back() : 0;
      b.offset[i] = j0 * b.across[i];
    }
    for (std::int64_t d = nd - 2, rest = r; d >= 0 && rest > 0; --d) {
      const std::int64_t k = rest % lines.shape[d];
      rest /= lines.shape[d];
      for (std::size_t i = 0; i < N; ++i) b.offset[i] += k * lines.strides[i][d];
    }
    block(b);
  };
  const std::int64_t tasks = rows * blocks;
  const bool parallel = n * rows * width >= kParallelGrain && tasks > 1;
#pragma omp parallel for schedule(static) if (parallel)
  for (std::int64_t task = 0; task < tasks; ++task) run(task);
}

// log(exp(a) + exp(b)) as max + log1p(exp(min - max)); NaN propagates, and two equal
// infinities give themselves (exp(inf - inf) would be NaN).
double log_add_exp(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  const double hi = std::max(a, b), lo = std::min(a, b);
  if (hi == lo && std::isinf(hi)) return hi;
  return hi + std::log1p(std::exp(lo - hi));
}

template <class T, class Out>
void scan_typed(const Tensor& out, const Tensor& in, std::int64_t dim, ScanOp op, bool reverse) {
  using C = compute_t<T>;
  using Acc = std::conditional_t<std::is_floating_point_v<C>, double, std::uint64_t>;
  const std::int64_t n = in.shape()[dim];
  const T* x = static_cast<const T*>(in.data_ptr());
  Out* o = static_cast<Out*>(out.data_ptr());
  Acc identity = op == ScanOp::Prod ? 1 : 0;
  if constexpr (std::is_floating_point_v<Acc>)
    if (op == ScanOp::LogSumExp) identity = -std::numeric_limits<double>::infinity();
  for_each_line_block<2>({in, out}, dim, [&](const LineBlock<2>& b) {
    std::array<Acc, kLines> acc;
    acc.fill(identity);
    for (std::int64_t t = 0; t < n; ++t) {
      const std::int64_t k = reverse ? n - 1 - t : t;
      const T* xk = x + b.offset[0] + k * b.step[0];
      Out* ok = o + b.offset[1] + k * b.step[1];
      if (op == ScanOp::Sum) {
        for (std::int64_t j = 0; j < b.m; ++j) acc[j] += static_cast<Acc>(static_cast<C>(xk[j * b.across[0]]));
      } else if (op == ScanOp::Prod) {
        for (std::int64_t j = 0; j < b.m; ++j) acc[j] *= static_cast<Acc>(static_cast<C>(xk[j * b.across[0]]));
      } else if constexpr (std::is_floating_point_v<Acc>) {
        for (std::int64_t j = 0; j < b.m; ++j)
          acc[j] = log_add_exp(acc[j], static_cast<double>(static_cast<C>(xk[j * b.across[0]])));
      }
      for (std::int64_t j = 0; j < b.m; ++j) ok[j * b.across[1]] = convert<Out>(acc[j]);
    }
  });
}

void scan_cpu(const Tensor& out, const Tensor& in, std::int64_t dim, ScanOp op, bool reverse) {
  dispatch(in.dtype(), [&]<class T>() {
    using Out = std::conditional_t<is_float_compute<T>, T, std::int64_t>;
    if (out.dtype() != data_type_of<Out>())
      throw DTypeError("scan", concat("cannot scan ", in.dtype(), " into ", out.dtype(), " (expected ",
                                      data_type_of<Out>(), ")"));
    if (op == ScanOp::LogSumExp && !is_float_compute<T>)
      throw DTypeError("scan", concat("log-sum-exp scans need a floating-point input, got ", in.dtype()));
    scan_typed<T, Out>(out, in, dim, op, reverse);
  });
}

// Running max (kMax) or min along each line, PyTorch's rule: an element replaces the
// running value when it is NaN, or when the running value is not NaN and the element is
// >= (<=) it; so the index moves to later equal elements and to every later NaN.
template <class T, bool kMax>
void arg_scan_typed(const Tensor& values, const Tensor& indices, const Tensor& in, std::int64_t dim) {
  using C = compute_t<T>;
  const std::int64_t n = in.shape()[dim];
  const T* x = static_cast<const T*>(in.data_ptr());
  T* v = static_cast<T*>(values.data_ptr());
  std::int64_t* idx = static_cast<std::int64_t*>(indices.data_ptr());
  auto takes_over = [](C e, C acc) {
    if (e != e) return true;
    return acc == acc && (kMax ? e >= acc : e <= acc);
  };
  for_each_line_block<3>({in, values, indices}, dim, [&](const LineBlock<3>& b) {
    std::array<C, kLines> acc;
    std::array<std::int64_t, kLines> at{};
    for (std::int64_t j = 0; j < b.m; ++j) acc[j] = static_cast<C>(x[b.offset[0] + j * b.across[0]]);
    for (std::int64_t k = 0; k < n; ++k) {
      const T* xk = x + b.offset[0] + k * b.step[0];
      for (std::int64_t j = 0; j < b.m; ++j) {
        const C e = static_cast<C>(xk[j * b.across[0]]);
        if (takes_over(e, acc[j])) {
          acc[j] = e;
          at[j] = k;
        }
        v[b.offset[1] + j * b.across[1] + k * b.step[1]] = convert<T>(acc[j]);
        idx[b.offset[2] + j * b.across[2] + k * b.step[2]] = at[j];
      }
    }
  });
}

void arg_scan_cpu(const Tensor& values, const Tensor& indices, const Tensor& in, std::int64_t dim, ReduceOp op) {
  dispatch(in.dtype(), [&]<class T>() {
    if (op == ReduceOp::Max) arg_scan_typed<T, true>(values, indices, in, dim);
    else arg_scan_typed<T, false>(values, indices, in, dim);
  });
}

const bool registered = [] {
  KernelTable<ScanKernel>::set(DeviceType::CPU, &scan_cpu);
  KernelTable<ArgScanKernel>::set(DeviceType::CPU, &arg_scan_cpu);
  return true;
}();

}  // namespace
}  // namespace infini::kernels
