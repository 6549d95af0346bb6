// The fused layer-norm kernels behind layer_norm (float32/64 rows): float32 against a naive
// float64 loop on rows far from zero (the two-pass variance), every affine combination,
// float32 gradients against float64 ones, more rows than one 64-row chunk of the affine
// sums, zero rows, mixed dtypes (the composed path), results made in another dtype
// (out_dtype: the bits of a cast after it, gradients too), the residual passthrough whose
// gradient the backward adds (the bits of a separate add); on a GPU, the CUDA kernels against
// the CPU's over many chunks and column blocks. The op table entry gradchecks and
// gradgradchecks it in float64 (nn_functional_ops_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "op_info.h"

namespace infini::test::layer_norm_fused_test {
namespace {

constexpr std::int64_t kRows = 70, kCols = 33;

// y[i, j] = (x[i, j] - mean_i) / sqrt(var_i + eps) * w[j] + b[j], in float64.
std::vector<double> naive_layer_norm(const std::vector<double>& x, const std::vector<double>* w,
                                     const std::vector<double>* b, double eps) {
  std::vector<double> y(x.size());
  for (std::int64_t i = 0; i < kRows; ++i) {
    double m = 0, v = 0;
    for (std::int64_t j = 0; j < kCols; ++j) m += x[i * kCols + j];
    m /= kCols;
    for (std::int64_t j = 0; j < kCols; ++j) v += (x[i * kCols + j] - m) * (x[i * kCols + j] - m);
    const double r = 1 / std::sqrt(v / kCols + eps);
    for (std::int64_t j = 0; j < kCols; ++j) {
      double e = (x[i * kCols + j] - m) * r;
      if (w) e *= (*w)[j];
      if (b) e += (*b)[j];
      y[i * kCols + j] = e;
    }
  }
  return y;
}

TEST(LayerNormFused, Float32RowsFarFromZeroMatchANaiveFloat64Loop) {
  // Rows around 1000 with spread 1: a one-pass variance (E[x^2] - E[x]^2) in float32 loses it
  // (errors near 1e-1). Two passes leave the float32 mean's rounding, up to half an ulp of 1000
  // (3e-5) shifting a row, times rstd (about 1.7).
  const Tensor x = add(sample({kRows, kCols}, -1, 1, 31), 1000.0).to(kFloat32);
  const Tensor w = sample({kCols}, 0.5, 1.5, 32).to(kFloat32), b = sample({kCols}, -1, 1, 33).to(kFloat32);
  const auto xv = values(x.to(kFloat64)), wv = values(w.to(kFloat64)), bv = values(b.to(kFloat64));
  for (const bool with_w : {false, true})
    for (const bool with_b : {false, true}) {
      const Tensor y = layer_norm(x, {kCols}, with_w ? std::optional(w) : std::nullopt,
                                  with_b ? std::optional(b) : std::nullopt, 1e-5);
      ASSERT_EQ(y.dtype(), kFloat32);
      const auto want = naive_layer_norm(xv, with_w ? &wv : nullptr, with_b ? &bv : nullptr, 1e-5);
      const auto got = values(y.to(kFloat64));
      for (std::size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], want[i], 1e-4 * (1 + std::abs(want[i]))) << "weight " << with_w << " bias " << with_b
                                                                      << " element " << i;
    }
}

TEST(LayerNormFused, Float32GradientsMatchFloat64AcrossChunksOfRows) {
  const Tensor x64 = sample({kRows, kCols}, -2, 2, 34), w64 = sample({kCols}, 0.5, 1.5, 35);
  const Tensor b64 = sample({kCols}, -1, 1, 36), g64 = sample({kRows, kCols}, -1, 1, 37);
  auto grads = [&](DataType dtype) {
    const Tensor x = x64.to(dtype).detach().requires_grad_(), w = w64.to(dtype).detach().requires_grad_();
    const Tensor b = b64.to(dtype).detach().requires_grad_();
    layer_norm(x, {kCols}, w, b, 1e-5).backward(g64.to(dtype));
    return TensorList{x.grad().to(kFloat64), w.grad().to(kFloat64), b.grad().to(kFloat64)};
  };
  const TensorList want = grads(kFloat64), got = grads(kFloat32);
  for (std::size_t k = 0; k < want.size(); ++k) {
    const auto a = values(got[k]), e = values(want[k]);
    for (std::size_t i = 0; i < a.size(); ++i)
      ASSERT_NEAR(a[i], e[i], 1e-4 * (1 + std::abs(e[i]))) << "gradient " << k << " element " << i;
  }
  // Against the composed formula's column sums, independently: dbias is the sum of g over rows.
  const auto g = values(g64), db = values(want[2]);
  for (std::int64_t j = 0; j < kCols; ++j) {
    double s = 0;
    for (std::int64_t i = 0; i < kRows; ++i) s += g[i * kCols + j];
    EXPECT_NEAR(db[j], s, 1e-12) << "column " << j;
  }
}

// x, weight and bias leaves of dtype, for the gradient tests below.
struct Leaves {
  Tensor x, w, b;
};
Leaves leaves(DataType dtype) {
  return {sample({kRows, kCols}, -2, 2, 44).to(dtype).requires_grad_(),
          sample({kCols}, 0.5, 1.5, 45).to(dtype).requires_grad_(),
          sample({kCols}, -1, 1, 46).to(dtype).requires_grad_()};
}

TEST(LayerNormFused, HalfOutputsAreTheBitsOfACastAndSoAreTheirGradients) {
  for (const DataType half : {kBFloat16, kFloat16}) {
    const Tensor g = sample({kRows, kCols}, -1, 1, 47).to(half);
    const Leaves direct = leaves(kFloat32), cast = leaves(kFloat32);
    const Tensor y = layer_norm(direct.x, {kCols}, direct.w, direct.b, 1e-5, half);
    const Tensor want = layer_norm(cast.x, {kCols}, cast.w, cast.b, 1e-5).to(half);
    ASSERT_EQ(y.dtype(), half);
    EXPECT_EQ(values(y), values(want)) << half;
    y.backward(g);
    want.backward(g);
    for (const auto& [got, expected, name] : {std::tuple{direct.x, cast.x, "x"}, {direct.w, cast.w, "weight"},
                                              {direct.b, cast.b, "bias"}}) {
      ASSERT_EQ(got.grad().dtype(), kFloat32) << half << " " << name;
      EXPECT_EQ(values(got.grad()), values(expected.grad())) << half << " " << name;
    }
  }
}

TEST(LayerNormFused, HalfOutputsGradientsWithAGraphMatchTheKernels) {
  const Tensor g = sample({kRows, kCols}, -1, 1, 48).to(kBFloat16);
  const Leaves p = leaves(kFloat32);
  const TensorList inputs{p.x, p.w, p.b};
  const TensorList kernel = autograd::grad({layer_norm(p.x, {kCols}, p.w, p.b, 1e-5, kBFloat16)}, inputs, {g});
  const TensorList graph =
      autograd::grad({layer_norm(p.x, {kCols}, p.w, p.b, 1e-5, kBFloat16)}, inputs, {g}, std::nullopt, true);
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    ASSERT_EQ(graph[k].dtype(), kFloat32) << "input " << k;
    const auto a = values(graph[k]), e = values(kernel[k]);
    for (std::size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], e[i], 1e-4 * (1 + std::abs(e[i]))) << k << " " << i;
  }
  EXPECT_TRUE(graph[0].requires_grad());  // a graph to differentiate again
}

