// clip_grad_norm_'s sum over all grads: |x|^p terms (or the largest |x|) combined in float64,
// as modules/nn/optim/clip_grad.cpp does on the CPU. Two fixed passes, so two runs give the
// same bits: one block per chunk of kChunk elements reduces it (each thread a strided
// sequential partial, then CUB's block tree) into scratch[chunk], then one block reduces
// the chunks' partials into scratch[chunks], which grad_norm_sum copies back.
#include <cub/block/block_reduce.cuh>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <type_traits>
#include <vector>

#include "element_types.cuh"
#include "infini/cuda/optim.h"
#include "launch.cuh"
#include "multi_tensor.cuh"
#include "strided.cuh"

namespace infini::cuda {
namespace {

using detail::Batch;
using detail::kThreads;

constexpr int kFinalThreads = 1024;

// How magnitudes combine, as clip_grad.cpp's NormKind.
enum class Norm { One, Two, Inf, Power };

template <Norm kNorm>
struct Combine {
  __device__ double operator()(double a, double b) const {
    if constexpr (kNorm == Norm::Inf) return a > b || a != a ? a : b;  // max; NaN wins
    else return a + b;
  }
};

template <Norm kNorm>
__device__ double term(double a, double p) {
  if constexpr (kNorm == Norm::Two) return __dmul_rn(a, a);  // rounded before it is summed, as on the CPU
  else if constexpr (kNorm == Norm::Power) return pow(a, p);
  else return a;
}

template <class T>
struct NormEntry {
  const T* data;
  std::int64_t numel, first_chunk;
};

// scratch[slot + c] = the combined terms of chunk c of the batch.
template <class T, Norm kNorm>
__global__ void __launch_bounds__(kThreads)
    chunk_kernel(const __grid_constant__ Batch<NormEntry<T>> batch, double p, double* scratch, std::int64_t slot) {
  using Reduce = cub::BlockReduce<double, kThreads>;
  __shared__ typename Reduce::TempStorage temp;
  detail::for_each_chunk(batch, [&](const NormEntry<T>& e, std::int64_t c, std::int64_t begin, std::int64_t length) {
    const T* x = e.data + begin;
    double local = 0;
    for (std::int64_t i = threadIdx.x; i < length; i += kThreads)
      local = Combine<kNorm>{}(local, term<kNorm>(fabs(static_cast<double>(detail::widen(x[i]))), p));
    const double total = Reduce(temp).Reduce(local, Combine<kNorm>{});
    if (threadIdx.x == 0) scratch[slot + c] = total;
    __syncthreads();  // temp is reused by the block's next chunk
  });
}

// scratch[n] = the combined scratch[0, n).
template <Norm kNorm>
__global__ void __launch_bounds__(kFinalThreads) final_kernel(double* scratch, std::int64_t n) {
  using Reduce = cub::BlockReduce<double, kFinalThreads>;
  __shared__ typename Reduce::TempStorage temp;
  double local = 0;
  for (std::int64_t i = threadIdx.x; i < n; i += kFinalThreads) local = Combine<kNorm>{}(local, scratch[i]);
  const double total = Reduce(temp).Reduce(local, Combine<kNorm>{});
  if (threadIdx.x == 0) scratch[n] = total;
}

Norm norm_of(double p) {
  if (std::isinf(p)) return Norm::Inf;
  return p == 1 ? Norm::One : p == 2 ? Norm::Two : Norm::Power;
}

template <class F>
void visit_norm(Norm norm, F&& f) {
  switch (norm) {
    case Norm::One: return f(std::integral_constant<Norm, Norm::One>{});
    case Norm::Two: return f(std::integral_constant<Norm, Norm::Two>{});
    case Norm::Inf: return f(std::integral_constant<Norm, Norm::Inf>{});
    case Norm::Power: return f(std::integral_constant<Norm, Norm::Power>{});
  }
}

}  // namespace

std::int64_t grad_norm_scratch(std::span<const NormTensor> tensors) {
  std::int64_t chunks = 0;
  for (const NormTensor& t : tensors) chunks += detail::chunks_of(t.numel);
  return chunks + 1;
}

void grad_norm_sum_on_device(std::span<const NormTensor> tensors, double p, double* scratch, int device) {
  for (const NormTensor& t : tensors)
    if (t.type != ElementType::F16 && t.type != ElementType::BF16 && t.type != ElementType::F32 &&
        t.type != ElementType::F64)
      throw CudaError("grad_norm_sum: expected floating-point tensors");
  const std::int64_t chunks = grad_norm_scratch(tensors) - 1;
  detail::use_device(device);
  visit_norm(norm_of(p), [&](auto norm) {
    constexpr Norm kNorm = decltype(norm)::value;
    // The tensors of each element type in one series of launches, the types in a fixed order.
    std::int64_t slot = 0;
    for (ElementType type : {ElementType::F16, ElementType::BF16, ElementType::F32, ElementType::F64}) {
      detail::visit_floating(type, "grad_norm_sum", [&](auto tag) {
        using T = typename decltype(tag)::type;
        std::vector<NormEntry<T>> entries;
        for (const NormTensor& t : tensors)
          if (t.type == type && t.numel > 0) entries.push_back({static_cast<const T*>(t.data), t.numel, 0});
        detail::for_each_batch<NormEntry<T>>(entries, [&](const Batch<NormEntry<T>>& batch) {
          chunk_kernel<T, kNorm>
              <<<detail::chunk_blocks(batch.chunks), kThreads, 0, detail::stream()>>>(batch, p, scratch, slot);
          slot += batch.chunks;
        });
      });
    }
    final_kernel<kNorm><<<1, kFinalThreads, 0, detail::stream()>>>(scratch, chunks);  // 0 for no chunks
  });
  detail::after_launch("grad_norm_sum");
}

double grad_norm_sum(std::span<const NormTensor> tensors, double p, double* scratch, int device) {
  detail::refuse_capture("the gradient norm", "it returns the norm to the host");
  const std::int64_t chunks = grad_norm_scratch(tensors) - 1;
  if (chunks == 0) return 0.0;
  grad_norm_sum_on_device(tensors, p, scratch, device);
  double total = 0;
  detail::check(cudaMemcpyAsync(&total, scratch + chunks, sizeof(double), cudaMemcpyDeviceToHost, detail::stream()),
                "grad_norm_sum: copying the norm back");
  detail::check(cudaStreamSynchronize(detail::stream()), "grad_norm_sum");
  return total;
}

}  // namespace infini::cuda
