// Op table entries for conv3d, conv_transpose1d and conv_transpose3d against the direct
// float64 sums of spatial_test_util.h (stride, padding, dilation, groups, output_padding),
// with gradgradcheck; plus errors, float32 / half precision and the transposed convolution
// as the input gradient of the convolution.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "op_info.h"
#include "spatial_test_util.h"

namespace infini::test::conv_nd_ops_test {
namespace {

using Ints = std::vector<std::int64_t>;

Tensor bias_of(const TensorList& in) { return in.size() > 2 ? in[2] : Tensor(); }

ExpandingArray<1> single(const Ints& v) { return v[0]; }
ExpandingArray<3> triple(const Ints& v) { return {v[0], v[1], v[2]}; }

// conv3d with a's arguments (zeros for output_padding: convolutions have none).
void add_conv3d(const ConvNdArgs& a, std::function<std::vector<OpSample>()> samples) {
  op_registry().push_back(
      {.name = "conv3d",
       .fn = [a](const TensorList& in) {
         return TensorList{conv3d(in[0], in[1], bias_of(in), triple(a.stride), triple(a.padding), triple(a.dilation),
                                  a.groups)};
       },
       .reference = [a](const TensorList& in) {
         return TensorList{unbatch_like(conv_nd_sums(batch_of(in[0], 3), in[1], bias_of(in), a), in[0], 3)};
       },
       .samples = std::move(samples),
       .gradgrad = true});
}

void add_conv_transpose1d(const ConvNdArgs& a, std::function<std::vector<OpSample>()> samples) {
  op_registry().push_back(
      {.name = "conv_transpose1d",
       .fn = [a](const TensorList& in) {
         return TensorList{conv_transpose1d(in[0], in[1], bias_of(in), single(a.stride), single(a.padding),
                                            single(a.output_padding), a.groups, single(a.dilation))};
       },
       .reference = [a](const TensorList& in) {
         return TensorList{unbatch_like(conv_transpose_nd_sums(batch_of(in[0], 1), in[1], bias_of(in), a), in[0], 1)};
       },
       .samples = std::move(samples),
       .gradgrad = true});
}

void add_conv_transpose3d(const ConvNdArgs& a, std::function<std::vector<OpSample>()> samples) {
  op_registry().push_back(
      {.name = "conv_transpose3d",
       .fn = [a](const TensorList& in) {
         return TensorList{conv_transpose3d(in[0], in[1], bias_of(in), triple(a.stride), triple(a.padding),
                                            triple(a.output_padding), a.groups, triple(a.dilation))};
       },
       .reference = [a](const TensorList& in) {
         return TensorList{unbatch_like(conv_transpose_nd_sums(batch_of(in[0], 3), in[1], bias_of(in), a), in[0], 3)};
       },
       .samples = std::move(samples),
       .gradgrad = true});
}

// (N, D, H, W, C) leaf viewed as a channels-last (N, C, D, H, W) input.
TensorList channels_last(const TensorList& l) {
  TensorList out = l;
  out[0] = l[0].permute({0, 4, 1, 2, 3});
  return out;
}

const bool registered = [] {
  const ConvNdArgs unit3{.stride = {1, 1, 1}, .padding = {0, 0, 0}, .dilation = {1, 1, 1},
                         .output_padding = {0, 0, 0}};
  add_conv3d(unit3, [] {
    return std::vector<OpSample>{
        {"batch of 2 with bias", {leaf({2, 2, 3, 3, 2}, 1), leaf({2, 2, 2, 2, 2}, 2), leaf({2}, 3)}},
        {"channels-last input", {leaf({1, 3, 2, 3, 2}, 4), leaf({1, 2, 2, 1, 2}, 5)}, channels_last},
        {"unbatched (C, D, H, W)", {leaf({2, 2, 3, 3}, 6), leaf({2, 2, 1, 2, 2}, 7), leaf({2}, 8)}},
        {"zero-size batch", {leaf({0, 2, 3, 3, 3}, 9), leaf({2, 2, 2, 2, 2}, 10), leaf({2}, 11)}},
    };
  });
  add_conv3d({.stride = {2, 1, 2}, .padding = {1, 0, 1}, .dilation = {1, 2, 1}, .groups = 2}, [] {
    return std::vector<OpSample>{
        {"stride (2, 1, 2), padding (1, 0, 1), dilation (1, 2, 1), groups 2",
         {leaf({1, 4, 3, 4, 3}, 21), leaf({2, 2, 2, 2, 2}, 22), leaf({2}, 23)}},
        {"depth and width transposed", {leaf({1, 2, 3, 3, 3}, 24), leaf({4, 1, 1, 2, 2}, 25)},
         [](const TensorList& l) { return TensorList{l[0].transpose(2, 4), l[1]}; }},
    };
  });

  add_conv_transpose1d({.stride = {1}, .padding = {0}, .dilation = {1}, .output_padding = {0}}, [] {
    return std::vector<OpSample>{
        {"batch of 2 with bias", {leaf({2, 2, 4}, 31), leaf({2, 3, 2}, 32), leaf({3}, 33)}},
        {"transposed input", {leaf({1, 3, 2}, 34), leaf({2, 2, 3}, 35)},
         [](const TensorList& l) { return TensorList{l[0].transpose(1, 2), l[1]}; }},
        {"unbatched (C, L)", {leaf({2, 3}, 36), leaf({2, 1, 3}, 37), leaf({1}, 38)}},
        {"zero-size batch", {leaf({0, 2, 3}, 39), leaf({2, 2, 2}, 40), leaf({2}, 41)}},
    };
  });
  add_conv_transpose1d({.stride = {2}, .padding = {1}, .dilation = {2}, .groups = 2, .output_padding = {1}}, [] {
    return std::vector<OpSample>{
        {"stride 2, padding 1, dilation 2, groups 2, output_padding 1",
         {leaf({1, 4, 3}, 51), leaf({4, 1, 3}, 52), leaf({2}, 53)}},
        {"groups 2, 4 output channels", {leaf({2, 2, 3}, 54), leaf({2, 2, 2}, 55)}},
    };
  });
  add_conv_transpose1d({.stride = {3}, .padding = {2}, .dilation = {1}, .output_padding = {2}}, [] {
    return std::vector<OpSample>{
        {"padding crops part of the input", {leaf({1, 1, 3}, 61), leaf({1, 2, 1}, 62), leaf({2}, 63)}},
    };
  });

  add_conv_transpose3d(unit3, [] {
    return std::vector<OpSample>{
        {"with bias", {leaf({1, 2, 2, 2, 3}, 71), leaf({2, 2, 2, 2, 1}, 72), leaf({2}, 73)}},
        {"channels-last input", {leaf({2, 2, 2, 2, 1}, 74), leaf({1, 1, 2, 1, 2}, 75)}, channels_last},
        {"unbatched (C, D, H, W)", {leaf({2, 2, 2, 2}, 76), leaf({2, 1, 2, 2, 2}, 77), leaf({1}, 78)}},
        {"zero-size batch", {leaf({0, 2, 2, 2, 2}, 79), leaf({2, 2, 2, 2, 2}, 80), leaf({2}, 81)}},
    };
  });
  add_conv_transpose3d({.stride = {2, 1, 2}, .padding = {1, 0, 0}, .dilation = {1, 2, 1}, .groups = 2,
                        .output_padding = {1, 0, 1}},
                       [] {
                         return std::vector<OpSample>{
                             {"stride (2, 1, 2), padding (1, 0, 0), dilation (1, 2, 1), groups 2, output_padding "
                              "(1, 0, 1)",
                              {leaf({1, 2, 2, 2, 2}, 91), leaf({2, 1, 2, 2, 2}, 92), leaf({2}, 93)}},
                         };
                       });
  return true;
}();

// ---- errors ----

TEST(ConvNd, ShapeErrors) {
  const Tensor x = zeros({2, 4, 3, 4, 4});
  expect_error<ShapeError>([&] { conv3d(x, zeros({2, 3, 2, 2, 2})); }, "conv3d",
                           {"[2, 3, 2, 2, 2]", "[2, 4, 3, 4, 4]"});
  expect_error<ShapeError>([&] { conv3d(x, zeros({3, 2, 2, 2, 2}), {}, 1, 0, 1, 2); }, "conv3d", {"groups=2", "3"});
  expect_error<ShapeError>([&] { conv3d(x, zeros({2, 4, 4, 2, 2})); }, "conv3d", {"smaller than the kernel", "3 < 4"});
  expect_error<ShapeError>([&] { conv3d(x, zeros({2, 4, 2, 2})); }, "conv3d", {"5-d weight", "[2, 4, 2, 2]"});
  expect_error<ShapeError>([&] { conv3d(zeros({4, 4, 4}), zeros({2, 4, 1, 1, 1})); }, "conv3d", {"4-d", "[4, 4, 4]"});
  expect_error<ShapeError>([&] { conv3d(x, zeros({2, 4, 1, 1, 1}), zeros({3})); }, "conv3d", {"bias", "[3]"});
  expect_error<ShapeError>([&] { conv3d(x, zeros({2, 4, 1, 1, 1}), {}, {1, 0, 1}); }, "conv3d",
                           {"stride", "[1, 0, 1]"});
  expect_error<ShapeError>([&] { conv_transpose1d(zeros({1, 3, 4}), zeros({2, 1, 3})); }, "conv_transpose1d",
                           {"[2, 1, 3]", "[1, 3, 4]"});
  expect_error<ShapeError>([&] { conv_transpose1d(zeros({1, 2, 4}), zeros({2, 1, 3}), {}, 2, 0, 2); },
                           "conv_transpose1d", {"output_padding [2]", "stride [2]"});
  expect_error<ShapeError>([&] { conv_transpose1d(zeros({1, 1, 1}), zeros({1, 1, 1}), {}, 1, 1); },
                           "conv_transpose1d", {"output size", "-1"});
  expect_error<ShapeError>([&] { conv_transpose1d(zeros({1, 2, 4}), zeros({2, 1, 3}), zeros({2})); },
                           "conv_transpose1d", {"bias", "[2]"});
  expect_error<ShapeError>([&] { conv_transpose3d(x, zeros({4, 1, 2, 2, 2}), {}, 1, 0, 0, 3); }, "conv_transpose3d",
                           {"groups=3"});
  expect_error<ShapeError>([&] { conv_transpose3d(x, zeros({4, 1, 2, 2, 2}), {}, {1, 2, 1}, 0, {0, 0, 1}); },
                           "conv_transpose3d", {"output_padding [0, 0, 1]", "dilation [1, 1, 1]"});
  expect_error<ShapeError>([&] { conv_transpose3d(x, zeros({4, 1, 2, 2})); }, "conv_transpose3d", {"5-d weight"});
}

TEST(ConvNd, DTypeErrors) {
  expect_error<DTypeError>([&] { conv3d(zeros({1, 1, 2, 2, 2}, {.dtype = kInt64}), zeros({1, 1, 1, 1, 1})); },
                           "conv3d", {"int64"});
  expect_error<DTypeError>([&] { conv_transpose1d(zeros({1, 1, 2}), zeros({1, 1, 1}, {.dtype = kFloat64})); },
                           "conv_transpose1d", {"float32", "float64"});
  expect_error<DTypeError>(
      [&] { conv_transpose3d(zeros({1, 1, 2, 2, 2}), zeros({1, 1, 1, 1, 1}), zeros({1}, {.dtype = kFloat16})); },
      "conv_transpose3d", {"float16"});
}

// ---- dtypes ----

TEST(ConvNd, Float32AndHalfPrecision) {
  const Tensor x = sample({2, 3, 4, 5, 4}), w = sample({4, 3, 2, 3, 2}, -1, 1, 2), b = sample({4}, -1, 1, 3);
  const ConvNdArgs a{.stride = {2, 1, 1}, .padding = {1, 1, 0}, .dilation = {1, 1, 2}};
  for (DataType t : {kFloat32, kFloat16, kBFloat16}) {
    const Tensor xt = x.to(t), wt = w.to(t), bt = b.to(t);
    const Tensor y = conv3d(xt, wt, bt, {2, 1, 1}, {1, 1, 0}, {1, 1, 2});
    // Against the sums of the rounded inputs: what remains is float32 accumulation and the
    // final rounding to t.
    expect_near_in(y, conv_nd_sums(xt.to(kFloat64), wt.to(kFloat64), bt.to(kFloat64), a), t);
  }
  const Tensor x1 = sample({2, 3, 5}), w1 = sample({3, 2, 3}, -1, 1, 4);
  const Tensor y1 = conv_transpose1d(x1.to(kFloat32), w1.to(kFloat32), {}, 2, 1, 1);
  EXPECT_EQ(y1.dtype(), kFloat32);
  const std::vector<double> got = values(y1);
  const ConvNdArgs a1{.stride = {2}, .padding = {1}, .dilation = {1}, .output_padding = {1}};
  const std::vector<double> ref = values(conv_transpose_nd_sums(x1, w1, {}, a1));
  ASSERT_EQ(got.size(), ref.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], ref[i], 1e-6 * (1 + std::abs(ref[i]))) << i;
  const Tensor yt = conv_transpose3d(x.to(kBFloat16), w.transpose(0, 1).to(kBFloat16), {}, 2);
  EXPECT_EQ(yt.dtype(), kBFloat16);
  EXPECT_EQ(yt.shape(), (Shape{2, 4, 8, 11, 8}));
}

// The gradient of conv3d with respect to its input is conv_transpose3d of the output
// gradient with the same weight and arguments, output_padding restoring the input size.
TEST(ConvNd, TransposedConvolutionIsTheInputGradient) {
  const Tensor x = sample({2, 4, 5, 4, 6}).requires_grad_();
  const Tensor w = sample({6, 2, 3, 2, 3}, -1, 1, 5);
  const Tensor y = conv3d(x, w, {}, {2, 1, 2}, {1, 0, 1}, {1, 2, 1}, 2);
  const Tensor g = sample(y.shape(), -1, 1, 6);
  y.backward(g);
  const Tensor dx = conv_transpose3d(g, w, {}, {2, 1, 2}, {1, 0, 1}, {0, 0, 1}, 2, {1, 2, 1});
  ASSERT_EQ(dx.shape(), x.shape());
  const std::vector<double> got = values(x.grad()), ref = values(dx);
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], ref[i], 1e-12 * (1 + std::abs(ref[i]))) << i;
}

}  // namespace
}  // namespace infini::test::conv_nd_ops_test
