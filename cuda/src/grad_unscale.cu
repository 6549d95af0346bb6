// GradScaler.unscale_'s kernel (PyTorch's _amp_foreach_non_finite_check_and_unscale_), as
// modules/nn/optim/grad_scaler.cpp does it on the CPU: x = T(C(x) * C(inv_scale)) with C
// float (double for F64), and a flag raised when any C(x) was Inf or NaN. Every thread that
// sees one stores the same 1, so the result does not depend on the order.
#include <cuda_bf16.h>

#include <cstdint>
#include <initializer_list>
#include <span>
#include <vector>

#include "element_types.cuh"
#include "infini/cuda/optim.h"
#include "infini/math/rounded.h"
#include "launch.cuh"
#include "multi_tensor.cuh"
#include "strided.cuh"

namespace infini::cuda {
namespace {

using detail::Batch;
using detail::kThreads;

template <class T>
struct UnscaleEntry {
  T* data;
  std::int64_t numel, first_chunk;
};

template <class T>
__global__ void __launch_bounds__(kThreads)
    unscale_kernel(const __grid_constant__ Batch<UnscaleEntry<T>> batch, float inv_scale, int* flag) {
  using C = math::compute_of<T>;
  const C factor = static_cast<C>(inv_scale);
  bool found = false;
  detail::for_each_chunk(batch, [&](const UnscaleEntry<T>& e, std::int64_t, std::int64_t begin, std::int64_t length) {
    T* x = e.data + begin;
    for (std::int64_t i = threadIdx.x; i < length; i += kThreads) {
      const C value = static_cast<C>(x[i]);
      if (!isfinite(value)) found = true;
      x[i] = T(math::mul_rn(value, factor));
    }
  });
  if (found) *flag = 1;
}

}  // namespace

bool unscale_grads(std::span<const UnscaleTensor> tensors, float inv_scale, int* flag, int device) {
  detail::refuse_capture("unscale_grads", "it returns whether a gradient overflowed to the host");
  for (const UnscaleTensor& t : tensors)
    if (t.type != ElementType::BF16 && t.type != ElementType::F32 && t.type != ElementType::F64)
      throw CudaError("unscale_grads: expected bfloat16, float32 or float64 tensors");
  bool any = false;
  for (const UnscaleTensor& t : tensors) any = any || t.numel > 0;
  if (!any) return false;
  detail::use_device(device);
  detail::check(cudaMemsetAsync(flag, 0, sizeof(int), detail::stream()), "unscale_grads: clearing the flag");
  for (ElementType type : {ElementType::BF16, ElementType::F32, ElementType::F64}) {
    detail::visit_floating(type, "unscale_grads", [&](auto tag) {
      using T = typename decltype(tag)::type;
      std::vector<UnscaleEntry<T>> entries;
      for (const UnscaleTensor& t : tensors)
        if (t.type == type && t.numel > 0) entries.push_back({static_cast<T*>(t.data), t.numel, 0});
      detail::for_each_batch<UnscaleEntry<T>>(entries, [&](const Batch<UnscaleEntry<T>>& batch) {
        const unsigned blocks = detail::chunk_blocks(batch.chunks);
        unscale_kernel<T><<<blocks, kThreads, 0, detail::stream()>>>(batch, inv_scale, flag);
      });
    });
  }
  detail::after_launch("unscale_grads");
  int found = 0;
  detail::check(cudaMemcpyAsync(&found, flag, sizeof(int), cudaMemcpyDeviceToHost, detail::stream()),
                "unscale_grads: copying the flag back");
  detail::check(cudaStreamSynchronize(detail::stream()), "unscale_grads");
  return found != 0;
}

}  // namespace infini::cuda
