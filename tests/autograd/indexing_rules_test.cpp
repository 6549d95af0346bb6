// Rules of the indexing family the op table does not cover: duplicate indices (last write
// wins; reductions combine all), out-of-range and dtype errors, multinomial statistics and
// reproducibility, sort stability, and which outputs carry no gradient. Large cases run
// the kernels' parallel paths.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "indexing_test_util.h"
#include "op_info.h"

namespace infini::test::indexing_rules_test {
namespace {

using namespace indexing_util;
using indexing::Ellipsis;
using indexing::None;
using indexing::Slice;

constexpr std::int64_t kWide = 40000;  // enough columns for the parallel kernels

// ---- duplicates: the last write wins ----

TEST(IndexingDuplicates, ScatterLastWriteWins) {
  // Column j of index is [0, 1, 0, 1, 0]: row 0 ends with src row 4, row 1 with src row 3.
  std::vector<std::int64_t> iv;
  for (std::int64_t i = 0; i < 5; ++i)
    for (std::int64_t j = 0; j < kWide; ++j) iv.push_back(i % 2);
  const Tensor index = i64({5, kWide}, iv);
  const Tensor src = add(mul(arange(5, {.dtype = kFloat64}).unsqueeze(1), 1e6), arange(kWide, {.dtype = kFloat64}));
  for (bool inplace : {false, true}) {
    Tensor self = zeros({2, kWide}, {.dtype = kFloat64});
    const Tensor out = inplace ? scatter_(self, 0, index, src) : scatter(self, 0, index, src);
    const std::vector<double> v = values(out);
    for (std::int64_t j = 0; j < kWide; j += 997) {
      EXPECT_EQ(v[j], 4e6 + j);
      EXPECT_EQ(v[kWide + j], 3e6 + j);
    }
  }
  // Along the last dim, with negative duplicates.
  const Tensor out = scatter(zeros({2, 3}), 1, i64({2, 4}, {0, -3, 2, 0, 1, 1, -2, 1}), f64({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}).to(kFloat32));
  EXPECT_EQ(values(out), (std::vector<double>{4, 0, 3, 0, 8, 0}));
}

TEST(IndexingDuplicates, IndexCopyLastWriteWins) {
  const Tensor index = i64({6}, {2, 0, 2, 1, -1, 0});  // row 2 last from 4, row 0 from 5, row 1 from 3
  const Tensor source = arange(6, {.dtype = kFloat64}).unsqueeze(1).expand({6, kWide}).contiguous();
  for (bool inplace : {false, true}) {
    Tensor self = zeros({3, kWide}, {.dtype = kFloat64});
    const Tensor out = inplace ? index_copy_(self, 0, index, source) : index_copy(self, 0, index, source);
    const std::vector<double> v = values(out);
    for (std::int64_t j = 0; j < kWide; j += 1009) {
      EXPECT_EQ(v[j], 5);
      EXPECT_EQ(v[kWide + j], 3);
      EXPECT_EQ(v[2 * kWide + j], 4);
    }
  }
  // Along dim 1 of a transposed target.
  Tensor target = zeros({4, 2}).t();
  index_copy_(target, 1, i64({3}, {3, 3, 0}), f64({2, 3}, {1, 2, 3, 4, 5, 6}).to(kFloat32));
  EXPECT_EQ(values(target), (std::vector<double>{3, 0, 0, 2, 6, 0, 0, 5}));
}

TEST(IndexingDuplicates, IndexPutLastWriteWins) {
  // One index tensor over many elements (row path), in place and out of place.
  std::vector<std::int64_t> iv;
  for (std::int64_t i = 0; i < kWide; ++i) iv.push_back(i % 3);
  const Tensor index = i64({kWide}, iv);
  const Tensor vals = arange(kWide, {.dtype = kFloat64});
  for (bool inplace : {false, true}) {
    Tensor self = zeros({3}, {.dtype = kFloat64});
    const Tensor out = inplace ? index_put_(self, {index}, vals) : index_put(self, {index}, vals);
    const std::vector<double> v = values(out);
    for (std::int64_t r = 0; r < 3; ++r) {
      std::int64_t expected = -1;
      for (std::int64_t i = 0; i < kWide; ++i)
        if (iv[i] == r) expected = i;
      EXPECT_EQ(v[r], static_cast<double>(expected)) << r;
    }
  }
  // Two index tensors (the storage-offset path), a transposed target, in place and not.
  const Tensor r = i64({5}, {1, 0, 1, -2, 0}), c = i64({5}, {2, 0, 2, 2, -3});
  const Tensor v5 = f64({5}, {10, 20, 30, 40, 50});
  for (bool inplace : {false, true}) {
    Tensor self = zeros({3, 2}, {.dtype = kFloat64}).t();  // (2,3), strides (1,2)
    const Tensor out = inplace ? index_put_(self, {r, c}, v5) : index_put(self, {r, c}, v5);
    EXPECT_EQ(values(out), (std::vector<double>{50, 0, 40, 0, 0, 30}));
  }
}

// ---- duplicates: reductions combine every write ----

TEST(IndexingDuplicates, AccumulateAndReduceCombineAll) {
  // Integer-valued floats make the sums exact in any order.
  std::vector<std::int64_t> iv;
  for (std::int64_t i = 0; i < 7; ++i)
    for (std::int64_t j = 0; j < kWide; ++j) iv.push_back((i * 5 + j) % 3);
  const Tensor index = i64({7, kWide}, iv);
  const Tensor src = add(arange(7, {.dtype = kFloat64}).unsqueeze(1), zeros({1, kWide}, {.dtype = kFloat64}));
  const Tensor sum = scatter_add(ones({3, kWide}, {.dtype = kFloat64}), 0, index, src);
  const Tensor prod = scatter(ones({3, kWide}, {.dtype = kFloat64}), 0, index, add(src, 1.0), ScatterReduce::Multiply);
  const Tensor amax = scatter(full({3, kWide}, 2.5, {.dtype = kFloat64}), 0, index, src, ScatterReduce::Amax);
  const Tensor amin = scatter(full({3, kWide}, 2.5, {.dtype = kFloat64}), 0, index, src, ScatterReduce::Amin);
  const std::vector<double> vs = values(sum), vp = values(prod), vmax = values(amax), vmin = values(amin);
  for (std::int64_t j = 0; j < kWide; j += 1013) {
    for (std::int64_t row = 0; row < 3; ++row) {
      double s = 1, p = 1, hi = 2.5, lo = 2.5;
      for (std::int64_t i = 0; i < 7; ++i)
        if (iv[i * kWide + j] == row) {
          s += i;
          p *= i + 1;
          hi = std::max(hi, static_cast<double>(i));
          lo = std::min(lo, static_cast<double>(i));
        }
      EXPECT_EQ(vs[row * kWide + j], s);
      EXPECT_EQ(vp[row * kWide + j], p);
      EXPECT_EQ(vmax[row * kWide + j], hi);
      EXPECT_EQ(vmin[row * kWide + j], lo);
    }
  }
  // index_add (alpha), index_put(accumulate) with duplicates, int64 and float16.
  EXPECT_EQ(values(index_add(zeros({3}), 0, i64({4}, {1, 1, -1, 1}), f64({4}, {1, 2, 3, 4}).to(kFloat32), 2)),
            (std::vector<double>{0, 14, 6}));
  EXPECT_EQ(values(index_put(zeros({2, 2}, {.dtype = kInt64}), {i64({3}, {1, 1, 1}), i64({3}, {0, 0, 0})},
                             i64({3}, {4, 5, 6}), true)),
            (std::vector<double>{0, 0, 15, 0}));
  const Tensor half = scatter_add(zeros({2}, {.dtype = kFloat16}), 0, i64({3}, {0, 0, 1}),
                                  f64({3}, {0.5, 0.25, 3}).to(kFloat16));
  EXPECT_EQ(half.dtype(), kFloat16);
  EXPECT_EQ(values(half), (std::vector<double>{0.75, 3}));
  Tensor counts = zeros({4}, {.dtype = kInt64});
  index_put_(counts, {i64({6}, {3, 0, 3, 3, 1, 0})}, ones({6}, {.dtype = kInt64}), true);
  EXPECT_EQ(values(counts), (std::vector<double>{2, 1, 0, 3}));
}

TEST(IndexingDuplicates, AccumulateGradientsSumOverDuplicates) {
  const Tensor x = leaf({3}, 1);
  const Tensor y = index_select(x, 0, i64({4}, {2, 2, 0, 2}));
  sum(y).backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{1, 0, 3}));
  const Tensor v = leaf({2}, 2);
  sum(mul(index_put(zeros({3}, {.dtype = kFloat64}), {i64({2}, {1, 1})}, v, true), 2.0)).backward();
  EXPECT_EQ(values(v.grad()), (std::vector<double>{2, 2}));
}

