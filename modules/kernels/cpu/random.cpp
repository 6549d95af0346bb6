// CPU random kernels over Philox4x32: element i of the (contiguous) output is the shared
// transform (cuda/include/infini/math/random_transforms.h) of counter state.offset + i, so
// any thread, and the CUDA kernels, may compute any element.
module;
#include <cstdint>

#include "infini/math/philox.h"
#include "infini/math/random_transforms.h"
module infini.kernels;
import infini.std;

namespace infini::kernels {
namespace {

template <class T>
constexpr bool is_floating = std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, Half> ||
                             std::is_same_v<T, BFloat16>;

// The random words of element i.
math::Philox4 draw(PhiloxState state, std::int64_t i) {
  return math::philox4x32(state.seed, state.offset + static_cast<std::uint64_t>(i));
}

template <class Body>
void for_each_index(std::int64_t numel, Body&& body) {
  if (numel < kParallelGrain) {
    for (std::int64_t i = 0; i < numel; ++i) body(i);
    return;
  }
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < numel; ++i) body(i);
}

void uniform_cpu(const Tensor& out, double low, double high, PhiloxState state) {
  dispatch(out.dtype(), [&]<class T>() {
    if constexpr (is_floating<T>) {
      T* data = static_cast<T*>(out.data_ptr());
      for_each_index(out.numel(), [&](std::int64_t i) {
        data[i] = convert<T>(math::uniform_sample<math::significand_digits<T, Half>>(draw(state, i), low, high));
      });
    } else {
      throw DTypeError("uniform_", concat("expected a floating-point tensor, got ", out.dtype()));
    }
  });
}

void normal_cpu(const Tensor& out, double mean, double std, PhiloxState state) {
  dispatch(out.dtype(), [&]<class T>() {
    if constexpr (is_floating<T>) {
      T* data = static_cast<T*>(out.data_ptr());
      for_each_index(out.numel(), [&](std::int64_t i) {
        data[i] = convert<T>(math::normal_sample(draw(state, i), mean, std));
      });
    } else {
      throw DTypeError("normal_", concat("expected a floating-point tensor, got ", out.dtype()));
    }
  });
}

void randint_cpu(const Tensor& out, std::int64_t low, std::int64_t high, PhiloxState state) {
  dispatch(out.dtype(), [&]<class T>() {
    T* data = static_cast<T*>(out.data_ptr());
    for_each_index(out.numel(), [&](std::int64_t i) {
      data[i] = convert<T>(math::randint_sample(draw(state, i), low, high));
    });
  });
}

const bool registered = [] {
  KernelTable<UniformKernel>::set(DeviceType::CPU, &uniform_cpu);
  KernelTable<NormalKernel>::set(DeviceType::CPU, &normal_cpu);
  KernelTable<RandintKernel>::set(DeviceType::CPU, &randint_cpu);
  return true;
}();

}  // namespace
}  // namespace infini::kernels
