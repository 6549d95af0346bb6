// Op table entries for adaptive_avg_pool1d and adaptive_max_pool2d(_with_indices) against
// naive float64 loops over PyTorch's adaptive windows (input [floor(o in / out),
// ceil((o + 1) in / out)) per dim); plus closed-form values, indices, ties, NaN, integers,
// empty outputs, half precision and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "op_info.h"
#include "spatial_test_util.h"

namespace infini::test::adaptive_pool_ops_test {
namespace {

// The adaptive window [start, end) of output o along a dim of size in, in floating point.
std::int64_t window_start(std::int64_t o, std::int64_t in, std::int64_t out) {
  return static_cast<std::int64_t>(std::floor(static_cast<double>(o * in) / static_cast<double>(out)));
}
std::int64_t window_end(std::int64_t o, std::int64_t in, std::int64_t out) {
  return static_cast<std::int64_t>(std::ceil(static_cast<double>((o + 1) * in) / static_cast<double>(out)));
}

// x (N, C, L) -> (N, C, out): the mean of each window.
Tensor adaptive_avg_pool1d_loops(const Tensor& x, std::int64_t out) {
  const std::int64_t l = x.size(2);
  const std::vector<double> xv = values(x);
  std::vector<double> y;
  for (std::int64_t b = 0; b < x.size(0) * x.size(1); ++b)
    for (std::int64_t o = 0; o < out; ++o) {
      const std::int64_t start = window_start(o, l, out), end = window_end(o, l, out);
      double sum = 0;
      for (std::int64_t i = start; i < end; ++i) sum += xv[b * l + i];
      y.push_back(sum / static_cast<double>(end - start));
    }
  return make({x.size(0), x.size(1), out}, y);
}

// x (N, C, H, W) -> values and positions ih * W + iw (as float64) of the first maximum of
// each window, scanned row-major, NaN counting as the maximum.
TensorList adaptive_max_pool2d_loops(const Tensor& x, std::int64_t oh, std::int64_t ow) {
  const std::int64_t h = x.size(2), w = x.size(3);
  const std::vector<double> xv = values(x);
  std::vector<double> y, idx;
  for (std::int64_t b = 0; b < x.size(0) * x.size(1); ++b)
    for (std::int64_t i = 0; i < oh; ++i)
      for (std::int64_t j = 0; j < ow; ++j) {
        double best = 0;
        std::int64_t at = -1;
        for (std::int64_t r = window_start(i, h, oh); r < window_end(i, h, oh); ++r)
          for (std::int64_t c = window_start(j, w, ow); c < window_end(j, w, ow); ++c) {
            const double v = xv[(b * h + r) * w + c];
            if (at < 0 || v > best || (std::isnan(v) && !std::isnan(best))) best = v, at = r * w + c;
          }
        y.push_back(best);
        idx.push_back(static_cast<double>(at));
      }
  const Shape ys{x.size(0), x.size(1), oh, ow};
  return {make(ys, y), make(ys, idx)};
}

void add_adaptive_avg_pool1d(std::int64_t out, std::function<std::vector<OpSample>()> samples) {
  op_registry().push_back(
      {.name = "adaptive_avg_pool1d",
       .fn = [out](const TensorList& in) { return TensorList{adaptive_avg_pool1d(in[0], out)}; },
       .reference = [out](const TensorList& in) {
         return TensorList{unbatch_like(adaptive_avg_pool1d_loops(batch_of(in[0].detach(), 1), out), in[0], 1)};
       },
       .samples = std::move(samples),
       .gradgrad = true});
}

void add_adaptive_max_pool2d(std::int64_t oh, std::int64_t ow, std::function<std::vector<OpSample>()> samples) {
  auto reference = [oh, ow](const TensorList& in) {
    TensorList out = adaptive_max_pool2d_loops(batch_of(in[0].detach(), 2), oh, ow);
    for (Tensor& t : out) t = unbatch_like(t, in[0], 2);
    return out;
  };
  op_registry().push_back({.name = "adaptive_max_pool2d",
                           .fn = [oh, ow](const TensorList& in) {
                             return TensorList{adaptive_max_pool2d(in[0], {oh, ow})};
                           },
                           .reference = [reference](const TensorList& in) { return TensorList{reference(in)[0]}; },
                           .samples = samples,
                           .gradgrad = true});
  op_registry().push_back({.name = "adaptive_max_pool2d_with_indices",
                           .fn = [oh, ow](const TensorList& in) {
                             auto [values, indices] = adaptive_max_pool2d_with_indices(in[0], {oh, ow});
                             return TensorList{values, indices};
                           },
                           .reference = reference,
                           .samples = samples});
}

const bool registered = [] {
  add_adaptive_avg_pool1d(3, [] {
    return std::vector<OpSample>{
        random("7 -> 3, batch of 2", {2, 2, 7}, 1),
        random("channels-last input", {1, 7, 2}, 2, channels_last_1d),
        random("unbatched (C, L)", {2, 7}, 3),
        random("zero-size batch", {0, 2, 7}, 4),
    };
  });
  add_adaptive_avg_pool1d(5, [] { return std::vector<OpSample>{random("3 -> 5 (upsampling)", {1, 2, 3}, 11)}; });
  add_adaptive_avg_pool1d(1, [] { return std::vector<OpSample>{random("global", {2, 3, 4}, 21)}; });

  add_adaptive_max_pool2d(3, 4, [] {
    return std::vector<OpSample>{
        distinct("5x7 -> 3x4, batch of 2", {2, 2, 5, 7}, 1),
        distinct("channels-last input", {1, 5, 7, 2}, 2, channels_last_2d),
        distinct("unbatched (C, H, W)", {2, 5, 7}, 3),
        distinct("zero-size batch", {0, 2, 5, 7}, 4),
    };
  });
  add_adaptive_max_pool2d(2, 2, [] { return std::vector<OpSample>{distinct("4x4 -> 2x2", {1, 2, 4, 4}, 11)}; });
  add_adaptive_max_pool2d(5, 4, [] {
    return std::vector<OpSample>{distinct("3x3 -> 5x4 (overlapping windows)", {1, 1, 3, 3}, 21)};
  });
  add_adaptive_max_pool2d(1, 1, [] {
    return std::vector<OpSample>{distinct("global", {2, 3, 4, 3}, 31, transposed_hw)};
  });
  return true;
}();

// ---- values vs PyTorch ----

TEST(AdaptivePool, AvgPool1dClosedForms) {
  // 5 -> 3: windows [0, 2), [1, 4), [3, 5).
  EXPECT_EQ(values(adaptive_avg_pool1d(make({1, 1, 5}, {1, 2, 3, 4, 5}), 3)), (std::vector<double>{1.5, 3, 4.5}));
  // 2 -> 3: windows [0, 1), [0, 2), [1, 2).
  EXPECT_EQ(values(adaptive_avg_pool1d(make({1, 2}, {2, 6}), 3)), (std::vector<double>{2, 4, 6}));
  const Tensor empty_out = adaptive_avg_pool1d(zeros({2, 3, 4}), 0);
  EXPECT_EQ(empty_out.shape(), (Shape{2, 3, 0}));
}

TEST(AdaptivePool, MaxPool2dClosedFormsAndTies) {
  // 3x3 -> 2x2: row and column windows [0, 2) and [1, 3).
  const Tensor x = make({1, 1, 3, 3}, {1, 5, 2, 7, 0, 3, 4, 8, 6}).requires_grad_();
  auto [values, indices] = adaptive_max_pool2d_with_indices(x, 2);
  EXPECT_EQ(indices.dtype(), kInt64);
  EXPECT_EQ(test::values(values), (std::vector<double>{7, 5, 8, 8}));
  EXPECT_EQ(test::values(indices), (std::vector<double>{3, 1, 7, 7}));
  sum(values).backward();
  EXPECT_EQ(test::values(x.grad()), (std::vector<double>{0, 1, 0, 1, 0, 0, 0, 2, 0}));
  // Ties: each window of a constant input picks its first (top-left) element.
  const Tensor c = ones({1, 1, 3, 3}, {.dtype = kFloat64}).requires_grad_();
  auto [cv, ci] = adaptive_max_pool2d_with_indices(c, 2);
  EXPECT_EQ(test::values(ci), (std::vector<double>{0, 1, 3, 4}));
  sum(cv).backward();
  EXPECT_EQ(test::values(c.grad()), (std::vector<double>{1, 1, 0, 1, 1, 0, 0, 0, 0}));
  // Output larger than the input, and empty outputs.
  EXPECT_EQ(test::values(adaptive_max_pool2d(make({1, 1, 2}, {3, 9}), {2, 3})),
            (std::vector<double>{3, 9, 9, 3, 9, 9}));
  EXPECT_EQ(adaptive_max_pool2d(zeros({2, 2, 3, 3}), {0, 2}).shape(), (Shape{2, 2, 0, 2}));
}

// The first window holds two NaNs: its index is the first one's (PyTorch's CPU kernel
// reports the last; a documented difference).
TEST(AdaptivePool, MaxPool2dPropagatesNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto [values, indices] = adaptive_max_pool2d_with_indices(make({1, 2, 4}, {1, nan, 5, 2, 3, nan, 0, nan}), {1, 2});
  const std::vector<double> v = test::values(values);
  EXPECT_TRUE(std::isnan(v[0]) && std::isnan(v[1]));
  EXPECT_EQ(test::values(indices), (std::vector<double>{1, 7}));
}

TEST(AdaptivePool, MaxPool2dOfIntegers) {
  const std::vector<double> v{-4, -9, -2, -7, -1, -3, -8, -6, -5, -11, -10, -12};
  for (DataType t : {kInt64, kInt32, kInt8}) {
    auto [values, indices] = adaptive_max_pool2d_with_indices(make({1, 1, 3, 4}, v).to(t), {2, 3});
    EXPECT_EQ(values.dtype(), t);
    const TensorList ref = adaptive_max_pool2d_loops(make({1, 1, 3, 4}, v), 2, 3);
    EXPECT_EQ(test::values(values), test::values(ref[0])) << t;
    EXPECT_EQ(test::values(indices), test::values(ref[1])) << t;
  }
}

TEST(AdaptivePool, HalfPrecisionAndFloat32) {
  const Tensor x = sample({2, 3, 7, 6});
  for (DataType t : {kFloat32, kFloat16, kBFloat16}) {
    const Tensor xt = x.to(t), x64 = xt.to(kFloat64);
    expect_near_in(adaptive_max_pool2d(xt, {3, 4}), adaptive_max_pool2d_loops(x64, 3, 4)[0], t);
    expect_near_in(adaptive_avg_pool1d(xt.flatten(2), 5), adaptive_avg_pool1d_loops(x64.flatten(2), 5), t);
  }
}

// ---- errors ----

TEST(AdaptivePool, Errors) {
  const Tensor x = zeros({1, 2, 5, 5});
  expect_error<ShapeError>([&] { adaptive_max_pool2d(x, {-1, 2}); }, "adaptive_max_pool2d", {"output_size", "[-1, 2]"});
  expect_error<ShapeError>([&] { adaptive_max_pool2d(x, {}); }, "adaptive_max_pool2d", {"output_size"});
  expect_error<ShapeError>([&] { adaptive_max_pool2d(zeros({5, 5}), 2); }, "adaptive_max_pool2d", {"[5, 5]"});
  expect_error<ShapeError>([&] { adaptive_max_pool2d_with_indices(zeros({1, 2, 0, 5}), 2); },
                           "adaptive_max_pool2d_with_indices", {"non-empty", "[1, 2, 0, 5]"});
  expect_error<DTypeError>([&] { adaptive_max_pool2d(x.to(kBool), 2); }, "adaptive_max_pool2d", {"bool"});
  expect_error<ShapeError>([&] { adaptive_avg_pool1d(zeros({1, 2, 5}), -2); }, "adaptive_avg_pool1d",
                           {"output_size", "[-2]"});
  expect_error<ShapeError>([&] { adaptive_avg_pool1d(zeros({1, 2, 5}), {}); }, "adaptive_avg_pool1d", {"output_size"});
  expect_error<ShapeError>([&] { adaptive_avg_pool1d(x, 2); }, "adaptive_avg_pool1d",
                           {"2-d (unbatched) or 3-d", "[1, 2, 5, 5]"});
  expect_error<ShapeError>([&] { adaptive_avg_pool1d(zeros({3, 0}), 2); }, "adaptive_avg_pool1d", {"[3, 0]"});
  expect_error<DTypeError>([&] { adaptive_avg_pool1d(zeros({1, 5}, {.dtype = kInt32}), 2); }, "adaptive_avg_pool1d",
                           {"int32"});
}

}  // namespace
}  // namespace infini::test::adaptive_pool_ops_test
