// linalg_svd, svdvals and matrix_norm "nuc" / +-2: op table entries with float64 references
// from an independent method (the eigenvectors of A^T A by a naive two-sided Jacobi
// eigenvalue loop), used through sign-invariant functions of U and Vh as PyTorch's own tests
// do; plain tests against matrices built as Q1 diag(s) Q2^T from known rotations, of
// orthonormality (tall, wide, batched, strided, rank-deficient, full matrices, float32),
// zero-size inputs, errors, and CPU-vs-CUDA results where a GPU is present.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "op_info.h"

namespace infini::test::svd_test {
namespace {

using Matrix = std::vector<double>;  // row-major

Matrix multiply(const Matrix& a, const Matrix& b, std::int64_t m, std::int64_t k, std::int64_t n) {
  Matrix c(static_cast<std::size_t>(m * n), 0.0);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t l = 0; l < k; ++l)
      for (std::int64_t j = 0; j < n; ++j) c[i * n + j] += a[i * k + l] * b[l * n + j];
  return c;
}

// An orthogonal (n, n) matrix: the product of a rotation in every plane (i, j), i < j, by
// an angle that depends on seed, i and j.
Matrix orthogonal(std::int64_t n, int seed) {
  Matrix q(static_cast<std::size_t>(n * n), 0.0);
  for (std::int64_t i = 0; i < n; ++i) q[i * n + i] = 1;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = i + 1; j < n; ++j) {
      const double t = 0.3 + 0.7 * seed + 1.1 * static_cast<double>(i) + 0.45 * static_cast<double>(j);
      const double c = std::cos(t), s = std::sin(t);
      for (std::int64_t r = 0; r < n; ++r) {  // q = q R_ij
        const double x = q[r * n + i], y = q[r * n + j];
        q[r * n + i] = c * x - s * y;
        q[r * n + j] = s * x + c * y;
      }
    }
  return q;
}

// The (m, n) matrix Q1 diag(s) Q2^T with the given singular values (min(m, n) of them).
Matrix with_singular_values(std::int64_t m, std::int64_t n, const std::vector<double>& s, int seed) {
  const Matrix q1 = orthogonal(m, seed), q2 = orthogonal(n, seed + 5);
  Matrix d(static_cast<std::size_t>(m * n), 0.0);
  for (std::size_t j = 0; j < s.size(); ++j) d[j * n + j] = s[j];
  Matrix q2t(static_cast<std::size_t>(n * n));
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j) q2t[i * n + j] = q2[j * n + i];
  return multiply(multiply(q1, d, m, m, n), q2t, m, n, n);
}

// A float64 tensor of `shape` (*, m, n) whose matrices have the singular values s[b].
Tensor built(const Shape& shape, const std::vector<std::vector<double>>& s, int seed = 1) {
  const std::int64_t m = shape.end()[-2], n = shape.back();
  Matrix all;
  for (std::size_t b = 0; b < s.size(); ++b) {
    const Matrix a = with_singular_values(m, n, s[b], seed + static_cast<int>(b));
    all.insert(all.end(), a.begin(), a.end());
  }
  return from_vector(all, shape);
}

// ---- the reference: eigenpairs of A^T A ----

