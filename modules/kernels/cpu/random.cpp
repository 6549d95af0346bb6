// CPU random kernels over Philox4x32: element i of the (contiguous) output uses counter
// state.offset + i, so any thread may compute any element.
module;
#include <array>
#include <cmath>
#include <type_traits>
#include <cstdint>
#include <limits>
#include <numbers>
module infini.kernels;

namespace infini::kernels {
namespace {

// Uniform in [0, 1) with as many random bits as T has significand digits, so rounding to T
// can never produce 1.
template <class T>
double unit_uniform(const std::array<std::uint32_t, 4>& w) {
  if constexpr (std::is_same_v<T, double>) {
    return static_cast<double>(((std::uint64_t{w[0]} << 32) | w[1]) >> 11) * 0x1p-53;
  } else {
    constexpr int digits = std::is_same_v<T, float> ? 24 : std::is_same_v<T, Half> ? 11 : 8;
    return static_cast<double>(w[0] >> (32 - digits)) * std::ldexp(1.0, -digits);
  }
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
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, Half> ||
                  std::is_same_v<T, BFloat16>) {
      T* data = static_cast<T*>(out.data_ptr());
      for_each_index(out.numel(), [&](std::int64_t i) {
        const double u = unit_uniform<T>(philox4x32(state.seed, state.offset + static_cast<std::uint64_t>(i)));
        data[i] = convert<T>(low + u * (high - low));
      });
    } else {
      throw DTypeError("uniform_", concat("expected a floating-point tensor, got ", out.dtype()));
    }
  });
}

void normal_cpu(const Tensor& out, double mean, double std, PhiloxState state) {
  dispatch(out.dtype(), [&]<class T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, Half> ||
                  std::is_same_v<T, BFloat16>) {
      T* data = static_cast<T*>(out.data_ptr());
      for_each_index(out.numel(), [&](std::int64_t i) {
        // Box-Muller on two 53-bit uniforms; u1 in (0, 1] keeps the log finite.
        const auto w = philox4x32(state.seed, state.offset + static_cast<std::uint64_t>(i));
        const double u1 = static_cast<double>((((std::uint64_t{w[0]} << 32) | w[1]) >> 11) + 1) * 0x1p-53;
        const double u2 = static_cast<double>(((std::uint64_t{w[2]} << 32) | w[3]) >> 11) * 0x1p-53;
        const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
        data[i] = convert<T>(mean + std * z);
      });
    } else {
      throw DTypeError("normal_", concat("expected a floating-point tensor, got ", out.dtype()));
    }
  });
}

void randint_cpu(const Tensor& out, std::int64_t low, std::int64_t high, PhiloxState state) {
  const auto range = static_cast<std::uint64_t>(high) - static_cast<std::uint64_t>(low);
  dispatch(out.dtype(), [&]<class T>() {
    T* data = static_cast<T*>(out.data_ptr());
    for_each_index(out.numel(), [&](std::int64_t i) {
      const auto w = philox4x32(state.seed, state.offset + static_cast<std::uint64_t>(i));
      const std::uint64_t r = ((std::uint64_t{w[0]} << 32) | w[1]) % range;
      data[i] = convert<T>(static_cast<std::int64_t>(static_cast<std::uint64_t>(low) + r));
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
