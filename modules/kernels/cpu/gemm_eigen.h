// Dense matrix products on the CPU through Eigen. A plain C++ header (no modules): its
// source, gemm_eigen.cpp, is the one unit built with -O3 -march=native, which module
// units cannot be (their BMIs must match their importers').
#pragma once

#include <cstdint>

namespace infini::cpu {

// A read-only matrix operand of a product, read in place: element (i, j) lies at
// data[i * ld + j] when row-major, at data[i + j * ld] when column-major (so a transposed
// row-major matrix is a column-major one with the same ld). ld >= 1.
template <class T>
struct MatrixArg {
  const T* data;
  std::int64_t ld;
  bool col_major;
};

// c (m,n) = alpha * a (m,k) @ b (k,n) + beta * c, with c row-major (element (i, j) at
// c[i * ldc + j]) and overlapping neither a nor b. beta == 0 ignores c's old values (NaN
// does not propagate); k == 0 leaves beta * c. With `parallel`, large products are split
// into column (or row) blocks of c, one per OpenMP thread; without it the product runs on
// the calling thread (for callers that spread a batch over the threads).
// With `bf16_operands` a float product may round a and b to bfloat16 (summing in float32)
// where that is faster: on AMX tiles (sgemm_amx.h) or with AVX512-BF16 (sgemm_packed.h).
// Returns false, with c partly written, when Eigen could not allocate its packing buffers.
bool gemm(std::int64_t m, std::int64_t n, std::int64_t k, float alpha, MatrixArg<float> a, MatrixArg<float> b,
          float beta, float* c, std::int64_t ldc, bool parallel, bool bf16_operands = false) noexcept;
bool gemm(std::int64_t m, std::int64_t n, std::int64_t k, double alpha, MatrixArg<double> a, MatrixArg<double> b,
          double beta, double* c, std::int64_t ldc, bool parallel) noexcept;

}  // namespace infini::cpu
