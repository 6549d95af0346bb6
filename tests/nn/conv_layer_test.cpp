// Conv1d, Conv2d and ConvTranspose2d against direct float64 loops (stride, padding, padding
// modes, dilation, groups, output_padding), weight gradients by gradcheck, parameters and
// their default initialisation, state dicts, clone, printing and errors naming the layer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "layer_test_util.h"

import infini.nn;

namespace infini::nn::conv_layer_test {
namespace {

using test::expect_error;
using test::expect_uniform_within;
using test::names;
using test::expect_all_near;
using test::make;
using test::sample;
using test::seed_parameters;
using test::values;


// A 2-d convolution problem: x (n, c_in, h, w), weight (c_out, c_in / groups, kh, kw).
// Conv1d problems have h = kh = 1.
struct Problem {
  std::int64_t n, c_in, h, w, c_out, kh, kw;
  std::int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, groups = 1;
  std::int64_t out_h() const { return (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1; }
  std::int64_t out_w() const { return (w + 2 * pw - dw * (kw - 1) - 1) / sw + 1; }
};

// Where padded position i of an input of size n reads from: an index, or -1 for a zero.
std::int64_t source(std::int64_t i, std::int64_t n, PaddingMode mode) {
  if (i >= 0 && i < n) return i;
  if (mode == PaddingMode::Zeros) return -1;
  if (mode == PaddingMode::Replicate) return std::clamp<std::int64_t>(i, 0, n - 1);
  return i < 0 ? -i : 2 * (n - 1) - i;  // reflect about the edge element
}

// y (n, c_out, out_h, out_w): the direct sum over each window.
std::vector<double> conv_reference(const Problem& p, const std::vector<double>& x, const std::vector<double>& w,
                                   const std::vector<double>& b, PaddingMode mode = PaddingMode::Zeros) {
  const std::int64_t oh = p.out_h(), ow = p.out_w(), cin_g = p.c_in / p.groups, cout_g = p.c_out / p.groups;
  std::vector<double> y;
  for (std::int64_t n = 0; n < p.n; ++n)
    for (std::int64_t oc = 0; oc < p.c_out; ++oc)
      for (std::int64_t oy = 0; oy < oh; ++oy)
        for (std::int64_t ox = 0; ox < ow; ++ox) {
          double acc = b.empty() ? 0.0 : b[oc];
          for (std::int64_t icg = 0; icg < cin_g; ++icg) {
            const std::int64_t ic = oc / cout_g * cin_g + icg;
            for (std::int64_t ky = 0; ky < p.kh; ++ky)
              for (std::int64_t kx = 0; kx < p.kw; ++kx) {
                const std::int64_t iy = source(oy * p.sh - p.ph + ky * p.dh, p.h, mode);
                const std::int64_t ix = source(ox * p.sw - p.pw + kx * p.dw, p.w, mode);
                if (iy < 0 || ix < 0) continue;
                acc += x[((n * p.c_in + ic) * p.h + iy) * p.w + ix] * w[((oc * cin_g + icg) * p.kh + ky) * p.kw + kx];
              }
          }
          y.push_back(acc);
        }
  return y;
}

// A transposed convolution: x (n, c_in, h, w), weight (c_in, c_out / groups, kh, kw); every
// input element scattered into the output through the kernel.
struct TransposedProblem {
  std::int64_t n, c_in, h, w, c_out, kh, kw;
  std::int64_t s = 1, pad = 0, out_pad = 0, dil = 1, groups = 1;
  std::int64_t out_h() const { return (h - 1) * s - 2 * pad + dil * (kh - 1) + out_pad + 1; }
  std::int64_t out_w() const { return (w - 1) * s - 2 * pad + dil * (kw - 1) + out_pad + 1; }
};

std::vector<double> conv_transpose_reference(const TransposedProblem& p, const std::vector<double>& x,
                                             const std::vector<double>& w, const std::vector<double>& b) {
  const std::int64_t oh = p.out_h(), ow = p.out_w(), cin_g = p.c_in / p.groups, cout_g = p.c_out / p.groups;
  std::vector<double> y(static_cast<std::size_t>(p.n * p.c_out * oh * ow), 0.0);
  for (std::int64_t n = 0; n < p.n; ++n)
    for (std::int64_t oc = 0; oc < p.c_out; ++oc)
      for (std::int64_t i = 0; i < oh * ow; ++i) y[(n * p.c_out + oc) * oh * ow + i] = b.empty() ? 0.0 : b[oc];
  for (std::int64_t n = 0; n < p.n; ++n)
    for (std::int64_t ic = 0; ic < p.c_in; ++ic)
      for (std::int64_t iy = 0; iy < p.h; ++iy)
        for (std::int64_t ix = 0; ix < p.w; ++ix)
          for (std::int64_t ocg = 0; ocg < cout_g; ++ocg)
            for (std::int64_t ky = 0; ky < p.kh; ++ky)
              for (std::int64_t kx = 0; kx < p.kw; ++kx) {
                const std::int64_t oy = iy * p.s - p.pad + ky * p.dil, ox = ix * p.s - p.pad + kx * p.dil;
                if (oy < 0 || oy >= oh || ox < 0 || ox >= ow) continue;
                const std::int64_t oc = ic / cin_g * cout_g + ocg;
                y[((n * p.c_out + oc) * oh + oy) * ow + ox] +=
                    x[((n * p.c_in + ic) * p.h + iy) * p.w + ix] * w[((ic * cout_g + ocg) * p.kh + ky) * p.kw + kx];
              }
  return y;
}

TEST(Conv2dLayer, ForwardMatchesDirectLoops) {
  const Problem p{.n = 2, .c_in = 4, .h = 7, .w = 6, .c_out = 6, .kh = 3, .kw = 2,
                  .sh = 2, .sw = 1, .ph = 1, .pw = 0, .dh = 1, .dw = 2, .groups = 2};
  Conv2d conv(4, 6, {3, 2}, {.stride = {2, 1}, .padding = {1, 0}, .dilation = {1, 2}, .groups = 2});
  conv->to(kFloat64);
  const auto [w, b] = seed_parameters(conv, 1);
  const std::vector<double> x = sample({2, 4, 7, 6}, 3);
  const Tensor y = conv(make({2, 4, 7, 6}, x));
  expect_all_near(y, {2, 6, p.out_h(), p.out_w()}, conv_reference(p, x, w, b), 1e-12);
}

TEST(Conv2dLayer, Float32DefaultAndUnbatchedInput) {
  const Problem p{.n = 1, .c_in = 3, .h = 5, .w = 5, .c_out = 2, .kh = 3, .kw = 3, .ph = 1, .pw = 1};
  Conv2d conv(3, 2, 3, {.padding = 1});
  EXPECT_EQ(conv->weight.dtype(), kFloat32);
  const std::vector<double> w = values(conv->weight), b = values(conv->bias);
  const std::vector<double> x = sample({3, 5, 5}, 4);
  const Tensor y = conv(make({3, 5, 5}, x).to(kFloat32));
  EXPECT_EQ(y.dtype(), kFloat32);
  expect_all_near(y, {2, 5, 5}, conv_reference(p, x, w, b), 1e-5);
}

TEST(Conv2dLayer, ReflectAndReplicatePadding) {
  const Problem p{.n = 1, .c_in = 2, .h = 4, .w = 5, .c_out = 3, .kh = 3, .kw = 3, .sh = 1, .sw = 2, .ph = 2, .pw = 1};
  const std::vector<double> x = sample({1, 2, 4, 5}, 5);
  for (PaddingMode mode : {PaddingMode::Reflect, PaddingMode::Replicate}) {
    Conv2d conv(2, 3, 3, {.stride = {1, 2}, .padding = {2, 1}, .padding_mode = mode});
    conv->to(kFloat64);
    const auto [w, b] = seed_parameters(conv, 6);
    expect_all_near(conv(make({1, 2, 4, 5}, x)), {1, 3, p.out_h(), p.out_w()}, conv_reference(p, x, w, b, mode),
                    1e-12);
  }
}

TEST(Conv1dLayer, ForwardMatchesDirectLoops) {
  const Problem p{.n = 2, .c_in = 6, .h = 1, .w = 9, .c_out = 3, .kh = 1, .kw = 3,
                  .sw = 2, .pw = 2, .dw = 2, .groups = 3};
  Conv1d conv(6, 3, 3, {.stride = 2, .padding = 2, .dilation = 2, .groups = 3, .bias = false});
  conv->to(kFloat64);
  EXPECT_FALSE(conv->bias.defined());
  const auto [w, b] = seed_parameters(conv, 7);
  const std::vector<double> x = sample({2, 6, 9}, 8);
  expect_all_near(conv(make({2, 6, 9}, x)), {2, 3, p.out_w()}, conv_reference(p, x, w, b), 1e-12);
  // Unbatched (C, L): the first sample's result.
  const std::vector<double> y = conv_reference(p, x, w, b);
  expect_all_near(conv(make({6, 9}, std::vector<double>(x.begin(), x.begin() + 54))), {3, p.out_w()},
                  std::vector<double>(y.begin(), y.begin() + 3 * p.out_w()), 1e-12);
}

TEST(Conv1dLayer, ReflectPadding) {
  const Problem p{.n = 1, .c_in = 1, .h = 1, .w = 4, .c_out = 1, .kh = 1, .kw = 3, .pw = 2};
  Conv1d conv(1, 1, 3, {.padding = 2, .padding_mode = PaddingMode::Reflect});
  conv->to(kFloat64);
  const auto [w, b] = seed_parameters(conv, 9);
  const std::vector<double> x{1, 2, 3, 4};
  expect_all_near(conv(make({1, 1, 4}, x)), {1, 1, 6}, conv_reference(p, x, w, b, PaddingMode::Reflect), 1e-12);
}

TEST(ConvTranspose2dLayer, ForwardMatchesScatterLoops) {
  const TransposedProblem p{.n = 2, .c_in = 4, .h = 3, .w = 4, .c_out = 6, .kh = 3, .kw = 2,
                            .s = 2, .pad = 1, .out_pad = 1, .dil = 2, .groups = 2};
  ConvTranspose2d conv(4, 6, {3, 2}, {.stride = 2, .padding = 1, .output_padding = 1, .groups = 2, .dilation = 2});
  conv->to(kFloat64);
  EXPECT_EQ(conv->weight.shape(), (Shape{4, 3, 3, 2}));
  const auto [w, b] = seed_parameters(conv, 10);
  const std::vector<double> x = sample({2, 4, 3, 4}, 11);
  expect_all_near(conv(make({2, 4, 3, 4}, x)), {2, 6, p.out_h(), p.out_w()}, conv_transpose_reference(p, x, w, b),
                  1e-12);
}

TEST(ConvLayers, WeightBiasAndInputGradientsPassGradcheck) {
  Conv2d conv2(2, 2, 2, {.stride = {1, 2}, .padding = 1, .groups = 2});
  Conv1d conv1(2, 3, 2, {.padding = 1, .dilation = 2, .padding_mode = PaddingMode::Replicate});
  ConvTranspose2d deconv(2, 2, 2, {.stride = 2, .output_padding = 1});
  for (Module* m : std::vector<Module*>{conv2.ptr().get(), conv1.ptr().get(), deconv.ptr().get()}) m->to(kFloat64);
  const Tensor x2 = make({1, 2, 3, 3}, sample({1, 2, 3, 3}, 12)).requires_grad_();
  test::expect_gradcheck([&](const TensorList&) { return TensorList{conv2(x2)}; }, {conv2->weight, conv2->bias, x2});
  const Tensor x1 = make({2, 2, 4}, sample({2, 2, 4}, 13)).requires_grad_();
  test::expect_gradcheck([&](const TensorList&) { return TensorList{conv1(x1)}; }, {conv1->weight, conv1->bias, x1});
  const Tensor xt = make({1, 2, 2, 2}, sample({1, 2, 2, 2}, 14)).requires_grad_();
  test::expect_gradcheck([&](const TensorList&) { return TensorList{deconv(xt)}; },
                         {deconv->weight, deconv->bias, xt});
}

TEST(ConvLayers, ParametersAndDefaultInitialisation) {
  Conv2d conv(8, 32, 3, {.groups = 2});  // fan_in = 8 / 2 * 3 * 3 = 36
  EXPECT_EQ(names(conv->named_parameters()), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(conv->weight.shape(), (Shape{32, 4, 3, 3}));
  EXPECT_EQ(conv->bias.shape(), (Shape{32}));
  EXPECT_TRUE(conv->weight.requires_grad());
  expect_uniform_within(conv->weight, 1.0 / 6.0);
  expect_uniform_within(Conv2d(1, 200, 1)->bias, 1.0);  // fan_in 1: U(-1, 1)

  Conv1d conv1(5, 4, 7, {.bias = false});
  EXPECT_EQ(names(conv1->named_parameters()), (std::vector<std::string>{"weight"}));
  EXPECT_EQ(conv1->weight.shape(), (Shape{4, 5, 7}));
  expect_uniform_within(conv1->weight, 1.0 / std::sqrt(35.0));

  // ConvTranspose2d's fan_in is weight.size(1) * kernel: out_channels / groups * kH * kW.
  ConvTranspose2d deconv(16, 8, {2, 3});
  EXPECT_EQ(deconv->weight.shape(), (Shape{16, 8, 2, 3}));
  expect_uniform_within(deconv->weight, 1.0 / std::sqrt(48.0));
  EXPECT_LE(std::ranges::max(values(abs(deconv->bias))), 1.0 / std::sqrt(48.0));

  // reset_parameters(generator) draws the same values from equally seeded generators.
  Conv2d c1(2, 3, 3), c2(2, 3, 3);
  Generator g1(7), g2(7);
  c1->reset_parameters(&g1);
  c2->reset_parameters(&g2);
  EXPECT_EQ(values(c1->weight), values(c2->weight));
  EXPECT_EQ(values(c1->bias), values(c2->bias));
}

TEST(ConvLayers, StateDictNamesAndCloneAreDeep) {
  Conv2d a(2, 3, 3), b(2, 3, 3);
  const StateDict state = a->state_dict();
  EXPECT_EQ(test::keys(state), (std::vector<std::string>{"bias", "weight"}));
  b->load_state_dict(state);
  EXPECT_EQ(values(b->weight), values(a->weight));

  auto copy = std::dynamic_pointer_cast<Conv2dImpl>(a->clone());
  ASSERT_TRUE(copy);
  EXPECT_EQ(copy->kernel_size, (std::vector<std::int64_t>{3, 3}));
  EXPECT_EQ(values(copy->weight), values(a->weight));
  EXPECT_NE(copy->weight.data_ptr(), a->weight.data_ptr());
  const Tensor x = ones({1, 2, 4, 4});
  EXPECT_EQ(values((*copy)(x)), values(a(x)));
  auto deconv = std::dynamic_pointer_cast<ConvTranspose2dImpl>(ConvTranspose2d(2, 4, 2, {.bias = false})->clone());
  ASSERT_TRUE(deconv);
  EXPECT_FALSE(deconv->bias.defined());
}

TEST(ConvLayers, PrintsPyTorchStyle) {
  EXPECT_EQ(Conv2d(3, 16, 3, {.stride = 2, .padding = 1})->str(),
            "Conv2d(3, 16, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1))");
  EXPECT_EQ(Conv1d(4, 4, 5, {.dilation = 2, .groups = 4, .bias = false, .padding_mode = PaddingMode::Reflect})->str(),
            "Conv1d(4, 4, kernel_size=(5,), stride=(1,), dilation=(2,), groups=4, bias=false, padding_mode=reflect)");
  EXPECT_EQ(ConvTranspose2d(8, 4, 4, {.stride = 2, .output_padding = 1})->str(),
            "ConvTranspose2d(8, 4, kernel_size=(4, 4), stride=(2, 2), output_padding=(1, 1))");
}

TEST(ConvLayers, BadOptionsNameTheLayer) {
  expect_error<ShapeError>([] { Conv2d(3, 4, 3, {.groups = 2}); }, "Conv2d", "groups=2");
  expect_error<ShapeError>([] { Conv2d(4, 3, 3, {.groups = 2}); }, "Conv2d", "out_channels=3");
  expect_error<ShapeError>([] { Conv2d(4, 4, 3, {.groups = 0}); }, "Conv2d", "groups must be >= 1");
  expect_error<ShapeError>([] { Conv2d(0, 4, 3); }, "Conv2d", "in_channels");
  expect_error<ShapeError>([] { Conv2d(1, 1, {3, 0}); }, "Conv2d", "kernel_size must be >= 1, got [3, 0]");
  expect_error<ShapeError>([] { Conv1d(1, 1, 3, {.stride = 0}); }, "Conv1d", "stride");
  expect_error<ShapeError>([] { Conv1d(1, 1, 3, {.padding = -1}); }, "Conv1d", "padding");
  expect_error<ShapeError>([] { Conv2d(1, 1, 3, {.dilation = {1, 0}}); }, "Conv2d", "dilation");
  expect_error<ShapeError>([] { ConvTranspose2d(2, 2, 3, {.stride = 2, .output_padding = 2}); }, "ConvTranspose2d",
                           "output_padding [2, 2] must be smaller than stride [2, 2] or dilation [1, 1]");
  expect_error<ShapeError>([] { ConvTranspose2d(3, 2, 3, {.groups = 2}); }, "ConvTranspose2d", "groups=2");
}

TEST(ConvLayers, BadInputsNameTheLayer) {
  Conv2d conv(3, 4, 3);
  expect_error<ShapeError>([&] { conv(zeros({1, 2, 5, 5})); }, "Conv2d", "conv2d: given groups=1");
  expect_error<ShapeError>([&] { conv(zeros({5, 5})); }, "Conv2d", "3-d (unbatched) or 4-d (batched)");
  expect_error<ShapeError>([&] { conv(zeros({1, 3, 2, 5})); }, "Conv2d", "smaller than the kernel");
  expect_error<DTypeError>([&] { conv(zeros({1, 3, 5, 5}, {.dtype = kInt64})); }, "Conv2d", "floating-point");
  expect_error<DTypeError>([&] { conv(zeros({1, 3, 5, 5}, {.dtype = kFloat64})); }, "Conv2d", "same dtype");
  Conv2d reflect(1, 1, 3, {.padding = 3, .padding_mode = PaddingMode::Reflect});
  expect_error<Error>([&] { reflect(zeros({1, 1, 3, 3})); }, "Conv2d", "pad");
  Conv1d conv1(2, 2, 3);
  expect_error<ShapeError>([&] { conv1(zeros({1, 2, 3, 3})); }, "Conv1d", "conv1d");
  ConvTranspose2d deconv(2, 3, 3);
  expect_error<ShapeError>([&] { deconv(zeros({1, 3, 4, 4})); }, "ConvTranspose2d", "conv_transpose2d");
}

}  // namespace
}  // namespace infini::nn::conv_layer_test