TEST(LayerNormFused, OtherOutputDtypesConvertTheResult) {
  const Tensor x = sample({kRows, kCols}, -2, 2, 49);
  // float64 rows (fused, then cast), bfloat16 rows (the composed form, then cast), and
  // float32 rows kept in float32.
  EXPECT_EQ(values(layer_norm(x, {kCols}, std::nullopt, std::nullopt, 1e-5, kBFloat16)),
            values(layer_norm(x, {kCols}).to(kBFloat16)));
  const Tensor x16 = x.to(kBFloat16);
  const Tensor y32 = layer_norm(x16, {kCols}, std::nullopt, std::nullopt, 1e-5, kFloat32);
  ASSERT_EQ(y32.dtype(), kFloat32);
  EXPECT_EQ(values(y32), values(layer_norm(x16, {kCols}).to(kFloat32)));
  const Tensor x32 = x.to(kFloat32);
  EXPECT_EQ(values(layer_norm(x32, {kCols}, std::nullopt, std::nullopt, 1e-5, kFloat32)),
            values(layer_norm(x32, {kCols})));
}

TEST(LayerNormFused, UnderAutocastTheFloat32ResultIsMadeInTheOutputDtype) {
  const Tensor x = sample({kRows, kCols}, -2, 2, 50).to(kBFloat16);  // autocast runs layer_norm in float32
  Tensor y;
  {
    AutocastGuard autocast(DeviceType::CPU, kBFloat16);
    y = layer_norm(x, {kCols}, std::nullopt, std::nullopt, 1e-5, kBFloat16);
  }
  ASSERT_EQ(y.dtype(), kBFloat16);
  EXPECT_EQ(values(y), values(layer_norm(x.to(kFloat32), {kCols}).to(kBFloat16)));
}

