// unique_consecutive: op table entries (flattened and along a dim) against a naive loop over
// runs, plus NaN runs, integer and bool inputs, zero-size and 0-d inputs and bad dims,
// checked against PyTorch 1.13's results.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "indexing_test_util.h"
#include "op_info.h"

namespace infini::test::unique_consecutive_test {
namespace {

using namespace indexing_util;
using I = std::vector<std::int64_t>;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The runs of x (flattened, or of its slices along dim) by comparing neighbours with ==
// (so NaN starts a run of its own): values, inverse and counts.
TensorList unique_consecutive_ref(const Tensor& x, std::optional<std::int64_t> dim) {
  const std::vector<double> v = values(x);
  const Shape shape = x.shape();
  std::int64_t n = x.numel(), d = 0;
  if (dim) {
    d = *dim < 0 ? *dim + x.dim() : *dim;
    n = shape[d];
  }
  const std::int64_t slice = n == 0 ? 0 : x.numel() / n;
  // Element j of slice i (row-major over the other dims).
  auto at = [&](std::int64_t i, std::int64_t j) {
    if (!dim) return v[i];
    Shape rest = shape;
    rest[d] = 1;
    Coords c = unravel(j, rest);
    c[d] = i;
    return v[ravel(c, shape)];
  };
  std::vector<std::int64_t> starts, inverse, counts;
  for (std::int64_t i = 0; i < n; ++i) {
    bool same = i > 0;
    for (std::int64_t j = 0; j < slice && same; ++j) same = at(i, j) == at(i - 1, j);
    if (!same) {
      starts.push_back(i);
      counts.push_back(0);
    }
    ++counts.back();
    inverse.push_back(static_cast<std::int64_t>(starts.size()) - 1);
  }
  const auto runs = static_cast<std::int64_t>(starts.size());
  std::vector<double> out;
  Shape out_shape{runs};
  if (dim) {
    out_shape = shape;
    out_shape[d] = runs;
    for (std::int64_t k = 0; k < numel_of(out_shape); ++k) {
      Coords c = unravel(k, out_shape);
      c[d] = starts[c[d]];
      out.push_back(v[ravel(c, shape)]);
    }
  } else {
    for (std::int64_t s : starts) out.push_back(v[s]);
  }
  return {f64(out_shape, out), i64(dim ? Shape{n} : shape, inverse), i64({runs}, counts)};
}

Tensor runs_3x4() { return f64({3, 4}, {1, 1, 2, 2, 2, 1, 3, 3, kNaN, kNaN, 3, 3}); }
// Rows 0-1 equal, 2-3 equal, 4 apart: runs along dim 0; columns 0-1 equal: runs along dim 1.
Tensor rows_5x3() { return f64({5, 3}, {1, 1, 2, 1, 1, 2, 0, 0, 5, 0, 0, 5, 0, 0, 4}); }

const bool registered = [] {
  op_registry().push_back(
      {.name = "unique_consecutive",
       .fn = [](const TensorList& in) {
         const UniqueResult r = unique_consecutive(in[0], true, true);
         return TensorList{r.values, r.inverse, r.counts};
       },
       .reference = [](const TensorList& in) { return unique_consecutive_ref(in[0], std::nullopt); },
       .samples = [] {
         return std::vector<OpSample>{
             {"runs and NaNs (3,4)", {runs_3x4()}},
             {"transposed", {runs_3x4()}, [](const TensorList& l) { return TensorList{l[0].t()}; }},
             {"all equal", {full({2, 2}, 1.5, {.dtype = kFloat64})}},
             {"zero-size", {f64({0, 3}, {})}},
             {"0-d", {f64({}, {2.5})}},
         };
       },
       .differentiable = false});
  for (const std::int64_t dim : {0, -1})
    op_registry().push_back(
        {.name = "unique_consecutive",
         .fn = [dim](const TensorList& in) {
           const UniqueResult r = unique_consecutive(in[0], true, true, dim);
           return TensorList{r.values, r.inverse, r.counts};
         },
         .reference = [dim](const TensorList& in) { return unique_consecutive_ref(in[0], dim); },
         .samples = [] {
           return std::vector<OpSample>{
               {"rows (5,3)", {rows_5x3()}},
               {"transposed", {rows_5x3()}, [](const TensorList& l) { return TensorList{l[0].t()}; }},
               {"3-d", {f64({2, 2, 2}, {1, 2, 1, 2, 3, 4, 3, 4})}},
               {"zero-size along dim", {f64({0, 0}, {})}},
           };
         },
         .differentiable = false});
  return true;
}();

TEST(UniqueConsecutive, EachNaNIsARunOfItsOwn) {
  // torch.unique_consecutive(torch.tensor([1, nan, nan, 2, 2, 2]), return_inverse=True, return_counts=True)
  const UniqueResult r = unique_consecutive(f64({6}, {1, kNaN, kNaN, 2, 2, 2}), true, true);
  const std::vector<double> v = values(r.values);
  ASSERT_EQ(v.size(), 4u);
  EXPECT_EQ(v[0], 1);
  EXPECT_TRUE(std::isnan(v[1]) && std::isnan(v[2]));
  EXPECT_EQ(v[3], 2);
  EXPECT_EQ(ints(r.inverse), (I{0, 1, 2, 3, 3, 3}));
  EXPECT_EQ(ints(r.counts), (I{1, 1, 1, 3}));
  // Rows holding a NaN never equal each other.
  const Tensor m = f64({3, 2}, {1, kNaN, 1, kNaN, 2, 3});
  const UniqueResult rows = unique_consecutive(m, true, true, 0);
  EXPECT_EQ(rows.values.shape(), (Shape{3, 2}));
  EXPECT_EQ(ints(rows.inverse), (I{0, 1, 2}));
  EXPECT_EQ(ints(rows.counts), (I{1, 1, 1}));
}

TEST(UniqueConsecutive, IntegerAndBoolKeepTheirDtype) {
  const UniqueResult r = unique_consecutive(i64({2, 3}, {1, 1, 2, 3, 3, 4}), true, true, 1);
  EXPECT_EQ(r.values.dtype(), kInt64);
  EXPECT_EQ(r.values.shape(), (Shape{2, 2}));
  EXPECT_EQ(ints(r.values), (I{1, 2, 3, 4}));
  EXPECT_EQ(ints(r.inverse), (I{0, 0, 1}));
  EXPECT_EQ(ints(r.counts), (I{2, 1}));
  const Tensor flags = ne(f64({3}, {1, 1, 0}), 0.0);
  const UniqueResult b = unique_consecutive(flags);
  EXPECT_EQ(b.values.dtype(), kBool);
  EXPECT_EQ(ints(b.values), (I{1, 0}));
  EXPECT_FALSE(b.inverse.defined());
  EXPECT_FALSE(b.counts.defined());
}

TEST(UniqueConsecutive, ShapesOfEmptyAnd0dInputs) {
  const UniqueResult flat = unique_consecutive(f64({0, 3}, {}), true, true);
  EXPECT_EQ(flat.values.shape(), (Shape{0}));
  EXPECT_EQ(flat.inverse.shape(), (Shape{0, 3}));
  EXPECT_EQ(flat.counts.shape(), (Shape{0}));
  const UniqueResult along = unique_consecutive(f64({3, 0}, {}), true, true, 1);
  EXPECT_EQ(along.values.shape(), (Shape{3, 0}));
  EXPECT_EQ(along.inverse.shape(), (Shape{0}));
  EXPECT_EQ(along.counts.shape(), (Shape{0}));
  const UniqueResult scalar = unique_consecutive(f64({}, {5}), true, true);
  EXPECT_EQ(scalar.values.shape(), (Shape{1}));
  EXPECT_EQ(scalar.inverse.shape(), (Shape{}));
  EXPECT_EQ(ints(scalar.counts), (I{1}));
}

TEST(UniqueConsecutive, NoGradient) {
  const Tensor x = f64({3}, {1, 1, 2}).requires_grad_();
  EXPECT_FALSE(unique_consecutive(x).values.requires_grad());
}

TEST(UniqueConsecutive, BadDims) {
  expect_error<IndexError>([] { unique_consecutive(f64({}, {5}), false, false, 0); }, "unique_consecutive",
                           {"0-d"});
  expect_error<IndexError>([] { unique_consecutive(f64({2}, {1, 2}), false, false, 2); }, "unique_consecutive",
                           {"dimension 2"});
  // PyTorch 1.13 too: slices with no elements, along a dim that is not empty itself.
  expect_error<ShapeError>([] { unique_consecutive(f64({3, 0}, {}), false, false, 0); }, "unique_consecutive",
                           {"[3, 0]"});
}

}  // namespace
}  // namespace infini::test::unique_consecutive_test
