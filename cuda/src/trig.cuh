// Internal: sin and cos without local memory. CUDA's sin/cos reduce large arguments with a
// Payne-Hanek routine that keeps its product in a local array, which this build rejects
// (ptxas -warn-lmem-usage). Here the argument is reduced to a fraction of pi/2 in double-
// double (Cody-Waite for float arguments below 2^20, else a Payne-Hanek reduction whose
// words stay in registers) and finished by sinpi/cospi, whose own reduction is exact.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace infini::cuda::detail {

// 2/pi in binary: word k holds bits 64k+1 .. 64k+64 after the point (bit j weighs 2^-j),
// preceded by one zero word so that windows may start up to 63 bits before the point.
#define INFINI_TWO_OVER_PI_WORDS                                                                                \
  0x0000000000000000, 0xA2F9836E4E441529, 0xFC2757D1F534DDC0, 0xDB6295993C439041, 0xFE5163ABDEBBC561,           \
      0xB7246E3A424DD2E0, 0x06492EEA09D1921C, 0xFE1DEB1CB129A73E, 0xE88235F52EBB4484, 0xE99C7026B45F7E41,       \
      0x3991D639835339F4, 0x9C845F8BBDF9283B, 0x1FF897FFDE05980F, 0xEF2F118B5A0A6D1F, 0x6D367ECF27CB09B7,       \
      0x4F463F669E5FEA2D, 0x7527BAC7EBE5F17B, 0x3D0739F78A5292EA, 0x6BFB5FB11F8D5D08, 0x56033046FC7B6BAB,       \
      0xF0CFBC209AF4361D, 0xA9E391615EE61B08
__constant__ const std::uint64_t kTwoOverPiDevice[] = {INFINI_TWO_OVER_PI_WORDS};
inline constexpr std::uint64_t kTwoOverPiHost[] = {INFINI_TWO_OVER_PI_WORDS};
#undef INFINI_TWO_OVER_PI_WORDS

__host__ __device__ inline std::uint64_t two_over_pi_word(int k) {
#if defined(__CUDA_ARCH__)
  return kTwoOverPiDevice[k];
#else
  return kTwoOverPiHost[k];
#endif
}

__host__ __device__ inline std::uint64_t mul_hi(std::uint64_t a, std::uint64_t b) {
#if defined(__CUDA_ARCH__)
  return __umul64hi(a, b);
#else
  return static_cast<std::uint64_t>((static_cast<unsigned __int128>(a) * b) >> 64);
#endif
}

__host__ __device__ inline int leading_zeros(std::uint64_t x) {  // x != 0
#if defined(__CUDA_ARCH__)
  return __clzll(static_cast<long long>(x));
#else
  return __builtin_clzll(x);
#endif
}

// x * 2/pi = 4n + quadrant + (hi + lo), |hi + lo| <= 1/2, as a double-double (hi, lo).
struct Reduced {
  int quadrant;
  double hi, lo;
};

// The 128-bit fraction (a:b) * 2^-128 as a double-double.
__host__ __device__ inline void fraction_to_double2(std::uint64_t a, std::uint64_t b, double& hi, double& lo) {
  int scale = -64;  // a's units
  if (a == 0) {
    a = b;
    b = 0;
    scale -= 64;
  }
  if (a == 0) {
    hi = lo = 0;
    return;
  }
  const int lz = leading_zeros(a);
  if (lz > 0) {
    a = (a << lz) | (b >> (64 - lz));
    b <<= lz;
    scale -= lz;
  }
  hi = std::ldexp(static_cast<double>(a & ~std::uint64_t{0x7FF}), scale);  // the top 53 bits, exact
  lo = std::ldexp(static_cast<double>(((a & 0x7FF) << 53) | (b >> 11)), scale - 53);
}

