// Op table entries for conv1d, conv2d and conv_transpose2d against direct float64 sums
// (explicit padding, stride, dilation and group indexing), with gradgradcheck; plus errors,
// dtypes and a larger float32 layer.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "op_info.h"
#include "spatial_test_util.h"

namespace infini::test::conv_ops_test {
namespace {

using Pair = std::array<std::int64_t, 2>;

struct ConvArgs {
  Pair stride{1, 1}, padding{0, 0}, dilation{1, 1};
  std::int64_t groups = 1;
  Pair output_padding{0, 0};  // conv_transpose2d only
};

// ---- references ----

// y (N, O, oH, oW) = sum over c, kh, kw of x[n, g C/G + c, oh s - p + kh d, ...] w[o, c, kh, kw]
// (+ b[o]) with x (N, C, H, W) zero outside, w (O, C/G, kH, kW), g = o / (O/G).
Tensor conv2d_sums(const Tensor& x, const Tensor& w, const Tensor& b, const ConvArgs& a) {
  const Shape& xs = x.shape();
  const Shape& ws = w.shape();
  const std::int64_t n = xs[0], h = xs[2], wd = xs[3], o = ws[0], cg = ws[1], kh = ws[2], kw = ws[3];
  const std::int64_t oh = (h + 2 * a.padding[0] - a.dilation[0] * (kh - 1) - 1) / a.stride[0] + 1;
  const std::int64_t ow = (wd + 2 * a.padding[1] - a.dilation[1] * (kw - 1) - 1) / a.stride[1] + 1;
  const std::vector<double> xv = values(x), wv = values(w), bv = b.defined() ? values(b) : std::vector<double>{};
  const Shape ys{n, o, oh, ow};
  std::vector<double> y(static_cast<std::size_t>(numel_of(ys)), 0.0);
  for (std::int64_t in = 0; in < n; ++in)
    for (std::int64_t io = 0; io < o; ++io) {
      const std::int64_t group = io / (o / a.groups);
      for (std::int64_t i = 0; i < oh; ++i)
        for (std::int64_t j = 0; j < ow; ++j) {
          double sum = bv.empty() ? 0.0 : bv[io];
          for (std::int64_t ic = 0; ic < cg; ++ic)
            for (std::int64_t p = 0; p < kh; ++p)
              for (std::int64_t q = 0; q < kw; ++q) {
                const std::int64_t r = i * a.stride[0] - a.padding[0] + p * a.dilation[0];
                const std::int64_t s = j * a.stride[1] - a.padding[1] + q * a.dilation[1];
                if (r < 0 || r >= h || s < 0 || s >= wd) continue;
                sum += xv[offset_of(xs, {in, group * cg + ic, r, s})] * wv[offset_of(ws, {io, ic, p, q})];
              }
          y[offset_of(ys, {in, io, i, j})] = sum;
        }
    }
  return make(ys, y);
}

// conv_transpose2d by its definition: every input element x[n, ci, i, j] adds
// x * w[ci, co, p, q] to y[n, g O/G + co, i s - pad + p d, j s - pad + q d] (where that
// lies inside the output), w (C, O/G, kH, kW).
Tensor conv_transpose2d_sums(const Tensor& x, const Tensor& w, const Tensor& b, const ConvArgs& a) {
  const Shape& xs = x.shape();
  const Shape& ws = w.shape();
  const std::int64_t n = xs[0], c = xs[1], h = xs[2], wd = xs[3], og = ws[1], kh = ws[2], kw = ws[3];
  const std::int64_t o = og * a.groups, cg = c / a.groups;
  const std::int64_t oh = (h - 1) * a.stride[0] - 2 * a.padding[0] + a.dilation[0] * (kh - 1) + a.output_padding[0] + 1;
  const std::int64_t ow = (wd - 1) * a.stride[1] - 2 * a.padding[1] + a.dilation[1] * (kw - 1) + a.output_padding[1] + 1;
  const std::vector<double> xv = values(x), wv = values(w), bv = b.defined() ? values(b) : std::vector<double>{};
  const Shape ys{n, o, oh, ow};
  std::vector<double> y(static_cast<std::size_t>(numel_of(ys)), 0.0);
  for (std::int64_t in = 0; in < n; ++in)
    for (std::int64_t io = 0; io < o; ++io)
      for (std::int64_t i = 0; i < oh; ++i)
        for (std::int64_t j = 0; j < ow; ++j) y[offset_of(ys, {in, io, i, j})] = bv.empty() ? 0.0 : bv[io];
  for (std::int64_t in = 0; in < n; ++in)
    for (std::int64_t ic = 0; ic < c; ++ic)
      for (std::int64_t i = 0; i < h; ++i)
        for (std::int64_t j = 0; j < wd; ++j)
          for (std::int64_t co = 0; co < og; ++co)
            for (std::int64_t p = 0; p < kh; ++p)
              for (std::int64_t q = 0; q < kw; ++q) {
                const std::int64_t r = i * a.stride[0] - a.padding[0] + p * a.dilation[0];
                const std::int64_t s = j * a.stride[1] - a.padding[1] + q * a.dilation[1];
                if (r < 0 || r >= oh || s < 0 || s >= ow) continue;
                y[offset_of(ys, {in, ic / cg * og + co, r, s})] +=
                    xv[offset_of(xs, {in, ic, i, j})] * wv[offset_of(ws, {ic, co, p, q})];
              }
  return make(ys, y);
}

Tensor bias_of(const TensorList& in) { return in.size() > 2 ? in[2] : Tensor(); }

// conv1d as conv2d over a height of 1: x (N, C, L) -> (N, C, 1, L), w (O, C/G, K) -> (O, C/G, 1, K).
Tensor conv1d_sums(const Tensor& x, const Tensor& w, const Tensor& b, const ConvArgs& a) {
  const ConvArgs a2{{1, a.stride[0]}, {0, a.padding[0]}, {1, a.dilation[0]}, a.groups};
  return conv2d_sums(x.detach().unsqueeze(2), w.detach().unsqueeze(2), b, a2).squeeze(2);
}

// ---- entries ----

ExpandingArray<2> pair(const Pair& p) { return {p[0], p[1]}; }

void add_conv2d(const ConvArgs& a, std::function<std::vector<OpSample>()> samples) {
  op_registry().push_back(
      {.name = "conv2d",
       .fn = [a](const TensorList& in) {
         return TensorList{conv2d(in[0], in[1], bias_of(in), pair(a.stride), pair(a.padding), pair(a.dilation),
                                  a.groups)};
       },
       .reference = [a](const TensorList& in) {
         return TensorList{unbatch_like(conv2d_sums(batch_of(in[0], 2), in[1], bias_of(in), a), in[0], 2)};
       },
       .samples = std::move(samples),
       .gradgrad = true});
}

void add_conv1d(const ConvArgs& a, std::function<std::vector<OpSample>()> samples) {
  op_registry().push_back(
      {.name = "conv1d",
       .fn = [a](const TensorList& in) {
         return TensorList{conv1d(in[0], in[1], bias_of(in), a.stride[0], a.padding[0], a.dilation[0], a.groups)};
       },
       .reference = [a](const TensorList& in) {
         return TensorList{unbatch_like(conv1d_sums(batch_of(in[0], 1), in[1], bias_of(in), a), in[0], 1)};
       },
       .samples = std::move(samples),
       .gradgrad = true});
}

void add_conv_transpose2d(const ConvArgs& a, std::function<std::vector<OpSample>()> samples) {
  op_registry().push_back(
      {.name = "conv_transpose2d",
       .fn = [a](const TensorList& in) {
         return TensorList{conv_transpose2d(in[0], in[1], bias_of(in), pair(a.stride), pair(a.padding),
                                            pair(a.output_padding), a.groups, pair(a.dilation))};
       },
       .reference = [a](const TensorList& in) {
         return TensorList{unbatch_like(conv_transpose2d_sums(batch_of(in[0], 2), in[1], bias_of(in), a), in[0], 2)};
       },
       .samples = std::move(samples),
       .gradgrad = true});
}

// (N, H, W, C) leaf viewed as a channels-last (N, C, H, W) input.
TensorList channels_last(const TensorList& l) {
  TensorList out = l;
  out[0] = l[0].permute({0, 3, 1, 2});
  return out;
}

const bool registered = [] {
  add_conv2d({}, [] {
    return std::vector<OpSample>{
        {"batch of 2 with bias", {leaf({2, 2, 3, 3}, 1), leaf({3, 2, 2, 2}, 2), leaf({3}, 3)}},
        {"channels-last input", {leaf({1, 3, 3, 2}, 4), leaf({2, 2, 2, 2}, 5)}, channels_last},
        {"1x1 kernel", {leaf({1, 3, 3, 3}, 6), leaf({2, 3, 1, 1}, 7), leaf({2}, 8)}},
        {"weight sliced with step",
         {leaf({1, 2, 3, 3}, 9), leaf({3, 2, 2, 4}, 10)},
         [](const TensorList& l) { return TensorList{l[0], l[1].slice(3, 0, 4, 2)}; }},
        {"expanded weight and input",
         {leaf({1, 2, 1, 3}, 11), leaf({1, 2, 2, 2}, 12)},
         [](const TensorList& l) { return TensorList{l[0].expand({2, 2, 3, 3}), l[1].expand({3, 2, 2, 2})}; }},
        {"unbatched (C, H, W)", {leaf({2, 3, 3}, 13), leaf({2, 2, 2, 2}, 14), leaf({2}, 15)}},
        {"zero-size batch", {leaf({0, 2, 3, 3}, 16), leaf({2, 2, 2, 2}, 17), leaf({2}, 18)}},
    };
  });
  add_conv2d({.stride = {2, 2}, .padding = {1, 1}}, [] {
    return std::vector<OpSample>{
        {"stride 2, padding 1", {leaf({2, 1, 4, 4}, 21), leaf({2, 1, 3, 3}, 22), leaf({2}, 23)}},
        {"channels-last input", {leaf({1, 4, 4, 2}, 24), leaf({1, 2, 3, 3}, 25)}, channels_last},
    };
  });
  add_conv2d({.padding = {2, 2}, .dilation = {2, 2}}, [] {
    return std::vector<OpSample>{
        {"dilation 2, padding 2", {leaf({1, 2, 4, 4}, 31), leaf({1, 2, 3, 3}, 32), leaf({1}, 33)}},
        {"transposed H and W", {leaf({1, 2, 4, 3}, 34), leaf({2, 2, 2, 3}, 35)},
         [](const TensorList& l) { return TensorList{l[0].transpose(2, 3), l[1]}; }},
    };
  });
  add_conv2d({.stride = {2, 1}, .padding = {1, 0}, .groups = 2}, [] {
    return std::vector<OpSample>{
        {"groups 2, stride (2, 1), padding (1, 0)", {leaf({1, 4, 3, 3}, 41), leaf({4, 2, 2, 2}, 42), leaf({4}, 43)}},
        {"groups 2, unbatched", {leaf({4, 3, 2}, 44), leaf({2, 2, 2, 1}, 45)}},
    };
  });
  add_conv2d({.padding = {0, 1}, .dilation = {2, 1}, .groups = 3}, [] {
    return std::vector<OpSample>{
        {"depthwise, dilation (2, 1), padding (0, 1)", {leaf({1, 3, 4, 3}, 51), leaf({3, 1, 2, 2}, 52), leaf({3}, 53)}},
        {"depthwise, 6 output channels", {leaf({2, 3, 3, 2}, 54), leaf({6, 1, 1, 2}, 55)}},
    };
  });

  add_conv1d({}, [] {
    return std::vector<OpSample>{
        {"batch of 2 with bias", {leaf({2, 2, 5}, 61), leaf({3, 2, 3}, 62), leaf({3}, 63)}},
        {"transposed input", {leaf({1, 5, 2}, 64), leaf({2, 2, 2}, 65)},
         [](const TensorList& l) { return TensorList{l[0].transpose(1, 2), l[1]}; }},
        {"1x1 kernel", {leaf({2, 3, 4}, 66), leaf({2, 3, 1}, 67)}},
        {"unbatched (C, L)", {leaf({2, 6}, 68), leaf({1, 2, 3}, 69), leaf({1}, 70)}},
        {"zero-size batch", {leaf({0, 2, 5}, 71), leaf({2, 2, 3}, 72), leaf({2}, 73)}},
    };
  });
  add_conv1d({.stride = {2, 2}, .padding = {1, 1}, .dilation = {2, 2}, .groups = 2}, [] {
    return std::vector<OpSample>{
        {"stride 2, padding 1, dilation 2, groups 2", {leaf({2, 4, 5}, 74), leaf({2, 2, 2}, 75), leaf({2}, 76)}},
        {"sliced input", {leaf({1, 4, 12}, 77), leaf({4, 2, 3}, 78)},
         [](const TensorList& l) { return TensorList{l[0].slice(2, 1, 12, 2), l[1]}; }},
    };
  });

  add_conv_transpose2d({}, [] {
    return std::vector<OpSample>{
        {"with bias", {leaf({1, 2, 3, 3}, 81), leaf({2, 3, 2, 2}, 82), leaf({3}, 83)}},
        {"channels-last input", {leaf({2, 2, 2, 2}, 84), leaf({2, 1, 2, 2}, 85)}, channels_last},
        {"1x1 kernel", {leaf({1, 3, 2, 2}, 86), leaf({3, 2, 1, 1}, 87)}},
        {"unbatched (C, H, W)", {leaf({2, 2, 3}, 88), leaf({2, 2, 2, 2}, 89), leaf({2}, 90)}},
        {"zero-size batch", {leaf({0, 2, 3, 3}, 91), leaf({2, 2, 2, 2}, 92), leaf({2}, 93)}},
    };
  });
  add_conv_transpose2d({.stride = {2, 2}, .padding = {1, 1}, .output_padding = {1, 1}}, [] {
    return std::vector<OpSample>{
        {"stride 2, padding 1, output_padding 1", {leaf({1, 2, 3, 3}, 94), leaf({2, 1, 3, 3}, 95), leaf({1}, 96)}},
        {"batch of 2", {leaf({2, 1, 2, 2}, 97), leaf({1, 2, 3, 3}, 98)}},
    };
  });
  add_conv_transpose2d({.stride = {2, 1}, .padding = {1, 1}, .dilation = {2, 2}, .output_padding = {1, 0}}, [] {
    return std::vector<OpSample>{
        {"stride (2, 1), dilation 2, output_padding (1, 0)", {leaf({1, 1, 3, 3}, 101), leaf({1, 2, 2, 2}, 102)}},
        {"transposed H and W", {leaf({1, 2, 3, 2}, 103), leaf({2, 1, 2, 2}, 104), leaf({1}, 105)},
         [](const TensorList& l) { return TensorList{l[0].transpose(2, 3), l[1], l[2]}; }},
    };
  });
  add_conv_transpose2d({.stride = {2, 2}, .groups = 2}, [] {
    return std::vector<OpSample>{
        {"groups 2, stride 2", {leaf({1, 4, 2, 2}, 111), leaf({4, 1, 2, 2}, 112), leaf({2}, 113)}},
        {"groups 2, 4 output channels", {leaf({1, 2, 2, 3}, 114), leaf({2, 2, 2, 2}, 115)}},
    };
  });
  add_conv_transpose2d({.stride = {2, 2}, .padding = {1, 1}}, [] {
    return std::vector<OpSample>{
        {"padding beyond the kernel crops", {leaf({1, 1, 3, 3}, 121), leaf({1, 1, 1, 1}, 122)}},
        {"kernel 2", {leaf({1, 1, 3, 3}, 123), leaf({1, 1, 2, 2}, 124), leaf({1}, 125)}},
    };
  });
  add_conv_transpose2d({.stride = {5, 1}, .padding = {2, 0}, .output_padding = {4, 0}}, [] {
    return std::vector<OpSample>{
        {"padding crops the whole input: bias only", {leaf({1, 1, 1, 3}, 131), leaf({1, 2, 1, 1}, 132), leaf({2}, 133)}},
        {"padding crops part of the input", {leaf({1, 1, 2, 3}, 134), leaf({1, 2, 1, 1}, 135)}},
    };
  });
  return true;
}();

// ---- errors ----

TEST(Conv, ShapeErrors) {
  const Tensor x = zeros({2, 4, 5, 5});
  expect_error<ShapeError>([&] { conv2d(x, zeros({3, 2, 3, 3})); }, "conv2d", {"[3, 2, 3, 3]", "[2, 4, 5, 5]"});
  expect_error<ShapeError>([&] { conv2d(x, zeros({3, 2, 3, 3}), {}, 1, 0, 1, 2); }, "conv2d", {"groups=2", "3"});
  expect_error<ShapeError>([&] { conv2d(x, zeros({4, 1, 3, 3}), {}, 1, 0, 1, 3); }, "conv2d", {"groups=3"});
  expect_error<ShapeError>([&] { conv2d(x, zeros({2, 4, 7, 7})); }, "conv2d", {"[2, 4, 5, 5]", "[2, 4, 7, 7]"});
  expect_error<ShapeError>([&] { conv2d(x, zeros({2, 4, 4, 4}), {}, 1, 0, 2); }, "conv2d", {"dilation", "7"});
  expect_error<ShapeError>([&] { conv2d(zeros({4, 5}), zeros({2, 4, 3, 3})); }, "conv2d", {"[4, 5]", "3-d"});
  expect_error<ShapeError>([&] { conv2d(zeros({1, 2, 4, 5, 5}), zeros({2, 4, 3, 3})); }, "conv2d", {"[1, 2, 4, 5, 5]"});
  expect_error<ShapeError>([&] { conv2d(x, zeros({2, 4, 3})); }, "conv2d", {"4-d weight", "[2, 4, 3]"});
  expect_error<ShapeError>([&] { conv2d(x, zeros({2, 4, 3, 3}), zeros({3})); }, "conv2d", {"bias", "[3]"});
  expect_error<ShapeError>([&] { conv2d(x, zeros({2, 4, 3, 3}), {}, 0); }, "conv2d", {"stride", "[0, 0]"});
  expect_error<ShapeError>([&] { conv2d(x, zeros({2, 4, 3, 3}), {}, 1, {-1, 0}); }, "conv2d", {"padding", "[-1, 0]"});
  expect_error<ShapeError>([&] { conv2d(x, zeros({2, 4, 3, 3}), {}, 1, 0, 1, 0); }, "conv2d", {"groups"});
  expect_error<ShapeError>([&] { conv2d(zeros({2, 4, 0, 5}), zeros({2, 4, 1, 1})); }, "conv2d", {"[2, 4, 0, 5]"});
  expect_error<ShapeError>([&] { conv1d(zeros({2, 3, 8}), zeros({2, 4, 3})); }, "conv1d", {"[2, 3, 8]", "[2, 4, 3]"});
  expect_error<ShapeError>([&] { conv1d(zeros({2, 3, 8, 8}), zeros({2, 3, 3})); }, "conv1d", {"[2, 3, 8, 8]"});
  expect_error<ShapeError>([&] { conv1d(zeros({2, 3, 2}), zeros({2, 3, 3})); }, "conv1d", {"[2, 3, 2]", "[2, 3, 3]"});
  expect_error<ShapeError>([&] { conv_transpose2d(x, zeros({3, 2, 3, 3})); }, "conv_transpose2d",
                           {"[3, 2, 3, 3]", "[2, 4, 5, 5]"});
  expect_error<ShapeError>([&] { conv_transpose2d(x, zeros({4, 2, 3, 3}), {}, 1, 0, 0, 3); }, "conv_transpose2d",
                           {"groups=3"});
  expect_error<ShapeError>([&] { conv_transpose2d(x, zeros({4, 2, 3, 3}), {}, 2, 0, 2); }, "conv_transpose2d",
                           {"output_padding", "[2, 2]"});
  expect_error<ShapeError>([&] { conv_transpose2d(zeros({1, 1, 1, 1}), zeros({1, 1, 1, 1}), {}, 1, 1); },
                           "conv_transpose2d", {"output size", "-1"});
}

TEST(Conv, UnbatchedInputIsABatchOfOne) {
  // Like PyTorch, a 3-d input to conv2d is one unbatched (C, H, W) image, not an error.
  const Tensor x = sample({2, 4, 4}), w = sample({3, 2, 3, 3});
  const Tensor y = conv2d(x, w, {}, 1, 1);
  EXPECT_EQ(y.shape(), (Shape{3, 4, 4}));
  EXPECT_EQ(values(y), values(conv2d(x.unsqueeze(0), w, {}, 1, 1)));
}

TEST(Conv, DTypeErrors) {
  const Tensor x = zeros({1, 2, 4, 4}), w = zeros({2, 2, 3, 3});
  expect_error<DTypeError>([&] { conv2d(x, w.to(kFloat64)); }, "conv2d", {"float32", "float64"});
  expect_error<DTypeError>([&] { conv2d(x, w, zeros({2}, {.dtype = kFloat64})); }, "conv2d", {"float64"});
  expect_error<DTypeError>([&] { conv2d(x.to(kInt64), w.to(kInt64)); }, "conv2d", {"int64"});
  expect_error<DTypeError>([&] { conv1d(zeros({1, 2, 4}, {.dtype = kInt32}), zeros({2, 2, 3})); }, "conv1d",
                           {"int32"});
  expect_error<DTypeError>([&] { conv_transpose2d(x, w.to(kFloat16)); }, "conv_transpose2d", {"float16"});
}

// ---- dtypes ----

TEST(Conv, Float32AndHalfPrecision) {
  const Tensor x = sample({2, 3, 6, 6}), w = sample({4, 3, 3, 3}, -1, 1, 2), b = sample({4}, -1, 1, 3);
  const ConvArgs a{.stride = {2, 1}, .padding = {1, 1}};
  for (DataType t : {kFloat32, kFloat16, kBFloat16}) {
    const Tensor xt = x.to(t), wt = w.to(t), bt = b.to(t);
    const Tensor y = conv2d(xt, wt, bt, {2, 1}, 1);
    // Against the sums of the rounded inputs: what remains is float32 accumulation and the
    // final rounding to t.
    expect_near_in(y, conv2d_sums(xt.to(kFloat64), wt.to(kFloat64), bt.to(kFloat64), a), t);
  }
  const Tensor yt = conv_transpose2d(x.to(kFloat16), w.transpose(0, 1).to(kFloat16), {}, 2);
  EXPECT_EQ(yt.dtype(), kFloat16);
  EXPECT_EQ(yt.shape(), (Shape{2, 4, 13, 13}));
}

// A layer of realistic size in float32 (threaded GEMM and copies) against the float64 sums,
// with the input gradient checked against the transposed convolution it equals.
TEST(Conv, LargerFloat32LayerAndItsInputGradient) {
  const Tensor x = sample({4, 8, 10, 10}).to(kFloat32).requires_grad_();
  const Tensor w = sample({16, 8, 3, 3}, -0.5, 0.5, 4).to(kFloat32).requires_grad_();
  const Tensor y = conv2d(x, w, {}, 1, 1);
  const std::vector<double> got = values(y), ref = values(conv2d_sums(x.to(kFloat64), w.to(kFloat64), {}, {
                                                                          .padding = {1, 1}}));
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], ref[i], 1e-4 * (1 + std::abs(ref[i]))) << i;
  const Tensor g = sample(y.shape(), -1, 1, 5).to(kFloat32);
  y.backward(g);
  const std::vector<double> dx = values(x.grad());
  const std::vector<double> dx_ref = values(conv_transpose2d_sums(g.to(kFloat64), w.to(kFloat64), {},
                                                                  {.padding = {1, 1}}));
  for (std::size_t i = 0; i < dx.size(); ++i) ASSERT_NEAR(dx[i], dx_ref[i], 1e-4 * (1 + std::abs(dx_ref[i]))) << i;
}

}  // namespace
}  // namespace infini::test::conv_ops_test