// ---- out-of-range indices ----

TEST(IndexingErrors, OutOfRangeIndicesNameOpDimIndexAndSize) {
  const Tensor x = zeros({3, 4});
  auto expect_range = [](auto&& call, const std::string& op, std::int64_t dim, std::int64_t index, std::int64_t size) {
    expect_error<IndexError>(call, op,
                             {"dimension " + std::to_string(dim), "index " + std::to_string(index), "size " + std::to_string(size)});
  };
  expect_range([&] { index_select(x, 1, i64({2}, {0, 4})); }, "index_select", 1, 4, 4);
  expect_range([&] { index_select(x, 0, i64({2}, {-4, 0})); }, "index_select", 0, -4, 3);
  expect_range([&] { gather(x, 1, i64({1, 2}, {1, -5})); }, "gather", 1, -5, 4);
  expect_range([&] { take_along_dim(x, i64({1, 1}, {4}), 1); }, "take_along_dim", 1, 4, 4);
  expect_range([&] { take_along_dim(x, i64({2}, {3, 12})); }, "take_along_dim", 0, 12, 12);
  expect_range([&] { scatter(x, 0, i64({1, 1}, {3}), ones({1, 1})); }, "scatter", 0, 3, 3);
  expect_range([&] { scatter(x, 0, i64({1, 1}, {3}), 1.0); }, "scatter", 0, 3, 3);
  expect_range([&] { scatter_add(x, 1, i64({1, 1}, {9}), ones({1, 1})); }, "scatter_add", 1, 9, 4);
  expect_range([&] { index_add(x, 0, i64({1}, {-7}), ones({1, 4})); }, "index_add", 0, -7, 3);
  expect_range([&] { index_copy(x, 1, i64({1}, {4}), ones({3, 1})); }, "index_copy", 1, 4, 4);
  expect_range([&] { index_fill(x, 1, i64({1}, {4}), 2.0); }, "index_fill", 1, 4, 4);
  expect_range([&] { index_put(x, {i64({1}, {5})}, ones({4})); }, "index_put", 0, 5, 3);
  expect_range([&] { index_put(x, {Slice(), i64({1}, {-5})}, ones({1})); }, "index_put", 1, -5, 4);
  expect_range([&] { index(x, {1, i64({1}, {4})}); }, "index", 1, 4, 4);
  expect_range([&] { index(x, {3}); }, "index", 0, 3, 3);
  expect_range([&] { index(x, {None, Ellipsis, -5}); }, "index", 1, -5, 4);
  expect_range([&] { one_hot(i64({3}, {0, 5, 1}), 5); }, "one_hot", 1, 5, 5);
  expect_range([&] { one_hot(i64({2}, {0, -1})); }, "one_hot", 1, -1, 1);
  expect_error<IndexError>([&] { topk(x, 5, 1); }, "topk", {"k = 5", "dimension 1", "size 4"});
  // Nothing is written before the check: the in-place forms leave the target unchanged.
  Tensor target = ones({3, 4});
  const Tensor bad = i64({2, 1}, {0, 3});
  expect_range([&] { scatter_(target, 0, bad, zeros({2, 1})); }, "scatter_", 0, 3, 3);
  expect_range([&] { scatter_add_(target, 0, bad, zeros({2, 1})); }, "scatter_add_", 0, 3, 3);
  expect_range([&] { index_add_(target, 0, i64({2}, {0, 3}), zeros({2, 4})); }, "index_add_", 0, 3, 3);
  expect_range([&] { index_copy_(target, 0, i64({2}, {0, 3}), zeros({2, 4})); }, "index_copy_", 0, 3, 3);
  expect_range([&] { index_fill_(target, 0, i64({2}, {0, 3}), 0.0); }, "index_fill_", 0, 3, 3);
  expect_range([&] { index_put_(target, {i64({2}, {0, 0}), i64({2}, {0, 4})}, zeros({2})); }, "index_put_", 1, 4, 4);
  expect_range([&] { index_put_(target, {i64({2}, {0, 3})}, 0.0); }, "index_put_", 0, 3, 3);
  EXPECT_EQ(values(target), std::vector<double>(12, 1.0));
}

