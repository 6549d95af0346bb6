// 16-bit floating point storage types: IEEE binary16 (Half) and bfloat16 (BFloat16).
// Conversions from float round to nearest even; NaN stays NaN (quieted), Inf stays Inf,
// values too large for the format become Inf, f16 subnormals are exact.
export module infini.tensor:half;
import infini.std;

export namespace infini {

constexpr std::uint16_t float_to_half_bits(float value) noexcept {
  std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  if (x >= 0x47800000u) {  // |value| >= 65536, Inf or NaN
    if (x > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u | ((x >> 13) & 0x3ffu));
    return static_cast<std::uint16_t>(sign | 0x7c00u);
  }
  if (x < 0x38800000u) {  // |value| < 2^-14: f16 subnormal or zero.
    // Adding 0.5f aligns the f16 subnormal ulp (2^-24) with the float ulp; the FPU rounds to even.
    const float aligned = std::bit_cast<float>(x) + 0.5f;
    return static_cast<std::uint16_t>(sign | (std::bit_cast<std::uint32_t>(aligned) - 0x3f000000u));
  }
  const std::uint32_t mantissa_odd = (x >> 13) & 1u;
  x += 0xc8000fffu + mantissa_odd;  // rebias exponent (127 -> 15) and round half to even
  return static_cast<std::uint16_t>(sign | (x >> 13));  // a carry into 0x7c00 is the overflow to Inf
}

constexpr float half_bits_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  const std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

constexpr std::uint16_t float_to_bfloat16_bits(float value) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x0040u);  // quiet NaN
  const std::uint32_t lsb = (x >> 16) & 1u;
  return static_cast<std::uint16_t>((x + 0x7fffu + lsb) >> 16);  // round half to even; overflow -> Inf
}

constexpr float bfloat16_bits_to_float(std::uint16_t b) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

struct Half {
  std::uint16_t bits = 0;
  constexpr Half() = default;
  constexpr Half(float f) noexcept : bits(float_to_half_bits(f)) {}
  static constexpr Half from_bits(std::uint16_t b) noexcept { Half h; h.bits = b; return h; }
  constexpr operator float() const noexcept { return half_bits_to_float(bits); }
};

struct BFloat16 {
  std::uint16_t bits = 0;
  constexpr BFloat16() = default;
  constexpr BFloat16(float f) noexcept : bits(float_to_bfloat16_bits(f)) {}
  static constexpr BFloat16 from_bits(std::uint16_t b) noexcept { BFloat16 h; h.bits = b; return h; }
  constexpr operator float() const noexcept { return bfloat16_bits_to_float(bits); }
};

}  // namespace infini