TEST(LayerNormFused, BadOutputDtypesRaise) {
  const Tensor x = sample({kRows, kCols}, -2, 2, 51).to(kFloat32);
  expect_error<DTypeError>([&] { layer_norm(x, {kCols}, std::nullopt, std::nullopt, 1e-5, kInt32); }, "layer_norm",
                           {"out_dtype", "int32"});
  expect_error<DTypeError>([&] { kernels::layer_norm_forward(x.to(kFloat64), Tensor(), Tensor(), 1e-5, kBFloat16); },
                           "layer_norm", {"float64", "bfloat16"});
}

// x + 0.5 layer_norm(x) through layer_norm_with_residual (fused) or composed; the gradients
// of x, weight and bias for the output gradient g.
TensorList residual_block_grads(const Tensor& x64, const Tensor& g, DataType dtype, Device device, bool fused,
                                std::optional<DataType> out_dtype = std::nullopt) {
  const std::int64_t cols = x64.shape().back();
  const Tensor x = x64.to(dtype).to(device).detach().requires_grad_();
  const Tensor w = sample({cols}, 0.5, 1.5, 52).to(dtype).to(device).requires_grad_();
  const Tensor b = sample({cols}, -1, 1, 53).to(dtype).to(device).requires_grad_();
  Tensor y;
  if (fused) {
    const auto [h, residual] = layer_norm_with_residual(x, {cols}, w, b, 1e-5, out_dtype);
    EXPECT_EQ(h.dtype(), out_dtype.value_or(dtype));
    y = add(residual, mul(h, 0.5));
  } else {
    const Tensor h = layer_norm(x, {cols}, w, b, 1e-5);
    y = add(x, mul(out_dtype ? h.to(*out_dtype) : h, 0.5));
  }
  y.backward(g.to(device));
  return {y, x.grad(), w.grad(), b.grad()};
}

TEST(LayerNormFused, TheResidualsGradientIsAddedWithASeparateAddsBits) {
  const Tensor x64 = sample({kRows, kCols}, -2, 2, 54), g = sample({kRows, kCols}, -1, 1, 55).to(kFloat32);
  for (const auto out : {std::optional<DataType>{}, std::optional<DataType>{kBFloat16}}) {
    const TensorList fused = residual_block_grads(x64, g, kFloat32, Device::cpu(), true, out);
    const TensorList composed = residual_block_grads(x64, g, kFloat32, Device::cpu(), false, out);
    for (std::size_t k = 0; k < fused.size(); ++k)
      EXPECT_EQ(values(fused[k]), values(composed[k])) << "output " << k << (out ? " bfloat16 norm" : "");
  }
}

