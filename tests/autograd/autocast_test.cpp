// Autocast (AutocastGuard): the ops of the lower-precision list compute on bfloat16/float16
// casts of their float32 inputs, those of the float32 list on float32 casts of 16-bit
// inputs, other ops in their inputs' dtypes; float64 and other devices' tensors are left
// alone; gradients reach float32 leaves as float32; backward passes run with autocast off;
// cached parameter casts follow in-place changes. Each op result is compared bitwise with
// the same op on explicitly cast inputs outside autocast, and the products also against a
// naive float64 loop over the rounded operands (so a cast that did not happen fails).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "op_info.h"

namespace infini::test::autocast_test {
namespace {

// op_info.h's float64 samples, as float32 (the dtype autocast casts).
Tensor sample32(const Shape& shape, double lo = -2, double hi = 2, std::uint64_t seed = 1) {
  return sample(shape, lo, hi, seed).to(kFloat32);
}

void expect_same(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.dtype(), want.dtype());
  ASSERT_EQ(got.shape(), want.shape());
  const std::vector<double> g = values(got), w = values(want);
  for (std::size_t i = 0; i < g.size(); ++i)
    EXPECT_EQ(std::bit_cast<std::uint64_t>(g[i]), std::bit_cast<std::uint64_t>(w[i])) << i << ": " << g[i] << " vs " << w[i];
}

// x rounded to the nearest bfloat16, ties to even (x finite).
double round_bf16(double x) {
  auto bits = std::bit_cast<std::uint32_t>(static_cast<float>(x));
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return std::bit_cast<float>(bits & 0xffff0000u);
}

TEST(Autocast, GuardSetsAndRestoresThePerDeviceState) {
  EXPECT_FALSE(is_autocast_enabled(DeviceType::CPU));
  EXPECT_EQ(autocast_dtype(DeviceType::CPU), kBFloat16);  // PyTorch's defaults
  EXPECT_EQ(autocast_dtype(DeviceType::CUDA), kFloat16);
  {
    AutocastGuard outer(DeviceType::CPU, kFloat16);
    EXPECT_TRUE(is_autocast_enabled(DeviceType::CPU));
    EXPECT_FALSE(is_autocast_enabled(DeviceType::CUDA));
    EXPECT_EQ(autocast_dtype(DeviceType::CPU), kFloat16);
    {
      AutocastGuard off(DeviceType::CPU, kBFloat16, /*enabled=*/false);
      EXPECT_FALSE(is_autocast_enabled(DeviceType::CPU));
    }
    EXPECT_TRUE(is_autocast_enabled(DeviceType::CPU));
    EXPECT_EQ(autocast_dtype(DeviceType::CPU), kFloat16);
  }
  EXPECT_FALSE(is_autocast_enabled(DeviceType::CPU));
  EXPECT_EQ(autocast_dtype(DeviceType::CPU), kBFloat16);
}

TEST(Autocast, RejectsDtypesOtherThanBfloat16AndFloat16) {
  expect_error([] { AutocastGuard guard(DeviceType::CPU, kFloat32); }, "autocast", "bfloat16 or float16");
  expect_error([] { AutocastGuard guard(DeviceType::CUDA, kFloat64); }, "autocast", "got float64");
  EXPECT_FALSE(is_autocast_enabled(DeviceType::CPU));
}

TEST(Autocast, MatmulRunsOnBfloat16CastsOfFloat32Inputs) {
  const Tensor a = sample32({5, 7}, -2, 2, 1), b = sample32({7, 3}, -2, 2, 2);
  Tensor y;
  {
    AutocastGuard autocast(DeviceType::CPU, kBFloat16);
    y = matmul(a, b);
  }
  expect_same(y, matmul(a.to(kBFloat16), b.to(kBFloat16)));
  // The naive loop over the rounded operands, summed exactly and rounded once.
  const std::vector<double> va = values(a), vb = values(b), got = values(y);
  for (std::int64_t i = 0; i < 5; ++i)
    for (std::int64_t j = 0; j < 3; ++j) {
      double sum = 0, scale = 0;
      for (std::int64_t p = 0; p < 7; ++p) {
        sum += round_bf16(va[i * 7 + p]) * round_bf16(vb[p * 3 + j]);
        scale += std::abs(round_bf16(va[i * 7 + p]) * round_bf16(vb[p * 3 + j]));
      }
      EXPECT_NEAR(got[i * 3 + j], sum, std::ldexp(scale, -8)) << i << "," << j;
    }
}

// The 16-bit products autocast produces, with an operand broadcast over the batch (read
// through stride 0, not copied out): each batch entry equals its own product.
TEST(Autocast, SixteenBitProductsBroadcastLikeTheirSlices) {
  const Tensor a = sample32({5, 7}, -2, 2, 30).to(kBFloat16), b = sample32({3, 7, 4}, -2, 2, 31).to(kBFloat16);
  const Tensor y = matmul(a, b);  // (3, 5, 4)
  ASSERT_EQ(y.dtype(), kBFloat16);
  for (std::int64_t i = 0; i < 3; ++i) expect_same(y.select(0, i), matmul(a, b.select(0, i)));
}

TEST(Autocast, EveryLowerPrecisionOpReturnsTheAutocastDtype) {
  const Tensor x = sample32({2, 4}, -1, 1, 3), w = sample32({3, 4}, -1, 1, 4), bias = sample32({3}, -1, 1, 5);
  const Tensor batch1 = sample32({2, 3, 4}, -1, 1, 6), batch2 = sample32({2, 4, 2}, -1, 1, 7);
  const Tensor image = sample32({1, 2, 5, 5}, -1, 1, 8), kernel = sample32({3, 2, 3, 3}, -1, 1, 9);
  const Tensor q = sample32({1, 2, 4, 8}, -1, 1, 10), k = sample32({1, 2, 4, 8}, -1, 1, 11),
               v = sample32({1, 2, 4, 8}, -1, 1, 12);
  const auto h = [](const Tensor& t) { return t.to(kFloat16); };
  AutocastGuard autocast(DeviceType::CPU, kFloat16);
  std::vector<std::pair<Tensor, Tensor>> cases;  // (under autocast, explicit casts with autocast off)
  cases.emplace_back(linear(x, w, bias), Tensor());
  cases.emplace_back(mm(x, w.t()), Tensor());
  cases.emplace_back(bmm(batch1, batch2), Tensor());
  cases.emplace_back(addmm(bias, x, w.t()), Tensor());
  cases.emplace_back(baddbmm(sample32({2, 3, 2}), batch1, batch2), Tensor());
  cases.emplace_back(conv2d(image, kernel), Tensor());
  cases.emplace_back(scaled_dot_product_attention(q, k, v, {}, 0.0, true), Tensor());
  {
    AutocastGuard off(DeviceType::CPU, kFloat16, false);
    cases[0].second = linear(h(x), h(w), h(bias));
    cases[1].second = mm(h(x), h(w.t()));
    cases[2].second = bmm(h(batch1), h(batch2));
    cases[3].second = addmm(h(bias), h(x), h(w.t()));
    cases[4].second = baddbmm(h(sample32({2, 3, 2})), h(batch1), h(batch2));
    cases[5].second = conv2d(h(image), h(kernel));
    cases[6].second = scaled_dot_product_attention(h(q), h(k), h(v), {}, 0.0, true);
  }
  for (std::size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(cases[i].first.dtype(), kFloat16);
    expect_same(cases[i].first, cases[i].second);
  }
}

TEST(Autocast, Float32OpsUpcastSixteenBitInputs) {
  const Tensor x = sample32({3, 6}, -3, 3, 13).to(kBFloat16);
  const Tensor target = from_vector(std::vector<std::int64_t>{1, 5, 0});
  const Tensor gamma = sample32({6}, 0.5, 1.5, 14), beta = sample32({6}, -1, 1, 15);
  AutocastGuard autocast(DeviceType::CPU, kBFloat16);
  const Tensor f = x.to(kFloat32);
  std::vector<std::pair<Tensor, Tensor>> cases;
  cases.emplace_back(softmax(x, 1), Tensor());
  cases.emplace_back(log_softmax(x, 0), Tensor());
  cases.emplace_back(cross_entropy(x, target), Tensor());
  cases.emplace_back(layer_norm(x, {6}, gamma.to(kBFloat16), beta), Tensor());
  cases.emplace_back(mse_loss(x, flip(x, {0})), Tensor());
  cases.emplace_back(logsumexp(x, {1}), Tensor());
  {
    AutocastGuard off(DeviceType::CPU, kBFloat16, false);
    cases[0].second = softmax(f, 1);
    cases[1].second = log_softmax(f, 0);
    cases[2].second = cross_entropy(f, target);
    cases[3].second = layer_norm(f, {6}, gamma.to(kBFloat16).to(kFloat32), beta);
    cases[4].second = mse_loss(f, flip(f, {0}));
    cases[5].second = logsumexp(f, {1});
  }
  for (std::size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(cases[i].first.dtype(), kFloat32);
    expect_same(cases[i].first, cases[i].second);
  }
}

TEST(Autocast, OtherOpsKeepTheirInputsDtypesAndPromote) {
  const Tensor a = sample32({4}, -1, 1, 16), b = sample32({4}, -1, 1, 17).to(kBFloat16);
  AutocastGuard autocast(DeviceType::CPU, kBFloat16);
  EXPECT_EQ(add(a, a).dtype(), kFloat32);
  EXPECT_EQ(mul(b, b).dtype(), kBFloat16);
  const Tensor residual = add(a, b);  // float32 + bfloat16 promotes
  EXPECT_EQ(residual.dtype(), kFloat32);
  expect_same(residual, add(a, b.to(kFloat32)));
  EXPECT_EQ(gelu(b).dtype(), kBFloat16);
}

TEST(Autocast, LeavesFloat64AndOtherDevicesAlone) {
  const Tensor a = sample({3, 3}, -1, 1, 18), b = sample32({3, 3}, -1, 1, 19);
  {
    AutocastGuard autocast(DeviceType::CPU, kBFloat16);
    const Tensor y = matmul(a, a);
    EXPECT_EQ(y.dtype(), kFloat64);
    expect_same(y, [&] {
      AutocastGuard off(DeviceType::CPU, kBFloat16, false);
      return matmul(a, a);
    }());
  }
  AutocastGuard cuda_only(DeviceType::CUDA, kBFloat16);  // CPU tensors are not CUDA's
  const Tensor y = matmul(b, b);
  EXPECT_EQ(y.dtype(), kFloat32);
  EXPECT_EQ(softmax(b.to(kBFloat16), 0).dtype(), kBFloat16);
}

TEST(Autocast, GradientsReachFloat32LeavesAsFloat32) {
  Tensor x = sample32({4, 5}, -1, 1, 20).requires_grad_(), w = sample32({3, 5}, -1, 1, 21).requires_grad_();
  Tensor bias = sample32({3}, -1, 1, 22).requires_grad_();
  Tensor loss;
  {
    AutocastGuard autocast(DeviceType::CPU, kBFloat16);
    const Tensor y = linear(x, w, bias);
    ASSERT_EQ(y.dtype(), kBFloat16);
    loss = cross_entropy(y, from_vector(std::vector<std::int64_t>{0, 2, 1, 2}));  // float32
  }
  ASSERT_EQ(loss.dtype(), kFloat32);
  loss.backward();
  ASSERT_EQ(w.grad().dtype(), kFloat32);
  ASSERT_EQ(x.grad().dtype(), kFloat32);
  ASSERT_EQ(bias.grad().dtype(), kFloat32);
  // The same graph written with explicit casts.
  Tensor x2 = x.detach().requires_grad_(), w2 = w.detach().requires_grad_(), b2 = bias.detach().requires_grad_();
  const Tensor y2 = linear(x2.to(kBFloat16), w2.to(kBFloat16), b2.to(kBFloat16));
  cross_entropy(y2.to(kFloat32), from_vector(std::vector<std::int64_t>{0, 2, 1, 2})).backward();
  expect_same(loss, cross_entropy(y2.detach().to(kFloat32), from_vector(std::vector<std::int64_t>{0, 2, 1, 2})));
  expect_same(w.grad(), w2.grad());
  expect_same(x.grad(), x2.grad());
  expect_same(bias.grad(), b2.grad());
}

TEST(Autocast, BackwardRunsWithAutocastOff) {
  // A float32 product recorded outside autocast, differentiated inside: its backward
  // products stay float32 (under autocast they would round to bfloat16).
  Tensor x = sample32({3, 4}, -1, 1, 23).requires_grad_();
  const Tensor w = sample32({4, 2}, -1, 1, 24);
  const Tensor g = sample32({3, 2}, -1, 1, 25);
  const Tensor y = matmul(x, w);
  {
    AutocastGuard autocast(DeviceType::CPU, kBFloat16);
    y.backward(g);
  }
  ASSERT_EQ(x.grad().dtype(), kFloat32);
  expect_same(x.grad(), matmul(g, w.t()));
}

TEST(Autocast, CachedParameterCastsFollowInPlaceChanges) {
  const Tensor x = sample32({2, 3}, -1, 1, 26);
  Tensor w = sample32({4, 3}, -1, 1, 27).requires_grad_();
  AutocastGuard autocast(DeviceType::CPU, kBFloat16);
  const Tensor y1 = linear(x, w);
  {
    NoGradGuard no_grad;
    mul_(w, 2.0);  // exact in bfloat16: the new cast is twice the old one
  }
  const Tensor y2 = linear(x, w);
  expect_same(y2, mul(y1, 2.0));
  // The parameter used twice in one region gets one gradient through both uses.
  const Tensor both = add(sum(linear(x, w).to(kFloat32)), sum(linear(x, w).to(kFloat32)));
  both.backward();
  ASSERT_EQ(w.grad().dtype(), kFloat32);
  const std::vector<double> grad = values(w.grad()), xs = values(x);
  for (std::int64_t o = 0; o < 4; ++o)
    for (std::int64_t i = 0; i < 3; ++i)  // each use: sum over rows of bfloat16 x[r][i], rounded to bfloat16
      EXPECT_DOUBLE_EQ(grad[o * 3 + i], 2 * round_bf16(round_bf16(xs[i]) + round_bf16(xs[3 + i]))) << o << "," << i;
}

}  // namespace
}  // namespace infini::test::autocast_test
