// Op table entries for norm with any p, vector_norm and matrix_norm, with float64
// references; zeros, empty inputs, errors and float16 in plain tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "reduction_reference.h"

namespace infini::test::reduction_norms_test {
namespace {

using Group = std::vector<double>;

const double inf = std::numeric_limits<double>::infinity();

// (sum |v|^p)^(1/p); p = 0 counts nonzeros, +-inf is max / min |v|.
double norm_of(const Group& v, double p) {
  if (p == 0) return static_cast<double>(std::ranges::count_if(v, [](double e) { return e != 0; }));
  if (std::isinf(p)) {
    double r = p > 0 ? 0 : inf;
    for (double e : v) r = p > 0 ? std::max(r, std::abs(e)) : std::min(r, std::abs(e));
    return r;
  }
  double s = 0;
  for (double e : v) s += std::pow(std::abs(e), p);
  return std::pow(s, 1 / p);
}

// matrix_norm of a 3-d x over dims (a, b): ord 1 / -1 is the max / min over b of sums of
// |x| over a; inf / -inf the same with a and b swapped; otherwise ("fro") the 2-norm.
Tensor matrix_norm_ref(const Tensor& x, std::int64_t a, std::int64_t b, double ord, bool keepdim) {
  if (ord == 2) return reduce_ref(x, {a, b}, keepdim, [](const Group& v) { return norm_of(v, 2); });
  if (std::isinf(ord)) std::swap(a, b);
  const std::int64_t c = 3 - a - b;  // the batch dim
  const std::vector<double> v = values(x);
  const Shape& s = x.shape();
  auto at = [&](std::int64_t i, std::int64_t j, std::int64_t k) {  // element with index i at a, j at b, k at c
    std::array<std::int64_t, 3> idx{};
    idx[a] = i, idx[b] = j, idx[c] = k;
    return v[(idx[0] * s[1] + idx[1]) * s[2] + idx[2]];
  };
  std::vector<double> out;
  for (std::int64_t k = 0; k < s[c]; ++k) {
    double best = ord > 0 ? -inf : inf;
    for (std::int64_t j = 0; j < s[b]; ++j) {
      double column = 0;
      for (std::int64_t i = 0; i < s[a]; ++i) column += std::abs(at(i, j, k));
      best = ord > 0 ? std::max(best, column) : std::min(best, column);
    }
    out.push_back(best);
  }
  Shape shape(3, 1);
  shape[c] = s[c];
  const Tensor r = from_vector(out, {s[c]}).reshape(shape);
  return keepdim ? r : r.reshape({s[c]});
}

struct MatrixCase {
  double ord;  // 2 stands for "fro"
  std::int64_t a, b;
  bool keepdim;
};
const std::vector<MatrixCase> kMatrixCases = {{2, 1, 2, false}, {1, 1, 2, false},   {-1, 2, 0, true},
                                              {inf, 1, 2, true}, {-inf, 0, 2, false}, {1, 2, 1, false}};

Tensor matrix_norm_of(const Tensor& x, const MatrixCase& c) {
  // Negative dims for some cases, to check wrapping.
  const std::vector<std::int64_t> dims = {c.a == 2 ? -1 : c.a, c.b == 1 ? -2 : c.b};
  if (c.ord == 2) return matrix_norm(x, "fro", dims, c.keepdim);
  return matrix_norm(x, c.ord, dims, c.keepdim);
}

const bool registered = [] {
  // p = 1, 2, inf are in reduction_ops_test.cpp. Negative p and -inf have no identity
  // (no zero-size sample); p = 0 has a zero gradient.
  for (double p : {0.0, 0.5, 1.5, 3.0, -1.0, -inf}) {
    register_reduction({.name = "norm",
                        .op = [p](const Tensor& x, const ReduceCase& c) { return norm(x, p, c.dims, c.keepdim); },
                        .ref = [p](const Group& v) { return norm_of(v, p); },
                        .with_empty = p >= 0 && !std::isinf(p)});
  }
  for (double p : {2.0, 3.0, -inf}) {
    register_reduction({.name = "vector_norm",
                        .op = [p](const Tensor& x, const ReduceCase& c) {
                          return vector_norm(x, p, c.dims, c.keepdim);
                        },
                        .ref = [p](const Group& v) { return norm_of(v, p); },
                        .with_empty = p > 0 && !std::isinf(p)});
  }
  op_registry().push_back({.name = "matrix_norm",
                           .fn = [](const TensorList& in) {
                             TensorList out;
                             for (const MatrixCase& c : kMatrixCases) out.push_back(matrix_norm_of(in[0], c));
                             return out;
                           },
                           .reference = [](const TensorList& in) {
                             TensorList out;
                             for (const MatrixCase& c : kMatrixCases)
                               out.push_back(matrix_norm_ref(in[0], c.a, c.b, c.ord, c.keepdim));
                             return out;
                           },
                           .samples = [] { return samples_3d(-2, 2, false); },
                           .gradgrad = true,
                           .tolerance = 1e-12});
  return true;
}();

Tensor leaf(const std::vector<double>& v) {
  return from_vector(v, {static_cast<std::int64_t>(v.size())}).detach().requires_grad_();
}

// Values and gradients at x = (0, 2, -3) against PyTorch 1.13's torch.linalg.vector_norm.
TEST(ReductionNorms, ValuesAndGradientsWithAZero) {
  struct Case {
    double p, value;
    std::vector<double> grad;
  };
  const std::vector<Case> cases = {
      {0, 2, {0, 0, 0}},
      {0.5, 9.898979485566358, {0, 2.224744871391589, -1.8164965809277263}},
      {3, 3.2710663101885897, {0, 0.37383614973583884, -0.8411313369056374}},
      {-1, 0, {0, 0, 0}},  // a zero makes the norm 0 for p < 0
      {-inf, 0, {0, 0, 0}},
  };
  for (const Case& c : cases) {
    const Tensor x = leaf({0, 2, -3});
    const Tensor y = norm(x, c.p);
    EXPECT_NEAR(y.item<double>(), c.value, 1e-14) << "p = " << c.p;
    y.backward();
    const std::vector<double> g = values(x.grad());
    for (std::size_t i = 0; i < 3; ++i) EXPECT_NEAR(g[i], c.grad[i], 1e-14) << "p = " << c.p << " element " << i;
  }
}

TEST(ReductionNorms, GradientIsZeroWhereTheNormIsZero) {
  for (double p : {0.5, 1.5, 3.0, -1.0, 2.0}) {
    const Tensor x = zeros({3}, {.dtype = kFloat64}).requires_grad_();
    const Tensor y = vector_norm(x, p);
    EXPECT_EQ(y.item<double>(), 0) << "p = " << p;
    y.backward();
    EXPECT_EQ(values(x.grad()), (std::vector<double>{0, 0, 0})) << "p = " << p;
  }
}

TEST(ReductionNorms, EmptyInputs) {
  // Sums over nothing are 0 for p >= 0; negative p and -inf have no identity.
  for (double p : {0.0, 0.5, 3.0}) EXPECT_EQ(norm(zeros({0}), p).item<double>(), 0) << "p = " << p;
  EXPECT_EQ(values(norm(zeros({2, 0}), 3, {1})), (std::vector<double>{0, 0}));
  EXPECT_EQ(vector_norm(zeros({0, 3}), -1, {1}).shape(), (Shape{0}));  // the reduced dim is not empty
  expect_error([] { vector_norm(zeros({0, 3}), -1, {0}); }, "vector_norm", "dimension 0 of size 0");
  expect_error([] { norm(zeros({0}), -inf); }, "norm", "no identity");
}

TEST(ReductionNorms, MatrixNormValues) {
  // [[1, -2], [3, 4]]: column sums 4, 6; row sums 3, 7 (as PyTorch).
  const Tensor a = from_vector<double>({1, -2, 3, 4}, {2, 2});
  EXPECT_EQ(matrix_norm(a, 1.0).item<double>(), 6);
  EXPECT_EQ(matrix_norm(a, -1.0).item<double>(), 4);
  EXPECT_EQ(matrix_norm(a, inf).item<double>(), 7);
  EXPECT_EQ(matrix_norm(a, -inf).item<double>(), 3);
  EXPECT_NEAR(matrix_norm(a).item<double>(), std::sqrt(30.0), 1e-15);
  // Ties split the gradient like amax: both columns of [[1, 1], [1, 1]] have sum 2.
  const Tensor t = ones({2, 2}, {.dtype = kFloat64}).requires_grad_();
  matrix_norm(t, 1.0).backward();
  EXPECT_EQ(values(t.grad()), (std::vector<double>{0.5, 0.5, 0.5, 0.5}));
  // Empty matrices: "fro" and sums over the empty dim are 0; a max over it has no identity.
  EXPECT_EQ(matrix_norm(zeros({0, 3}), 1.0).item<double>(), 0);
  EXPECT_EQ(matrix_norm(zeros({3, 0})).item<double>(), 0);
  expect_error([] { matrix_norm(zeros({3, 0}), 1.0); }, "matrix_norm", "dimension 1 of size 0");
  EXPECT_EQ(matrix_norm(zeros({4, 2, 3}), inf, {-2, -1}, true).shape(), (Shape{4, 1, 1}));
}

TEST(ReductionNorms, Errors) {
  const Tensor m = zeros({3, 3});
  // "nuc" and +-2 (singular values): svd_test.cpp.
  expect_error([&] { matrix_norm(m, 3.0); }, "matrix_norm", "got 3");
  expect_error([&] { matrix_norm(m, "max"); }, "matrix_norm", "\"max\"");
  expect_error([&] { matrix_norm(zeros({3})); }, "matrix_norm", "at least 2 dims, got shape [3]");
  expect_error([&] { matrix_norm(m, "fro", {1, 1}); }, "matrix_norm", "must differ");
  expect_error([&] { matrix_norm(m, "fro", {1}); }, "matrix_norm", "expected 2 dims, got 1");
  expect_error([&] { matrix_norm(m, "fro", {0, 2}); }, "matrix_norm", "2");
  expect_error([&] { matrix_norm(from_vector<std::int64_t>({1, 2}, {1, 2})); }, "matrix_norm", "int64");
  expect_error([&] { vector_norm(from_vector<std::int32_t>({1})); }, "vector_norm", "int32");
  expect_error([&] { vector_norm(zeros({2, 0}), -1, {1}); }, "vector_norm", "dimension 1 of size 0");
  expect_error([&] { vector_norm(m, 2, {2}); }, "vector_norm", "2");
  expect_error([&] { norm(m, std::nan("")); }, "norm", "NaN");
}

TEST(ReductionNorms, HalfPrecisionComputesInFloat32) {
  // 300^3 overflows float16 (max 65504); the float32 result rounds back.
  const Tensor big = from_vector<double>({300, 400}).to(kFloat16);
  EXPECT_EQ(norm(big, 3).dtype(), kFloat16);
  EXPECT_NEAR(norm(big, 3).item<double>(), std::cbrt(300.0 * 300 * 300 + 400.0 * 400 * 400), 0.5);
  EXPECT_EQ(matrix_norm(big.view({1, 2}), inf).item<double>(), 700);
  EXPECT_EQ(vector_norm(from_vector<float>({3, -4}), 0).dtype(), kFloat32);
  EXPECT_EQ(vector_norm(from_vector<float>({3, 0, -4}), 0).item<double>(), 2);
}

}  // namespace
}  // namespace infini::test::reduction_norms_test
