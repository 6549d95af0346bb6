// Op table entries for the linear-algebra family (matmul, mm, bmm, mv, dot, outer, baddbmm,
// linear) against a naive float64 triple loop, plus errors, dtypes, float32 accuracy of
// larger products and the threaded paths of the CPU GEMM.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "op_info.h"

namespace infini::test::linalg_ops_test {
namespace {

// ---- the reference: PyTorch's matmul rules written out by hand ----

// A float64 tensor of `shape` holding `v` (row-major); works for 0-d and empty shapes.
Tensor make(const Shape& shape, const std::vector<double>& v) {
  return from_vector(v, {static_cast<std::int64_t>(v.size())}).reshape(shape);
}

std::int64_t count(const Shape& shape, std::size_t from = 0, std::size_t to = SIZE_MAX) {
  std::int64_t n = 1;
  for (std::size_t d = from; d < std::min(to, shape.size()); ++d) n *= shape[d];
  return n;
}

// Offset of batch index `i` (row-major over `batch`) in an operand whose batch dims
// `own` are right-aligned with `batch` and broadcast where they are 1.
std::int64_t batch_offset(std::int64_t i, const Shape& batch, const Shape& own, std::int64_t matrix_size) {
  std::int64_t offset = 0, stride = matrix_size;
  for (std::int64_t d = static_cast<std::int64_t>(batch.size()) - 1; d >= 0; --d) {
    const std::int64_t index = i % batch[d];
    i /= batch[d];
    const std::int64_t od = d - static_cast<std::int64_t>(batch.size() - own.size());
    if (od < 0) continue;
    if (own[od] != 1) offset += index * stride;
    stride *= own[od];
  }
  return offset;
}

// alpha * (a @ b) + beta * bias (bias broadcast to the result; ignored when beta == 0),
// by a triple loop over float64 values.
Tensor matmul_ref(const Tensor& a, const Tensor& b, const Tensor& bias = {}, double beta = 1, double alpha = 1) {
  Shape as = a.shape(), bs = b.shape();
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  const std::int64_t m = as.end()[-2], k = as.back(), n = bs.back();
  const Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  Shape batch(std::max(ab.size(), bb.size()), 1);
  for (std::size_t d = 0; d < batch.size(); ++d) {
    const std::int64_t ia = static_cast<std::int64_t>(d) - static_cast<std::int64_t>(batch.size() - ab.size());
    const std::int64_t ib = static_cast<std::int64_t>(d) - static_cast<std::int64_t>(batch.size() - bb.size());
    const std::int64_t sa = ia >= 0 ? ab[ia] : 1, sb = ib >= 0 ? bb[ib] : 1;
    batch[d] = sa == 1 ? sb : sa;
  }
  Shape result = batch;
  if (a.dim() > 1) result.push_back(m);
  if (b.dim() > 1) result.push_back(n);
  const std::vector<double> va = values(a), vb = values(b);
  std::vector<double> out(static_cast<std::size_t>(count(batch) * m * n), 0.0);
  if (bias.defined() && beta != 0) {  // bias broadcast to the result, by index arithmetic
    const std::vector<double> vbias = values(bias);
    const Shape& s = bias.shape();
    for (std::size_t i = 0; i < out.size(); ++i) {
      std::int64_t rest = static_cast<std::int64_t>(i), offset = 0, stride = 1;
      for (std::int64_t d = static_cast<std::int64_t>(result.size()) - 1; d >= 0; --d) {
        const std::int64_t index = rest % result[d];
        rest /= result[d];
        const std::int64_t sd = d - static_cast<std::int64_t>(result.size() - s.size());
        if (sd < 0) continue;
        if (s[sd] != 1) offset += index * stride;
        stride *= s[sd];
      }
      out[i] = beta * vbias[offset];
    }
  }
  for (std::int64_t t = 0; t < count(batch); ++t) {
    const std::int64_t oa = batch_offset(t, batch, ab, m * k), ob = batch_offset(t, batch, bb, k * n);
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (std::int64_t p = 0; p < k; ++p) sum += va[oa + i * k + p] * vb[ob + p * n + j];
        out[(t * m + i) * n + j] += alpha * sum;
      }
  }
  return make(result, out);
}

// ---- samples ----

Tensor leaf(const Shape& shape, std::uint64_t seed) { return sample(shape, -2, 2, seed).requires_grad_(); }

OpSample operands(std::string label, const Shape& a, const Shape& b, std::uint64_t seed, Fn view = nullptr) {
  return {std::move(label), {leaf(a, seed), leaf(b, seed + 1)}, std::move(view)};
}

std::vector<OpSample> matmul_samples() {
  return {
      operands("(3,4) @ (4,2)", {3, 4}, {4, 2}, 1),
      operands("transposed operands", {4, 3}, {2, 4}, 3,
               [](const TensorList& l) { return TensorList{l[0].t(), l[1].t()}; }),
      operands("sliced with step", {3, 8}, {4, 4}, 5,
               [](const TensorList& l) { return TensorList{l[0].slice(1, 0, 8, 2), l[1].slice(1, 0, 4, 2)}; }),
      operands("broadcast batch (2,1,3,2) @ (3,2,2)", {2, 1, 3, 2}, {3, 2, 2}, 7),
      operands("expanded batch (2,3,2) @ (2,2,2)", {1, 3, 2}, {2, 2, 2}, 9,
               [](const TensorList& l) { return TensorList{l[0].expand({2, 3, 2}), l[1]}; }),
      operands("batched @ matrix (2,3,4) @ (4,2)", {2, 3, 4}, {4, 2}, 11),
      operands("transposed batched @ matrix", {2, 4, 3}, {4, 2}, 13,
               [](const TensorList& l) { return TensorList{l[0].transpose(1, 2), l[1]}; }),
      operands("matrix @ batched (3,4) @ (2,4,2)", {3, 4}, {2, 4, 2}, 15),
      operands("1-D @ 1-D (dot)", {5}, {5}, 17),
      operands("2-D @ 1-D", {3, 4}, {4}, 19),
      operands("1-D @ 2-D", {4}, {4, 2}, 21),
      operands("1-D @ batched (4) @ (2,4,3)", {4}, {2, 4, 3}, 23),
      operands("batched @ 1-D (2,3,4) @ (4)", {2, 3, 4}, {4}, 25),
      operands("k = 0 gives zeros", {3, 0}, {0, 2}, 27),
      operands("m = 0 gives an empty result", {0, 4}, {4, 2}, 29),
      operands("empty batch (0,3,4) @ (4,2)", {0, 3, 4}, {4, 2}, 31),
  };
}

std::vector<OpSample> mm_samples() {
  return {
      operands("(3,4) @ (4,2)", {3, 4}, {4, 2}, 1),
      operands("transposed operands", {4, 3}, {2, 4}, 3,
               [](const TensorList& l) { return TensorList{l[0].t(), l[1].t()}; }),
      operands("sliced with step", {3, 8}, {8, 2}, 5,
               [](const TensorList& l) { return TensorList{l[0].slice(1, 0, 8, 2), l[1].slice(0, 1, 8, 2)}; }),
      operands("expanded rows", {1, 4}, {4, 2}, 7,
               [](const TensorList& l) { return TensorList{l[0].expand({3, 4}), l[1]}; }),
      operands("k = 0 gives zeros", {3, 0}, {0, 2}, 9),
      operands("m = 0 gives an empty result", {0, 4}, {4, 2}, 11),
  };
}

std::vector<OpSample> bmm_samples() {
  return {
      operands("(2,3,4) @ (2,4,2)", {2, 3, 4}, {2, 4, 2}, 1),
      operands("transposed matrices", {2, 4, 3}, {2, 2, 4}, 3,
               [](const TensorList& l) { return TensorList{l[0].transpose(1, 2), l[1].transpose(1, 2)}; }),
      operands("batch-major transposed", {3, 2, 4}, {4, 2, 2}, 5,
               [](const TensorList& l) { return TensorList{l[0].transpose(0, 1), l[1].permute({1, 0, 2})}; }),
      operands("sliced with step", {2, 3, 8}, {4, 4, 2}, 7,
               [](const TensorList& l) { return TensorList{l[0].slice(2, 0, 8, 2), l[1].slice(0, 0, 4, 2)}; }),
      operands("expanded batch", {1, 3, 4}, {2, 4, 2}, 9,
               [](const TensorList& l) { return TensorList{l[0].expand({2, 3, 4}), l[1]}; }),
      operands("zero-size", {0, 3, 4}, {0, 4, 2}, 11),
      operands("k = 0 gives zeros", {2, 3, 0}, {2, 0, 2}, 13),
  };
}

std::vector<OpSample> mv_samples() {
  return {
      operands("(3,4) @ (4)", {3, 4}, {4}, 1),
      operands("transposed matrix", {4, 3}, {4}, 3, [](const TensorList& l) { return TensorList{l[0].t(), l[1]}; }),
      operands("sliced with step", {3, 8}, {8}, 5,
               [](const TensorList& l) { return TensorList{l[0].slice(1, 0, 8, 2), l[1].slice(0, 1, 8, 2)}; }),
      operands("expanded vector", {3, 4}, {1}, 7,
               [](const TensorList& l) { return TensorList{l[0], l[1].expand({4})}; }),
      operands("k = 0 gives zeros", {3, 0}, {0}, 9),
      operands("m = 0 gives an empty result", {0, 4}, {4}, 11),
  };
}

std::vector<OpSample> vector_pair_samples(bool same_size) {
  const std::int64_t n = same_size ? 5 : 3;
  return {
      operands("contiguous", {5}, {n}, 1),
      operands("sliced with step", {10}, {2 * n}, 3,
               [](const TensorList& l) {
                 return TensorList{l[0].slice(0, 0, 10, 2), l[1].slice(0, 1, std::nullopt, 2)};
               }),
      operands("expanded", {1}, {n}, 5, [](const TensorList& l) { return TensorList{l[0].expand({5}), l[1]}; }),
      operands("zero-size", {0}, {same_size ? 0 : 3}, 7),
  };
}

// baddbmm samples: input, batch1, batch2.
std::vector<OpSample> baddbmm_samples(bool nan_input) {
  auto triple = [](std::string label, const Shape& input, const Shape& b1, const Shape& b2, std::uint64_t seed,
                   Fn view = nullptr) {
    return OpSample{std::move(label), {leaf(input, seed), leaf(b1, seed + 1), leaf(b2, seed + 2)}, std::move(view)};
  };
  if (nan_input) {
    Tensor input = make({2, 3, 2}, std::vector<double>(12, std::numeric_limits<double>::quiet_NaN()));
    return {{"NaN input is ignored", {input.requires_grad_(), leaf({2, 3, 4}, 1), leaf({2, 4, 2}, 2)}}};
  }
  return {
      triple("(2,3,2) + (2,3,4) @ (2,4,2)", {2, 3, 2}, {2, 3, 4}, {2, 4, 2}, 1),
      triple("broadcast input (3,1)", {3, 1}, {2, 3, 4}, {2, 4, 2}, 4),
      triple("transposed and sliced batches", {2, 3, 2}, {2, 4, 3}, {2, 4, 4}, 7,
             [](const TensorList& l) { return TensorList{l[0], l[1].transpose(1, 2), l[2].slice(2, 0, 4, 2)}; }),
      triple("expanded batch", {2, 3, 2}, {1, 3, 4}, {2, 4, 2}, 10,
             [](const TensorList& l) { return TensorList{l[0], l[1].expand({2, 3, 4}), l[2]}; }),
      triple("k = 0 leaves beta * input", {2, 3, 2}, {2, 3, 0}, {2, 0, 2}, 13),
      triple("zero-size batch", {0, 3, 2}, {0, 3, 4}, {0, 4, 2}, 16),
  };
}

// linear samples: x, weight and (when three leaves) bias.
std::vector<OpSample> linear_samples() {
  auto make_sample = [](std::string label, const Shape& x, const Shape& w, const Shape& bias, std::uint64_t seed,
                        Fn view = nullptr) {
    TensorList leaves = {leaf(x, seed), leaf(w, seed + 1)};
    if (!bias.empty()) leaves.push_back(leaf(bias, seed + 2));
    return OpSample{std::move(label), leaves, std::move(view)};
  };
  return {
      make_sample("(3,4) x (2,4) + (2)", {3, 4}, {2, 4}, {2}, 1),
      make_sample("batched input (2,3,4)", {2, 3, 4}, {2, 4}, {2}, 4),
      make_sample("1-D input", {4}, {3, 4}, {3}, 7),
      make_sample("no bias", {3, 4}, {2, 4}, {}, 10),
      make_sample("transposed weight, sliced input", {3, 8}, {4, 2}, {2}, 13,
                  [](const TensorList& l) { return TensorList{l[0].slice(1, 0, 8, 2), l[1].t(), l[2]}; }),
      make_sample("zero-size input", {0, 4}, {2, 4}, {2}, 16),
      make_sample("in_features = 0 gives the bias", {3, 0}, {2, 0}, {2}, 19),
  };
}

void entry(const std::string& name, std::function<Tensor(const TensorList&)> op,
           std::function<Tensor(const TensorList&)> ref, std::function<std::vector<OpSample>()> samples) {
  op_registry().push_back({.name = name,
                           .fn = [op](const TensorList& in) { return TensorList{op(in)}; },
                           .reference = [ref](const TensorList& in) { return TensorList{ref(in)}; },
                           .samples = std::move(samples),
                           .gradgrad = true,
                           .tolerance = 1e-12});
}

Tensor ref2(const TensorList& in) { return matmul_ref(in[0], in[1]); }

const bool registered = [] {
  entry("matmul", [](const TensorList& in) { return matmul(in[0], in[1]); }, ref2, matmul_samples);
  entry("mm", [](const TensorList& in) { return mm(in[0], in[1]); }, ref2, mm_samples);
  entry("bmm", [](const TensorList& in) { return bmm(in[0], in[1]); }, ref2, bmm_samples);
  entry("mv", [](const TensorList& in) { return mv(in[0], in[1]); }, ref2, mv_samples);
  entry("dot", [](const TensorList& in) { return dot(in[0], in[1]); }, ref2, [] { return vector_pair_samples(true); });
  entry("outer", [](const TensorList& in) { return outer(in[0], in[1]); },
        [](const TensorList& in) { return matmul_ref(in[0].reshape({-1, 1}), in[1].reshape({1, -1})); },
        [] { return vector_pair_samples(false); });
  entry("baddbmm", [](const TensorList& in) { return baddbmm(in[0], in[1], in[2], 0.5, 2.0); },
        [](const TensorList& in) { return matmul_ref(in[1], in[2], in[0], 0.5, 2.0); },
        [] { return baddbmm_samples(false); });
  entry("baddbmm", [](const TensorList& in) { return baddbmm(in[0], in[1], in[2], 0.0, 1.5); },
        [](const TensorList& in) { return matmul_ref(in[1], in[2], in[0], 0.0, 1.5); },
        [] { return baddbmm_samples(true); });
  entry("linear",
        [](const TensorList& in) { return in.size() == 3 ? linear(in[0], in[1], in[2]) : linear(in[0], in[1]); },
        [](const TensorList& in) {
          const Tensor wt = in[1].t();
          return in.size() == 3 ? matmul_ref(in[0], wt, in[2]) : matmul_ref(in[0], wt);
        },
        linear_samples);
  return true;
}();

// ---- errors ----

TEST(Linalg, ShapeErrorsNameBothShapes) {
  expect_error<ShapeError>([] { matmul(zeros({2, 3}), zeros({4, 5})); }, "matmul", {"[2, 3]", "[4, 5]"});
  expect_error<ShapeError>([] { matmul(zeros({2, 3, 4}), zeros({3, 4, 5})); }, "matmul", {"[2, 3, 4]", "[3, 4, 5]"});
  expect_error<ShapeError>([] { matmul(zeros({3}), zeros({4})); }, "matmul", {"[3]", "[4]"});
  expect_error<ShapeError>([] { mm(zeros({2, 3, 4}), zeros({4, 5})); }, "mm", {"[2, 3, 4]", "[4, 5]"});
  expect_error<ShapeError>([] { mm(zeros({2, 3}), zeros({2, 3})); }, "mm", {"[2, 3]"});
  expect_error<ShapeError>([] { bmm(zeros({2, 3, 4}), zeros({3, 4, 5})); }, "bmm", {"[2, 3, 4]", "[3, 4, 5]"});
  expect_error<ShapeError>([] { bmm(zeros({3, 4}), zeros({4, 5})); }, "bmm", {"[3, 4]", "[4, 5]"});
  expect_error<ShapeError>([] { mv(zeros({2, 3}), zeros({4})); }, "mv", {"[2, 3]", "[4]"});
  expect_error<ShapeError>([] { mv(zeros({2, 3}), zeros({3, 1})); }, "mv", {"[2, 3]", "[3, 1]"});
  expect_error<ShapeError>([] { dot(zeros({3}), zeros({4})); }, "dot", {"[3]", "[4]"});
  expect_error<ShapeError>([] { dot(zeros({3, 1}), zeros({3})); }, "dot", {"[3, 1]", "[3]"});
  expect_error<ShapeError>([] { outer(zeros({2, 2}), zeros({3})); }, "outer", {"[2, 2]", "[3]"});
  expect_error<ShapeError>([] { baddbmm(zeros({4, 4}), zeros({2, 3, 4}), zeros({2, 4, 2})); }, "baddbmm",
                     {"[4, 4]", "[2, 3, 2]"});
  expect_error<ShapeError>([] { baddbmm(zeros({2, 3, 2}), zeros({2, 3, 4}), zeros({3, 4, 2})); }, "baddbmm",
                     {"[2, 3, 4]", "[3, 4, 2]"});
  expect_error<ShapeError>([] { linear(zeros({3, 5}), zeros({2, 4})); }, "linear", {"[3, 5]", "[2, 4]"});
  expect_error<ShapeError>([] { linear(zeros({3, 4}), zeros({4})); }, "linear", {"[3, 4]", "[4]"});
  expect_error<ShapeError>([] { linear(zeros({3, 4}), zeros({2, 4}), zeros({3})); }, "linear", {"[3]", "[3, 2]"});
}

TEST(Linalg, ZeroDimOperandsAreShapeErrors) {
  expect_error<ShapeError>([] { matmul(scalar_tensor(2.0), zeros({3})); }, "matmul", {"[]", "[3]"});
  expect_error<ShapeError>([] { matmul(zeros({3, 2}), scalar_tensor(2.0)); }, "matmul", {"[3, 2]", "[]"});
  expect_error<ShapeError>([] { dot(scalar_tensor(2.0), scalar_tensor(2.0)); }, "dot", {"[]"});
  expect_error<ShapeError>([] { linear(scalar_tensor(2.0), zeros({2, 1})); }, "linear", {"[]", "[2, 1]"});
}

TEST(Linalg, DTypeErrors) {
  const Tensor f = zeros({2, 2}), d = zeros({2, 2}, {.dtype = kFloat64}), i = zeros({2, 2}, {.dtype = kInt64});
  expect_error<DTypeError>([&] { matmul(f, d); }, "matmul", {"float32", "float64"});
  expect_error<DTypeError>([&] { mm(d, f); }, "mm", {"float64", "float32"});
  expect_error<DTypeError>([&] { matmul(i, i); }, "matmul", {"int64"});
  expect_error<DTypeError>([&] { mm(i, i); }, "mm", {"int64"});
  expect_error<DTypeError>([&] { bmm(i.unsqueeze(0), i.unsqueeze(0)); }, "bmm", {"int64"});
  expect_error<DTypeError>([&] { dot(zeros({2}, {.dtype = kInt32}), zeros({2}, {.dtype = kInt32})); }, "dot",
                     {"int32"});
  expect_error<DTypeError>([&] { matmul(zeros({2, 2}, {.dtype = kBool}), zeros({2, 2}, {.dtype = kBool})); },
                     "matmul", {"bool"});
  expect_error<DTypeError>([&] { linear(f, f, zeros({2}, {.dtype = kFloat64})); }, "linear", {"float64", "float32"});
  expect_error<DTypeError>([&] { baddbmm(d.unsqueeze(0), f.unsqueeze(0), f.unsqueeze(0)); }, "baddbmm",
                     {"float64", "float32"});
}

// ---- dtypes and accuracy ----

Tensor abs_ref(const Tensor& t) {
  std::vector<double> v = values(t);
  for (double& x : v) x = std::abs(x);
  return make(t.shape(), v);
}

// Max over elements of |got - ref| / sum_p |a_ip b_pj|: the rounding error relative to its bound.
double relative_error(const Tensor& got, const Tensor& a, const Tensor& b) {
  const Tensor ref = matmul_ref(a, b), scale = matmul_ref(abs_ref(a), abs_ref(b));
  const std::vector<double> g = values(got), r = values(ref), s = values(scale);
  double worst = 0;
  for (std::size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::abs(g[i] - r[i]) / (s[i] + 1e-300));
  return worst;
}

TEST(Linalg, Float32AccuracyOfLargerProducts) {
  Generator gen(7);
  const Tensor a = randn({300, 200}, {}, &gen), b = randn({200, 100}, {}, &gen);
  EXPECT_LT(relative_error(matmul(a, b), a, b), 1e-5);
  // Transposed operands are read in place (column-major) by the GEMM.
  const Tensor at = a.t().contiguous().t(), bt = b.t().contiguous().t();
  EXPECT_LT(relative_error(matmul(at, bt), a, b), 1e-5);
  EXPECT_LT(relative_error(linear(a, b.t().contiguous()), a, b), 1e-5);
  // Batch folded into rows: (3,100,200) @ (200,100) is one (300,200) @ (200,100) product.
  const Tensor a3 = a.reshape({3, 100, 200});
  EXPECT_LT(relative_error(matmul(a3, b), a3, b), 1e-5);
}

// The packed AVX-512 float GEMM (used from 8x16 @ 16x48 up): edge tiles in m (12-row
// tiles; a last panel of up to 4 or 8 rows has its own kernels, so m covers remainders of
// 1, 4, 6, 8 and 10 rows) and n (32-column tiles), inner dimensions past one 384-deep
// slice, all four operand layouts, and alpha/beta through baddbmm.
TEST(Linalg, Float32PackedGemmEdgesAndLayouts) {
  Generator gen(11);
  for (const auto& [m, k, n] : {std::array<std::int64_t, 3>{8, 16, 48}, {13, 385, 61}, {37, 777, 130}, {25, 40, 97},
                                {16, 40, 50}, {30, 40, 64}, {46, 100, 33}}) {
    const Tensor a = randn({m, k}, {}, &gen), b = randn({k, n}, {}, &gen);
    const Tensor at = a.t().contiguous().t(), bt = b.t().contiguous().t();
    EXPECT_LT(relative_error(matmul(a, b), a, b), 1e-5) << m << "x" << k << "x" << n;
    EXPECT_LT(relative_error(matmul(at, b), a, b), 1e-5) << m << "x" << k << "x" << n;
    EXPECT_LT(relative_error(matmul(a, bt), a, b), 1e-5) << m << "x" << k << "x" << n;
    EXPECT_LT(relative_error(matmul(at, bt), a, b), 1e-5) << m << "x" << k << "x" << n;
    // out = 0.5 * input + 2 * a @ b, checked elementwise against the float64 product.
    const Tensor input = randn({1, m, n}, {}, &gen);
    const std::vector<double> got = values(baddbmm(input, a.unsqueeze(0), b.unsqueeze(0), 0.5, 2.0));
    const std::vector<double> ref = values(matmul_ref(a, b)), scale = values(matmul_ref(abs_ref(a), abs_ref(b)));
    const std::vector<double> in = values(input);
    for (std::size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], 0.5 * in[i] + 2.0 * ref[i], 1e-5 * (2.0 * scale[i] + std::abs(in[i]))) << i;
  }
}