// ---- dtypes and shapes ----

TEST(IndexingErrors, IndexDTypes) {
  const Tensor x = zeros({3, 4});
  const Tensor f = f64({2}, {0, 1});
  for (auto [call, op] : std::vector<std::pair<std::function<void()>, std::string>>{
           {[&] { index_select(x, 0, f); }, "index_select"},
           {[&] { gather(x, 0, f.reshape({2, 1})); }, "gather"},
           {[&] { take_along_dim(x, f.reshape({2, 1}), 0); }, "take_along_dim"},
           {[&] { scatter(x, 0, f.reshape({2, 1}), ones({2, 1})); }, "scatter"},
           {[&] { scatter_add(x, 0, f.reshape({2, 1}), ones({2, 1})); }, "scatter_add"},
           {[&] { index_add(x, 0, f, ones({2, 4})); }, "index_add"},
           {[&] { index_copy(x, 0, f, ones({2, 4})); }, "index_copy"},
           {[&] { index_fill(x, 0, f, 1.0); }, "index_fill"},
           {[&] { index(x, {f}); }, "index"},
           {[&] { index_put(x, {f}, ones({1})); }, "index_put"},
           {[&] { one_hot(f); }, "one_hot"},
           {[&] { gather(x, 0, zeros({1, 1}, {.dtype = kBool})); }, "gather"},
           {[&] { index_select(x, 0, zeros({1}, {.dtype = kUInt8})); }, "index_select"}})
    expect_error<DTypeError>(call, op, {"int64"});
  // int32 indices are accepted and converted.
  EXPECT_EQ(values(index_select(f64({3}, {5, 6, 7}), 0, i64({2}, {2, -3}).to(kInt32))), (std::vector<double>{7, 5}));
  EXPECT_EQ(values(gather(f64({3}, {5, 6, 7}), 0, i64({1}, {1}).to(kInt32))), (std::vector<double>{6}));
  // Values and masks of the wrong dtype.
  expect_error<DTypeError>([&] { scatter(x, 0, i64({1, 1}, {0}), ones({1, 1}, {.dtype = kFloat64})); }, "scatter",
                           {"float32", "float64"});
  expect_error<DTypeError>([&] { index_copy(x, 0, i64({1}, {0}), ones({1, 4}, {.dtype = kInt64})); }, "index_copy",
                           {"float32", "int64"});
  expect_error<DTypeError>([&] { index_put(x, {i64({1}, {0})}, ones({1}, {.dtype = kFloat64})); }, "index_put",
                           {"float32", "float64"});
  expect_error<DTypeError>([&] { masked_select(x, zeros({3, 4})); }, "masked_select", {"bool", "float32"});
  expect_error<DTypeError>([&] { masked_scatter(x, zeros({3, 4}), ones({12})); }, "masked_scatter", {"bool"});
  expect_error<DTypeError>([&] { multinomial(ones({3}, {.dtype = kInt64}), 1); }, "multinomial", {"int64"});
}

