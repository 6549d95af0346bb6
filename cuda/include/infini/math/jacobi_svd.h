// The singular value decomposition of one matrix by one-sided Jacobi (Hestenes) rotations in
// float64, shared by the CPU kernel (modules/kernels/cpu/svd.cpp, one matrix per OpenMP
// iteration) and the CUDA kernel (cuda/src/svd.cu, one thread per matrix), so both devices
// run the same code (contract: SvdKernel in modules/kernels/linalg.cppm).
//
// a (m, n) = U diag(S) Vh with k = min(m, n). W = a (a^T when m < n) has r = max(m, n) rows
// and k columns w_j (column-major in the workspace), V = I (k, k). Each pair of columns (p, q)
// is rotated, V's columns with it, until every pair is orthogonal to working precision:
// |w_p . w_q| <= tol ||w_p|| ||w_q||. The rotated W = U' diag(sigma) with sigma_j = ||w_j||
// and U' orthonormal:
//   m >= n: a V = W, so a = U' diag(sigma) V^T: U = U', Vh = V^T;
//   m <  n: a^T V = W, so a = V diag(sigma) U'^T: U = V, Vh = U'^T.
// The columns are sorted by sigma descending (stable: ties keep their index order), scaled to
// unit length, and the columns for zero singular values (and, for full matrices, the missing
// ones) completed to an orthonormal set by Gram-Schmidt against standard basis vectors, so U
// and Vh are orthonormal even for rank-deficient a.
#pragma once

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>

#include "infini/math/host_device.h"

namespace infini::math {

// What jacobi_svd returns for one matrix (the int32 status of SvdKernel).
enum SvdStatus : int {
  kSvdOk = 0,
  kSvdNonFinite = 1,      // a holds Inf or NaN: every output is NaN
  kSvdNoConvergence = 2,  // still rotating after kSvdMaxSweeps sweeps (the outputs are the last state)
};

// Sweeps over all column pairs; Jacobi converges quadratically, in well under 20 sweeps for
// matrices of thousands of columns.
inline constexpr int kSvdMaxSweeps = 60;

// float64 elements of workspace one (m, n) matrix needs: W (r, r or k), V (k, k), sigma (k).
INFINI_HD inline std::int64_t jacobi_svd_workspace(std::int64_t m, std::int64_t n, bool full) {
  const std::int64_t r = m > n ? m : n, k = m < n ? m : n;
  return r * (full ? r : k) + k * k + k;
}

namespace svd_detail {

// Columns of the scaled W (largest entry about 1) with a norm below this are not rotated and
// their U columns completed like those of zero singular values: their squares underflow, so
// Jacobi could not make them orthogonal (it would not converge), and their part of a is far
// below rounding anyway.
inline constexpr double kNegligible = 1e-150;

// The power of two 2^-e for the exponent e of a finite x > 0 (x 2^-e in [1, 2)), read from
// the bits of x, so it is exact; clamped to the normal range: 2^1023 for a subnormal x (x p
// below 2), 2^-1022 for x >= 2^1023 (x p in [2, 4)).
INFINI_HD inline double inverse_power_of_two(double x) {
  const auto exponent = static_cast<std::int64_t>((std::bit_cast<std::uint64_t>(x) >> 52) & 0x7ff);  // biased
  std::int64_t biased = 2046 - exponent;  // 2^-(exponent - 1023)
  biased = biased < 1 ? 1 : biased > 2046 ? 2046 : biased;
  return std::bit_cast<double>(static_cast<std::uint64_t>(biased) << 52);
}

// ||x|| of r entries, scaled by a power of two on the way, so a column whose squares would
// underflow still has its norm (the same bits as the plain sum otherwise).
INFINI_HD inline double column_norm(const double* x, std::int64_t r) {
  double big = 0;
  for (std::int64_t i = 0; i < r; ++i) big = std::fmax(big, std::fabs(x[i]));
  if (big == 0) return 0;
  const double p = inverse_power_of_two(big);
  double sum = 0;
  for (std::int64_t i = 0; i < r; ++i) sum += (x[i] * p) * (x[i] * p);
  return std::sqrt(sum) / p;
}

// Swaps columns p and q of the column-major (rows, *) matrix x.
INFINI_HD inline void swap_columns(double* x, std::int64_t rows, std::int64_t p, std::int64_t q) {
  double* xp = x + p * rows;
  double* xq = x + q * rows;
  for (std::int64_t i = 0; i < rows; ++i) {
    const double t = xp[i];
    xp[i] = xq[i];
    xq[i] = t;
  }
}

// Column j of the column-major (r, *) matrix w becomes a unit vector orthogonal to its
// orthonormal columns 0..j-1: the standard basis vector e_b with the largest part outside
// their span (1 - sum_i w_i[b]^2, at least (r - j) / r for the best b), with that span
// projected out twice (classical Gram-Schmidt, repeated for orthogonality to rounding).
INFINI_HD inline void complete_column(double* w, std::int64_t r, std::int64_t j) {
  std::int64_t best = 0;
  double best_rest = -1;
  for (std::int64_t b = 0; b < r; ++b) {
    double inside = 0;
    for (std::int64_t i = 0; i < j; ++i) inside += w[b + i * r] * w[b + i * r];
    if (1 - inside > best_rest) {
      best_rest = 1 - inside;
      best = b;
    }
  }
  double* x = w + j * r;
  for (std::int64_t e = 0; e < r; ++e) x[e] = e == best ? 1 : 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (std::int64_t i = 0; i < j; ++i) {
      const double* wi = w + i * r;
      double d = 0;
      for (std::int64_t e = 0; e < r; ++e) d += wi[e] * x[e];
      for (std::int64_t e = 0; e < r; ++e) x[e] -= d * wi[e];
    }
  }
  double norm = 0;
  for (std::int64_t e = 0; e < r; ++e) norm += x[e] * x[e];
  norm = std::sqrt(norm);
  for (std::int64_t e = 0; e < r; ++e) x[e] /= norm;
}

}  // namespace svd_detail