TEST(LayerNormFused, TheResidualAloneOrTheNormAloneGetTheirGradients) {
  const Leaves p = leaves(kFloat32);
  const Tensor g = sample({kRows, kCols}, -1, 1, 56).to(kFloat32);
  {
    const auto [h, residual] = layer_norm_with_residual(p.x, {kCols}, p.w, p.b);
    EXPECT_EQ(values(residual), values(p.x));
    residual.backward(g);  // the norm gets no gradient: x's is the residual's
    EXPECT_EQ(values(p.x.grad()), values(g));
  }
  const Leaves q = leaves(kFloat32), want = leaves(kFloat32);
  layer_norm_with_residual(q.x, {kCols}, q.w, q.b).normalized.backward(g);
  layer_norm(want.x, {kCols}, want.w, want.b).backward(g);
  EXPECT_EQ(values(q.x.grad()), values(want.x.grad()));
  EXPECT_EQ(values(q.w.grad()), values(want.w.grad()));
  // Other dtypes take the composed form: {layer_norm(x), x}.
  const Tensor x16 = sample({kRows, kCols}, -2, 2, 57).to(kBFloat16);
  const auto [h16, r16] = layer_norm_with_residual(x16, {kCols});
  EXPECT_TRUE(r16.is_same(x16));
  EXPECT_EQ(values(h16), values(layer_norm(x16, {kCols})));
  expect_error<ShapeError>(
      [&] {
        kernels::layer_norm_backward(g, p.x.detach(), zeros({kRows}), ones({kRows}), Tensor(), false, false,
                                     zeros({kRows, kCols + 1}));
      },
      "layer_norm", {"[70, 34]", "[70, 33]"});
  expect_error<ShapeError>(
      [&] { kernels::layer_norm_backward(g, p.x.detach(), zeros({kRows + 1}), ones({kRows}), Tensor(), false, false); },
      "layer_norm", {"mean and rstd of shape [70]", "[71]"});
  expect_error<DTypeError>(
      [&] {
        kernels::layer_norm_backward(g, p.x.detach(), zeros({kRows}), ones({kRows}).to(kFloat64), Tensor(), false,
                                     false);
      },
      "layer_norm", {"mean and rstd of float32", "float64"});
}