TEST(IndexingErrors, ShapesAndIndexLists) {
  const Tensor x = zeros({3, 4});
  expect_error<ShapeError>([&] { gather(x, 0, i64({2}, {0, 1})); }, "gather", {"[2]", "[3, 4]"});
  expect_error<ShapeError>([&] { gather(x, 0, i64({1, 5}, {0, 0, 0, 0, 0})); }, "gather", {"[1, 5]", "dimension 1"});
  expect_error<ShapeError>([&] { scatter(x, 0, i64({2, 2}, {0, 0, 0, 0}), ones({1, 2})); }, "scatter", {"[2, 2]"});
  expect_error<ShapeError>([&] { index_select(x, 0, i64({1, 1}, {0})); }, "index_select", {"0-d or 1-d"});
  expect_error<ShapeError>([&] { index_add(x, 0, i64({2}, {0, 1}), ones({3, 4})); }, "index_add", {"[3, 4]", "[2, 4]"});
  expect_error<ShapeError>([&] { masked_select(x, zeros({2, 4}, {.dtype = kBool})); }, "masked_select", {"[3, 4]"});
  expect_error<ShapeError>([&] { masked_scatter(x, ones({3, 4}, {.dtype = kBool}), ones({5})); }, "masked_scatter",
                           {"12"});
  expect_error<ShapeError>([&] { index_put(x, {i64({2}, {0, 1})}, ones({3})); }, "index_put", {"[3]", "[2, 4]"});
  expect_error<ShapeError>([&] { one_hot(i64({0}, {})); }, "one_hot", {"empty"});
  expect_error<IndexError>([&] { index(x, {0, 0, 0}); }, "index", {"too many indices", "[3, 4]"});
  expect_error<IndexError>([&] { index(x, {Ellipsis, Ellipsis}); }, "index", {"Ellipsis"});
  expect_error<IndexError>([&] { index(x, {Slice(0, 2, -1)}); }, "index", {"step"});
  expect_error<IndexError>([&] { index(x, {ones({3, 3}, {.dtype = kBool})}); }, "index", {"[3, 3]", "[3, 4]"});
  expect_error<IndexError>([&] { index(x, {i64({2}, {0, 1}), i64({3}, {0, 1, 2})}); }, "index", {"[2]", "[3]"});
  expect_error<Error>([&] { Tensor e = zeros({1}).expand({3}); index_put_(e, {i64({1}, {0})}, 1.0); }, "index_put_",
                      {"memory location"});
  // Python's rules for 0-d bool indices, None and Ellipsis.
  EXPECT_EQ(index(x, {from_vector<bool>({true}).reshape({})}).shape(), (Shape{1, 3, 4}));
  EXPECT_EQ(index(x, {Slice(), from_vector<bool>({false}).reshape({})}).shape(), (Shape{3, 0, 4}));
  EXPECT_EQ(index(x, {None, Ellipsis, None}).shape(), (Shape{1, 3, 4, 1}));
  EXPECT_EQ(index(x, {Ellipsis, 2}).shape(), (Shape{3}));
  EXPECT_TRUE(index(x, {Slice(1), 2}).storage().is_same(x.storage()));  // basic indexing is a view
}

