// Philox4x32-10 (Salmon et al., SC'11), the counter-based generator behind every random
// op, usable from host and device code: bit-identical to infini::philox4x32
// (modules/tensor/generator.cppm), so a CUDA kernel draws exactly what the CPU draws for
// the same (seed, counter, stream).
#pragma once

#include <cstdint>

#include "infini/math/host_device.h"

namespace infini::math {

// Four 32-bit random words (a plain struct: usable in device code).
struct Philox4 {
  std::uint32_t w[4];
};

// The words for counter `counter` (c1:c0) and stream `stream` (c3:c2) under key `seed` (k1:k0).
INFINI_HD constexpr Philox4 philox4x32(std::uint64_t seed, std::uint64_t counter, std::uint64_t stream = 0) noexcept {
  std::uint32_t c0 = static_cast<std::uint32_t>(counter), c1 = static_cast<std::uint32_t>(counter >> 32);
  std::uint32_t c2 = static_cast<std::uint32_t>(stream), c3 = static_cast<std::uint32_t>(stream >> 32);
  std::uint32_t k0 = static_cast<std::uint32_t>(seed), k1 = static_cast<std::uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = std::uint64_t{0xD2511F53u} * c0;
    const std::uint64_t p1 = std::uint64_t{0xCD9E8D57u} * c2;
    const std::uint32_t n0 = static_cast<std::uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const std::uint32_t n2 = static_cast<std::uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<std::uint32_t>(p1);
    c3 = static_cast<std::uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {{c0, c1, c2, c3}};
}

}  // namespace infini::math
