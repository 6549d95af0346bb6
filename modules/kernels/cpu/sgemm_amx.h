// Float32 GEMM with bfloat16 operands on AMX tiles: what float32 products compute under
// set_float32_matmul_precision(kMedium) on a CPU that has AMX-BF16, like oneDNN's path
// behind torch.set_float32_matmul_precision("medium"). A plain C++ header, like
// gemm_eigen.h, which dispatches float products here.
#pragma once

#include <cstdint>

#include "gemm_eigen.h"

namespace infini::cpu {

// True when this build has the AMX kernel (compiled for a CPU with AMX-BF16).
#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__AVX512BF16__)
inline constexpr bool kHasAmxBf16 = true;
#else
inline constexpr bool kHasAmxBf16 = false;
#endif

// True when this build has the kernel and the OS lets this process use the tiles (asked
// once, with arch_prctl(ARCH_REQ_XCOMP_PERM)).
bool amx_bf16_ready() noexcept;

// Whether the tiles are worth it for an (m,k) @ (k,n) product: a 32 x 32 block of c per
// micro-kernel and 32-deep tile products waste most of their work on thinner ones.
inline bool amx_bf16_suits(std::int64_t m, std::int64_t n, std::int64_t k) {
  return kHasAmxBf16 && m >= 16 && n >= 16 && k >= 32;
}

// c (m,n) row-major = alpha * round(a) @ round(b) + beta * c, where round() takes each
// element to the nearest bfloat16 (ties to even) and the products are summed in float32.
// Otherwise the contract of gemm(): beta == 0 ignores c's old values; `threads` > 1 runs
// on that many OpenMP threads. Returns false when a packing buffer could not be
// allocated. Only callable when amx_bf16_ready().
bool amx_bf16_gemm(std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const MatrixArg<float>& a,
                   const MatrixArg<float>& b, float beta, float* c, std::int64_t ldc, int threads) noexcept;

}  // namespace infini::cpu
