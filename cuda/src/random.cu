// uniform, normal, randint: element i of a contiguous output is the shared per-element
// transform (infini/math/random_transforms.h) of Philox counter offset + i, as on the CPU.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <string>

#include "element_types.cuh"
#include "infini/cuda/random.h"
#include "infini/math/philox.h"
#include "infini/math/random_transforms.h"
#include "launch.cuh"
#include "strided.cuh"

namespace infini::cuda {
namespace {

using detail::convert;

template <class T>
struct UniformSample {
  double low, high;
  __device__ T operator()(const math::Philox4& r) const {
    return convert<T>(math::uniform_sample<math::significand_digits<T, __half>>(r, low, high));
  }
};

template <class T>
struct NormalSample {
  double mean, stddev;
  __device__ T operator()(const math::Philox4& r) const { return convert<T>(math::normal_sample(r, mean, stddev)); }
};

// Converted like the CPU's convert<T>(int64): 16-bit floats through double (one rounding
// from that double), everything else directly.
template <class T>
struct RandintSample {
  std::int64_t low, high;
  __device__ T operator()(const math::Philox4& r) const {
    const std::int64_t v = math::randint_sample(r, low, high);
    if constexpr (detail::is_16bit_float<T>) return convert<T>(static_cast<double>(v));
    else return convert<T>(v);
  }
};

// out[i] = sample(philox4x32(seed, offset + i)) for i in [0, numel).
template <class T, class Sample>
__global__ void random_fill_kernel(T* out, std::int64_t numel, PhiloxCounters counters, Sample sample) {
  for (std::int64_t i = detail::first_index(); i < numel; i += detail::grid_step())
    out[i] = sample(math::philox4x32(counters.seed, counters.offset + static_cast<std::uint64_t>(i)));
}

template <class T, class Sample>
void launch(void* out, std::int64_t numel, PhiloxCounters counters, Sample sample) {
  detail::refuse_capture("a random fill", "each replay would draw the same numbers");
  random_fill_kernel<T><<<detail::blocks_for(numel), detail::kThreads, 0, detail::stream()>>>(
      static_cast<T*>(out), numel, counters, sample);
}

}  // namespace

void uniform(void* out, ElementType type, std::int64_t numel, double low, double high, PhiloxCounters counters,
             int device) {
  if (numel == 0) return;
  detail::use_device(device);
  detail::visit_floating(type, "uniform_", [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch<T>(out, numel, counters, UniformSample<T>{low, high});
  });
  detail::after_launch("uniform_");
}

void normal(void* out, ElementType type, std::int64_t numel, double mean, double std, PhiloxCounters counters,
            int device) {
  if (numel == 0) return;
  detail::use_device(device);
  detail::visit_floating(type, "normal_", [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch<T>(out, numel, counters, NormalSample<T>{mean, std});
  });
  detail::after_launch("normal_");
}

void randint(void* out, ElementType type, std::int64_t numel, std::int64_t low, std::int64_t high,
             PhiloxCounters counters, int device) {
  if (numel == 0) return;
  detail::use_device(device);
  detail::visit(type, "randint", [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch<T>(out, numel, counters, RandintSample<T>{low, high});
  });
  detail::after_launch("randint");
}

}  // namespace infini::cuda