// The eigenvalues (descending) and unit eigenvectors (columns of v, row-major (n, n)) of the
// symmetric (n, n) matrix a, by cyclic two-sided Jacobi rotations (Golub and Van Loan 8.5).
void symmetric_eigen(Matrix a, std::int64_t n, std::vector<double>& values, Matrix& v) {
  v.assign(static_cast<std::size_t>(n * n), 0.0);
  for (std::int64_t i = 0; i < n; ++i) v[i * n + i] = 1;
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0, all = 0;
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        all += a[i * n + j] * a[i * n + j];
        if (i != j) off += a[i * n + j] * a[i * n + j];
      }
    if (off <= 1e-32 * all) break;
    for (std::int64_t p = 0; p < n; ++p)
      for (std::int64_t q = p + 1; q < n; ++q) {
        if (a[p * n + q] == 0) continue;
        const double tau = (a[q * n + q] - a[p * n + p]) / (2 * a[p * n + q]);
        const double t = (tau >= 0 ? 1 : -1) / (std::abs(tau) + std::sqrt(1 + tau * tau));
        const double c = 1 / std::sqrt(1 + t * t), s = t * c;
        for (std::int64_t r = 0; r < n; ++r) {  // a = a J
          const double x = a[r * n + p], y = a[r * n + q];
          a[r * n + p] = c * x - s * y;
          a[r * n + q] = s * x + c * y;
        }
        for (std::int64_t r = 0; r < n; ++r) {  // a = J^T a
          const double x = a[p * n + r], y = a[q * n + r];
          a[p * n + r] = c * x - s * y;
          a[q * n + r] = s * x + c * y;
        }
        for (std::int64_t r = 0; r < n; ++r) {  // v = v J
          const double x = v[r * n + p], y = v[r * n + q];
          v[r * n + p] = c * x - s * y;
          v[r * n + q] = s * x + c * y;
        }
      }
  }
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) order[i] = i;
  std::ranges::sort(order, [&](std::int64_t x, std::int64_t y) {
    return a[x * n + x] != a[y * n + y] ? a[x * n + x] > a[y * n + y] : x < y;
  });
  Matrix sorted(v.size());
  values.clear();
  for (std::int64_t j = 0; j < n; ++j) {
    values.push_back(a[order[j] * n + order[j]]);
    for (std::int64_t r = 0; r < n; ++r) sorted[r * n + j] = v[r * n + order[j]];
  }
  v = sorted;
}

// The reference SVD of one (m, n) matrix: s (k), u (m, k) and v (n, k) row-major, with v_j
// the eigenvectors of A^T A, s_j = sqrt(lambda_j) and u_j = A v_j / s_j (nonzero s only).
struct ReferenceSvd {
  std::vector<double> s;
  Matrix u, v;
};

ReferenceSvd reference_svd(const Matrix& a, std::int64_t m, std::int64_t n) {
  const std::int64_t k = std::min(m, n);
  Matrix ata(static_cast<std::size_t>(n * n), 0.0);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t r = 0; r < m; ++r) ata[i * n + j] += a[r * n + i] * a[r * n + j];
  std::vector<double> lambda;
  Matrix vectors;
  symmetric_eigen(ata, n, lambda, vectors);
  ReferenceSvd r;
  r.u.assign(static_cast<std::size_t>(m * k), 0.0);
  r.v.assign(static_cast<std::size_t>(n * k), 0.0);
  for (std::int64_t j = 0; j < k; ++j) {
    r.s.push_back(std::sqrt(std::max(lambda[j], 0.0)));
    for (std::int64_t i = 0; i < n; ++i) r.v[i * k + j] = vectors[i * n + j];
    for (std::int64_t i = 0; i < m; ++i) {
      double x = 0;
      for (std::int64_t l = 0; l < n; ++l) x += a[i * n + l] * vectors[l * n + j];
      r.u[i * k + j] = x / r.s[j];
    }
  }
  return r;
}

// Calls f(matrix values, m, n) for every matrix of x (*, m, n), in order.
template <class F>
void for_each_matrix(const Tensor& x, F&& f) {
  const std::int64_t m = x.shape().end()[-2], n = x.shape().back();
  const std::vector<double> v = values(x);
  for (std::size_t at = 0; at < v.size(); at += static_cast<std::size_t>(m * n))
    f(Matrix(v.begin() + static_cast<std::ptrdiff_t>(at), v.begin() + static_cast<std::ptrdiff_t>(at + m * n)), m, n);
}

Shape batch_of(const Tensor& x, std::initializer_list<std::int64_t> tail) {
  Shape s(x.shape().begin(), x.shape().end() - 2);
  s.insert(s.end(), tail);
  return s;
}

// The sign-invariant functions of the factors the op table checks: S,
// P = U diag(w) Vh, G = U diag(S) U^T, H = Vh^T diag(w) Vh with weights w_j = j + 1, and P
// again from the full matrices' first k columns / rows.
TensorList svd_functions(const Tensor& x) {
  const auto [U, S, Vh] = linalg_svd(x, false);
  const std::int64_t k = S.shape().back();
  std::vector<double> weights;
  for (std::int64_t j = 0; j < k; ++j) weights.push_back(static_cast<double>(j + 1));
  const Tensor w = from_vector(weights, {k}).to(x.device(), x.dtype()).unsqueeze(0);  // (1, k)
  const Tensor P = matmul(mul(U, w), Vh);
  const Tensor G = matmul(mul(U, S.unsqueeze(-2)), U.transpose(-1, -2));
  const Tensor H = matmul(mul(Vh.transpose(-1, -2), w), Vh);
  const auto full = linalg_svd(x, true);
  const Tensor P_full = matmul(mul(full.U.narrow(-1, 0, k), w), full.Vh.narrow(-2, 0, k));
  return {S, P, G, H, P_full};
}