TEST(LayerNormFusedCuda, GradientsMatchTheCpuOverManyChunksAndColumnBlocks) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const Device gpu = Device::cuda(0);
  // 1500 rows are 47 chunks of 32 (the last one partial), more than the 16 chunk strides of
  // the CUDA column sums; 70 columns are three blocks of 32 columns, the last one partial.
  // 4100 columns are too wide for the one-pass kernel's shared slices (64 bytes per float32
  // column, 128 per float64, against at most 227 KiB per block): they take the two-pass path.
  for (const auto [rows, cols] : {std::pair<std::int64_t, std::int64_t>{1500, 70}, {100, 4100}}) {
    const Tensor x64 = sample({rows, cols}, -2, 2, 40), w64 = sample({cols}, 0.5, 1.5, 41);
    const Tensor b64 = sample({cols}, -1, 1, 42), g64 = sample({rows, cols}, -1, 1, 43);
    auto grads = [&](DataType dtype, Device device) {
      const Tensor x = x64.to(dtype).to(device).detach().requires_grad_();
      const Tensor w = w64.to(dtype).to(device).detach().requires_grad_();
      const Tensor b = b64.to(dtype).to(device).detach().requires_grad_();
      const Tensor y = layer_norm(x, {cols}, w, b, 1e-5);
      y.backward(g64.to(dtype).to(device));
      return TensorList{y.to(kFloat64), x.grad().to(kFloat64), w.grad().to(kFloat64), b.grad().to(kFloat64)};
    };
    const TensorList want = grads(kFloat64, Device::cpu());
    for (const DataType dtype : {kFloat64, kFloat32}) {
      const double tolerance = dtype == kFloat64 ? 1e-10 : 1e-4;
      const TensorList got = grads(dtype, gpu), again = grads(dtype, gpu);
      for (std::size_t k = 0; k < want.size(); ++k) {
        const auto a = values(got[k]), e = values(want[k]);
        ASSERT_EQ(a.size(), e.size());
        const std::string what = concat(rows, "x", cols, " ", dtype, " output ", k);
        for (std::size_t i = 0; i < a.size(); ++i)
          ASSERT_NEAR(a[i], e[i], tolerance * (1 + std::abs(e[i]))) << what << " element " << i;
        EXPECT_EQ(values(again[k]), a) << what << ": two runs differ";
      }
    }
    // float32 rows written, and their gradient read, in bfloat16: the bits of the casts.
    const Tensor g = g64.to(kBFloat16).to(gpu);
    auto half_grads = [&](bool direct) {
      const Tensor x = x64.to(kFloat32).to(gpu).detach().requires_grad_();
      const Tensor w = w64.to(kFloat32).to(gpu).detach().requires_grad_();
      const Tensor b = b64.to(kFloat32).to(gpu).detach().requires_grad_();
      const Tensor y = direct ? layer_norm(x, {cols}, w, b, 1e-5, kBFloat16)
                              : layer_norm(x, {cols}, w, b, 1e-5).to(kBFloat16);
      y.backward(g);
      return TensorList{y, x.grad(), w.grad(), b.grad()};
    };
    const TensorList direct = half_grads(true), cast = half_grads(false);
    for (std::size_t k = 0; k < direct.size(); ++k)
      EXPECT_EQ(values(direct[k]), values(cast[k])) << rows << "x" << cols << " bfloat16 output " << k;
    // A residual's gradient added by the kernel: the bits of a separate add.
    const Tensor g32 = g64.to(kFloat32);
    for (const auto out : {std::optional<DataType>{}, std::optional<DataType>{kBFloat16}}) {
      const TensorList fused = residual_block_grads(x64, g32, kFloat32, gpu, true, out);
      const TensorList composed = residual_block_grads(x64, g32, kFloat32, gpu, false, out);
      for (std::size_t k = 0; k < fused.size(); ++k)
        EXPECT_EQ(values(fused[k]), values(composed[k])) << rows << "x" << cols << " residual output " << k;
    }
  }
}

TEST(LayerNormFused, ZeroRowsGiveEmptyResultsAndGradients) {
  const Tensor x = zeros({0, 4}).requires_grad_(), w = ones({4}).requires_grad_(), b = zeros({4}).requires_grad_();
  const Tensor y = layer_norm(x, {4}, w, b);
  EXPECT_EQ(y.shape(), (Shape{0, 4}));
  sum(y).backward();
  EXPECT_EQ(x.grad().shape(), (Shape{0, 4}));
  EXPECT_EQ(values(w.grad()), std::vector<double>(4, 0.0));
  EXPECT_EQ(values(b.grad()), std::vector<double>(4, 0.0));
}

TEST(LayerNormFused, MixedDtypesPromoteThroughTheComposedForm) {
  const Tensor x = sample({3, 4}, -2, 2, 38).to(kFloat32), w = sample({4}, 0.5, 1.5, 39);  // float64 weight
  const Tensor y = layer_norm(x, {4}, w, std::nullopt);
  EXPECT_EQ(y.dtype(), kFloat64);
  const Tensor want = layer_norm(x.to(kFloat64), {4}, w, std::nullopt);
  const auto a = values(y), e = values(want);
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], e[i], 1e-6);
}

}  // namespace
}  // namespace infini::test::layer_norm_fused_test
