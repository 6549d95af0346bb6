// GEMM (see gemm_eigen.h). Float products that may take bfloat16 operands go to the AMX
// kernel of sgemm_amx.cpp where it suits them, else to the bfloat16-pair kernel of
// sgemm_packed.cpp (AVX512-BF16); other float products that suit it to the packed AVX-512
// kernel of sgemm_packed.cpp; the rest, and every double product, to Eigen.
// Eigen's operands are Eigen::Maps over the caller's memory, row- or column-major as they
// lie, so transposed operands are never copied (but for the matrix of a double
// matrix-vector product, below); Eigen packs them into its own cache blocks. Threading is
// ours, not Eigen's: c is cut into one column (or row) block per OpenMP thread and each
// block is a single-threaded Eigen product. On a 2-core machine
// this measured at least as fast as Eigen's parallel GEMM, and it keeps every allocation
// failure inside a region that catches it.
#define EIGEN_DONT_PARALLELIZE
// Every product through Eigen's packed GEMM, never its coefficient-wise "lazy" product for
// tiny sizes (m + n + k < 20): that one vectorizes along whichever dim the storage order
// makes contiguous, so a transposed operand would change the bits of the result (seen with
// AVX2's four-double packets). Packing makes the summation order independent of layout.
#define EIGEN_GEMM_TO_COEFFBASED_THRESHOLD 0
#include "gemm_eigen.h"
#include "sgemm_amx.h"
#include "sgemm_packed.h"

#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <new>
#include <vector>