TensorList svd_functions_reference(const Tensor& x) {
  std::vector<double> s_all, p_all, g_all, h_all;
  for_each_matrix(x, [&](const Matrix& a, std::int64_t m, std::int64_t n) {
    const ReferenceSvd r = reference_svd(a, m, n);
    const std::int64_t k = std::min(m, n);
    s_all.insert(s_all.end(), r.s.begin(), r.s.end());
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t c = 0; c < n; ++c) {
        double p = 0;
        for (std::int64_t j = 0; j < k; ++j) p += static_cast<double>(j + 1) * r.u[i * k + j] * r.v[c * k + j];
        p_all.push_back(p);
      }
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t c = 0; c < m; ++c) {
        double g = 0;
        for (std::int64_t j = 0; j < k; ++j) g += r.s[j] * r.u[i * k + j] * r.u[c * k + j];
        g_all.push_back(g);
      }
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t c = 0; c < n; ++c) {
        double h = 0;
        for (std::int64_t j = 0; j < k; ++j) h += static_cast<double>(j + 1) * r.v[i * k + j] * r.v[c * k + j];
        h_all.push_back(h);
      }
  });
  const std::int64_t m = x.shape().end()[-2], n = x.shape().back();
  const Tensor P = from_vector(p_all, batch_of(x, {m, n}));
  return {from_vector(s_all, batch_of(x, {std::min(m, n)})), P, from_vector(g_all, batch_of(x, {m, m})),
          from_vector(h_all, batch_of(x, {n, n})), P};
}

// Matrices with distinct, well-separated nonzero singular values (gradients of the SVD grow
// as 1 / (s_i^2 - s_j^2) and 1 / s).
std::vector<OpSample> svd_samples() {
  return {
      {"square (3,3)", {built({3, 3}, {{3, 2, 0.5}}).requires_grad_()}},
      {"tall (4,2)", {built({4, 2}, {{2.5, 1}}, 2).requires_grad_()}},
      {"wide (2,4)", {built({2, 4}, {{2, 0.7}}, 3).requires_grad_()}},
      {"batched (2,3,2)", {built({2, 3, 2}, {{3, 1}, {1.5, 0.5}}, 4).requires_grad_()}},
      {"transposed (4,3)^T", {built({4, 3}, {{2, 1.2, 0.4}}, 5).requires_grad_()},
       [](const TensorList& l) { return TensorList{l[0].transpose(0, 1)}; }},
  };
}

// matrix_norm's singular-value ords of x (*, m, n) over its last two dims: "nuc", 2 (over
// the dims in swapped order, kept) and -2.
TensorList singular_norms(const Tensor& x) {
  return {matrix_norm(x, "nuc"), matrix_norm(x, 2.0, {-1, -2}, true), matrix_norm(x, -2.0, {-2, -1})};
}

TensorList singular_norms_reference(const Tensor& x) {
  std::vector<double> nuc, largest, smallest;
  for_each_matrix(x, [&](const Matrix& a, std::int64_t m, std::int64_t n) {
    const ReferenceSvd r = reference_svd(a, m, n);
    double sum = 0;
    for (double s : r.s) sum += s;
    nuc.push_back(sum);
    largest.push_back(*std::ranges::max_element(r.s));
    smallest.push_back(*std::ranges::min_element(r.s));
  });
  // from_vector with an empty shape makes a 1-d tensor: reshape to the (maybe 0-d) result.
  const auto count = static_cast<std::int64_t>(nuc.size());
  return {from_vector(nuc, {count}).reshape(batch_of(x, {})), from_vector(largest, batch_of(x, {1, 1})),
          from_vector(smallest, {count}).reshape(batch_of(x, {}))};
}

