// Per-element transforms of the random fills (uniform_, normal_, randint), shared by the CPU
// kernels (modules/kernels/cpu/random.cpp) and the CUDA ones (cuda/src/random.cu): element i
// of a fill is transform(philox4x32(seed, offset + i)), so both devices produce the same
// values (uniform and randint bit for bit; normal up to the ulp by which CUDA's log and
// cos may differ from the host libm's).
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <type_traits>

#include "infini/math/host_device.h"
#include "infini/math/philox.h"

namespace infini::math {

// a * b + c with two roundings. nvcc would fuse it into one fma; the CPU build (no FMA
// target) rounds twice, so the device does too.
INFINI_HD inline double mul_add_unfused(double a, double b, double c) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(__dmul_rn(a, b), c);
#else
  const double product = a * b;  // a separate statement: never contracted
  return product + c;
#endif
}

// The top 53 bits of w[hi]:w[hi + 1] as a double in [0, 1).
INFINI_HD constexpr double uniform53(const Philox4& r, int hi = 0) noexcept {
  return static_cast<double>(((std::uint64_t{r.w[hi]} << 32) | r.w[hi + 1]) >> 11) * 0x1p-53;
}

// Uniform in [0, 1) with Digits random bits, the significand digits of the target type
// (53 double, 24 float, 11 half, 8 bfloat16), so rounding to that type can never give 1.
template <int Digits>
INFINI_HD constexpr double unit_uniform(const Philox4& r) noexcept {
  static_assert(Digits == 53 || (Digits > 0 && Digits <= 32));
  if constexpr (Digits == 53) return uniform53(r);
  else return static_cast<double>(r.w[0] >> (32 - Digits)) / static_cast<double>(std::uint64_t{1} << Digits);
}

// The significand digits of floating-point storage type T, HalfT being the caller's float16
// type: 53 double, 24 float, 11 float16, 8 bfloat16. A uniform draw into T takes that many
// random bits.
template <class T, class HalfT>
inline constexpr int significand_digits = std::is_same_v<T, double>  ? 53
                                          : std::is_same_v<T, float> ? 24
                                          : std::is_same_v<T, HalfT> ? 11
                                                                     : 8;

// uniform_: low + u (high - low), u = unit_uniform<Digits>.
template <int Digits>
INFINI_HD inline double uniform_sample(const Philox4& r, double low, double high) {
  return mul_add_unfused(unit_uniform<Digits>(r), high - low, low);
}

// cos(x) for x = fl(2 pi) * u, u in [0, 1), as the CPU computes it (std::cos). CUDA's cos
// carries a Payne-Hanek reduction for huge arguments that needs local memory; instead, with
// delta = x - 2 pi u (the product's rounding error, exact from fma residuals, |delta| <
// 5e-16), cos(x) = cospi(2u) - sinpi(2u) delta to far below an ulp.
INFINI_HD inline double cos_two_pi(double u) {
  constexpr double two_pi = 2.0 * std::numbers::pi;
#if defined(__CUDA_ARCH__)
  constexpr double two_pi_tail = 2.4492935982947063545e-16;  // 2 pi - two_pi
  const double x = __dmul_rn(two_pi, u);
  const double delta = __fma_rn(-two_pi_tail, u, -__fma_rn(two_pi, u, -x));
  double s, c;
  sincospi(2.0 * u, &s, &c);
  return __fma_rn(-s, delta, c);
#else
  return std::cos(two_pi * u);
#endif
}

// normal_: mean + stddev z, z standard normal by Box-Muller on two 53-bit uniforms (u1 in
// (0, 1] keeps the log finite).
INFINI_HD inline double normal_sample(const Philox4& r, double mean, double stddev) {
  const double u1 = static_cast<double>((((std::uint64_t{r.w[0]} << 32) | r.w[1]) >> 11) + 1) * 0x1p-53;
  const double u2 = uniform53(r, 2);
  const double z = std::sqrt(-2.0 * std::log(u1)) * cos_two_pi(u2);
  return mul_add_unfused(stddev, z, mean);
}

// randint: low + (w[0]:w[1] mod (high - low)), wrapping like the unsigned arithmetic it is.
INFINI_HD constexpr std::int64_t randint_sample(const Philox4& r, std::int64_t low, std::int64_t high) noexcept {
  const std::uint64_t range = static_cast<std::uint64_t>(high) - static_cast<std::uint64_t>(low);
  const std::uint64_t x = ((std::uint64_t{r.w[0]} << 32) | r.w[1]) % range;
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(low) + x);
}

}  // namespace infini::math
