// MaxPool1d/2d, AvgPool1d/2d/3d, AdaptiveAvgPool1d/2d and AdaptiveMaxPool2d against window
// loops in float64 (padding, dilation, ceil_mode, count_include_pad, divisor_override),
// input gradients by gradcheck, clone, printing and errors naming the layer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "layer_test_util.h"

import infini.nn;

namespace infini::nn::pooling_layer_test {
namespace {

using test::expect_error;
using test::expect_all_near;
using test::make;
using test::sample;
using test::values;


// One spatial dim of a pooling window: size in, kernel, stride, padding, dilation.
struct Dim {
  std::int64_t in, kernel, stride, padding = 0, dilation = 1;
  // PyTorch's output size: floor (or ceil) of the window count; with ceil_mode the last
  // window must start inside the input or the left padding.
  std::int64_t out(bool ceil_mode) const {
    const std::int64_t span = in + 2 * padding - dilation * (kernel - 1) - 1;
    std::int64_t n = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
    if (ceil_mode && (n - 1) * stride >= in + padding) --n;
    return n;
  }
};

// n distinct values 0.1 apart, in a scrambled order (so every window max is unique).
std::vector<double> distinct(std::int64_t n) {
  std::vector<double> v;
  for (std::int64_t i = 0; i < n; ++i) v.push_back(0.1 * static_cast<double>((i * 37 + 11) % n) - 0.05 * n);
  return v;
}

struct MaxResult {
  std::vector<double> values;
  std::vector<double> indices;  // ih * W + iw of each max
};

// (planes, H, W) -> (planes, oH, oW): the max of each window, -inf padding never winning,
// the first maximal element (row-major) giving the index.
MaxResult max_pool_reference(const std::vector<double>& x, std::int64_t planes, const Dim& h, const Dim& w,
                             bool ceil_mode) {
  MaxResult r;
  for (std::int64_t p = 0; p < planes; ++p)
    for (std::int64_t oy = 0; oy < h.out(ceil_mode); ++oy)
      for (std::int64_t ox = 0; ox < w.out(ceil_mode); ++ox) {
        double best = -std::numeric_limits<double>::infinity();
        std::int64_t at = -1;
        for (std::int64_t ky = 0; ky < h.kernel; ++ky)
          for (std::int64_t kx = 0; kx < w.kernel; ++kx) {
            const std::int64_t iy = oy * h.stride - h.padding + ky * h.dilation;
            const std::int64_t ix = ox * w.stride - w.padding + kx * w.dilation;
            if (iy < 0 || iy >= h.in || ix < 0 || ix >= w.in) continue;
            const double v = x[(p * h.in + iy) * w.in + ix];
            if (v > best) {
              best = v;
              at = iy * w.in + ix;
            }
          }
        r.values.push_back(best);
        r.indices.push_back(static_cast<double>(at));
      }
  return r;
}

// (planes, D, H, W) -> (planes, oD, oH, oW): window sums divided by PyTorch's divisor: the
// window clipped to the padded input (count_include_pad) or to the input, or the override.
std::vector<double> avg_pool_reference(const std::vector<double>& x, std::int64_t planes, const Dim& d, const Dim& h,
                                       const Dim& w, bool ceil_mode, bool count_include_pad,
                                       std::optional<std::int64_t> divisor_override = {}) {
  std::vector<double> y;
  const auto range = [&](const Dim& dim, std::int64_t o, std::int64_t& lo, std::int64_t& hi, std::int64_t& padded) {
    const std::int64_t start = o * dim.stride - dim.padding;
    const std::int64_t end = std::min(start + dim.kernel, dim.in + dim.padding);
    padded = end - start;
    lo = std::max<std::int64_t>(start, 0);
    hi = std::min(end, dim.in);
  };
  for (std::int64_t p = 0; p < planes; ++p)
    for (std::int64_t oz = 0; oz < d.out(ceil_mode); ++oz)
      for (std::int64_t oy = 0; oy < h.out(ceil_mode); ++oy)
        for (std::int64_t ox = 0; ox < w.out(ceil_mode); ++ox) {
          std::int64_t z0, z1, pz, y0, y1, py, x0, x1, px;
          range(d, oz, z0, z1, pz);
          range(h, oy, y0, y1, py);
          range(w, ox, x0, x1, px);
          double total = 0;
          for (std::int64_t iz = z0; iz < z1; ++iz)
            for (std::int64_t iy = y0; iy < y1; ++iy)
              for (std::int64_t ix = x0; ix < x1; ++ix) total += x[((p * d.in + iz) * h.in + iy) * w.in + ix];
          const std::int64_t divisor = divisor_override ? *divisor_override
                                       : count_include_pad ? pz * py * px
                                                           : (z1 - z0) * (y1 - y0) * (x1 - x0);
          y.push_back(total / static_cast<double>(divisor));
        }
  return y;
}

const Dim kFlat{.in = 1, .kernel = 1, .stride = 1};  // the depth of a 2-d pooling problem

TEST(MaxPool2dLayer, MatchesWindowMaxAndIndices) {
  const Dim h{.in = 8, .kernel = 3, .stride = 2, .padding = 1, .dilation = 2};
  const Dim w{.in = 8, .kernel = 2, .stride = 3, .padding = 1};
  EXPECT_EQ(h.out(true), h.out(false) + 1);  // ceil_mode adds a window along H ...
  EXPECT_EQ(w.out(true), w.out(false));      // ... not along W, where it would start in the padding
  const std::vector<double> x = distinct(2 * 3 * 8 * 8);
  for (bool ceil_mode : {false, true}) {
    MaxPool2d pool({3, 2}, {.stride = {2, 3}, .padding = 1, .dilation = {2, 1}, .ceil_mode = ceil_mode});
    const MaxResult expected = max_pool_reference(x, 6, h, w, ceil_mode);
    const Shape shape{2, 3, h.out(ceil_mode), w.out(ceil_mode)};
    expect_all_near(pool(make({2, 3, 8, 8}, x)), shape, expected.values, 0);
    const MaxPoolResult r = pool->forward_with_indices(make({2, 3, 8, 8}, x));
    EXPECT_EQ(r.indices.dtype(), kInt64);
    expect_all_near(r.values, shape, expected.values, 0);
    expect_all_near(r.indices, shape, expected.indices, 0);
  }
}

TEST(MaxPool2dLayer, StrideDefaultsToKernelAndUnbatchedInput) {
  MaxPool2d pool(2);
  EXPECT_EQ(pool->stride, (std::vector<std::int64_t>{2, 2}));
  const std::vector<double> x = distinct(2 * 5 * 4);
  const Dim h{.in = 5, .kernel = 2, .stride = 2}, w{.in = 4, .kernel = 2, .stride = 2};
  expect_all_near(pool(make({2, 5, 4}, x)), {2, 2, 2}, max_pool_reference(x, 2, h, w, false).values, 0);
  // Integers pool too.
  EXPECT_EQ(values(pool(make({1, 2, 2}, {1, 7, 3, 5}).to(kInt64))), (std::vector<double>{7}));
}

TEST(MaxPool2dLayer, InputGradientPassesGradcheck) {
  MaxPool2d pool(3, {.stride = 2, .padding = 1});
  const Tensor x = make({1, 2, 5, 5}, distinct(50)).requires_grad_();
  test::expect_gradcheck([&](const TensorList&) { return TensorList{pool(x)}; }, {x});
}

TEST(AvgPool2dLayer, MatchesWindowMeans) {
  const std::vector<double> x = sample({2, 2, 6, 7}, 21);
  const Dim h{.in = 6, .kernel = 3, .stride = 2, .padding = 1}, w{.in = 7, .kernel = 2, .stride = 2, .padding = 1};
  for (bool ceil_mode : {false, true})
    for (bool include_pad : {true, false}) {
      AvgPool2d pool({3, 2}, {.stride = 2, .padding = 1, .ceil_mode = ceil_mode, .count_include_pad = include_pad});
      expect_all_near(pool(make({2, 2, 6, 7}, x)), {2, 2, h.out(ceil_mode), w.out(ceil_mode)},
                      avg_pool_reference(x, 4, kFlat, h, w, ceil_mode, include_pad), 1e-12);
    }
  AvgPool2d overridden(2, {.padding = 1, .divisor_override = 3});
  const Dim h2{.in = 6, .kernel = 2, .stride = 2, .padding = 1}, w2{.in = 7, .kernel = 2, .stride = 2, .padding = 1};
  expect_all_near(overridden(make({2, 2, 6, 7}, x)), {2, 2, 4, 4},
                  avg_pool_reference(x, 4, kFlat, h2, w2, false, true, 3), 1e-12);
}

TEST(AvgPool3dLayer, MatchesWindowMeans) {
  const std::vector<double> x = sample({1, 2, 5, 4, 6}, 22);
  const Dim d{.in = 5, .kernel = 2, .stride = 2, .padding = 1};
  const Dim h{.in = 4, .kernel = 3, .stride = 1, .padding = 1};
  const Dim w{.in = 6, .kernel = 2, .stride = 3};
  for (bool include_pad : {true, false}) {
    AvgPool3d pool({2, 3, 2}, {.stride = {2, 1, 3}, .padding = {1, 1, 0}, .ceil_mode = true,
                               .count_include_pad = include_pad});
    expect_all_near(pool(make({1, 2, 5, 4, 6}, x)), {1, 2, d.out(true), h.out(true), w.out(true)},
                    avg_pool_reference(x, 2, d, h, w, true, include_pad), 1e-12);
  }
  // Unbatched (C, D, H, W).
  AvgPool3d cube(2);
  const Dim c{.in = 4, .kernel = 2, .stride = 2};
  const std::vector<double> x4 = sample({3, 4, 4, 4}, 23);
  expect_all_near(cube(make({3, 4, 4, 4}, x4)), {3, 2, 2, 2}, avg_pool_reference(x4, 3, c, c, c, false, true), 1e-12);
}

TEST(AdaptiveAvgPool2dLayer, AveragesFloorToCeilRanges) {
  const std::vector<double> x = sample({1, 2, 7, 5}, 24);
  AdaptiveAvgPool2d pool({3, 2});
  std::vector<double> expected;
  for (std::int64_t p = 0; p < 2; ++p)
    for (std::int64_t i = 0; i < 3; ++i)
      for (std::int64_t j = 0; j < 2; ++j) {
        const std::int64_t r0 = i * 7 / 3, r1 = ((i + 1) * 7 + 2) / 3, c0 = j * 5 / 2, c1 = ((j + 1) * 5 + 1) / 2;
        double total = 0;
        for (std::int64_t r = r0; r < r1; ++r)
          for (std::int64_t c = c0; c < c1; ++c) total += x[(p * 7 + r) * 5 + c];
        expected.push_back(total / static_cast<double>((r1 - r0) * (c1 - c0)));
      }
  expect_all_near(pool(make({1, 2, 7, 5}, x)), {1, 2, 3, 2}, expected, 1e-12);
  expect_all_near(pool(make({2, 7, 5}, x)), {2, 3, 2}, expected, 1e-12);
  expect_all_near(AdaptiveAvgPool2d(1)(make({1, 1, 2, 2}, {1, 2, 3, 6})), {1, 1, 1, 1}, {3.0}, 1e-12);
}

TEST(MaxPool1dLayer, MatchesWindowMaxAndIndices) {
  const Dim l{.in = 10, .kernel = 3, .stride = 2, .padding = 1, .dilation = 2};
  EXPECT_EQ(l.out(true), l.out(false) + 1);  // ceil_mode adds a window
  const std::vector<double> x = distinct(2 * 3 * 10);
  for (bool ceil_mode : {false, true}) {
    MaxPool1d pool(3, {.stride = 2, .padding = 1, .dilation = 2, .ceil_mode = ceil_mode});
    const MaxResult expected = max_pool_reference(x, 6, kFlat, l, ceil_mode);
    const Shape shape{2, 3, l.out(ceil_mode)};
    expect_all_near(pool(make({2, 3, 10}, x)), shape, expected.values, 0);
    const MaxPoolResult r = pool->forward_with_indices(make({2, 3, 10}, x));
    EXPECT_EQ(r.indices.dtype(), kInt64);
    expect_all_near(r.indices, shape, expected.indices, 0);
  }
  // Unbatched (C, L), stride defaulting to kernel_size.
  MaxPool1d pair(2);
  EXPECT_EQ(pair->stride, (std::vector<std::int64_t>{2}));
  expect_all_near(pair(make({2, 4}, {1, 7, 3, 5, 8, 2, 6, 4})), {2, 2}, {7, 5, 8, 6}, 0);
}

TEST(AvgPool1dLayer, MatchesWindowMeans) {
  const std::vector<double> x = sample({2, 2, 7}, 27);
  const Dim l{.in = 7, .kernel = 3, .stride = 2, .padding = 1};
  for (bool ceil_mode : {false, true})
    for (bool include_pad : {true, false}) {
      AvgPool1d pool(3, {.stride = 2, .padding = 1, .ceil_mode = ceil_mode, .count_include_pad = include_pad});
      expect_all_near(pool(make({2, 2, 7}, x)), {2, 2, l.out(ceil_mode)},
                      avg_pool_reference(x, 4, kFlat, kFlat, l, ceil_mode, include_pad), 1e-12);
    }
  expect_all_near(AvgPool1d(2)(make({1, 4}, {1, 2, 3, 6})), {1, 2}, {1.5, 4.5}, 1e-15);
}

TEST(AdaptiveAvgPool1dLayer, AveragesFloorToCeilRanges) {
  // 5 -> 3: windows [0, 2), [1, 4), [3, 5).
  AdaptiveAvgPool1d pool(3);
  expect_all_near(pool(make({1, 1, 5}, {1, 2, 3, 4, 5})), {1, 1, 3}, {1.5, 3, 4.5}, 1e-15);
  expect_all_near(pool(make({2, 2}, {2, 6, 1, 3})), {2, 3}, {2, 4, 6, 1, 2, 3}, 1e-15);
}

TEST(AdaptiveMaxPool2dLayer, MaxOfFloorToCeilRanges) {
  const std::vector<double> x = distinct(2 * 7 * 5);
  AdaptiveMaxPool2d pool({3, 2});
  std::vector<double> expected, positions;
  for (std::int64_t p = 0; p < 2; ++p)
    for (std::int64_t i = 0; i < 3; ++i)
      for (std::int64_t j = 0; j < 2; ++j) {
        const std::int64_t r0 = i * 7 / 3, r1 = ((i + 1) * 7 + 2) / 3, c0 = j * 5 / 2, c1 = ((j + 1) * 5 + 1) / 2;
        double best = -std::numeric_limits<double>::infinity();
        std::int64_t at = -1;
        for (std::int64_t r = r0; r < r1; ++r)
          for (std::int64_t c = c0; c < c1; ++c)
            if (x[(p * 7 + r) * 5 + c] > best) best = x[(p * 7 + r) * 5 + c], at = r * 5 + c;
        expected.push_back(best);
        positions.push_back(static_cast<double>(at));
      }
  expect_all_near(pool(make({1, 2, 7, 5}, x)), {1, 2, 3, 2}, expected, 0);
  const MaxPoolResult r = pool->forward_with_indices(make({2, 7, 5}, x));
  expect_all_near(r.values, {2, 3, 2}, expected, 0);
  expect_all_near(r.indices, {2, 3, 2}, positions, 0);
}

TEST(PoolingLayers, InputGradientsPassGradcheck) {
  AvgPool2d avg(2, {.stride = 1, .padding = 1, .count_include_pad = false});
  AdaptiveAvgPool2d adaptive({2, 3});
  AvgPool3d avg3(2, {.ceil_mode = true});
  AdaptiveMaxPool2d adaptive_max({2, 3});
  const Tensor x = make({1, 2, 3, 4}, distinct(24)).requires_grad_();
  test::expect_gradcheck([&](const TensorList&) { return TensorList{avg(x), adaptive(x), adaptive_max(x)}; }, {x});
  MaxPool1d max1(3, {.stride = 2, .padding = 1});
  AvgPool1d avg1(3, {.stride = 2, .padding = 1, .ceil_mode = true, .count_include_pad = false});
  AdaptiveAvgPool1d adaptive1(4);
  const Tensor x1 = make({2, 2, 6}, distinct(24)).requires_grad_();
  test::expect_gradcheck([&](const TensorList&) { return TensorList{max1(x1), avg1(x1), adaptive1(x1)}; }, {x1});
  const Tensor x3 = make({1, 1, 3, 2, 3}, sample({1, 1, 3, 2, 3}, 26)).requires_grad_();
  test::expect_gradcheck([&](const TensorList&) { return TensorList{avg3(x3)}; }, {x3});
}

TEST(PoolingLayers, NoParametersCloneAndPrint) {
  MaxPool2d pool({3, 2}, {.padding = 1, .ceil_mode = true});
  EXPECT_TRUE(pool->parameters().empty());
  EXPECT_TRUE(pool->state_dict().empty());
  auto copy = std::dynamic_pointer_cast<MaxPool2dImpl>(pool->clone());
  ASSERT_TRUE(copy);
  EXPECT_EQ(copy->kernel_size, (std::vector<std::int64_t>{3, 2}));
  EXPECT_TRUE(copy->ceil_mode);
  EXPECT_EQ(pool->str(), "MaxPool2d(kernel_size=(3, 2), stride=(3, 2), padding=1, dilation=1, ceil_mode=true)");
  EXPECT_EQ(AvgPool2d(2)->str(), "AvgPool2d(kernel_size=2, stride=2, padding=0)");
  EXPECT_EQ(AvgPool3d(2, {.stride = 1, .count_include_pad = false, .divisor_override = 4})->str(),
            "AvgPool3d(kernel_size=2, stride=1, padding=0, count_include_pad=false, divisor_override=4)");
  EXPECT_EQ(AdaptiveAvgPool2d({5, 7})->str(), "AdaptiveAvgPool2d(output_size=(5, 7))");
  auto avg = std::dynamic_pointer_cast<AvgPool3dImpl>(AvgPool3d(2, {.divisor_override = 2})->clone());
  ASSERT_TRUE(avg);
  EXPECT_EQ(avg->divisor_override, 2);
  Sequential net(MaxPool2d(2), AdaptiveAvgPool2d(1));
  EXPECT_EQ(net(ones({1, 3, 4, 4})).shape(), (Shape{1, 3, 1, 1}));
  EXPECT_EQ(MaxPool1d(3, {.stride = 1, .padding = 1})->str(),
            "MaxPool1d(kernel_size=3, stride=1, padding=1, dilation=1, ceil_mode=false)");
  EXPECT_EQ(AvgPool1d(4, {.ceil_mode = true, .count_include_pad = false})->str(),
            "AvgPool1d(kernel_size=4, stride=4, padding=0, ceil_mode=true, count_include_pad=false)");
  EXPECT_EQ(AdaptiveAvgPool1d(5)->str(), "AdaptiveAvgPool1d(output_size=5)");
  EXPECT_EQ(AdaptiveMaxPool2d({5, 7})->str(), "AdaptiveMaxPool2d(output_size=(5, 7))");
  auto max1 = std::dynamic_pointer_cast<MaxPool1dImpl>(MaxPool1d(2, {.dilation = 2})->clone());
  ASSERT_TRUE(max1);
  EXPECT_EQ(max1->dilation, (std::vector<std::int64_t>{2}));
  auto adaptive_max = std::dynamic_pointer_cast<AdaptiveMaxPool2dImpl>(AdaptiveMaxPool2d(3)->clone());
  ASSERT_TRUE(adaptive_max);
  EXPECT_EQ(adaptive_max->output_size, (std::vector<std::int64_t>{3, 3}));
  EXPECT_TRUE(AdaptiveMaxPool2d(3)->parameters().empty());
  Sequential net1(MaxPool1d(2), AvgPool1d(2), AdaptiveAvgPool1d(1));
  EXPECT_EQ(net1(ones({2, 3, 8})).shape(), (Shape{2, 3, 1}));
}

TEST(PoolingLayers, BadOptionsNameTheLayer) {
  expect_error<ShapeError>([] { MaxPool2d(0); }, "MaxPool2d", "kernel_size must be >= 1");
  expect_error<ShapeError>([] { MaxPool2d(2, {.stride = {1, 0}}); }, "MaxPool2d", "stride");
  expect_error<ShapeError>([] { MaxPool2d(3, {.padding = 2}); }, "MaxPool2d", "at most half of kernel_size");
  expect_error<ShapeError>([] { MaxPool2d(3, {.padding = -1}); }, "MaxPool2d", "padding must be >= 0");
  expect_error<ShapeError>([] { MaxPool2d(3, {.dilation = 0}); }, "MaxPool2d", "dilation");
  expect_error<ShapeError>([] { AvgPool2d(2, {.padding = 2}); }, "AvgPool2d", "at most half");
  expect_error<ShapeError>([] { AvgPool3d({2, 2, 0}); }, "AvgPool3d", "kernel_size must be >= 1, got [2, 2, 0]");
  expect_error<ShapeError>([] { AvgPool2d(2, {.divisor_override = 0}); }, "AvgPool2d", "divisor_override");
  expect_error<ShapeError>([] { AdaptiveAvgPool2d({0, 3}); }, "AdaptiveAvgPool2d", "output_size");
  expect_error<ShapeError>([] { MaxPool1d(3, {.padding = 2}); }, "MaxPool1d", "padding [2] must be at most half");
  expect_error<ShapeError>([] { MaxPool1d(0); }, "MaxPool1d", "kernel_size must be >= 1, got [0]");
  expect_error<ShapeError>([] { AvgPool1d(2, {.stride = 0}); }, "AvgPool1d", "stride must be >= 1, got [0]");
  expect_error<ShapeError>([] { AdaptiveAvgPool1d(0); }, "AdaptiveAvgPool1d", "output_size");
  expect_error<ShapeError>([] { AdaptiveMaxPool2d({2, -1}); }, "AdaptiveMaxPool2d", "output_size");
}

TEST(PoolingLayers, BadInputsNameTheLayer) {
  MaxPool2d max(3);
  expect_error<ShapeError>([&] { max(zeros({4, 4})); }, "MaxPool2d", "max_pool2d");
  expect_error<ShapeError>([&] { max(zeros({1, 1, 2, 5})); }, "MaxPool2d", "too small");
  expect_error<DTypeError>([&] { max(zeros({1, 3, 3}, {.dtype = kBool})); }, "MaxPool2d", "bool");
  expect_error<ShapeError>([&] { max->forward_with_indices(zeros({2})); }, "MaxPool2d", "max_pool2d_with_indices");
  AvgPool2d avg(2);
  expect_error<DTypeError>([&] { avg(zeros({1, 4, 4}, {.dtype = kInt64})); }, "AvgPool2d", "floating-point");
  expect_error<ShapeError>([&] { AvgPool3d(2)(zeros({2, 4, 4})); }, "AvgPool3d", "avg_pool3d");
  expect_error<ShapeError>([&] { AdaptiveAvgPool2d(2)(zeros({1, 0, 4, 4})); }, "AdaptiveAvgPool2d", "non-empty");
  MaxPool1d max1(3);
  expect_error<ShapeError>([&] { max1(zeros({1, 2, 3, 3})); }, "MaxPool1d", "max_pool1d");
  expect_error<ShapeError>([&] { max1->forward_with_indices(zeros({2, 2})); }, "MaxPool1d",
                           "max_pool1d_with_indices");
  expect_error<DTypeError>([&] { AvgPool1d(2)(zeros({1, 4}, {.dtype = kInt32})); }, "AvgPool1d", "avg_pool1d");
  expect_error<ShapeError>([&] { AdaptiveAvgPool1d(2)(zeros({4})); }, "AdaptiveAvgPool1d", "adaptive_avg_pool1d");
  AdaptiveMaxPool2d adaptive_max(2);
  expect_error<DTypeError>([&] { adaptive_max(zeros({1, 3, 3}, {.dtype = kBool})); }, "AdaptiveMaxPool2d", "bool");
  expect_error<ShapeError>([&] { adaptive_max->forward_with_indices(zeros({3, 3})); }, "AdaptiveMaxPool2d",
                           "adaptive_max_pool2d_with_indices");
}

}  // namespace
}  // namespace infini::nn::pooling_layer_test
