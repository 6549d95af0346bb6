// Multi-tensor fused SGD and Adam(W) updates: per element exactly infini::math::sgd_step /
// adam_step (the CPU loops' arithmetic, no fused multiply-adds), over the chunks of up to
// kMaxTensors tensors per launch. Each thread handles kIlp elements of a chunk at a time,
// kThreads apart (coalesced), loading all of them before computing.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "element_types.cuh"
#include "infini/cuda/optim.h"
#include "infini/math/adam_step.h"
#include "infini/math/sgd_step.h"
#include "launch.cuh"
#include "multi_tensor.cuh"
#include "strided.cuh"

namespace infini::cuda {
namespace {

using detail::Batch;
using detail::kThreads;

constexpr int kIlp = 4;

template <class T>
struct SgdEntry {
  T* param;
  const T* grad;
  T* momentum_buffer;
  std::int64_t numel, first_chunk;
};

// One tensor's arrays and its place in the batch, in every Adam launch.
template <class T>
struct AdamArrays {
  T* param;
  const T* grad;
  T* exp_avg;
  T* exp_avg_sq;
  T* max_exp_avg_sq;
  std::int64_t numel, first_chunk;
};

template <class T>
struct AdamEntry : AdamArrays<T> {
  math::compute_of<T> neg_step_size, bias_correction2_sqrt;  // this tensor's step's
};

// A capturable update's tensor: its step is read from the device.
template <class T>
struct AdamDeviceEntry : AdamArrays<T> {
  const std::int64_t* step;
};

// The arrays of `t` as type T.
template <class T>
AdamArrays<T> arrays_of(const AdamTensor& t) {
  return {static_cast<T*>(t.param), static_cast<const T*>(t.grad), static_cast<T*>(t.exp_avg),
          static_cast<T*>(t.exp_avg_sq), static_cast<T*>(t.max_exp_avg_sq), t.numel, 0};
}

// What a capturable update computes its scalars from: the options, and the learning rate
// and grad scale in device memory.
struct AdamDeviceArgs {
  double beta1, beta2, eps, weight_decay;
  bool decoupled_weight_decay;
  const double* lr;
  const double* grad_scale;
};

// Calls f(j, i) for each of the thread's kIlp elements i = base + j kThreads below length.
template <class F>
__device__ void for_each_ilp(std::int64_t base, std::int64_t length, F&& f) {
#pragma unroll
  for (int j = 0; j < kIlp; ++j) {
    const std::int64_t i = base + j * kThreads;
    if (i < length) f(j, i);
  }
}

// Kernel arguments stay within the 4 KiB every architecture accepts.
static_assert(sizeof(Batch<AdamEntry<double>>) + sizeof(math::AdamScalars<double>) <= 4096);
static_assert(sizeof(Batch<AdamDeviceEntry<double>>) + sizeof(AdamDeviceArgs) <= 4096);

template <class T>
__global__ void __launch_bounds__(kThreads)
    sgd_kernel(const __grid_constant__ Batch<SgdEntry<T>> batch, const math::SgdScalars<math::compute_of<T>> s) {
  const bool read_buffer = s.use_momentum && !s.first;  // a new buffer is only written
  detail::for_each_chunk(batch, [&](const SgdEntry<T>& e, std::int64_t, std::int64_t begin, std::int64_t length) {
    T* __restrict__ p = e.param + begin;
    const T* __restrict__ g = e.grad + begin;
    T* __restrict__ b = s.use_momentum ? e.momentum_buffer + begin : nullptr;
    for (std::int64_t base = threadIdx.x; base < length; base += std::int64_t{kThreads} * kIlp) {
      T pv[kIlp] = {}, gv[kIlp] = {}, bv[kIlp] = {};
      for_each_ilp(base, length, [&](int j, std::int64_t i) {
        pv[j] = p[i];
        gv[j] = g[i];
        if (read_buffer) bv[j] = b[i];
      });
#pragma unroll
      for (int j = 0; j < kIlp; ++j) math::sgd_step(pv[j], gv[j], bv[j], s);
      for_each_ilp(base, length, [&](int j, std::int64_t i) {
        p[i] = pv[j];
        if (s.use_momentum) b[i] = bv[j];
      });
    }
  });
}

// The update of every chunk of `batch` this block owns, with the scalars scalars_of(entry).
template <class T, bool kAmsgrad, class Entry, class ScalarsOf>
__device__ void adam_chunks(const Batch<Entry>& batch, ScalarsOf&& scalars_of) {
  detail::for_each_chunk(batch, [&](const Entry& e, std::int64_t, std::int64_t begin, std::int64_t length) {
    const math::AdamScalars<math::compute_of<T>> s = scalars_of(e);
    T* __restrict__ p = e.param + begin;
    const T* __restrict__ g = e.grad + begin;
    T* __restrict__ m = e.exp_avg + begin;
    T* __restrict__ v = e.exp_avg_sq + begin;
    T* __restrict__ vmax = kAmsgrad ? e.max_exp_avg_sq + begin : nullptr;
    for (std::int64_t base = threadIdx.x; base < length; base += std::int64_t{kThreads} * kIlp) {
      T pv[kIlp] = {}, gv[kIlp] = {}, mv[kIlp] = {}, vv[kIlp] = {}, xv[kIlp] = {};
      for_each_ilp(base, length, [&](int j, std::int64_t i) {
        pv[j] = p[i];
        gv[j] = g[i];
        mv[j] = m[i];
        vv[j] = v[i];
        if constexpr (kAmsgrad) xv[j] = vmax[i];
      });
#pragma unroll
      for (int j = 0; j < kIlp; ++j) math::adam_step<kAmsgrad>(pv[j], gv[j], mv[j], vv[j], xv[j], s);
      for_each_ilp(base, length, [&](int j, std::int64_t i) {
        p[i] = pv[j];
        m[i] = mv[j];
        v[i] = vv[j];
        if constexpr (kAmsgrad) vmax[i] = xv[j];
      });
    }
  });
}

template <class T, bool kAmsgrad>
__global__ void __launch_bounds__(kThreads)
    adam_kernel(const __grid_constant__ Batch<AdamEntry<T>> batch,
                const math::AdamScalars<math::compute_of<T>> shared) {
  adam_chunks<T, kAmsgrad>(batch, [&](const AdamEntry<T>& e) {
    math::AdamScalars<math::compute_of<T>> s = shared;
    s.neg_step_size = e.neg_step_size;
    s.bias_correction2_sqrt = e.bias_correction2_sqrt;
    return s;
  });
}

// Each block computes its chunks' scalars from the device values (a few double operations
// per chunk of kChunk elements).
template <class T, bool kAmsgrad>
__global__ void __launch_bounds__(kThreads)
    adam_device_kernel(const __grid_constant__ Batch<AdamDeviceEntry<T>> batch, const AdamDeviceArgs a) {
  adam_chunks<T, kAmsgrad>(batch, [&](const AdamDeviceEntry<T>& e) {
    return math::adam_scalars<math::compute_of<T>>(*a.lr, a.beta1, a.beta2, a.eps, a.weight_decay,
                                                   a.decoupled_weight_decay, *e.step, *a.grad_scale);
  });
}

}  // namespace

void sgd_update(ElementType type, std::span<const SgdTensor> tensors, const SgdOptions& o, int device) {
  detail::visit_floating(type, "sgd_update", [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::vector<SgdEntry<T>> entries;
    for (const SgdTensor& t : tensors)
      if (t.numel > 0)
        entries.push_back({static_cast<T*>(t.param), static_cast<const T*>(t.grad), static_cast<T*>(t.momentum_buffer),
                           t.numel, 0});
    if (entries.empty()) return;
    detail::use_device(device);
    const auto s = math::sgd_scalars<math::compute_of<T>>(o.lr, o.momentum, o.dampening, o.weight_decay, o.nesterov,
                                                          o.first_momentum_step);
    detail::for_each_batch<SgdEntry<T>>(entries, [&](const Batch<SgdEntry<T>>& batch) {
      sgd_kernel<T><<<detail::chunk_blocks(batch.chunks), kThreads, 0, detail::stream()>>>(batch, s);
    });
    detail::after_launch("sgd_update");
  });
}

namespace {

template <class T>
void adam_update_on_device(std::span<const AdamTensor> tensors, const AdamOptions& o) {
  std::vector<AdamDeviceEntry<T>> entries;
  for (const AdamTensor& t : tensors) {
    if (t.numel == 0) continue;
    if (!t.device_step) throw CudaError("adam_update: a capturable update needs every tensor's device_step");
    entries.push_back({arrays_of<T>(t), t.device_step});
  }
  const AdamDeviceArgs args{.beta1 = o.beta1,
                            .beta2 = o.beta2,
                            .eps = o.eps,
                            .weight_decay = o.weight_decay,
                            .decoupled_weight_decay = o.decoupled_weight_decay,
                            .lr = o.device_lr,
                            .grad_scale = o.device_grad_scale};
  detail::for_each_batch<AdamDeviceEntry<T>>(entries, [&](const Batch<AdamDeviceEntry<T>>& batch) {
    const unsigned blocks = detail::chunk_blocks(batch.chunks);
    if (o.amsgrad) adam_device_kernel<T, true><<<blocks, kThreads, 0, detail::stream()>>>(batch, args);
    else adam_device_kernel<T, false><<<blocks, kThreads, 0, detail::stream()>>>(batch, args);
  });
}

template <class T>
void adam_update_on_host_scalars(std::span<const AdamTensor> tensors, const AdamOptions& o) {
  using C = math::compute_of<T>;
  auto scalars = [&](std::int64_t step) {
    return math::adam_scalars<C>(o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, o.decoupled_weight_decay, step,
                                 o.grad_scale);
  };
  std::vector<AdamEntry<T>> entries;
  for (const AdamTensor& t : tensors) {
    if (t.numel == 0) continue;
    if (t.step < 1) throw CudaError("adam_update: step must be >= 1, got " + std::to_string(t.step));
    const math::AdamScalars<C> s = scalars(t.step);
    entries.push_back({arrays_of<T>(t), s.neg_step_size, s.bias_correction2_sqrt});
  }
  const math::AdamScalars<C> shared = scalars(1);  // the per-tensor fields come from the entries
  detail::for_each_batch<AdamEntry<T>>(entries, [&](const Batch<AdamEntry<T>>& batch) {
    const unsigned blocks = detail::chunk_blocks(batch.chunks);
    if (o.amsgrad) adam_kernel<T, true><<<blocks, kThreads, 0, detail::stream()>>>(batch, shared);
    else adam_kernel<T, false><<<blocks, kThreads, 0, detail::stream()>>>(batch, shared);
  });
}

}  // namespace

void adam_update(ElementType type, std::span<const AdamTensor> tensors, const AdamOptions& o, int device) {
  const bool on_device = o.device_lr != nullptr;
  if (on_device != (o.device_grad_scale != nullptr))
    throw CudaError("adam_update: a capturable update needs both device_lr and device_grad_scale");
  detail::visit_floating(type, "adam_update", [&](auto tag) {
    using T = typename decltype(tag)::type;
    detail::use_device(device);
    if (on_device) adam_update_on_device<T>(tensors, o);
    else adam_update_on_host_scalars<T>(tensors, o);
    detail::after_launch("adam_update");
  });
}

}  // namespace infini::cuda