// The SVD of a (m, n), row-major, into u (m, full ? m : k), s (k) and vh (full ? n : k, n),
// all row-major of the element type T (float or double); work holds
// jacobi_svd_workspace(m, n, full) doubles. Returns an SvdStatus.
template <class T>
INFINI_HD int jacobi_svd(const T* a, std::int64_t m, std::int64_t n, bool full, T* u, T* s, T* vh, double* work) {
  const bool wide = m < n;
  const std::int64_t r = wide ? n : m, k = wide ? m : n;
  const std::int64_t wc = full ? r : k;  // W's columns: k from Jacobi, then the completed ones
  const std::int64_t u_cols = full ? m : k, vh_rows = full ? n : k;
  double* w = work;           // (r, wc) column-major: w[i + j r]
  double* v = w + r * wc;     // (k, k) column-major
  double* sigma = v + k * k;  // (k)

  // W = a or a^T, scaled by a power of two that brings the largest |a_ij| to about 1: no sum
  // of squares below overflows, and only columns negligible next to the largest underflow.
  double largest = 0;
  bool finite = true;
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      const double x = static_cast<double>(a[i * n + j]);
      finite = finite && std::isfinite(x);
      largest = std::fmax(largest, std::fabs(x));
    }
  if (!finite) {
    const T nan = static_cast<T>(std::numeric_limits<double>::quiet_NaN());
    for (std::int64_t i = 0; i < m * u_cols; ++i) u[i] = nan;
    for (std::int64_t i = 0; i < k; ++i) s[i] = nan;
    for (std::int64_t i = 0; i < vh_rows * n; ++i) vh[i] = nan;
    return kSvdNonFinite;
  }
  const double scale = largest > 0 ? svd_detail::inverse_power_of_two(largest) : 1.0;
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      const double x = static_cast<double>(a[i * n + j]) * scale;
      if (wide) w[j + i * r] = x;
      else w[i + j * r] = x;
    }
  for (std::int64_t i = 0; i < k * k; ++i) v[i] = 0;
  for (std::int64_t i = 0; i < k; ++i) v[i + i * k] = 1;

  // Cyclic sweeps over the pairs p < q. A dot product of r terms is off by at most about
  // r eps ||w_p|| ||w_q||, so pairs within that are taken as orthogonal.
  const double tol = DBL_EPSILON * static_cast<double>(r > 1 ? r : 1);
  int status = kSvdNoConvergence;
  for (int sweep = 0; sweep < kSvdMaxSweeps; ++sweep) {
    bool rotated = false;
    for (std::int64_t p = 0; p + 1 < k; ++p) {
      for (std::int64_t q = p + 1; q < k; ++q) {
        double* wp = w + p * r;
        double* wq = w + q * r;
        double alpha = 0, beta = 0, gamma = 0;  // ||w_p||^2, ||w_q||^2, w_p . w_q
        for (std::int64_t i = 0; i < r; ++i) {
          alpha += wp[i] * wp[i];
          beta += wq[i] * wq[i];
          gamma += wp[i] * wq[i];
        }
        constexpr double kNegligibleSquare = svd_detail::kNegligible * svd_detail::kNegligible;
        if (alpha <= kNegligibleSquare || beta <= kNegligibleSquare) continue;
        if (gamma == 0 || std::fabs(gamma) <= tol * std::sqrt(alpha) * std::sqrt(beta)) continue;
        // The rotation that makes the pair orthogonal (Demmel, Applied Numerical Linear
        // Algebra, algorithm 5.5): t = tan(theta), the smaller root of t^2 + 2 zeta t - 1 = 0.
        const double zeta = (beta - alpha) / (2 * gamma);
        const double t = (zeta >= 0 ? 1.0 : -1.0) / (std::fabs(zeta) + std::hypot(1.0, zeta));
        const double c = 1 / std::sqrt(1 + t * t), sn = c * t;
        if (sn == 0) continue;  // an angle below rounding (zeta overflowed): nothing would change
        rotated = true;
        for (std::int64_t i = 0; i < r; ++i) {
          const double x = wp[i], y = wq[i];
          wp[i] = c * x - sn * y;
          wq[i] = sn * x + c * y;
        }
        double* vp = v + p * k;
        double* vq = v + q * k;
        for (std::int64_t i = 0; i < k; ++i) {
          const double x = vp[i], y = vq[i];
          vp[i] = c * x - sn * y;
          vq[i] = sn * x + c * y;
        }
      }
    }
    if (!rotated) {
      status = kSvdOk;
      break;
    }
  }

  // sigma_j = ||w_j||, sorted descending by stable insertion (columns of W and V move along).
  for (std::int64_t j = 0; j < k; ++j) sigma[j] = svd_detail::column_norm(w + j * r, r);
  for (std::int64_t j = 1; j < k; ++j)
    for (std::int64_t q = j; q > 0 && sigma[q - 1] < sigma[q]; --q) {
      const double t = sigma[q];
      sigma[q] = sigma[q - 1];
      sigma[q - 1] = t;
      svd_detail::swap_columns(w, r, q - 1, q);
      svd_detail::swap_columns(v, k, q - 1, q);
    }
  // Unit columns; zero singular values (last after the sort) and the full matrices' extra
  // columns completed, and so are negligible ones (their singular values are still reported).
  for (std::int64_t j = 0; j < wc; ++j) {
    if (j < k && sigma[j] > svd_detail::kNegligible) {
      for (std::int64_t i = 0; i < r; ++i) w[i + j * r] /= sigma[j];
    } else {
      svd_detail::complete_column(w, r, j);
    }
  }

  for (std::int64_t j = 0; j < k; ++j) s[j] = static_cast<T>(sigma[j] / scale);
  if (!wide) {
    for (std::int64_t i = 0; i < m; ++i)  // U = W (m, u_cols)
      for (std::int64_t j = 0; j < u_cols; ++j) u[i * u_cols + j] = static_cast<T>(w[i + j * r]);
    for (std::int64_t j = 0; j < k; ++j)  // Vh = V^T (k = n rows)
      for (std::int64_t c = 0; c < n; ++c) vh[j * n + c] = static_cast<T>(v[c + j * k]);
  } else {
    for (std::int64_t i = 0; i < m; ++i)  // U = V (m, k = m)
      for (std::int64_t j = 0; j < m; ++j) u[i * m + j] = static_cast<T>(v[i + j * k]);
    for (std::int64_t j = 0; j < vh_rows; ++j)  // Vh = W^T (vh_rows, n)
      for (std::int64_t c = 0; c < n; ++c) vh[j * n + c] = static_cast<T>(w[c + j * r]);
  }
  return status;
}

}  // namespace infini::math