const bool registered = [] {
  op_registry().push_back({.name = "linalg_svd",
                           .fn = [](const TensorList& in) { return svd_functions(in[0]); },
                           .reference = [](const TensorList& in) { return svd_functions_reference(in[0]); },
                           .samples = svd_samples,
                           .gradgrad = true});
  op_registry().push_back({.name = "svdvals",
                           .fn = [](const TensorList& in) { return TensorList{svdvals(in[0])}; },
                           .reference =
                               [](const TensorList& in) { return TensorList{svd_functions_reference(in[0])[0]}; },
                           .samples = svd_samples,
                           .gradgrad = true});
  op_registry().push_back({.name = "matrix_norm",
                           .fn = [](const TensorList& in) { return singular_norms(in[0]); },
                           .reference = [](const TensorList& in) { return singular_norms_reference(in[0]); },
                           .samples = svd_samples,
                           .gradgrad = true});
  return true;
}();

// ---- plain tests ----

double max_abs(const Tensor& t) {
  double r = 0;
  for (double v : values(t)) r = std::max(r, std::abs(v));
  return r;
}

// |U diag(S) Vh - x|, |U^T U - I| and |Vh Vh^T - I| (largest entries), S descending >= 0.
struct Residuals {
  double reconstruction, u_orthonormal, vh_orthonormal;
};

Residuals residuals(const Tensor& x, const SvdResult& r) {
  NoGradGuard no_grad;
  const std::int64_t k = r.S.shape().back();
  const Tensor xd = x.to(kFloat64), U = r.U.to(kFloat64), S = r.S.to(kFloat64), Vh = r.Vh.to(kFloat64);
  const Tensor a = matmul(mul(U.narrow(-1, 0, k), S.unsqueeze(-2)), Vh.narrow(-2, 0, k));
  const Tensor uu = matmul(U.transpose(-1, -2), U), vv = matmul(Vh, Vh.transpose(-1, -2));
  const std::vector<double> s = values(S);
  for (std::size_t i = 0; i < s.size(); ++i) {
    EXPECT_GE(s[i], 0) << i;
    if (k > 0 && i % static_cast<std::size_t>(k) != 0) EXPECT_LE(s[i], s[i - 1]) << i;
  }
  return {max_abs(sub(a, xd)),
          max_abs(sub(uu, eye(uu.shape().back(), {.dtype = kFloat64}))),
          max_abs(sub(vv, eye(vv.shape().back(), {.dtype = kFloat64})))};
}

void expect_svd(const Tensor& x, const SvdResult& r, double tol, const std::string& where) {
  const Residuals e = residuals(x, r);
  EXPECT_LE(e.reconstruction, tol * (1 + max_abs(x))) << where << ": U diag(S) Vh != x";
  EXPECT_LE(e.u_orthonormal, tol) << where << ": U^T U != I";
  EXPECT_LE(e.vh_orthonormal, tol) << where << ": Vh Vh^T != I";
}

TEST(Svd, KnownSingularValues) {
  const std::vector<double> s = {5, 3, 1, 0.25};
  for (auto [m, n] : {std::pair<std::int64_t, std::int64_t>{4, 4}, {6, 4}, {4, 7}}) {
    const Tensor x = built({m, n}, {s}, 7);
    const SvdResult r = linalg_svd(x, false);
    EXPECT_EQ(r.U.shape(), (Shape{m, 4}));
    EXPECT_EQ(r.S.shape(), (Shape{4}));
    EXPECT_EQ(r.Vh.shape(), (Shape{4, n}));
    const std::vector<double> got = values(r.S);
    for (std::size_t j = 0; j < s.size(); ++j) EXPECT_NEAR(got[j], s[j], 1e-13) << m << "x" << n << " s" << j;
    expect_svd(x, r, 1e-13, "known values");
    // The column of Q1 for s_j is U's column j up to sign.
    const Matrix q1 = orthogonal(m, 7);
    const std::vector<double> u = values(r.U);
    for (std::int64_t j = 0; j < 4; ++j) {
      double dot = 0;
      for (std::int64_t i = 0; i < m; ++i) dot += q1[i * m + j] * u[i * 4 + j];
      EXPECT_NEAR(std::abs(dot), 1, 1e-12) << m << "x" << n << " column " << j;
    }
  }
}

