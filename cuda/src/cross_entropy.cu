// Fused cross-entropy rows: one block per row, read (and the gradient written) in 16-byte
// packs where the rows are aligned, reductions in a fixed tree (CUB's block reduce), so two
// runs give the same bits. Mirrors modules/kernels/cpu/cross_entropy.cpp:
// the log-sum-exp is kept in float64 for float32 logits too (exp of each shifted logit in
// float32, their sum in float64), and the float32 backward takes exp(x - s) * exp(s - lse)
// with s = lse rounded to float32. bfloat16/float16 logits are read as they are and
// computed in float32, their loss float32: the values of casting them to float32 first, up
// to the order of the float64 sum (a thread's columns follow the packs, whose width depends
// on the dtype and on the row's alignment).
#include <cub/block/block_reduce.cuh>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "element_types.cuh"
#include "elementwise.cuh"
#include "infini/cuda/cross_entropy.h"
#include "launch.cuh"
#include "strided.cuh"

namespace infini::cuda {
namespace {

constexpr int kRowThreads = 256;
constexpr std::int64_t kMaxRowBlocks = std::int64_t{1} << 20;  // a grid-stride loop covers more rows

unsigned row_blocks(std::int64_t rows) { return static_cast<unsigned>(std::min(rows, kMaxRowBlocks)); }

struct Max {
  template <class T>
  __device__ T operator()(T a, T b) const {
    return a > b ? a : b;
  }
};

// Elements per 16-byte pack of T.
template <class T>
constexpr int kPack = 16 / static_cast<int>(sizeof(T));

// Calls f(j, widen(x[j])) for this thread's columns j < n of a row, in 16-byte packs (pack
// p is thread p % kRowThreads's) while x is aligned to them, then element by element.
template <class T, class F>
__device__ void for_each_column(const T* x, std::int64_t n, F&& f) {
  constexpr int V = kPack<T>;
  std::int64_t done = 0;
  if (detail::aligned(x, 16)) {
    const std::int64_t packs = n / V;
    for (std::int64_t p = threadIdx.x; p < packs; p += kRowThreads) {
      const detail::Vec<T, V> pack = reinterpret_cast<const detail::Vec<T, V>*>(x)[p];
#pragma unroll
      for (int k = 0; k < V; ++k) f(p * V + k, detail::widen(pack.v[k]));
    }
    done = packs * V;
  }
  for (std::int64_t j = done + threadIdx.x; j < n; j += kRowThreads) f(j, detail::widen(x[j]));
}

// exp in the element type: float32 rows take exp in float32 like the CPU's vectorized exp.
__device__ inline float exp_of(float x) { return expf(x); }
__device__ inline double exp_of(double x) { return exp(x); }

// Row i: lse[i] = shift + log(sum_c exp(x[c] - shift)) with shift the row's maximum (0 when
// that is infinite), the sum in float64; loss[i] = lse[i] - x[target] in C (float32 for
// 16-bit logits, which are widened as they are read). An out-of-range target leaves loss 0
// and lowers *bad to its row (integer atomicMin: order-independent).
template <class T, class C = detail::compute_t<T>>
__global__ void forward_kernel(CrossEntropyRows r, C* loss, double* lse, unsigned long long* bad) {
  using MaxReduce = cub::BlockReduce<C, kRowThreads>;
  using SumReduce = cub::BlockReduce<double, kRowThreads>;
  __shared__ union {
    typename MaxReduce::TempStorage max;
    typename SumReduce::TempStorage sum;
  } temp;
  __shared__ C row_shift;
  for (std::int64_t i = blockIdx.x; i < r.rows; i += gridDim.x) {
    const T* x = static_cast<const T*>(r.logits) + i * r.row_stride;
    C local_max = -INFINITY;
    for_each_column(x, r.classes, [&](std::int64_t, C v) { local_max = Max{}(local_max, v); });
    const C row_max = MaxReduce(temp.max).Reduce(local_max, Max{});
    if (threadIdx.x == 0) row_shift = isinf(row_max) ? C(0) : row_max;
    __syncthreads();
    const C shift = row_shift;
    double local_sum = 0;
    for_each_column(x, r.classes, [&](std::int64_t, C v) { local_sum += static_cast<double>(exp_of(v - shift)); });
    const double sum = SumReduce(temp.sum).Sum(local_sum);
    if (threadIdx.x == 0) {
      const double row_lse = static_cast<double>(shift) + log(sum);
      lse[i] = row_lse;
      const std::int64_t c = r.target[i];
      if (c == r.ignore_index) {
        loss[i] = C(0);
      } else if (c < 0 || c >= r.classes) {
        atomicMin(bad, static_cast<unsigned long long>(i));
        loss[i] = C(0);
      } else {
        loss[i] = static_cast<C>(row_lse - static_cast<double>(detail::widen(x[c])));
      }
    }
    __syncthreads();  // temp and row_shift are reused by the next row
  }
}

// Row i of grad (width columns) = g (exp(x - lse) - one_hot(target)), 0 for ignored/out-of-range
// targets and in the padding columns from r.classes on, computed in C (grad_loss is C) and
// rounded once into T. The products are rounded before the one-hot subtraction (no fused
// multiply-add), as on the CPU.
template <class T, class C = detail::compute_t<T>>
__global__ void backward_kernel(CrossEntropyRows r, std::int64_t width, T* grad, const C* grad_loss,
                                const double* lse) {
  for (std::int64_t i = blockIdx.x; i < r.rows; i += gridDim.x) {
    T* out = grad + i * width;
    const std::int64_t c = r.target[i];
    const bool counted = c != r.ignore_index && c >= 0 && c < r.classes;
    for (std::int64_t j = (counted ? r.classes : 0) + threadIdx.x; j < width; j += kRowThreads)
      out[j] = detail::convert<T>(C(0));
    if (!counted) continue;
    const T* x = static_cast<const T*>(r.logits) + i * r.row_stride;
    const C g = grad_loss[i];
    const double l = lse[i];
    if constexpr (std::is_same_v<C, float>) {
      const float shift = static_cast<float>(l);
      const float correction = isfinite(l) ? static_cast<float>(exp(static_cast<double>(shift) - l)) : 1.0f;
      const float scale = __fmul_rn(g, correction);
      auto grad_of = [&](std::int64_t j, float v) {
        const float p = __fmul_rn(scale, expf(v - shift));
        return detail::convert<T>(j == c ? p - g : p);
      };
      // 16-byte packs read and written while both rows are aligned to them.
      constexpr int V = kPack<T>;
      std::int64_t done = 0;
      if (detail::aligned(x, 16) && detail::aligned(out, 16)) {
        const std::int64_t packs = r.classes / V;
        for (std::int64_t p = threadIdx.x; p < packs; p += kRowThreads) {
          const detail::Vec<T, V> in = reinterpret_cast<const detail::Vec<T, V>*>(x)[p];
          detail::Vec<T, V> result;
#pragma unroll
          for (int k = 0; k < V; ++k) result.v[k] = grad_of(p * V + k, detail::widen(in.v[k]));
          reinterpret_cast<detail::Vec<T, V>*>(out)[p] = result;
        }
        done = packs * V;
      }
      for (std::int64_t j = done + threadIdx.x; j < r.classes; j += kRowThreads)
        out[j] = grad_of(j, detail::widen(x[j]));
    } else {
      for (std::int64_t j = threadIdx.x; j < r.classes; j += kRowThreads) {
        const double p = __dmul_rn(g, exp(x[j] - l));
        out[j] = j == c ? p - g : p;
      }
    }
  }
}

}  // namespace

BadTarget cross_entropy_forward(void* loss, double* lse, const CrossEntropyRows& rows, std::int64_t* scratch,
                                int device) {
  if (rows.rows == 0) return {};
  detail::use_device(device);
  auto* bad = reinterpret_cast<unsigned long long*>(scratch);
  detail::check(cudaMemsetAsync(bad, 0xFF, sizeof(*bad), detail::stream()), "cross_entropy: cudaMemsetAsync");
  detail::visit_floating(rows.type, "cross_entropy", [&](auto tag) {
    using T = typename decltype(tag)::type;
    forward_kernel<T><<<row_blocks(rows.rows), kRowThreads, 0, detail::stream()>>>(
        rows, static_cast<detail::compute_t<T>*>(loss), lse, bad);
  });
  detail::after_launch("cross_entropy");
  if (detail::defer_check(bad, sizeof(*bad), [](const void* host) {
        const unsigned long long row = *static_cast<const unsigned long long*>(host);
        if (row != ~0ull)
          throw CudaError("cross_entropy: the target of row " + std::to_string(row) +
                          " is out of range (in a CUDA graph replay)");
      }))
    return {};
  unsigned long long first_bad = 0;
  detail::check(cudaMemcpyAsync(&first_bad, bad, sizeof(first_bad), cudaMemcpyDeviceToHost, detail::stream()),
                "cross_entropy: reading back the target check");
  detail::check(cudaStreamSynchronize(detail::stream()), "cross_entropy kernel");
  if (first_bad == ~0ull) return {};
  BadTarget result{static_cast<std::int64_t>(first_bad), 0};
  detail::check(cudaMemcpyAsync(&result.target, rows.target + result.row, sizeof(result.target),
                                cudaMemcpyDeviceToHost, detail::stream()),
                "cross_entropy: reading back the bad target");
  detail::check(cudaStreamSynchronize(detail::stream()), "cross_entropy: reading back the bad target");
  return result;
}

void cross_entropy_backward(void* grad_logits, std::int64_t width, const void* grad_loss, const double* lse,
                            const CrossEntropyRows& rows, int device) {
  if (rows.rows == 0 || width == 0) return;
  detail::use_device(device);
  detail::visit_floating(rows.type, "cross_entropy_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    backward_kernel<T><<<row_blocks(rows.rows), kRowThreads, 0, detail::stream()>>>(
        rows, width, static_cast<T*>(grad_logits), static_cast<const detail::compute_t<T>*>(grad_loss), lse);
  });
  detail::after_launch("cross_entropy_backward");
}

}  // namespace infini::cuda