// ---- multinomial ----

TEST(Multinomial, CountsMatchProbabilities) {
  const std::vector<double> p = {0.1, 0.2, 0.3, 0.4};
  constexpr std::int64_t n = 200000;
  Generator generator(42);
  const std::vector<std::int64_t> draws = ints(multinomial(f64({4}, {1, 2, 3, 4}), n, true, &generator));
  std::vector<double> counts(4, 0);
  for (std::int64_t d : draws) counts.at(d) += 1;
  for (int c = 0; c < 4; ++c) {
    const double sigma = std::sqrt(n * p[c] * (1 - p[c]));
    EXPECT_LT(std::abs(counts[c] - n * p[c]), 5 * sigma) << "category " << c;
  }
  // Without replacement: the first draw follows p, every row's draws are distinct, and a
  // zero-probability category is never drawn.
  constexpr std::int64_t rows = 20000;
  const Tensor probs = f64({1, 5}, {1, 2, 3, 4, 0}).expand({rows, 5});
  const std::vector<std::int64_t> picks = ints(multinomial(probs, 4, false, &generator));
  std::vector<double> first(5, 0);
  for (std::int64_t r = 0; r < rows; ++r) {
    first.at(picks[r * 4]) += 1;
    for (int a = 0; a < 4; ++a) {
      EXPECT_NE(picks[r * 4 + a], 4);
      for (int b = 0; b < a; ++b) EXPECT_NE(picks[r * 4 + a], picks[r * 4 + b]);
    }
  }
  for (int c = 0; c < 4; ++c) {
    const double sigma = std::sqrt(rows * p[c] * (1 - p[c]));
    EXPECT_LT(std::abs(first[c] - rows * p[c]), 5 * sigma) << "category " << c;
  }
  // Second draw without replacement, given the first was category 3 (p = 0.4): p / 0.6.
  double after3 = 0, of0 = 0;
  for (std::int64_t r = 0; r < rows; ++r)
    if (picks[r * 4] == 3) {
      after3 += 1;
      of0 += picks[r * 4 + 1] == 0;
    }
  EXPECT_LT(std::abs(of0 - after3 / 6), 5 * std::sqrt(after3 * (1.0 / 6) * (5.0 / 6)));
}

