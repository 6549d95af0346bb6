// Op table entries for max_pool1d(_with_indices) and avg_pool1d against naive float64 loops
// over each window (PyTorch's output size with its ceil_mode rule and its divisors); plus
// closed-form values, indices, ties, NaN, integers, half precision and errors that name the
// 1-d op with its 1-d arguments.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "op_info.h"
#include "spatial_test_util.h"

namespace infini::test::pool1d_ops_test {
namespace {

struct Pool1dArgs {
  std::int64_t kernel, stride, padding = 0, dilation = 1;
  bool ceil = false;
  bool count_include_pad = true;  // avg_pool1d only
};

std::int64_t out_of(const Tensor& x, const Pool1dArgs& a) {
  return pool_out(x.size(2), a.kernel, a.stride, a.padding, a.dilation, a.ceil);
}

// x (N, C, L): the value and position (as float64) of the first maximum of each window's
// elements inside the input, NaN counting as the maximum.
TensorList max_pool1d_loops(const Tensor& x, const Pool1dArgs& a) {
  const std::int64_t planes = x.size(0) * x.size(1), l = x.size(2), out = out_of(x, a);
  const std::vector<double> xv = values(x);
  std::vector<double> y, idx;
  for (std::int64_t b = 0; b < planes; ++b)
    for (std::int64_t o = 0; o < out; ++o) {
      double best = 0;
      std::int64_t at = -1;
      for (std::int64_t k = 0; k < a.kernel; ++k) {
        const std::int64_t i = o * a.stride - a.padding + k * a.dilation;
        if (i < 0 || i >= l) continue;
        const double v = xv[b * l + i];
        if (at < 0 || v > best || (std::isnan(v) && !std::isnan(best))) best = v, at = i;
      }
      y.push_back(best);
      idx.push_back(static_cast<double>(at));
    }
  const Shape ys{x.size(0), x.size(1), out};
  return {make(ys, y), make(ys, idx)};
}

// x (N, C, L): each window's sum over the input divided by its size clipped to the padded
// input (count_include_pad) or to the input.
Tensor avg_pool1d_loops(const Tensor& x, const Pool1dArgs& a) {
  const std::int64_t planes = x.size(0) * x.size(1), l = x.size(2), out = out_of(x, a);
  const std::vector<double> xv = values(x);
  std::vector<double> y;
  for (std::int64_t b = 0; b < planes; ++b)
    for (std::int64_t o = 0; o < out; ++o) {
      const std::int64_t start = o * a.stride - a.padding, end = std::min(start + a.kernel, l + a.padding);
      const std::int64_t lo = std::max<std::int64_t>(start, 0), hi = std::min(end, l);
      double sum = 0;
      for (std::int64_t i = lo; i < hi; ++i) sum += xv[b * l + i];
      y.push_back(sum / static_cast<double>(a.count_include_pad ? end - start : hi - lo));
    }
  return make({x.size(0), x.size(1), out}, y);
}

void add_max_pool1d(const Pool1dArgs& a, std::function<std::vector<OpSample>()> samples) {
  auto reference = [a](const TensorList& in) {
    TensorList out = max_pool1d_loops(batch_of(in[0].detach(), 1), a);
    for (Tensor& t : out) t = unbatch_like(t, in[0], 1);
    return out;
  };
  op_registry().push_back({.name = "max_pool1d",
                           .fn = [a](const TensorList& in) {
                             return TensorList{max_pool1d(in[0], a.kernel, a.stride, a.padding, a.dilation, a.ceil)};
                           },
                           .reference = [reference](const TensorList& in) { return TensorList{reference(in)[0]}; },
                           .samples = samples});
  op_registry().push_back({.name = "max_pool1d_with_indices",
                           .fn = [a](const TensorList& in) {
                             auto [values, indices] =
                                 max_pool1d_with_indices(in[0], a.kernel, a.stride, a.padding, a.dilation, a.ceil);
                             return TensorList{values, indices};
                           },
                           .reference = reference,
                           .samples = samples});
}

void add_avg_pool1d(const Pool1dArgs& a, std::function<std::vector<OpSample>()> samples) {
  op_registry().push_back(
      {.name = "avg_pool1d",
       .fn = [a](const TensorList& in) {
         return TensorList{avg_pool1d(in[0], a.kernel, a.stride, a.padding, a.ceil, a.count_include_pad)};
       },
       .reference = [a](const TensorList& in) {
         return TensorList{unbatch_like(avg_pool1d_loops(batch_of(in[0].detach(), 1), a), in[0], 1)};
       },
       .samples = std::move(samples)});
}

const bool registered = [] {
  add_max_pool1d({.kernel = 2, .stride = 2}, [] {
    return std::vector<OpSample>{
        distinct("kernel 2, batch of 2", {2, 2, 6}, 1),
        distinct("transposed, last element unused", {1, 5, 2}, 2, channels_last_1d),
        distinct("unbatched (C, L)", {2, 6}, 3),
        distinct("zero-size batch", {0, 2, 4}, 4),
    };
  });
  add_max_pool1d({.kernel = 3, .stride = 2, .padding = 1}, [] {
    return std::vector<OpSample>{distinct("kernel 3, stride 2, padding 1", {1, 2, 7}, 11)};
  });
  add_max_pool1d({.kernel = 2, .stride = 1, .dilation = 2}, [] {
    return std::vector<OpSample>{distinct("dilation 2", {1, 2, 6}, 21)};
  });
  add_max_pool1d({.kernel = 2, .stride = 2, .ceil = true}, [] {
    return std::vector<OpSample>{distinct("ceil_mode, partial last window", {1, 2, 5}, 31)};
  });
  add_max_pool1d({.kernel = 2, .stride = 2, .padding = 1, .ceil = true}, [] {
    return std::vector<OpSample>{distinct("ceil_mode drops a window starting in the right padding", {1, 1, 5}, 41),
                                 distinct("ceil_mode keeps one ending in it", {1, 2, 6}, 42)};
  });
  add_max_pool1d({.kernel = 3, .stride = 3, .padding = 1, .dilation = 2, .ceil = true}, [] {
    return std::vector<OpSample>{distinct("ceil_mode window past the right padding", {1, 1, 7}, 51)};
  });

  add_avg_pool1d({.kernel = 2, .stride = 2}, [] {
    return std::vector<OpSample>{
        random("kernel 2, batch of 2", {2, 2, 6}, 1),
        random("transposed input", {1, 6, 2}, 2, channels_last_1d),
        random("expanded input", {1, 1, 6}, 3, [](const TensorList& l) { return TensorList{l[0].expand({2, 3, 6})}; }),
        random("unbatched (C, L)", {2, 5}, 4),
        random("zero-size batch", {0, 2, 4}, 5),
    };
  });
  add_avg_pool1d({.kernel = 3, .stride = 2, .padding = 1}, [] {
    return std::vector<OpSample>{random("kernel 3, stride 2, padding 1, count_include_pad", {1, 2, 6}, 11)};
  });
  add_avg_pool1d({.kernel = 3, .stride = 2, .padding = 1, .count_include_pad = false}, [] {
    return std::vector<OpSample>{random("kernel 3, stride 2, padding 1, without pad", {1, 2, 6}, 21)};
  });
  add_avg_pool1d({.kernel = 3, .stride = 2, .padding = 1, .ceil = true}, [] {
    return std::vector<OpSample>{random("ceil_mode, count_include_pad", {1, 1, 6}, 31)};
  });
  add_avg_pool1d({.kernel = 4, .stride = 3, .padding = 2, .ceil = true, .count_include_pad = false}, [] {
    return std::vector<OpSample>{random("kernel 4, stride 3, padding 2, ceil_mode, without pad", {1, 2, 7}, 41)};
  });
  return true;
}();

// ---- values vs PyTorch ----

TEST(Pool1d, AvgPoolClosedForms) {
  const Tensor x = make({1, 1, 4}, {1, 2, 3, 4});
  // Windows [-1, 2), [0, 3), [1, 4), [2, 5): sums 3, 6, 9, 7.
  EXPECT_EQ(values(avg_pool1d(x, 3, 1, 1)), (std::vector<double>{1, 2, 3, 7.0 / 3}));
  EXPECT_EQ(values(avg_pool1d(x, 3, 1, 1, false, false)), (std::vector<double>{1.5, 2, 3, 3.5}));
  // ceil_mode adds the window [3, 5): clipped to the padded input [-1, 5) it is 2 wide.
  EXPECT_EQ(values(avg_pool1d(x, 3, 2, 1, true)), (std::vector<double>{1, 3, 2}));
  EXPECT_EQ(values(avg_pool1d(x, 3, 2, 1, true, false)), (std::vector<double>{1.5, 3, 4}));
  // Unbatched (C, L), stride defaulting to kernel_size.
  const Tensor y = avg_pool1d(make({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}), 2);
  EXPECT_EQ(y.shape(), (Shape{2, 2}));
  EXPECT_EQ(values(y), (std::vector<double>{1.5, 3.5, 5.5, 7.5}));
}

TEST(Pool1d, MaxPoolIndicesAreColumnsAndTiesGoToTheFirst) {
  const Tensor x = make({1, 1, 7}, {4, 1, 4, 4, 2, 7, 7}).requires_grad_();
  auto [values, indices] = max_pool1d_with_indices(x, 3, 2, 1);
  EXPECT_EQ(indices.dtype(), kInt64);
  EXPECT_EQ(test::values(values), (std::vector<double>{4, 4, 7, 7}));
  EXPECT_EQ(test::values(indices), (std::vector<double>{0, 2, 5, 5}));
  sum(values).backward();
  EXPECT_EQ(test::values(x.grad()), (std::vector<double>{1, 0, 1, 0, 0, 2, 0}));
}

// The second window holds two NaNs: its index is the first one's (PyTorch's CPU kernel
// reports the last; a documented difference).
TEST(Pool1d, MaxPoolPropagatesNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto [values, indices] = max_pool1d_with_indices(make({1, 6}, {1, nan, 5, 2, nan, nan}), 3);
  const std::vector<double> v = test::values(values);
  EXPECT_TRUE(std::isnan(v[0]) && std::isnan(v[1]));
  EXPECT_EQ(test::values(indices), (std::vector<double>{1, 4}));
}

TEST(Pool1d, MaxPoolOfIntegersNeverPicksThePadding) {
  for (DataType t : {kInt64, kInt32, kInt8, kUInt8}) {
    const std::vector<double> v =
        t == kUInt8 ? std::vector<double>{0, 3, 1, 2, 5} : std::vector<double>{-9, -3, -7, -8, -5};
    const Tensor x = make({1, 1, 5}, v).to(t);
    auto [values, indices] = max_pool1d_with_indices(x, 3, 2, 1);
    EXPECT_EQ(values.dtype(), t);
    const TensorList ref = max_pool1d_loops(make({1, 1, 5}, v), {.kernel = 3, .stride = 2, .padding = 1});
    EXPECT_EQ(test::values(values), test::values(ref[0])) << t;
    EXPECT_EQ(test::values(indices), test::values(ref[1])) << t;
  }
}

TEST(Pool1d, HalfPrecisionAndFloat32) {
  const Tensor x = sample({2, 3, 9});
  for (DataType t : {kFloat32, kFloat16, kBFloat16}) {
    const Tensor xt = x.to(t), x64 = xt.to(kFloat64);
    expect_near_in(max_pool1d(xt, 3, 2, 1), max_pool1d_loops(x64, {.kernel = 3, .stride = 2, .padding = 1})[0], t);
    expect_near_in(
        avg_pool1d(xt, 4, 2, 2, true, false),
        avg_pool1d_loops(x64, {.kernel = 4, .stride = 2, .padding = 2, .ceil = true, .count_include_pad = false}), t);
  }
}

// ---- errors ----

TEST(Pool1d, ErrorsNameThe1dOpAndArguments) {
  const Tensor x = zeros({1, 2, 5});
  expect_error<ShapeError>([&] { max_pool1d(x, 3, 1, 2); }, "max_pool1d", {"padding [2]", "kernel_size [3]"});
  expect_error<ShapeError>([&] { max_pool1d(x, 6); }, "max_pool1d", {"[1, 2, 5]", "kernel_size [6]"});
  expect_error<ShapeError>([&] { max_pool1d(x, 3, 1, 0, 3); }, "max_pool1d", {"[1, 2, 5]", "dilation [3]"});
  expect_error<ShapeError>([&] { max_pool1d(x, 0); }, "max_pool1d", {"kernel_size", "[0]"});
  expect_error<ShapeError>([&] { max_pool1d(x, 2, 0); }, "max_pool1d", {"stride", "[0]"});
  expect_error<ShapeError>([&] { max_pool1d(zeros({5}), 2); }, "max_pool1d", {"2-d (unbatched) or 3-d", "[5]"});
  expect_error<ShapeError>([&] { max_pool1d(zeros({1, 1, 4, 4}), 2); }, "max_pool1d", {"[1, 1, 4, 4]"});
  expect_error<ShapeError>([&] { max_pool1d_with_indices(zeros({1, 0, 4}), 2); }, "max_pool1d_with_indices",
                           {"[1, 0, 4]"});
  expect_error<ShapeError>([&] { max_pool1d(zeros({1, 1, 2}), 2, 1, 1, 3); }, "max_pool1d",
                           {"entirely in the padding", "[1, 1, 2]"});
  expect_error<DTypeError>([&] { max_pool1d(x.to(kBool), 2); }, "max_pool1d", {"bool"});
  expect_error<ShapeError>([&] { avg_pool1d(x, 2, 2, 2); }, "avg_pool1d", {"padding [2]", "kernel_size [2]"});
  expect_error<ShapeError>([&] { avg_pool1d(zeros({1, 2, 3, 5}), 2); }, "avg_pool1d", {"[1, 2, 3, 5]"});
  expect_error<ShapeError>([&] { avg_pool1d(zeros({2, 0}), 1); }, "avg_pool1d", {"[2, 0]"});
  expect_error<DTypeError>([&] { avg_pool1d(x.to(kInt64), 2); }, "avg_pool1d", {"int64"});
}

}  // namespace
}  // namespace infini::test::pool1d_ops_test