TEST(Svd, RandomShapesBatchesAndLayouts) {
  struct Case {
    std::string label;
    Tensor x;
  };
  const std::vector<Case> cases = {
      {"square", sample({5, 5}, -2, 2, 21)},
      {"tall", sample({9, 4}, -2, 2, 22)},
      {"wide", sample({3, 8}, -2, 2, 23)},
      {"batched", sample({2, 3, 6, 5}, -2, 2, 24)},
      {"transposed", sample({4, 7}, -2, 2, 25).transpose(0, 1)},
      {"sliced", sample({3, 10, 6}, -2, 2, 26).slice(1, 0, 10, 2)},
      {"expanded", sample({1, 4, 3}, -2, 2, 27).expand({3, 4, 3})},
      {"row", sample({1, 6}, -2, 2, 28)},
      {"column", sample({6, 1}, -2, 2, 29)},
      {"large", sample({40, 30}, -2, 2, 30)},
  };
  for (const Case& c : cases) {
    for (bool full : {false, true}) {
      const SvdResult r = linalg_svd(c.x, full);
      const std::int64_t m = c.x.shape().end()[-2], n = c.x.shape().back(), k = std::min(m, n);
      EXPECT_EQ(r.U.shape(), batch_of(c.x, {m, full ? m : k})) << c.label;
      EXPECT_EQ(r.Vh.shape(), batch_of(c.x, {full ? n : k, n})) << c.label;
      expect_svd(c.x, r, 1e-12, c.label + (full ? " full" : ""));
      const Tensor x32 = c.x.to(kFloat32);
      const SvdResult r32 = linalg_svd(x32, full);
      EXPECT_EQ(r32.S.dtype(), kFloat32);
      expect_svd(x32, r32, 2e-6, c.label + " float32" + (full ? " full" : ""));
      // The singular values of the float32 input agree with float64's to float32 rounding.
      const std::vector<double> s32 = values(r32.S), s64 = values(linalg_svd(x32.to(kFloat64), false).S);
      for (std::size_t j = 0; j < s32.size(); ++j) EXPECT_NEAR(s32[j], s64[j], 1e-6 * (1 + s64[j])) << c.label;
    }
  }
}

TEST(Svd, RankDeficientKeepsOrthonormalFactors) {
  // Zero singular values, a repeated one, and the zero matrix.
  const std::vector<std::pair<std::string, Tensor>> cases = {
      {"rank 2 of 4", built({5, 4}, {{3, 1, 0, 0}}, 8)},
      {"repeated", built({4, 4}, {{2, 2, 2, 1}}, 9)},
      {"wide rank 1", built({3, 6}, {{4, 0, 0}}, 10)},
      {"zero", zeros({4, 3}, {.dtype = kFloat64})},
      {"identity", eye(4, {.dtype = kFloat64})},
  };
  for (const auto& [label, x] : cases)
    for (bool full : {false, true}) expect_svd(x, linalg_svd(x, full), 1e-13, label);
  const std::vector<double> s = values(svdvals(built({4, 4}, {{2, 2, 2, 1}}, 9)));
  for (std::size_t j = 0; j < 3; ++j) EXPECT_NEAR(s[j], 2, 1e-14);
  EXPECT_EQ(values(svdvals(zeros({4, 3}, {.dtype = kFloat64}))), (std::vector<double>{0, 0, 0}));
}

TEST(Svd, ExtremeMagnitudes) {
  // Scaled by powers of two inside the kernel: no overflow of squares, no underflow.
  for (double scale : {1e-300, 1e300}) {
    const Tensor x = mul(built({3, 3}, {{3, 2, 1}}, 11), scale);
    const std::vector<double> s = values(svdvals(x));
    EXPECT_NEAR(s[0] / scale, 3, 1e-13);
    EXPECT_NEAR(s[2] / scale, 1, 1e-13);
  }
  // Columns 1e-165 times the others: their squares underflow, yet the factors stay
  // orthonormal (and Jacobi converges).
  const Tensor tiny = mul(sample({5, 4}, -2, 2, 32), from_vector<double>({1, 1, 1e-165, 1e-165}, {4}));
  for (bool full : {false, true}) expect_svd(tiny, linalg_svd(tiny, full), 1e-13, "tiny columns");
  EXPECT_GT(values(svdvals(tiny))[3], 0);
}

