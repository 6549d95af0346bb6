// scaled_dot_product_attention against a naive float64 implementation that materialises
// the score matrix, for plain, causal, masked, grouped-query and dropout attention.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "op_info.h"

namespace infini::test::attention_ops_test {
namespace {

struct RefOptions {
  bool causal = false;
  std::optional<Tensor> mask = std::nullopt;  // (Tq, Tk) bool or float
  double dropout_p = 0;
  std::uint64_t seed = 0;      // Generator seed of the dropout draws (offset 0)
};

// out[b,h,i] = sum_j softmax_j(scale q_i . k_j + mask) * keep_ij * v_j, computed naively.
Tensor attention_ref(const Tensor& q, const Tensor& k, const Tensor& v, const RefOptions& o) {
  const auto qv = values(q.contiguous()), kv = values(k.contiguous()), vv = values(v.contiguous());
  const std::int64_t B = q.shape()[0], H = q.shape()[1], Tq = q.shape()[2], D = q.shape()[3];
  const std::int64_t Hkv = k.shape()[1], Tk = k.shape()[2], Dv = v.shape()[3];
  const std::vector<double> mv = o.mask ? values(*o.mask) : std::vector<double>();
  const bool bool_mask = o.mask && o.mask->dtype() == kBool;
  const double scale = 1 / std::sqrt(static_cast<double>(D));
  std::vector<double> out(static_cast<std::size_t>(B * H * Tq * Dv));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t i = 0; i < Tq; ++i) {
        const std::int64_t hk = h / (H / Hkv);
        std::vector<double> s(static_cast<std::size_t>(Tk), -std::numeric_limits<double>::infinity());
        for (std::int64_t j = 0; j < Tk; ++j) {
          if (o.causal && j > i) continue;
          if (bool_mask && mv[i * Tk + j] == 0) continue;
          double dot = 0;
          for (std::int64_t d = 0; d < D; ++d) dot += qv[((b * H + h) * Tq + i) * D + d] * kv[((b * Hkv + hk) * Tk + j) * D + d];
          s[j] = dot * scale + (o.mask && !bool_mask ? mv[i * Tk + j] : 0);
        }
        double m = -std::numeric_limits<double>::infinity(), total = 0;
        for (double e : s) m = std::max(m, e);
        for (double e : s) total += std::exp(e - m);
        for (std::int64_t j = 0; j < Tk; ++j) {
          double p = std::exp(s[j] - m) / total;
          if (o.dropout_p > 0) {
            const auto w = philox4x32(o.seed, static_cast<std::uint64_t>(((b * H + h) * Tq + i) * Tk + j));
            p *= static_cast<double>(w[0] >> 8) * 0x1p-24 >= o.dropout_p ? 1 / (1 - o.dropout_p) : 0;
          }
          for (std::int64_t d = 0; d < Dv; ++d)
            out[((b * H + h) * Tq + i) * Dv + d] += p * vv[((b * Hkv + hk) * Tk + j) * Dv + d];
        }
      }
  return from_vector(out, {static_cast<std::int64_t>(out.size())}).reshape({B, H, Tq, Dv});
}

Tensor leaf(const Shape& shape, std::uint64_t seed) { return sample(shape, -1.5, 1.5, seed).requires_grad_(); }

TensorList qkv(std::int64_t H, std::int64_t Hkv, std::int64_t Tq, std::int64_t Tk, std::uint64_t seed) {
  return {leaf({1, H, Tq, 3}, seed), leaf({1, Hkv, Tk, 3}, seed + 1), leaf({1, Hkv, Tk, 2}, seed + 2)};
}

const bool registered = [] {
  const Tensor bool_mask = from_vector<bool>({true, false, true, true, true, true, false, true, true, true, true, false},
                                             {3, 4});
  const Tensor float_mask = sample({3, 4}, -1, 1, 77);
  op_registry().push_back(
      {.name = "scaled_dot_product_attention",
       .fn = [=](const TensorList& in) {
         Generator g(11);
         return TensorList{scaled_dot_product_attention(in[0], in[1], in[2]),
                           scaled_dot_product_attention(in[0], in[1], in[2], {}, 0.0, true),
                           scaled_dot_product_attention(in[0], in[1], in[2], bool_mask.to(in[0].device())),
                           scaled_dot_product_attention(in[0], in[1], in[2], float_mask.to(in[0].device())),
                           scaled_dot_product_attention(in[0], in[1], in[2], {}, 0.3, false, {}, &g)};
       },
       .reference = [=](const TensorList& in) {
         return TensorList{attention_ref(in[0], in[1], in[2], {}),
                           attention_ref(in[0], in[1], in[2], {.causal = true}),
                           attention_ref(in[0], in[1], in[2], {.mask = bool_mask}),
                           attention_ref(in[0], in[1], in[2], {.mask = float_mask}),
                           attention_ref(in[0], in[1], in[2], {.dropout_p = 0.3, .seed = 11})};
       },
       .samples = [] {
         return std::vector<OpSample>{
             {"H=2, Tq=3, Tk=4", qkv(2, 2, 3, 4, 1)},
             {"grouped-query H=4, Hkv=2", qkv(4, 2, 3, 4, 4)},
             {"(B,T,H,D) transposed", {leaf({1, 3, 2, 3}, 7), leaf({1, 4, 2, 3}, 8), leaf({1, 4, 2, 2}, 9)},
              [](const TensorList& l) {
                return TensorList{l[0].transpose(1, 2), l[1].transpose(1, 2), l[2].transpose(1, 2)};
              }}};
       }});
  return true;
}();

TEST(Attention, HalfPrecisionAndLongRowsMatchTheReference) {
  // T = 300 exercises many rescalings of the running max; float32 and bfloat16 inputs.
  const Tensor q = sample({1, 2, 300, 8}, -3, 3, 30), k = sample({1, 2, 300, 8}, -3, 3, 31),
               v = sample({1, 2, 300, 4}, -1, 1, 32);
  const auto ref = values(attention_ref(q, k, v, {.causal = true}));
  const auto f32 = values(scaled_dot_product_attention(q.to(kFloat32), k.to(kFloat32), v.to(kFloat32), {}, 0, true));
  for (std::size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(f32[i], ref[i], 1e-5);
  const Tensor bf = scaled_dot_product_attention(q.to(kBFloat16), k.to(kBFloat16), v.to(kBFloat16), {}, 0, true);
  EXPECT_EQ(bf.dtype(), kBFloat16);
}

TEST(Attention, FullyMaskedRowIsNaNAndGetsNoGradient) {
  Tensor q = sample({1, 1, 2, 2}, -1, 1, 40).requires_grad_();
  const Tensor k = sample({1, 1, 2, 2}, -1, 1, 41), v = sample({1, 1, 2, 2}, -1, 1, 42);
  const Tensor mask = from_vector<bool>({false, false, true, true}, {2, 2});
  const Tensor out = scaled_dot_product_attention(q, k, v, mask);
  const auto o = values(out);
  EXPECT_TRUE(std::isnan(o[0]) && std::isnan(o[1]));
  EXPECT_FALSE(std::isnan(o[2]));
  sum(out.select(2, 1)).backward();
  const auto gq = values(q.grad());
  EXPECT_EQ(gq[0], 0.0);
  EXPECT_EQ(gq[1], 0.0);
}

TEST(Attention, Errors) {
  const Tensor q = zeros({1, 2, 3, 4}), k = zeros({1, 2, 5, 4}), v = zeros({1, 2, 5, 6});
  auto expect_error = [](auto&& call, const std::string& part) {
    test::expect_error(call, "scaled_dot_product_attention", part);
  };
  expect_error([&] { scaled_dot_product_attention(q, zeros({1, 2, 5, 3}), v); }, "incompatible shapes");
  expect_error([&] { scaled_dot_product_attention(q, zeros({1, 3, 5, 4}), zeros({1, 3, 5, 6})); }, "Hkv dividing H");
  expect_error([&] { scaled_dot_product_attention(zeros({2, 3, 4}), k, v); }, "(B, H, Tq, D)");
  expect_error([&] { scaled_dot_product_attention(q, k.to(kFloat64), v); }, "one floating-point dtype");
  expect_error([&] { scaled_dot_product_attention(q, k, v, zeros({3, 4}, {.dtype = kBool})); }, "cannot be broadcast");
  expect_error([&] { scaled_dot_product_attention(q, k, v, zeros({3, 5}, {.dtype = kBool}), 0, true); }, "not both");
  expect_error([&] { scaled_dot_product_attention(q, k, v, {}, 1.0); }, "dropout_p");
  const Tensor qg = zeros({1, 2, 3, 4}).requires_grad_();
  expect_error([&] { autograd::grad({sum(scaled_dot_product_attention(qg, k, v))}, {qg}, {}, {}, true); },
               "double backward");
}

}  // namespace
}  // namespace infini::test::attention_ops_test