// Above 1024 rows and 2^21 packed floats of a, the packed GEMM works in several blocks of
// rows and of the inner dimension; each block of the inner dimension adds to c.
TEST(Linalg, Float32PackedGemmInBlocks) {
  Generator gen(12);
  const Tensor a = randn({1030, 2100}, {}, &gen), b = randn({2100, 50}, {}, &gen);
  EXPECT_LT(relative_error(matmul(a, b), a, b), 1e-5);
  const Tensor nan_input = full({1, 1030, 50}, std::numeric_limits<double>::quiet_NaN());
  EXPECT_LT(relative_error(baddbmm(nan_input, a.unsqueeze(0), b.unsqueeze(0), 0.0, 1.0).squeeze(0), a, b), 1e-5);
}

TEST(Linalg, BatchesOfSmallProductsRunInParallel) {
  // 64 products of 24x16 @ 16x20: one whole product per thread; the batch of b is expanded.
  Generator gen(3);
  const Tensor a = randn({64, 24, 16}, {}, &gen), b = randn({1, 16, 20}, {}, &gen).expand({64, 16, 20});
  EXPECT_LT(relative_error(bmm(a, b), a, b), 1e-5);
  EXPECT_LT(relative_error(bmm(a.transpose(1, 2).contiguous().transpose(1, 2), b), a, b), 1e-5);
  const Tensor d = randn({64, 24, 16}, {.dtype = kFloat64}, &gen), e = randn({64, 16, 20}, {.dtype = kFloat64}, &gen);
  EXPECT_LT(relative_error(bmm(d, e), d, e), 1e-13);
}