TEST(Svd, ZeroSize) {
  for (bool full : {false, true}) {
    const SvdResult wide = linalg_svd(zeros({2, 0, 3}, {.dtype = kFloat64}), full);
    EXPECT_EQ(wide.U.shape(), (Shape{2, 0, 0}));
    EXPECT_EQ(wide.S.shape(), (Shape{2, 0}));
    EXPECT_EQ(wide.Vh.shape(), (Shape{2, full ? 3 : 0, 3}));
    if (full) EXPECT_EQ(values(wide.Vh.select(0, 1)), values(eye(3)));
    const SvdResult tall = linalg_svd(zeros({3, 0}), full);
    EXPECT_EQ(tall.U.shape(), (Shape{3, full ? 3 : 0}));
    EXPECT_EQ(tall.S.shape(), (Shape{0}));
    EXPECT_EQ(tall.Vh.shape(), (Shape{0, 0}));
    if (full) EXPECT_EQ(values(tall.U), values(eye(3)));
    const SvdResult none = linalg_svd(zeros({0, 4, 2}), full);
    EXPECT_EQ(none.U.shape(), (Shape{0, 4, full ? 4 : 2}));
    EXPECT_EQ(none.S.shape(), (Shape{0, 2}));
  }
  // Gradients of an empty input are empty.
  const Tensor x = zeros({3, 0}, {.dtype = kFloat64}).requires_grad_();
  sum(linalg_svd(x).U).backward();
  EXPECT_EQ(x.grad().shape(), (Shape{3, 0}));
}

TEST(Svd, Errors) {
  Tensor bad = eye(3, {.dtype = kFloat64});
  bad.view({9}).select(0, 4).fill_(std::numeric_limits<double>::quiet_NaN());
  expect_error([&] { linalg_svd(bad); }, "linalg_svd", "non-finite");
  expect_error([&] { svdvals(mul(bad, std::numeric_limits<double>::infinity())); }, "svdvals", "non-finite");
  expect_error([] { linalg_svd(zeros({2, 2}, {.dtype = kInt32})); }, "linalg_svd", "int32");
  expect_error([] { linalg_svd(zeros({2, 2}, {.dtype = kFloat16})); }, "linalg_svd", "float16");
  expect_error([] { linalg_svd(zeros({3}, {.dtype = kFloat64})); }, "linalg_svd", "at least 2 dims, got shape [3]");
  EXPECT_THROW(linalg_svd(zeros({2, 2}, {.dtype = kInt64})), DTypeError);
  EXPECT_THROW(svdvals(zeros({4})), ShapeError);
}

// gradcheck / gradgradcheck of functions of the full factors (the op table checks the
// reduced ones): the first k columns / rows, sign-invariantly.
TEST(Svd, FullMatricesGradients) {
  for (const Shape& shape : {Shape{4, 2}, Shape{2, 3}}) {
    const Tensor x = built(shape, {{2, 0.6}}, 12).requires_grad_();
    auto fn = [](const TensorList& in) {
      const auto [U, S, Vh] = linalg_svd(in[0], true);
      const std::int64_t k = S.shape().back();
      const Tensor u = U.narrow(-1, 0, k), vh = Vh.narrow(-2, 0, k);
      return TensorList{matmul(mul(u, mul(S, S).unsqueeze(-2)), vh), matmul(u.transpose(-1, -2), u)};
    };
    const auto first = autograd::gradcheck(fn, {x});
    EXPECT_TRUE(first.ok) << first.message;
    const auto second = autograd::gradgradcheck(fn, {x});
    EXPECT_TRUE(second.ok) << second.message;
  }
}

TEST(Svd, SvdvalsGradientIsUVh) {
  // d sum(S) / dA = U Vh (reduced).
  const Tensor x = built({3, 5}, {{3, 2, 1}}, 13).requires_grad_();
  sum(svdvals(x)).backward();
  const SvdResult r = linalg_svd(x.detach(), false);
  const std::vector<double> want = values(matmul(r.U, r.Vh)), got = values(x.grad());
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-13);
}

