// Conv3d, ConvTranspose1d and ConvTranspose3d against direct float64 loops over any number
// of spatial dims (stride, padding, padding modes, dilation, groups, output_padding),
// gradients by gradcheck, parameters and their default initialisation, clone, printing and
// errors naming the layer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "layer_test_util.h"

import infini.nn;

namespace infini::nn::conv3d_layer_test {
namespace {

using test::expect_all_near;
using test::expect_error;
using test::expect_uniform_within;
using test::make;
using test::names;
using test::sample;
using test::seed_parameters;
using test::values;
using Ints = std::vector<std::int64_t>;

std::int64_t offset_of(const Ints& shape, const Ints& index) {
  std::int64_t at = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) at = at * shape[d] + index[d];
  return at;
}

// Every index of shape, row-major.
std::vector<Ints> indices_of(const Ints& shape) {
  std::vector<Ints> out{Ints(shape.size(), 0)};
  for (std::int64_t s : shape)
    if (s == 0) return {};
  while (true) {
    Ints next = out.back();
    std::size_t d = shape.size();
    while (d > 0 && ++next[d - 1] == shape[d - 1]) next[--d] = 0;
    if (d == 0) return out;
    out.push_back(next);
  }
}

// Where padded position i of an input of size n reads from: an index, or -1 for a zero.
std::int64_t source(std::int64_t i, std::int64_t n, PaddingMode mode) {
  if (i >= 0 && i < n) return i;
  if (mode == PaddingMode::Zeros) return -1;
  if (mode == PaddingMode::Replicate) return std::clamp<std::int64_t>(i, 0, n - 1);
  return i < 0 ? -i : 2 * (n - 1) - i;  // reflect about the edge element
}

// A convolution problem with D = stride.size() spatial dims: x (N, C, *in), weight
// (O, C / groups, *kernel) for a convolution, (C, O / groups, *kernel) for a transposed one.
struct Problem {
  Ints x_shape, w_shape;
  Ints stride, padding, dilation;
  std::int64_t groups = 1;
  Ints output_padding{};  // transposed only
};

// (N, O, *out) and the direct sum over each window, the input read through `mode`.
std::pair<Ints, std::vector<double>> conv_reference(const Problem& p, const std::vector<double>& x,
                                                    const std::vector<double>& w, const std::vector<double>& b,
                                                    PaddingMode mode = PaddingMode::Zeros) {
  const std::size_t dims = p.stride.size();
  const std::int64_t cg = p.w_shape[1], og = p.w_shape[0] / p.groups;
  const Ints kernel(p.w_shape.begin() + 2, p.w_shape.end());
  Ints ys{p.x_shape[0], p.w_shape[0]};
  for (std::size_t d = 0; d < dims; ++d)
    ys.push_back((p.x_shape[2 + d] + 2 * p.padding[d] - p.dilation[d] * (kernel[d] - 1) - 1) / p.stride[d] + 1);
  std::vector<double> y;
  for (const Ints& at : indices_of(ys)) {
    double sum = b.empty() ? 0.0 : b[at[1]];
    for (std::int64_t c = 0; c < cg; ++c)
      for (const Ints& k : indices_of(kernel)) {
        Ints xi{at[0], at[1] / og * cg + c}, wi{at[1], c};
        bool inside = true;
        for (std::size_t d = 0; d < dims; ++d) {
          const std::int64_t r =
              source(at[2 + d] * p.stride[d] - p.padding[d] + k[d] * p.dilation[d], p.x_shape[2 + d], mode);
          inside = inside && r >= 0;
          xi.push_back(r);
          wi.push_back(k[d]);
        }
        if (inside) sum += x[offset_of(p.x_shape, xi)] * w[offset_of(p.w_shape, wi)];
      }
    y.push_back(sum);
  }
  return {ys, y};
}

// (N, O, *out) and every input element scattered into the output through the kernel.
std::pair<Ints, std::vector<double>> conv_transpose_reference(const Problem& p, const std::vector<double>& x,
                                                              const std::vector<double>& w,
                                                              const std::vector<double>& b) {
  const std::size_t dims = p.stride.size();
  const std::int64_t og = p.w_shape[1], cg = p.x_shape[1] / p.groups;
  const Ints kernel(p.w_shape.begin() + 2, p.w_shape.end());
  Ints ys{p.x_shape[0], og * p.groups};
  for (std::size_t d = 0; d < dims; ++d)
    ys.push_back((p.x_shape[2 + d] - 1) * p.stride[d] - 2 * p.padding[d] + p.dilation[d] * (kernel[d] - 1) +
                 p.output_padding[d] + 1);
  std::vector<double> y;
  for (const Ints& at : indices_of(ys)) y.push_back(b.empty() ? 0.0 : b[at[1]]);
  for (const Ints& at : indices_of(p.x_shape))
    for (std::int64_t o = 0; o < og; ++o)
      for (const Ints& k : indices_of(kernel)) {
        Ints yi{at[0], at[1] / cg * og + o}, wi{at[1], o};
        bool inside = true;
        for (std::size_t d = 0; d < dims; ++d) {
          const std::int64_t r = at[2 + d] * p.stride[d] - p.padding[d] + k[d] * p.dilation[d];
          inside = inside && r >= 0 && r < ys[2 + d];
          yi.push_back(r);
          wi.push_back(k[d]);
        }
        if (inside) y[offset_of(ys, yi)] += x[offset_of(p.x_shape, at)] * w[offset_of(p.w_shape, wi)];
      }
  return {ys, y};
}

TEST(Conv3dLayer, ForwardMatchesDirectLoops) {
  Conv3d conv(4, 6, {3, 2, 2}, {.stride = {2, 1, 1}, .padding = {1, 0, 1}, .dilation = {1, 2, 1}, .groups = 2});
  conv->to(kFloat64);
  const Problem p{.x_shape = {2, 4, 5, 4, 3}, .w_shape = {6, 2, 3, 2, 2}, .stride = {2, 1, 1},
                  .padding = {1, 0, 1}, .dilation = {1, 2, 1}, .groups = 2};
  const auto [w, b] = seed_parameters(conv, 1);
  const std::vector<double> x = sample(p.x_shape, 2);
  const auto [shape, expected] = conv_reference(p, x, w, b);
  expect_all_near(conv(make(p.x_shape, x)), shape, expected, 1e-12);
}

TEST(Conv3dLayer, Float32DefaultAndUnbatchedInput) {
  Conv3d conv(2, 3, 2, {.padding = 1});
  EXPECT_EQ(conv->weight.dtype(), kFloat32);
  const std::vector<double> w = values(conv->weight), b = values(conv->bias);
  const Problem p{.x_shape = {1, 2, 3, 4, 2}, .w_shape = {3, 2, 2, 2, 2}, .stride = {1, 1, 1},
                  .padding = {1, 1, 1}, .dilation = {1, 1, 1}};
  const std::vector<double> x = sample(p.x_shape, 3);
  const Tensor y = conv(make({2, 3, 4, 2}, x).to(kFloat32));
  EXPECT_EQ(y.dtype(), kFloat32);
  const auto [shape, expected] = conv_reference(p, x, w, b);
  expect_all_near(y, Shape(shape.begin() + 1, shape.end()), expected, 1e-5);
}

TEST(Conv3dLayer, ReflectAndReplicatePadding) {
  const Problem p{.x_shape = {1, 2, 3, 4, 3}, .w_shape = {2, 2, 3, 2, 3}, .stride = {1, 2, 1},
                  .padding = {2, 1, 1}, .dilation = {1, 1, 1}};
  const std::vector<double> x = sample(p.x_shape, 4);
  for (PaddingMode mode : {PaddingMode::Reflect, PaddingMode::Replicate}) {
    Conv3d conv(2, 2, {3, 2, 3}, {.stride = {1, 2, 1}, .padding = {2, 1, 1}, .padding_mode = mode});
    conv->to(kFloat64);
    const auto [w, b] = seed_parameters(conv, 5);
    const auto [shape, expected] = conv_reference(p, x, w, b, mode);
    expect_all_near(conv(make(p.x_shape, x)), shape, expected, 1e-12);
  }
}

TEST(ConvTransposeLayers, ForwardMatchesScatterLoops) {
  ConvTranspose1d deconv1(4, 6, 3, {.stride = 2, .padding = 1, .output_padding = 1, .groups = 2, .dilation = 2});
  deconv1->to(kFloat64);
  EXPECT_EQ(deconv1->weight.shape(), (Shape{4, 3, 3}));
  const auto [w1, b1] = seed_parameters(deconv1, 6);
  const Problem p1{.x_shape = {2, 4, 5}, .w_shape = {4, 3, 3}, .stride = {2}, .padding = {1}, .dilation = {2},
                   .groups = 2, .output_padding = {1}};
  const std::vector<double> x1 = sample(p1.x_shape, 7);
  const auto [shape1, expected1] = conv_transpose_reference(p1, x1, w1, b1);
  expect_all_near(deconv1(make(p1.x_shape, x1)), shape1, expected1, 1e-12);
  // Unbatched (C, L): the first sample's result.
  const std::int64_t per_sample = static_cast<std::int64_t>(expected1.size()) / 2;
  expect_all_near(deconv1(make({4, 5}, std::vector<double>(x1.begin(), x1.begin() + 20))), {6, shape1[2]},
                  std::vector<double>(expected1.begin(), expected1.begin() + per_sample), 1e-12);

  ConvTranspose3d deconv3(2, 4, {2, 3, 2}, {.stride = {2, 1, 2}, .padding = {0, 1, 1}, .output_padding = {1, 0, 0},
                                            .groups = 2, .bias = false, .dilation = {1, 2, 1}});
  deconv3->to(kFloat64);
  EXPECT_FALSE(deconv3->bias.defined());
  const auto [w3, b3] = seed_parameters(deconv3, 8);
  const Problem p3{.x_shape = {1, 2, 3, 2, 3}, .w_shape = {2, 2, 2, 3, 2}, .stride = {2, 1, 2},
                   .padding = {0, 1, 1}, .dilation = {1, 2, 1}, .groups = 2, .output_padding = {1, 0, 0}};
  const std::vector<double> x3 = sample(p3.x_shape, 9);
  const auto [shape3, expected3] = conv_transpose_reference(p3, x3, w3, b3);
  expect_all_near(deconv3(make(p3.x_shape, x3)), shape3, expected3, 1e-12);
}

TEST(Conv3dLayers, WeightBiasAndInputGradientsPassGradcheck) {
  Conv3d conv(2, 2, 2, {.stride = {1, 2, 1}, .padding = 1, .groups = 2, .padding_mode = PaddingMode::Replicate});
  ConvTranspose1d deconv1(2, 3, 2, {.stride = 2, .output_padding = 1});
  ConvTranspose3d deconv3(2, 2, 2, {.stride = 2, .dilation = {1, 1, 2}});
  for (Module* m : std::vector<Module*>{conv.ptr().get(), deconv1.ptr().get(), deconv3.ptr().get()}) m->to(kFloat64);
  const Tensor x = make({1, 2, 2, 3, 2}, sample({1, 2, 2, 3, 2}, 10)).requires_grad_();
  test::expect_gradcheck([&](const TensorList&) { return TensorList{conv(x)}; }, {conv->weight, conv->bias, x});
  const Tensor x1 = make({2, 2, 3}, sample({2, 2, 3}, 11)).requires_grad_();
  test::expect_gradcheck([&](const TensorList&) { return TensorList{deconv1(x1)}; },
                         {deconv1->weight, deconv1->bias, x1});
  const Tensor x3 = make({1, 2, 2, 1, 2}, sample({1, 2, 2, 1, 2}, 12)).requires_grad_();
  test::expect_gradcheck([&](const TensorList&) { return TensorList{deconv3(x3)}; },
                         {deconv3->weight, deconv3->bias, x3});
}

TEST(Conv3dLayers, ParametersInitialisationAndClone) {
  Conv3d conv(4, 8, {2, 3, 3}, {.groups = 2});  // fan_in = 4 / 2 * 2 * 3 * 3 = 36
  EXPECT_EQ(names(conv->named_parameters()), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(conv->weight.shape(), (Shape{8, 2, 2, 3, 3}));
  expect_uniform_within(conv->weight, 1.0 / 6.0);
  EXPECT_LE(std::ranges::max(values(abs(conv->bias))), 1.0 / 6.0);
  // ConvTranspose's fan_in is weight.size(1) * kernel: out_channels / groups * kernel elements.
  ConvTranspose1d deconv1(16, 8, 5, {.groups = 2});
  EXPECT_EQ(deconv1->weight.shape(), (Shape{16, 4, 5}));
  expect_uniform_within(deconv1->weight, 1.0 / std::sqrt(20.0));
  ConvTranspose3d deconv3(2, 3, {1, 2, 3}, {.bias = false});
  EXPECT_EQ(names(deconv3->named_parameters()), (std::vector<std::string>{"weight"}));
  EXPECT_EQ(deconv3->weight.shape(), (Shape{2, 3, 1, 2, 3}));

  auto copy = std::dynamic_pointer_cast<Conv3dImpl>(conv->clone());
  ASSERT_TRUE(copy);
  EXPECT_EQ(copy->kernel_size, (Ints{2, 3, 3}));
  EXPECT_NE(copy->weight.data_ptr(), conv->weight.data_ptr());
  const Tensor x = ones({1, 4, 3, 3, 3});
  EXPECT_EQ(values((*copy)(x)), values(conv(x)));
  auto deconv_copy = std::dynamic_pointer_cast<ConvTranspose1dImpl>(deconv1->clone());
  ASSERT_TRUE(deconv_copy);
  EXPECT_EQ(deconv_copy->groups, 2);
  EXPECT_EQ(values(deconv_copy->weight), values(deconv1->weight));
  ConvTranspose1d other(16, 8, 5, {.groups = 2});
  other->load_state_dict(deconv1->state_dict());
  EXPECT_EQ(values(other->bias), values(deconv1->bias));
}

TEST(Conv3dLayers, PrintsPyTorchStyle) {
  EXPECT_EQ(Conv3d(3, 16, 3, {.stride = 2, .padding_mode = PaddingMode::Replicate})->str(),
            "Conv3d(3, 16, kernel_size=(3, 3, 3), stride=(2, 2, 2), padding_mode=replicate)");
  EXPECT_EQ(ConvTranspose1d(8, 4, 4, {.stride = 2, .output_padding = 1})->str(),
            "ConvTranspose1d(8, 4, kernel_size=(4,), stride=(2,), output_padding=(1,))");
  EXPECT_EQ(ConvTranspose3d(2, 2, {1, 2, 3}, {.padding = 1, .groups = 2, .bias = false, .dilation = {1, 1, 2}})->str(),
            "ConvTranspose3d(2, 2, kernel_size=(1, 2, 3), stride=(1, 1, 1), padding=(1, 1, 1), dilation=(1, 1, 2), "
            "groups=2, bias=false)");
}

TEST(Conv3dLayers, BadOptionsAndInputsNameTheLayer) {
  expect_error<ShapeError>([] { Conv3d(3, 4, 3, {.groups = 2}); }, "Conv3d", "groups=2");
  expect_error<ShapeError>([] { Conv3d(1, 1, {3, 0, 3}); }, "Conv3d", "kernel_size must be >= 1, got [3, 0, 3]");
  expect_error<ShapeError>([] { ConvTranspose1d(2, 2, 3, {.stride = 2, .output_padding = 2}); }, "ConvTranspose1d",
                           "output_padding [2] must be smaller than stride [2] or dilation [1]");
  expect_error<ShapeError>([] { ConvTranspose3d(2, 2, 3, {.padding = {0, -1, 0}}); }, "ConvTranspose3d", "padding");
  expect_error<ShapeError>([] { ConvTranspose3d(3, 2, 3, {.groups = 2}); }, "ConvTranspose3d", "groups=2");
  Conv3d conv(3, 4, 3);
  expect_error<ShapeError>([&] { conv(zeros({1, 2, 5, 5, 5})); }, "Conv3d", "conv3d: given groups=1");
  expect_error<ShapeError>([&] { conv(zeros({3, 5, 5})); }, "Conv3d", "4-d (unbatched) or 5-d (batched)");
  expect_error<DTypeError>([&] { conv(zeros({1, 3, 5, 5, 5}, {.dtype = kFloat64})); }, "Conv3d", "same dtype");
  Conv3d reflect(1, 1, 3, {.padding = 3, .padding_mode = PaddingMode::Reflect});
  expect_error<Error>([&] { reflect(zeros({1, 1, 3, 3, 3})); }, "Conv3d", "pad");
  expect_error<ShapeError>([&] { ConvTranspose1d(2, 3, 3)(zeros({1, 3, 4})); }, "ConvTranspose1d",
                           "conv_transpose1d");
  expect_error<ShapeError>([&] { ConvTranspose3d(2, 3, 3)(zeros({2, 4, 4, 4, 4})); }, "ConvTranspose3d",
                           "conv_transpose3d");
}

}  // namespace
}  // namespace infini::nn::conv3d_layer_test