namespace infini::cpu {
namespace {

// Multiply-adds below which another thread costs more than it brings.
constexpr double kWorkPerThread = 1 << 18;

template <class T, int Order>
using ConstMap = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Order>, 0, Eigen::OuterStride<>>;
template <class T>
using OutMap = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, 0, Eigen::OuterStride<>>;

template <class T, int Order>
ConstMap<T, Order> map(const MatrixArg<T>& arg, std::int64_t rows, std::int64_t cols) {
  return ConstMap<T, Order>(arg.data, rows, cols, Eigen::OuterStride<>(arg.ld));
}

// c = alpha * a @ b + beta * c on the calling thread, for blocks of a, b and c.
template <class T, class A, class B>
void product(OutMap<T> c, const A& a, const B& b, T alpha, T beta) {
  if (beta == T(0)) {
    c.noalias() = alpha * a * b;
  } else {
    if (beta != T(1)) c *= beta;
    c.noalias() += alpha * a * b;
  }
}

// Rows [r0, r0 + rows) and columns [c0, c0 + cols) of c from the same rows of a and
// columns of b, with a and b mapped in their storage orders.
template <class T, int OrderA, int OrderB>
void block(std::int64_t r0, std::int64_t rows, std::int64_t c0, std::int64_t cols, std::int64_t m, std::int64_t n,
           std::int64_t k, T alpha, const MatrixArg<T>& a, const MatrixArg<T>& b, T beta, T* c, std::int64_t ldc) {
  const auto am = map<T, OrderA>(a, m, k).middleRows(r0, rows);
  const auto bm = map<T, OrderB>(b, k, n).middleCols(c0, cols);
  product<T>(OutMap<T>(c + r0 * ldc + c0, rows, cols, Eigen::OuterStride<>(ldc)), am, bm, alpha, beta);
}

template <class T>
void block(std::int64_t r0, std::int64_t rows, std::int64_t c0, std::int64_t cols, std::int64_t m, std::int64_t n,
           std::int64_t k, T alpha, const MatrixArg<T>& a, const MatrixArg<T>& b, T beta, T* c, std::int64_t ldc) {
  constexpr int R = Eigen::RowMajor, C = Eigen::ColMajor;
  if (!a.col_major && !b.col_major) block<T, R, R>(r0, rows, c0, cols, m, n, k, alpha, a, b, beta, c, ldc);
  else if (!a.col_major) block<T, R, C>(r0, rows, c0, cols, m, n, k, alpha, a, b, beta, c, ldc);
  else if (!b.col_major) block<T, C, R>(r0, rows, c0, cols, m, n, k, alpha, a, b, beta, c, ldc);
  else block<T, C, C>(r0, rows, c0, cols, m, n, k, alpha, a, b, beta, c, ldc);
}

// OpenMP threads worth using for m * n * k multiply-adds.
int threads_for(std::int64_t m, std::int64_t n, std::int64_t k) {
  const double work = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  return std::max(1, static_cast<int>(std::min<double>(omp_get_max_threads(), work / kWorkPerThread)));
}

template <class T>
bool gemm_impl(std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const MatrixArg<T>& a, const MatrixArg<T>& b,
               T beta, T* c, std::int64_t ldc, bool parallel) noexcept {
  if (m == 0 || n == 0) return true;
  if (k == 0) {  // an empty sum: c = beta * c
    OutMap<T> out(c, m, n, Eigen::OuterStride<>(ldc));
    if (beta == T(0)) out.setZero();
    else out *= beta;
    return true;
  }
  int threads = parallel ? threads_for(m, n, k) : 1;
  // Split c along its longer side, in multiples of 16 columns (a SIMD register of floats)
  // or 8 rows, so each thread's block keeps Eigen's register tiles whole.
  const bool by_cols = n >= m;
  const std::int64_t extent = by_cols ? n : m, grain = by_cols ? 16 : 8;
  threads = static_cast<int>(std::clamp<std::int64_t>(extent / grain, 1, std::max(threads, 1)));
  // Block `part` of `parts`; false when Eigen could not allocate.
  auto run = [&](std::int64_t part, std::int64_t parts) noexcept {
    const std::int64_t step = (extent / grain + parts - 1) / parts * grain;
    const std::int64_t begin = std::min(extent, part * step);
    const std::int64_t end = part == parts - 1 ? extent : std::min(extent, begin + step);
    try {
      if (begin < end) {
        if (by_cols) block<T>(0, m, begin, end - begin, m, n, k, alpha, a, b, beta, c, ldc);
        else block<T>(begin, end - begin, 0, n, m, n, k, alpha, a, b, beta, c, ldc);
      }
    } catch (const std::bad_alloc&) {
      return false;
    }
    return true;
  };
  if (threads == 1) return run(0, 1);
  std::atomic<bool> ok{true};
#pragma omp parallel num_threads(threads)
  if (!run(omp_get_thread_num(), omp_get_num_threads())) ok = false;
  return ok;
}

}  // namespace

bool gemm(std::int64_t m, std::int64_t n, std::int64_t k, float alpha, MatrixArg<float> a, MatrixArg<float> b,
          float beta, float* c, std::int64_t ldc, bool parallel, bool bf16_operands) noexcept {
  if constexpr (kHasAmxBf16) {
    if (bf16_operands && amx_bf16_suits(m, n, k) && amx_bf16_ready())
      return amx_bf16_gemm(m, n, k, alpha, a, b, beta, c, ldc, parallel ? threads_for(m, n, k) : 1);
  }
  if constexpr (kHasPackedSgemm) {
    const int threads = parallel ? threads_for(m, n, k) : 1;
    if (bf16_operands && packed_bf16_suits(m, n, k)) return packed_sgemm(m, n, k, alpha, a, b, beta, c, ldc, threads, true);
    if (packed_sgemm_suits(m, n, k)) return packed_sgemm(m, n, k, alpha, a, b, beta, c, ldc, threads);
  }
  return gemm_impl(m, n, k, alpha, a, b, beta, c, ldc, parallel);
}

// Matrix-vector products go through Eigen's GEMV, whose summation order follows the
// matrix's storage order (dot products when k is contiguous, axpys otherwise). The double
// products are the references of the tests (gradcheck, layouts), so they read the matrix
// with k contiguous always: the same bits whatever the operands' strides.
bool gemm(std::int64_t m, std::int64_t n, std::int64_t k, double alpha, MatrixArg<double> a, MatrixArg<double> b,
          double beta, double* c, std::int64_t ldc, bool parallel) noexcept {
  std::vector<double> copy;
  try {
    if (n == 1 && m > 1 && k > 1 && a.col_major) {  // a (m, k) into row-major
      copy.resize(static_cast<std::size_t>(m * k));
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < k; ++j) copy[static_cast<std::size_t>(i * k + j)] = a.data[j * a.ld + i];
      a = {copy.data(), k, false};
    } else if (m == 1 && n > 1 && k > 1 && !b.col_major) {  // b (k, n) into column-major
      copy.resize(static_cast<std::size_t>(k * n));
      for (std::int64_t j = 0; j < n; ++j)
        for (std::int64_t i = 0; i < k; ++i) copy[static_cast<std::size_t>(j * k + i)] = b.data[i * b.ld + j];
      b = {copy.data(), k, true};
    }
  } catch (const std::bad_alloc&) {
    return false;
  }
  return gemm_impl(m, n, k, alpha, a, b, beta, c, ldc, parallel);
}

}  // namespace infini::cpu
