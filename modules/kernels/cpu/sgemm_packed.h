// Packed single-precision GEMM with an AVX-512 register-tile micro-kernel (the BLIS
// scheme). A plain C++ header, like gemm_eigen.h, which dispatches float products here.
#pragma once

#include <cstdint>

#include "gemm_eigen.h"

namespace infini::cpu {

// True when this build has the micro-kernel (compiled for a CPU with AVX-512F).
#if defined(__AVX512F__)
inline constexpr bool kHasPackedSgemm = true;
#else
inline constexpr bool kHasPackedSgemm = false;
#endif

// Whether the packed kernel is worth it for an (m,k) @ (k,n) product: its 12x32 register
// tile wastes most of its work on thinner products, which Eigen handles better.
inline bool packed_sgemm_suits(std::int64_t m, std::int64_t n, std::int64_t k) {
  return kHasPackedSgemm && m >= 8 && n >= 48 && k >= 16;
}

// True when this build also has the bfloat16-pair micro-kernel (AVX512-BF16: Zen 4,
// Cooper Lake and later), which packed_sgemm runs for bf16_operands.
#if defined(__AVX512F__) && defined(__AVX512BF16__)
inline constexpr bool kHasPackedBf16 = true;
#else
inline constexpr bool kHasPackedBf16 = false;
#endif

// kHasPackedBf16 as this header sees it in sgemm_packed.cpp, built with -march=native (units
// built without it, like the module units, see it false).
bool packed_bf16_built() noexcept;

// Whether a product under kMedium rounds its operands to bfloat16 here: the same sizes
// as the AMX kernel (sgemm_amx.h), so that the setting means one thing on both CPUs.
inline bool packed_bf16_suits(std::int64_t m, std::int64_t n, std::int64_t k) {
  return kHasPackedBf16 && m >= 16 && n >= 16 && k >= 32;
}

// Same contract as gemm(): c (m,n) row-major = alpha * a @ b + beta * c; beta == 0
// ignores c's old values. `threads` > 1 runs on that many OpenMP threads (one team,
// column blocks handed out dynamically); 1 runs on the calling thread. Returns false
// when a packing buffer could not be allocated. Only callable when kHasPackedSgemm.
// With bf16_operands (only when kHasPackedBf16), a and b are rounded to bfloat16 (nearest,
// ties to even) while they are packed, and the products are summed in float32.
bool packed_sgemm(std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const MatrixArg<float>& a,
                  const MatrixArg<float>& b, float beta, float* c, std::int64_t ldc, int threads,
                  bool bf16_operands = false) noexcept;

}  // namespace infini::cpu
