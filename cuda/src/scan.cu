// scan and arg_scan: cumulative sum, product and log-sum-exp, and the running max/min with
// its index, along one dim (the CPU kernels of modules/kernels/cpu/scan.cpp).
//
// The other dims enumerate "lines" along the scanned dim. A line is scanned by one thread
// (short lines, or lines whose elements are far apart while neighbouring lines are adjacent)
// or by a warp or a block, tile by tile: an inclusive scan of the tile in a fixed tree
// (Hillis-Steele within warps, then the warps' totals in order), combined with the carry of
// the tiles before. Each op's combine is associative, so every schedule computes the same
// running values up to rounding, and each schedule depends only on the shape (same bits on
// every run).
#include <cuda/std/limits>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "element_types.cuh"
#include "infini/cuda/reduce.h"
#include "grid_math.cuh"
#include "launch.cuh"
#include "strided.cuh"
#include "warp_shuffle.cuh"

namespace infini::cuda {
namespace {

using detail::compute_t;
using detail::ceil_div;
using detail::convert;
using detail::grid_for;
using detail::is_float_compute;
using detail::kThreads;
using detail::ValueIndex;
using detail::widen;

// The lines of a scan: in's and the outputs' dims other than the scanned one, coalesced
// together (their shared sizes enumerate the lines), and the scanned dim's length and strides.
struct ScanPlan {
  StridedArray in, out, out2;  // out2: the second output (arg_scan's indices), else out again
  std::int64_t lines = 0, n = 0;
  std::int64_t step_in = 0, step_out = 0, step_out2 = 0;
  bool reverse = false;
};

ScanPlan plan_scan(const StridedArray& in, const StridedArray& out, const StridedArray& out2, int dim, bool reverse,
                   const char* op) {
  if (in.ndim < 1 || in.ndim > kMaxDims || dim < 0 || dim >= in.ndim)
    throw CudaError(std::string(op) + ": dim out of range");
  for (const StridedArray* a : {&out, &out2})
    if (a->ndim != in.ndim || !std::equal(in.sizes, in.sizes + in.ndim, a->sizes))
      throw CudaError(std::string(op) + ": outputs and in sizes differ");
  ScanPlan p;
  p.in = in;
  p.out = out;
  p.out2 = out2;
  p.n = in.sizes[dim];
  p.step_in = in.strides[dim];
  p.step_out = out.strides[dim];
  p.step_out2 = out2.strides[dim];
  p.reverse = reverse;
  for (StridedArray* a : {&p.in, &p.out, &p.out2}) {
    std::copy(a->sizes + dim + 1, a->sizes + a->ndim, a->sizes + dim);
    std::copy(a->strides + dim + 1, a->strides + a->ndim, a->strides + dim);
    --a->ndim;
  }
  detail::coalesce({&p.in, &p.out, &p.out2});
  p.lines = detail::numel(p.in);
  return p;
}

// The offsets of line `line`'s first element in in, out and out2 (one unravelling for all).
struct LineStart {
  std::int64_t in = 0, out = 0, out2 = 0;
};
__device__ LineStart line_start(const ScanPlan& p, std::int64_t line) {
  LineStart s;
#pragma unroll 1
  for (int d = p.in.ndim - 1; d >= 0; --d) {
    const std::int64_t j = d > 0 ? line % p.in.sizes[d] : line;
    line /= p.in.sizes[d];
    s.in += j * p.in.strides[d];
    s.out += j * p.out.strides[d];
    s.out2 += j * p.out2.strides[d];
  }
  return s;
}

// An op: using T (input storage type), Acc; load(x, k) -> Acc for element k of a line;
// combine(a, b) -> Acc where a covers the elements before b's (in scan order); store(p, o,
// o2, acc) writes a running value at offsets o (out) and o2 (out2).

// log(exp(a) + exp(b)) as max + log1p(exp(min - max)) (the CPU's log_add_exp).
__device__ double log_add_exp(double a, double b) {
  if (isnan(a) || isnan(b)) return ::cuda::std::numeric_limits<double>::quiet_NaN();
  const double hi = a < b ? b : a, lo = b < a ? b : a;
  if (hi == lo && isinf(hi)) return hi;
  return hi + log1p(exp(lo - hi));
}

// Cumulative sum, product or log-sum-exp: float64 for floating types; uint64 (wrapping,
// stored as int64) for bool and integers.
template <class T_, CumulativeOp kOp>
struct Cumulative {
  using T = T_;
  using Acc = std::conditional_t<is_float_compute<T>, double, std::uint64_t>;
  using Out = std::conditional_t<is_float_compute<T>, T, std::int64_t>;
  __device__ Acc load(T x, std::int64_t) const { return static_cast<Acc>(static_cast<compute_t<T>>(widen(x))); }
  __device__ Acc combine(Acc a, Acc b) const {
    if constexpr (kOp == CumulativeOp::Sum) return a + b;
    else if constexpr (kOp == CumulativeOp::Prod) return a * b;
    else return log_add_exp(a, b);
  }
  __device__ void store(const ScanPlan& p, std::int64_t o, std::int64_t, Acc a) const {
    static_cast<Out*>(p.out.data)[o] = convert<Out>(a);
  }
};

// Running max (kMax) or min and its index (PyTorch's cummax/cummin): the later of two
// (value, index) pairs takes over when its value is NaN, or when the earlier one is not NaN
// and the later value is >= (<=) it.
template <class T_, bool kMax>
struct RunningExtreme {
  using T = T_;
  using C = compute_t<T>;
  using Acc = ValueIndex<C>;
  __device__ Acc load(T x, std::int64_t k) const { return {static_cast<C>(widen(x)), k}; }
  __device__ Acc combine(Acc a, Acc b) const {
    const bool takes_over =
        detail::is_nan(b.value) || (!detail::is_nan(a.value) && (kMax ? b.value >= a.value : b.value <= a.value));
    return takes_over ? b : a;
  }
  __device__ void store(const ScanPlan& p, std::int64_t o, std::int64_t o2, Acc a) const {
    static_cast<T*>(p.out.data)[o] = convert<T>(a.value);
    static_cast<std::int64_t*>(p.out2.data)[o2] = a.index;
  }
};

// One thread per line, in order.
template <class Op>
__global__ void scan_each_line(const __grid_constant__ ScanPlan p, const Op op) {
  using T = typename Op::T;
  using Acc = typename Op::Acc;
  const std::int64_t step = p.reverse ? -1 : 1;
  for (std::int64_t line = detail::first_index(); line < p.lines; line += detail::grid_step()) {
    const LineStart at = line_start(p, line);
    const T* x = static_cast<const T*>(p.in.data) + at.in;
    const std::int64_t o = at.out, o2 = at.out2;
    std::int64_t k = p.reverse ? p.n - 1 : 0;
    Acc acc = op.load(x[k * p.step_in], k);
    op.store(p, o + k * p.step_out, o2 + k * p.step_out2, acc);
    for (std::int64_t t = 1; t < p.n; ++t) {
      k += step;
      acc = op.combine(acc, op.load(x[k * p.step_in], k));
      op.store(p, o + k * p.step_out, o2 + k * p.step_out2, acc);
    }
  }
}

// G threads per line (a warp, or the whole block), G elements at a time.
template <class Op, int G>
__global__ void scan_lines_together(const __grid_constant__ ScanPlan p, const Op op) {
  using T = typename Op::T;
  using Acc = typename Op::Acc;
  constexpr int kGroups = kThreads / G, kWarps = kThreads / 32;
  [[maybe_unused]] __shared__ Acc warp_total[kWarps];
  [[maybe_unused]] __shared__ Acc tile_total;
  const int t = threadIdx.x % G, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  // Uniform over each group (over the block when G is the block).
  for (std::int64_t line = std::int64_t{blockIdx.x} * kGroups + threadIdx.x / G; line < p.lines;
       line += std::int64_t{gridDim.x} * kGroups) {
    const LineStart at = line_start(p, line);
    const T* x = static_cast<const T*>(p.in.data) + at.in;
    const std::int64_t o = at.out, o2 = at.out2;
    Acc carry{};  // the running value before the tile
    for (std::int64_t base = 0; base < p.n; base += G) {
      const std::int64_t count = std::min<std::int64_t>(G, p.n - base);  // elements in the tile
      // Position base + t in scan order; threads past the end repeat the last element, and
      // their values never reach the threads before them.
      const std::int64_t pos = base + std::min<std::int64_t>(t, count - 1);
      const std::int64_t k = p.reverse ? p.n - 1 - pos : pos;
      Acc a = op.load(x[k * p.step_in], k);
#pragma unroll
      for (int d = 1; d < 32; d *= 2) {
        const Acc before = detail::shuffle_up(a, d);
        if (lane >= d) a = op.combine(before, a);
      }
      if constexpr (G > 32) {
        if (lane == 31) warp_total[warp] = a;
        __syncthreads();
        if (warp > 0) {
          Acc before = warp_total[0];
          for (int w = 1; w < warp; ++w) before = op.combine(before, warp_total[w]);
          a = op.combine(before, a);
        }
      }
      if (base > 0) a = op.combine(carry, a);
      if (t < count) op.store(p, o + k * p.step_out, o2 + k * p.step_out2, a);
      if constexpr (G > 32) {
        if (t == count - 1) tile_total = a;
        __syncthreads();  // also: every warp_total read of this tile is done
        carry = tile_total;
      } else {
        carry = detail::shuffle_from(a, static_cast<int>(count - 1));
      }
    }
  }
}

// Launches the scan of every line with `op`: a thread per line when lines are short, or when
// their elements are strided and there are lines enough to fill the GPU (neighbouring threads
// then read neighbouring memory); else a warp per line, or a block for few long lines.
template <class Op>
void run_scan(const ScanPlan& p, const Op& op) {
  const bool together = p.n >= 32 && (std::llabs(p.step_in) == 1 || p.lines < 4096);
  if (!together) scan_each_line<Op><<<detail::blocks_for(p.lines), kThreads, 0, detail::stream()>>>(p, op);
  else if (p.lines < 512 && p.n >= 2048)
    scan_lines_together<Op, kThreads><<<grid_for(p.lines), kThreads, 0, detail::stream()>>>(p, op);
  else
    scan_lines_together<Op, 32><<<grid_for(ceil_div(p.lines, kThreads / 32)), kThreads, 0, detail::stream()>>>(p, op);
}

}  // namespace

void scan(const StridedArray& out, const StridedArray& in, int dim, CumulativeOp op, bool reverse, int device) {
  const bool floating = in.type == ElementType::F16 || in.type == ElementType::BF16 || in.type == ElementType::F32 ||
                        in.type == ElementType::F64;
  if (out.type != (floating ? in.type : ElementType::I64)) throw CudaError("scan: out has the wrong element type");
  const ScanPlan plan = plan_scan(in, out, out, dim, reverse, "scan");
  if (plan.lines == 0 || plan.n == 0) return;
  detail::use_device(device);
  detail::visit(in.type, "scan", [&](auto tag) {
    using T = typename decltype(tag)::type;
    switch (op) {
      case CumulativeOp::Sum: return run_scan(plan, Cumulative<T, CumulativeOp::Sum>{});
      case CumulativeOp::Prod: return run_scan(plan, Cumulative<T, CumulativeOp::Prod>{});
      case CumulativeOp::LogSumExp:
        if constexpr (is_float_compute<T>) return run_scan(plan, Cumulative<T, CumulativeOp::LogSumExp>{});
        break;
    }
    throw CudaError("scan: log-sum-exp scans need a floating-point input");
  });
  detail::after_launch("scan");
}

void arg_scan(const StridedArray& values, const StridedArray& indices, const StridedArray& in, int dim, bool max,
              int device) {
  if (values.type != in.type || indices.type != ElementType::I64)
    throw CudaError("arg_scan: values must have in's element type and indices I64");
  const ScanPlan plan = plan_scan(in, values, indices, dim, false, "arg_scan");
  if (plan.lines == 0 || plan.n == 0) return;
  detail::use_device(device);
  detail::visit(in.type, "arg_scan", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (max) run_scan(plan, RunningExtreme<T, true>{});
    else run_scan(plan, RunningExtreme<T, false>{});
  });
  detail::after_launch("arg_scan");
}

}  // namespace infini::cuda
