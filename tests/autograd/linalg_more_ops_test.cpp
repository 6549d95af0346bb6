// Op table entries for addmm, addmv, addbmm and cdist against naive float64 loops, plus the
// beta == 0 rule, cdist's zero gradient at zero distance, float32 and bad inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "indexing_test_util.h"
#include "op_info.h"

namespace infini::test::linalg_more_ops_test {
namespace {

using namespace indexing_util;
using V = std::vector<double>;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Element (i, j) of t (0-d, 1-d or 2-d) broadcast to a matrix.
double broadcast_at(const Tensor& t, const V& v, std::int64_t i, std::int64_t j) {
  const Shape& s = t.shape();
  if (s.empty()) return v[0];
  if (s.size() == 1) return v[s[0] == 1 ? 0 : j];
  return v[(s[0] == 1 ? 0 : i) * s[1] + (s[1] == 1 ? 0 : j)];
}

// beta * input + alpha * sum over the batch of a[b] (m, k) @ c[b] (k, n); a and c are
// (batch, m, k) and (batch, k, n), or 2-d for one product. input is ignored when beta == 0.
Tensor addmm_ref(const Tensor& input, const Tensor& a, const Tensor& c, double beta, double alpha) {
  const Tensor a3 = a.dim() == 2 ? a.unsqueeze(0) : a, c3 = c.dim() == 2 ? c.unsqueeze(0) : c;
  const std::int64_t nb = a3.shape()[0], m = a3.shape()[1], k = a3.shape()[2], n = c3.shape()[2];
  const V vi = values(input), va = values(a3), vc = values(c3);
  V out(static_cast<std::size_t>(m * n));
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (std::int64_t b = 0; b < nb; ++b)
        for (std::int64_t p = 0; p < k; ++p) sum += va[(b * m + i) * k + p] * vc[(b * k + p) * n + j];
      out[i * n + j] = (beta == 0 ? 0 : beta * broadcast_at(input, vi, i, j)) + alpha * sum;
    }
  return f64({m, n}, out);
}

// addmv: input (m) broadcast along the rows of the (m, 1) product.
Tensor addmv_ref(const Tensor& input, const Tensor& mat, const Tensor& vec, double beta, double alpha) {
  const std::int64_t m = mat.shape()[0];
  const Tensor column = input.dim() == 0 ? input : input.unsqueeze(1);
  return addmm_ref(column, mat, vec.unsqueeze(1), beta, alpha).reshape({m});
}

// p-norm distances of the rows of x1 (*1, P, M) and x2 (*2, R, M), batch dims broadcast.
Tensor cdist_ref(const Tensor& x1, const Tensor& x2, double p) {
  const Shape s1 = x1.shape(), s2 = x2.shape();
  const std::int64_t P = s1.end()[-2], R = s2.end()[-2], M = s1.back();
  const std::size_t nd = std::max(s1.size(), s2.size()) - 2;
  Shape batch(nd), b1(nd, 1), b2(nd, 1);
  for (std::size_t d = 0; d < nd; ++d) {
    if (d + s1.size() >= nd + 2) b1[d] = s1[d + s1.size() - nd - 2];
    if (d + s2.size() >= nd + 2) b2[d] = s2[d + s2.size() - nd - 2];
    batch[d] = b1[d] == 1 ? b2[d] : b1[d];
  }
  const V v1 = values(x1), v2 = values(x2);
  V out;
  for (std::int64_t t = 0; t < numel_of(batch); ++t) {
    const Coords c = unravel(t, batch);
    Coords c1(nd), c2(nd);
    for (std::size_t d = 0; d < nd; ++d) {
      c1[d] = b1[d] == 1 ? 0 : c[d];
      c2[d] = b2[d] == 1 ? 0 : c[d];
    }
    const std::int64_t o1 = ravel(c1, b1) * P * M, o2 = ravel(c2, b2) * R * M;
    for (std::int64_t i = 0; i < P; ++i)
      for (std::int64_t j = 0; j < R; ++j) {
        double acc = 0;
        for (std::int64_t q = 0; q < M; ++q) {
          const double d = std::abs(v1[o1 + i * M + q] - v2[o2 + j * M + q]);
          if (p == 0) acc += d != 0;
          else if (std::isinf(p)) acc = std::max(acc, d);
          else acc += std::pow(d, p);
        }
        out.push_back(p == 0 || std::isinf(p) ? acc : std::pow(acc, 1 / p));
      }
  }
  Shape shape = batch;
  shape.push_back(P);
  shape.push_back(R);
  return f64(shape, out);
}

OpSample operands(std::string label, const std::vector<Shape>& shapes, Fn view = nullptr) {
  TensorList leaves;
  for (std::size_t k = 0; k < shapes.size(); ++k) leaves.push_back(leaf(shapes[k], 21 + 3 * k));
  return {std::move(label), leaves, std::move(view)};
}

std::vector<OpSample> addmm_samples() {
  return {
      operands("(3,2) + (3,4) @ (4,2)", {{3, 2}, {3, 4}, {4, 2}}),
      operands("input (2) broadcast", {{2}, {3, 4}, {4, 2}}),
      operands("input (3,1) broadcast", {{3, 1}, {3, 4}, {4, 2}}),
      operands("0-d input", {{}, {3, 4}, {4, 2}}),
      operands("transposed matrices", {{3, 2}, {4, 3}, {2, 4}},
               [](const TensorList& l) { return TensorList{l[0], l[1].t(), l[2].t()}; }),
      operands("k = 0 leaves beta * input", {{3, 2}, {3, 0}, {0, 2}}),
      operands("m = 0", {{0, 2}, {0, 4}, {4, 2}}),
  };
}

std::vector<OpSample> addmv_samples() {
  return {
      operands("(3) + (3,4) @ (4)", {{3}, {3, 4}, {4}}),
      operands("input (1) broadcast", {{1}, {3, 4}, {4}}),
      operands("0-d input", {{}, {3, 4}, {4}}),
      operands("transposed matrix", {{3}, {4, 3}, {4}}, [](const TensorList& l) {
        return TensorList{l[0], l[1].t(), l[2]};
      }),
      operands("k = 0", {{3}, {3, 0}, {0}}),
      operands("m = 0", {{0}, {0, 4}, {4}}),
  };
}

std::vector<OpSample> addbmm_samples() {
  return {
      operands("(3,2) + sum (2,3,4) @ (2,4,2)", {{3, 2}, {2, 3, 4}, {2, 4, 2}}),
      operands("input (2) broadcast", {{2}, {2, 3, 4}, {2, 4, 2}}),
      operands("transposed batches", {{3, 2}, {2, 4, 3}, {4, 2, 2}},
               [](const TensorList& l) { return TensorList{l[0], l[1].transpose(1, 2), l[2].transpose(0, 1)}; }),
      operands("empty batch leaves beta * input", {{3, 2}, {0, 3, 4}, {0, 4, 2}}),
      operands("k = 0", {{3, 2}, {2, 3, 0}, {2, 0, 2}}),
  };
}

// x1 row 1 equals x2 row 2: a zero distance, whose gradient is 0.
OpSample equal_rows() {
  return {"a zero distance",
          {f64({2, 2}, {0.5, -1, 1.5, 2}).requires_grad_(), f64({3, 2}, {-1, 0.25, 2, 1, 1.5, 2}).requires_grad_()}};
}

std::vector<OpSample> cdist_samples() {
  return {
      operands("(3,2) to (4,2)", {{3, 2}, {4, 2}}),
      operands("batch (2,1) with (3)", {{2, 1, 3, 2}, {3, 4, 2}}),
      operands("transposed x1", {{2, 3}, {4, 2}}, [](const TensorList& l) { return TensorList{l[0].t(), l[1]}; }),
      equal_rows(),
      operands("P = 0", {{0, 2}, {4, 2}}),
      operands("M = 0", {{3, 0}, {2, 0}}),
  };
}

void entry(const std::string& name, std::function<Tensor(const TensorList&)> op,
           std::function<Tensor(const TensorList&)> ref, std::function<std::vector<OpSample>()> samples,
           bool gradgrad = true) {
  op_registry().push_back({.name = name,
                           .fn = [op](const TensorList& in) { return TensorList{op(in)}; },
                           .reference = [ref](const TensorList& in) { return TensorList{ref(in)}; },
                           .samples = std::move(samples),
                           .gradgrad = gradgrad,
                           .tolerance = 1e-12});
}

const bool registered = [] {
  entry("addmm", [](const TensorList& in) { return addmm(in[0], in[1], in[2], 0.5, 2.0); },
        [](const TensorList& in) { return addmm_ref(in[0], in[1], in[2], 0.5, 2.0); }, addmm_samples);
  entry("addmm", [](const TensorList& in) { return addmm(in[0], in[1], in[2]); },
        [](const TensorList& in) { return addmm_ref(in[0], in[1], in[2], 1, 1); },
        [] { return std::vector<OpSample>{operands("defaults", {{3, 2}, {3, 4}, {4, 2}})}; });
  entry("addmm", [](const TensorList& in) { return addmm(in[0], in[1], in[2], 0, 1); },
        [](const TensorList& in) { return addmm_ref(in[0], in[1], in[2], 0, 1); }, [] {
          return std::vector<OpSample>{{"beta 0 ignores a NaN input",
                                        {full({3, 2}, kNaN, {.dtype = kFloat64}).requires_grad_(), leaf({3, 4}, 1),
                                         leaf({4, 2}, 2)}}};
        });
  entry("addmv", [](const TensorList& in) { return addmv(in[0], in[1], in[2], 0.5, 2.0); },
        [](const TensorList& in) { return addmv_ref(in[0], in[1], in[2], 0.5, 2.0); }, addmv_samples);
  entry("addbmm", [](const TensorList& in) { return addbmm(in[0], in[1], in[2], 0.5, 2.0); },
        [](const TensorList& in) { return addmm_ref(in[0], in[1], in[2], 0.5, 2.0); }, addbmm_samples);
  for (const double p : {0.0, 0.5, 1.0, 2.0, 3.0, kInf})
    entry("cdist", [p](const TensorList& in) { return cdist(in[0], in[1], p); },
          [p](const TensorList& in) { return cdist_ref(in[0], in[1], p); }, cdist_samples, false);
  return true;
}();

TEST(AddProducts, BetaZeroIgnoresInputButGivesItAZeroGradient) {
  const Tensor input = full({2, 2}, kNaN, {.dtype = kFloat64}).requires_grad_();
  const Tensor a = f64({2, 2}, {1, 2, 3, 4}).requires_grad_(), b = f64({2, 2}, {1, 0, 0, 1});
  const Tensor y = addmm(input, a, b, 0, 3);
  EXPECT_EQ(values(y), (V{3, 6, 9, 12}));
  sum(y).backward();
  EXPECT_EQ(values(input.grad()), (V{0, 0, 0, 0}));
  EXPECT_EQ(values(a.grad()), (V{3, 3, 3, 3}));
  const Tensor v = full({2}, kNaN, {.dtype = kFloat64});
  EXPECT_EQ(values(addmv(v, a, f64({2}, {1, 1}), 0)), (V{3, 7}));
  EXPECT_EQ(values(addbmm(v, a.unsqueeze(0), b.unsqueeze(0), 0)), (V{1, 2, 3, 4}));
}

TEST(AddProducts, KnownValuesAndFloat32) {
  // addbmm sums the batch: [[1, 2]] @ [[1], [1]] + [[3, 4]] @ [[2], [0]] = 3 + 6.
  const Tensor y = addbmm(f64({}, {1}), f64({2, 1, 2}, {1, 2, 3, 4}), f64({2, 2, 1}, {1, 1, 2, 0}), 2, 0.5);
  EXPECT_EQ(y.shape(), (Shape{1, 1}));
  EXPECT_EQ(values(y), (V{2 + 0.5 * 9}));
  const Tensor f = addmv(full({2}, 1.0, {.dtype = kFloat32}), full({2, 3}, 0.5, {.dtype = kFloat32}),
                         full({3}, 2.0, {.dtype = kFloat32}), 1, -1);
  EXPECT_EQ(f.dtype(), kFloat32);
  EXPECT_EQ(values(f), (V{-2, -2}));
}

TEST(AddProducts, BadInputs) {
  const Tensor m34 = zeros({3, 4}, {.dtype = kFloat64}), m42 = zeros({4, 2}, {.dtype = kFloat64});
  const Tensor in32 = zeros({3, 2}, {.dtype = kFloat64});
  expect_error<ShapeError>([&] { addmm(in32, m34, m34); }, "addmm", {"[3, 4]", "cannot be multiplied"});
  expect_error<ShapeError>([&] { addmm(in32, m34.unsqueeze(0), m42); }, "addmm", {"[1, 3, 4]", "2 and 2 dims"});
  expect_error<ShapeError>([&] { addmm(zeros({3}, {.dtype = kFloat64}), m34, m42); }, "addmm",
                           {"input of shape [3]", "[3, 2]"});
  expect_error<ShapeError>([&] { addmm(in32.unsqueeze(0), m34, m42); }, "addmm", {"[1, 3, 2]"});
  expect_error<DTypeError>([&] { addmm(in32.to(kFloat32), m34, m42); }, "addmm", {"float32", "float64"});
  expect_error<DTypeError>([&] { addmm(in32.to(kInt64), m34.to(kInt64), m42.to(kInt64)); }, "addmm",
                           {"int64", "floating-point"});
  expect_error<Error>([&] { addmm(Tensor(), m34, m42); }, "addmm", {"undefined"});
  expect_error<ShapeError>([&] { addmv(zeros({3}, {.dtype = kFloat64}), m34, zeros({3}, {.dtype = kFloat64})); },
                           "addmv", {"[3, 4]", "[3]", "cannot be multiplied"});
  expect_error<ShapeError>([&] { addmv(zeros({2}, {.dtype = kFloat64}), m34, zeros({4}, {.dtype = kFloat64})); },
                           "addmv", {"input of shape [2]", "[3]"});
  expect_error<ShapeError>([&] { addmv(zeros({3}, {.dtype = kFloat64}), m34, m42); }, "addmv", {"2 and 1 dims"});
  expect_error<ShapeError>(
      [&] { addbmm(in32, zeros({2, 3, 4}, {.dtype = kFloat64}), zeros({3, 4, 2}, {.dtype = kFloat64})); }, "addbmm",
      {"[2, 3, 4]", "[3, 4, 2]"});
  expect_error<ShapeError>([&] { addbmm(in32, m34, m42); }, "addbmm", {"3 and 3 dims"});
}

TEST(Cdist, GradientIsZeroWhereADistanceIsZero) {
  for (const double p : {1.0, 2.0, kInf}) {
    const Tensor x1 = f64({2, 2}, {1, 2, 4, 6}).requires_grad_(), x2 = f64({1, 2}, {1, 2}).requires_grad_();
    const Tensor d = cdist(x1, x2, p);
    const double far = p == 1 ? 7 : p == 2 ? 5 : 4;  // row 1 is (3, 4) away
    EXPECT_EQ(values(d), (V{0, far})) << p;
    sum(d).backward();
    const V expected = p == 1 ? V{0, 0, 1, 1} : p == 2 ? V{0, 0, 0.6, 0.8} : V{0, 0, 0, 1};
    EXPECT_EQ(values(x1.grad()), expected) << p;
    EXPECT_EQ(values(x2.grad()), (V{-expected[2], -expected[3]})) << p;
  }
}

TEST(Cdist, OtherPMatchPyTorch) {
  // torch.cdist(x1, x2, p).sum().backward() in PyTorch 1.13; row 2 differs in one coordinate
  // only, whose gradient is 0 for p < 1 (|0|^(p - 1) is taken as 0).
  const V p05 = {0, 13.928203230275509, 3}, p3 = {0, 4.497941445275415, 3};
  const V g05 = {0, 0, 2.1547005383792515, 1.8660254037844388, 0, 0.9999999999999998};
  const V g3 = {0, 0, 0.4448513517305356, 0.7908468475209521, 0, 1};
  for (const double p : {0.0, 0.5, 3.0}) {
    const Tensor x1 = f64({3, 2}, {1, 2, 4, 6, 1, 5}).requires_grad_(), x2 = f64({1, 2}, {1, 2});
    const Tensor d = cdist(x1, x2, p);
    sum(d).backward();
    const V dv = values(d), gv = values(x1.grad());
    const V& want_d = p == 0 ? V{0, 2, 1} : p == 0.5 ? p05 : p3;
    const V& want_g = p == 0 ? V(6, 0.0) : p == 0.5 ? g05 : g3;
    for (std::size_t i = 0; i < dv.size(); ++i) EXPECT_NEAR(dv[i], want_d[i], 1e-12) << p;
    for (std::size_t i = 0; i < gv.size(); ++i) EXPECT_NEAR(gv[i], want_g[i], 1e-12) << p;
  }
}

TEST(Cdist, InfSplitsTheGradientAmongTies) {
  // Both coordinates are 4 apart. PyTorch 1.13 gives each the whole gradient (1, 1); like
  // amax and norm, the gradient here is split: a true subgradient.
  const Tensor x1 = f64({1, 2}, {5, 6}).requires_grad_();
  const Tensor d = cdist(x1, f64({1, 2}, {1, 2}), kInf);
  EXPECT_EQ(values(d), (V{4}));
  d.backward(ones_like(d));
  EXPECT_EQ(values(x1.grad()), (V{0.5, 0.5}));
}

TEST(Cdist, Float32AndShapes) {
  const Tensor d = cdist(zeros({2, 1, 3, 2}), ones({4, 5, 2}), 2);
  EXPECT_EQ(d.dtype(), kFloat32);
  EXPECT_EQ(d.shape(), (Shape{2, 4, 3, 5}));
  EXPECT_NEAR(values(d)[0], std::sqrt(2.0), 1e-6);
}

TEST(Cdist, BadInputs) {
  const Tensor a = zeros({3, 2}, {.dtype = kFloat64});
  expect_error<ShapeError>([&] { cdist(a, zeros({3, 4}, {.dtype = kFloat64})); }, "cdist", {"[3, 2]", "[3, 4]"});
  expect_error<ShapeError>([&] { cdist(zeros({2}, {.dtype = kFloat64}), a); }, "cdist", {"at least 2 dims", "[2]"});
  expect_error<ShapeError>([&] { cdist(zeros({2, 3, 2}, {.dtype = kFloat64}), zeros({3, 3, 2}, {.dtype = kFloat64})); },
                           "cdist", {"batch dims", "[2, 3, 2]", "[3, 3, 2]"});
  expect_error<Error>([&] { cdist(a, a, -1); }, "cdist", {"non-negative", "-1"});
  expect_error<DTypeError>([&] { cdist(a.to(kInt64), a.to(kInt64)); }, "cdist", {"int64"});
  expect_error<DTypeError>([&] { cdist(a, a.to(kFloat32)); }, "cdist", {"float64", "float32"});
}

}  // namespace
}  // namespace infini::test::linalg_more_ops_test