TEST(Linalg, HalfPrecisionComputesInFloat32) {
  Generator gen(5);
  for (DataType t : {kFloat16, kBFloat16}) {
    const Tensor a = randn({5, 7}, {.dtype = t}, &gen), b = randn({7, 3}, {.dtype = t}, &gen);
    const Tensor y = matmul(a, b);
    EXPECT_EQ(y.dtype(), t);
    // One rounding of the float32 result: within half a unit in the last place of t.
    const double ulp = t == kFloat16 ? 1.0 / 1024 : 1.0 / 128;
    const std::vector<double> got = values(y), ref = values(matmul_ref(a, b));
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_LE(std::abs(got[i] - ref[i]), ulp * std::abs(ref[i]) + 1e-6);
    EXPECT_EQ(linear(a, b.t(), zeros({3}, {.dtype = t})).dtype(), t);
  }
}

TEST(Linalg, BaddbmmWithZeroBetaIgnoresNaN) {
  const Tensor input = full({2, 2, 2}, std::numeric_limits<double>::quiet_NaN(), {.dtype = kFloat32});
  const Tensor y = baddbmm(input, ones({2, 2, 3}), ones({2, 3, 2}), 0.0, 2.0);
  for (double v : values(y)) EXPECT_EQ(v, 6.0);
}

TEST(Linalg, GradientsKeepDTypeAndShape) {
  Tensor x = randn({4, 3}).requires_grad_(), w = randn({2, 3}).requires_grad_(), b = randn({2}).requires_grad_();
  sum(linear(x, w, b)).backward();
  EXPECT_EQ(x.grad().shape(), x.shape());
  EXPECT_EQ(w.grad().shape(), w.shape());
  EXPECT_EQ(b.grad().dtype(), kFloat32);
  EXPECT_EQ(values(b.grad()), (std::vector<double>{4, 4}));
}

}  // namespace
}  // namespace infini::test::linalg_ops_test