// Payne-Hanek: |x| * 2/pi mod 4 for a finite |x| >= 2^-10 with exponent at most 1023.
__host__ __device__ inline Reduced reduce_large(double x) {
#if defined(__CUDA_ARCH__)
  const auto bits = static_cast<std::uint64_t>(__double_as_longlong(x));
#else
  std::uint64_t bits;
  std::memcpy(&bits, &x, sizeof bits);
#endif
  const int e = static_cast<int>((bits >> 52) & 0x7FF) - 1075;  // |x| = m * 2^e
  const std::uint64_t m = (bits & ((std::uint64_t{1} << 52) - 1)) | (std::uint64_t{1} << 52);
  // Bits j <= e - 2 of 2/pi give multiples of 4; take the 192 bits from j = e - 1 on (the
  // window W), so that |x| * 2/pi mod 4 = (m * W mod 2^192) * 2^-190 up to 2^-130.
  const int first = e - 2 + 64;  // 0-based bit position of j = e - 1 in the padded table
  const int k = first / 64, shift = first % 64;
  auto window_word = [&](int i) {
    const std::uint64_t w0 = two_over_pi_word(k + i), w1 = two_over_pi_word(k + i + 1);
    return shift == 0 ? w0 : (w0 << shift) | (w1 >> (64 - shift));
  };
  const std::uint64_t top = window_word(0), mid = window_word(1), low = window_word(2);
  const std::uint64_t p0 = low * m;
  const std::uint64_t low_hi = mul_hi(low, m), mid_lo = mid * m;
  const std::uint64_t p1 = low_hi + mid_lo;
  const std::uint64_t p2 = mul_hi(mid, m) + top * m + (p1 < low_hi ? 1 : 0);
  Reduced r;
  r.quadrant = static_cast<int>(p2 >> 62);
  std::uint64_t a = (p2 << 2) | (p1 >> 62), b = (p1 << 2) | (p0 >> 62);
  const bool upper_half = (a >> 63) != 0;  // fraction >= 1/2: take f - 1 instead
  if (upper_half) {
    r.quadrant = (r.quadrant + 1) & 3;
    b = ~b + 1;
    a = ~a + (b == 0 ? 1 : 0);
  }
  fraction_to_double2(a, b, r.hi, r.lo);
  if (upper_half) {
    r.hi = -r.hi;
    r.lo = -r.lo;
  }
  return r;
}

// |x| * 2/pi for |x| < 2^20 (exact to about 2^-85, plenty for float arguments) from
// Cody-Waite: x * 2/pi as a double-double minus its nearest integer.
__host__ __device__ inline Reduced reduce_medium(double ax) {
  const double t = ax * 0x1.45f306dc9c883p-1;
  const double t_lo = std::fma(ax, 0x1.45f306dc9c883p-1, -t) + ax * -0x1.6b01ec5417056p-55;
  const double k = std::rint(t), f = t - k;  // exact
  Reduced r;
  r.quadrant = static_cast<int>(static_cast<std::int64_t>(k) & 3);
  r.hi = f + t_lo;  // two-sum
  const double f_part = r.hi - t_lo;
  r.lo = (f - f_part) + (t_lo - (r.hi - f_part));
  return r;
}

// sin(x) (want_sin) or cos(x) in double, accurate to about an ulp; float arguments (at
// most 2^128) may use the cheaper Cody-Waite reduction below 2^20.
__host__ __device__ inline double sin_cos_reduced(double x, bool want_sin, bool float_argument) {
  const double ax = std::fabs(x);
  if (!(ax <= 1.7976931348623157e308)) return x - x;  // NaN for Inf and NaN
  if (ax < 0x1p-27) return want_sin ? x : 1.0;        // sin x = x, cos x = 1 after rounding
  Reduced r{0, 0, 0};
  if (ax < 0x1p-10) {
    r.hi = ax * 0x1.45f306dc9c883p-1;  // ax * 2/pi as a double-double
    r.lo = std::fma(ax, 0x1.45f306dc9c883p-1, -r.hi) + ax * -0x1.6b01ec5417056p-55;
  } else if (float_argument && ax < 0x1p20) {
    r = reduce_medium(ax);
  } else {
    r = reduce_large(ax);
  }
  // |x| = (4n + q + f) pi/2 with f = hi + lo: sin(f pi/2) = sinpi(f / 2), and lo adds
  // lo pi/2 times the derivative.
  const double s0 = sinpi(r.hi / 2), c0 = cospi(r.hi / 2), d = r.lo * 1.5707963267948966;
  const double s = s0 + d * c0, c = c0 - d * s0;
  const int q = r.quadrant;
  if (want_sin) {
    const double v = (q & 1) ? c : s;
    return ((q & 2) != 0) != (x < 0) ? -v : v;
  }
  const double v = (q & 1) ? s : c;
  return (q == 1 || q == 2) ? -v : v;
}

// sin and cos in the compute type C (float or double).
template <class C>
__device__ C sin_no_lmem(C x) {
  return static_cast<C>(sin_cos_reduced(x, true, std::is_same_v<C, float>));
}

template <class C>
__device__ C cos_no_lmem(C x) {
  return static_cast<C>(sin_cos_reduced(x, false, std::is_same_v<C, float>));
}

}  // namespace infini::cuda::detail
