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

// Same contract as gemm(): c (m,n) row-major = alpha * a @ b + beta * c; beta == 0
// ignores c's old values. `threads` > 1 runs on that many OpenMP threads (one team,
// column blocks handed out dynamically); 1 runs on the calling thread. Returns false
// when a packing buffer could not be allocated. Only callable when kHasPackedSgemm.
bool packed_sgemm(std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const MatrixArg<float>& a,
                  const MatrixArg<float>& b, float beta, float* c, std::int64_t ldc, int threads) noexcept;

}  // namespace infini::cpu