TEST(Multinomial, SeededGeneratorReproduces) {
  const Tensor probs = rand({3, 10}, {.dtype = kFloat64}, nullptr);
  for (bool replacement : {true, false}) {
    Generator a(7), b(7), c(8);
    const Tensor first = multinomial(probs, 5, replacement, &a);
    EXPECT_EQ(values(first), values(multinomial(probs, 5, replacement, &b)));
    EXPECT_NE(values(first), values(multinomial(probs, 5, replacement, &c)));
    EXPECT_NE(values(first), values(multinomial(probs, 5, replacement, &a)));  // the generator moved on
    EXPECT_EQ(first.dtype(), kInt64);
    EXPECT_EQ(first.shape(), (Shape{3, 5}));
  }
  // float32 probabilities and a 1-d input.
  Generator a(1), b(1);
  EXPECT_EQ(values(multinomial(f64({3}, {1, 0, 1}).to(kFloat32), 6, true, &a)),
            values(multinomial(f64({3}, {1, 0, 1}), 6, true, &b)));
}

TEST(Multinomial, Errors) {
  const double nan = std::nan("");
  expect_error<Error>([] { multinomial(f64({3}, {1, -1, 1}), 1); }, "multinomial", {"non-negative"});
  expect_error<Error>([=] { multinomial(f64({3}, {1, nan, 1}), 1); }, "multinomial", {"finite"});
  expect_error<Error>([] { multinomial(f64({2, 2}, {1, 1, 0, 0}), 1); }, "multinomial", {"positive sum"});
  expect_error<Error>([] { multinomial(f64({3}, {1, 1, 0}), 3, false); }, "multinomial", {"only 2"});
  expect_error<ShapeError>([] { multinomial(f64({3}, {1, 1, 1}), 4, false); }, "multinomial", {"4", "3 categories"});
  expect_error<ShapeError>([] { multinomial(f64({3}, {1, 1, 1}), 0); }, "multinomial", {"positive"});
  expect_error<ShapeError>([] { multinomial(zeros({1, 1, 3}), 1); }, "multinomial", {"[1, 1, 3]"});
}

// ---- sort stability and dtypes ----