TEST(MatrixNormSingularValues, ValuesAndShapes) {
  // [[3, 0], [4, 5]]: A^T A = [[25, 20], [20, 25]], eigenvalues 45 and 5.
  const Tensor a = from_vector<double>({3, 0, 4, 5}, {2, 2});
  EXPECT_NEAR(matrix_norm(a, "nuc").item<double>(), std::sqrt(45.0) + std::sqrt(5.0), 1e-14);
  EXPECT_NEAR(matrix_norm(a, 2.0).item<double>(), std::sqrt(45.0), 1e-14);
  EXPECT_NEAR(matrix_norm(a, -2.0).item<double>(), std::sqrt(5.0), 1e-14);
  EXPECT_EQ(matrix_norm(a.to(kFloat32), "nuc").dtype(), kFloat32);
  // Other dims: the matrices over (0, 2) of x are those over (1, 2) of x.permute(1, 0, 2).
  const Tensor x = sample({3, 2, 4}, -2, 2, 31);
  for (double ord : {2.0, -2.0}) {
    const Tensor y = matrix_norm(x, ord, {0, 2}, true);
    EXPECT_EQ(y.shape(), (Shape{1, 2, 1}));
    EXPECT_EQ(values(y), values(matrix_norm(x.permute({1, 0, 2}), ord)));
  }
  EXPECT_EQ(matrix_norm(x, "nuc", {2, 0}).shape(), (Shape{2}));
  EXPECT_NEAR(values(matrix_norm(x, "nuc", {2, 0}))[1], values(matrix_norm(x.select(1, 1), "nuc"))[0], 1e-13);
}

TEST(MatrixNormSingularValues, EmptyMatricesAndErrors) {
  // As PyTorch 1.13: "nuc" of an empty matrix is 0; +-2 has no identity.
  EXPECT_EQ(matrix_norm(zeros({0, 3}), "nuc").item<double>(), 0);
  EXPECT_EQ(values(matrix_norm(zeros({2, 3, 0}), "nuc")), (std::vector<double>{0, 0}));
  EXPECT_EQ(matrix_norm(zeros({2, 3, 0}), "nuc", {-2, -1}, true).shape(), (Shape{2, 1, 1}));
  expect_error([] { matrix_norm(zeros({3, 0}), 2.0); }, "matrix_norm", "dimension 1 of size 0");
  expect_error([] { matrix_norm(zeros({0, 3}), -2.0); }, "matrix_norm", "dimension 0 of size 0");
  // float16 / bfloat16: a DTypeError, as PyTorch's "Low precision dtypes not supported".
  expect_error([] { matrix_norm(zeros({2, 2}, {.dtype = kFloat16}), "nuc"); }, "matrix_norm", "float16");
  expect_error([] { matrix_norm(zeros({2, 2}, {.dtype = kBFloat16}), 2.0); }, "matrix_norm", "bfloat16");
  Tensor bad = zeros({2, 2}, {.dtype = kFloat64});
  bad.view({4}).select(0, 0).fill_(std::numeric_limits<double>::infinity());
  expect_error([&] { matrix_norm(bad, "nuc"); }, "svdvals", "non-finite");
}

// The CUDA kernel (the same Jacobi code, one thread per matrix) against the CPU's.
TEST(SvdCuda, MatchesCpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const Device gpu = Device::cuda(0);
  for (DataType dtype : {kFloat64, kFloat32}) {
    const double tol = dtype == kFloat64 ? 1e-12 : 2e-5;
    for (const Shape& shape : {Shape{70, 5, 4}, Shape{3, 4, 9}, Shape{2, 33, 33}, Shape{2, 0, 3}}) {
      const Tensor x = sample(shape, -2, 2, 40).to(dtype);
      for (bool full : {false, true}) {
        const SvdResult cpu = linalg_svd(x, full), cuda = linalg_svd(x.to(gpu), full);
        EXPECT_TRUE(cuda.U.device().is_cuda());
        const SvdResult back{cuda.U.to(Device::cpu()), cuda.S.to(Device::cpu()), cuda.Vh.to(Device::cpu())};
        expect_svd(x, back, dtype == kFloat64 ? 1e-12 : 2e-6, "cuda");
        const std::vector<double> a = values(back.S), b = values(cpu.S);
        for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tol * (1 + b[i]));
      }
    }
  }
  Tensor bad = eye(3, {.dtype = kFloat64});
  bad.view({9}).select(0, 0).fill_(std::numeric_limits<double>::quiet_NaN());
  expect_error([&] { linalg_svd(bad.to(gpu)); }, "linalg_svd", "non-finite");
}

}  // namespace
}  // namespace infini::test::svd_test