TEST(Sort, StableWithTiesAndNaN) {
  constexpr std::int64_t n = 50000;
  std::vector<double> v;
  for (std::int64_t i = 0; i < n; ++i) v.push_back(static_cast<double>((i * 7919) % 13));
  const Tensor x = f64({2, n}, [&] {
    std::vector<double> two = v;
    two.insert(two.end(), v.rbegin(), v.rend());
    return two;
  }());
  for (bool descending : {false, true}) {
    const auto [values_out, indices] = sort(x, -1, descending, true);
    const std::vector<double> sv = values(values_out);
    const std::vector<std::int64_t> si = ints(indices);
    for (std::int64_t r = 0; r < 2; ++r)
      for (std::int64_t i = 1; i < n; ++i) {
        const double a = sv[r * n + i - 1], b = sv[r * n + i];
        EXPECT_TRUE(descending ? a >= b : a <= b);
        if (a == b) EXPECT_LT(si[r * n + i - 1], si[r * n + i]) << "unstable at " << i;
      }
  }
  // NaN above every number; equal values (and NaNs) keep their order, also in float16 and bool.
  const double nan = std::nan("");
  const Tensor y = f64({6}, {2, nan, -1, 2, nan, -1});
  EXPECT_EQ(ints(argsort(y)), (std::vector<std::int64_t>{2, 5, 0, 3, 1, 4}));
  EXPECT_EQ(ints(argsort(y, 0, true)), (std::vector<std::int64_t>{1, 4, 0, 3, 2, 5}));
  EXPECT_EQ(ints(argsort(y.to(kFloat16))), (std::vector<std::int64_t>{2, 5, 0, 3, 1, 4}));
  EXPECT_EQ(ints(argsort(from_vector<bool>({true, false, true, false}))), (std::vector<std::int64_t>{1, 3, 0, 2}));
  const auto [bf, bi] = sort(f64({3}, {3, 1, 2}).to(kBFloat16), 0, true);
  EXPECT_EQ(bf.dtype(), kBFloat16);
  EXPECT_EQ(values(bf), (std::vector<double>{3, 2, 1}));
  // topk: ties by lower index; NaN is the largest.
  const auto [tv, ti] = topk(f64({5}, {1, 3, nan, 3, 1}), 3);
  EXPECT_EQ(ints(ti), (std::vector<std::int64_t>{2, 1, 3}));
  EXPECT_EQ(ints(topk(f64({5}, {1, 3, 0, 3, 1}), 3, 0, false).indices), (std::vector<std::int64_t>{2, 0, 4}));
}

// ---- gradients: which outputs carry none, and saved indices ----

TEST(IndexingGradients, IntegerOutputsCarryNoGradient) {
  const Tensor x = leaf({2, 3}, 1);
  EXPECT_FALSE(argsort(x).requires_grad());
  EXPECT_FALSE(sort(x).indices.requires_grad());
  EXPECT_TRUE(sort(x).values.requires_grad());
  EXPECT_FALSE(topk(x, 1).indices.requires_grad());
  EXPECT_FALSE(nonzero(x).requires_grad());
  EXPECT_FALSE(unique(x).values.requires_grad());
  EXPECT_FALSE(one_hot(i64({2}, {0, 1})).requires_grad());
  EXPECT_FALSE(multinomial(abs(x), 1).requires_grad());
  // topk's gradient reaches the selected elements only.
  sum(topk(x, 1).values).backward();
  const std::vector<double> g = values(x.grad()), xv = values(x);
  for (std::int64_t r = 0; r < 2; ++r)
    for (std::int64_t c = 0; c < 3; ++c) {
      bool is_max = true;
      for (std::int64_t k = 0; k < 3; ++k) is_max = is_max && xv[r * 3 + k] <= xv[r * 3 + c];
      EXPECT_EQ(g[r * 3 + c], is_max ? 1.0 : 0.0);
    }
}

TEST(IndexingGradients, SavedIndexModifiedInPlaceIsAnError) {
  const Tensor x = leaf({3}, 1);
  Tensor idx = i64({2}, {0, 2});
  const Tensor y = gather(x, 0, idx);
  idx.fill_(1);
  EXPECT_THROW(sum(y).backward(), Error);
}

TEST(IndexingGradients, InPlaceOnLeafIsAnError) {
  Tensor x = leaf({3}, 1);
  expect_error<Error>([&] { index_fill_(x, 0, i64({1}, {0}), 1.0); }, "index_fill_", {"leaf"});
  expect_error<Error>([&] { index_put_(x, {i64({1}, {0})}, 1.0); }, "index_put_", {"leaf"});
  NoGradGuard no_grad;
  index_fill_(x, 0, i64({1}, {0}), 7.0);
  EXPECT_EQ(values(x)[0], 7.0);
}

}  // namespace
}  // namespace infini::test::indexing_rules_test
