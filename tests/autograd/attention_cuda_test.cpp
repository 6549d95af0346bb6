// The 16-bit tensor-core attention kernels (cuda/src/attention_*_mma.cu) against the float64
// CPU kernel on the same rounded inputs (that kernel is checked against a naive loop and
// gradchecked in attention_ops_test.cpp): output and q/k/v gradients, causal and not,
// grouped-query heads, lengths that are not multiples of the 64-row tiles, every head dim
// the kernels are built for; and a second run gives the same bits. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "op_info.h"

namespace infini::test::attention_cuda_test {
namespace {

struct Problem {
  std::int64_t batch, heads, kv_heads, q_len, kv_len, head_dim;
  bool causal;
};

struct Outcome {
  Tensor out, dq, dk, dv;  // on the CPU, float64
};

// Output and gradients of sum(out * weights) for inputs q, k, v (B, H, T, D) of `dtype` on
// `device`; with `interleaved` the leaves are (B, T, H, D) and attention reads their
// transposed views in place (as GPT-2's heads are).
Outcome attention_run(const TensorList& inputs, const Tensor& weights, bool causal, Device device, DataType dtype,
                      bool interleaved = false) {
  TensorList leaves, views;
  for (const Tensor& t : inputs) {
    Tensor moved = t.to(dtype).to(device).detach();
    if (interleaved) moved = moved.transpose(1, 2).contiguous();
    leaves.push_back(moved.requires_grad_());
    views.push_back(interleaved ? leaves.back().transpose(1, 2) : leaves.back());
  }
  const Tensor out = scaled_dot_product_attention(views[0], views[1], views[2], {}, 0.0, causal);
  out.backward(weights.to(dtype).to(device));
  auto host = [](const Tensor& t) { return t.detach().to(Device::cpu()).to(kFloat64); };
  auto grad = [&](int i) { return host(interleaved ? leaves[i].grad().transpose(1, 2) : leaves[i].grad()); };
  return {host(out), grad(0), grad(1), grad(2)};
}

// max |got - want| over max |want|: errors relative to the tensor's scale.
double relative_error(const Tensor& got, const Tensor& want) {
  const auto g = values(got), w = values(want);
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    worst = std::max(worst, std::abs(g[i] - w[i]));
    scale = std::max(scale, std::abs(w[i]));
  }
  return worst / std::max(scale, 1e-30);
}

void expect_identical(const Tensor& a, const Tensor& b, const std::string& what) {
  const auto x = values(a), y = values(b);
  ASSERT_EQ(x.size(), y.size()) << what;
  for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(x[i], y[i]) << what << " element " << i;
}

TEST(AttentionCuda, TensorCoreKernelsMatchFloat64OnTheSameRoundedInputs) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const std::vector<Problem> problems = {
      {2, 4, 2, 100, 100, 64, true},   // GQA, causal, a partial second tile
      {1, 2, 2, 70, 130, 128, false},  // more keys than queries
      {1, 3, 1, 65, 65, 32, true},     // one key/value head for three query heads
      {2, 1, 1, 3, 200, 16, false},    // a few queries over many keys
      {1, 2, 2, 130, 40, 64, true},    // causal with fewer keys than queries
      // Equal lengths: the gradients land in one (B, T, H + 2 Hkv, D) buffer.
      {1, 4, 2, 80, 80, 128, true},  // the widest heads, grouped-query
      {2, 2, 2, 70, 70, 128, false},
      {1, 2, 1, 33, 33, 16, false},  // the narrowest heads
  };
  std::uint64_t seed = 1;
  for (const Problem& p : problems)
    for (const DataType dtype : {kBFloat16, kFloat16}) {
      const std::string where = std::string(name(dtype)) + " D=" + std::to_string(p.head_dim) + " Tq=" +
                                std::to_string(p.q_len) + " Tk=" + std::to_string(p.kv_len) +
                                (p.causal ? " causal" : "");
      // Inputs rounded to the 16-bit type first, so both sides see the same values.
      TensorList inputs;
      for (const Shape& shape : {Shape{p.batch, p.heads, p.q_len, p.head_dim},
                                 Shape{p.batch, p.kv_heads, p.kv_len, p.head_dim},
                                 Shape{p.batch, p.kv_heads, p.kv_len, p.head_dim}})
        inputs.push_back(sample(shape, -2, 2, seed++).to(dtype).to(kFloat64));
      const Tensor weights = sample({p.batch, p.heads, p.q_len, p.head_dim}, -1, 1, seed++).to(dtype).to(kFloat64);

      const Outcome want = attention_run(inputs, weights, p.causal, Device::cpu(), kFloat64);
      const Outcome got = attention_run(inputs, weights, p.causal, Device::cuda(0), dtype);
      // Weights and score gradients are rounded to 16 bits before their products (as in
      // FlashAttention-2), the results once more: a few units of the 16-bit epsilon.
      const double tol = dtype == kBFloat16 ? 3e-2 : 4e-3;
      EXPECT_LT(relative_error(got.out, want.out), tol) << where << " out";
      EXPECT_LT(relative_error(got.dq, want.dq), tol) << where << " dq";
      EXPECT_LT(relative_error(got.dk, want.dk), tol) << where << " dk";
      EXPECT_LT(relative_error(got.dv, want.dv), tol) << where << " dv";

      const Outcome again = attention_run(inputs, weights, p.causal, Device::cuda(0), dtype);
      expect_identical(again.out, got.out, where + " second run out");
      expect_identical(again.dq, got.dq, where + " second run dq");
      expect_identical(again.dk, got.dk, where + " second run dk");
      expect_identical(again.dv, got.dv, where + " second run dv");

      // (B, T, H, D) inputs read in place give the same bits.
      const Outcome in_place = attention_run(inputs, weights, p.causal, Device::cuda(0), dtype, true);
      expect_identical(in_place.out, got.out, where + " in place out");
      expect_identical(in_place.dq, got.dq, where + " in place dq");
      expect_identical(in_place.dk, got.dk, where + " in place dk");
      expect_identical(in_place.dv, got.dv, where + " in place dv");
    }
}

// GPT-2's heads: q, k, v split from one (B, T, 3 C) projection. The kernels write the three
// gradients into one buffer laid out as that projection, which split's backward takes as
// the projection's gradient without a copy; its values are those of separate (B, T, H, D)
// leaves. A grouped-query split (C, C / 2, C / 2) likewise.
TEST(AttentionCuda, SplitProjectionGetsItsGradientWithoutACopy) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const std::int64_t B = 2, T = 100, D = 64;
  for (const std::int64_t kv_heads : {4, 2}) {
    const std::int64_t H = 4, C = H * D, Ckv = kv_heads * D;
    const std::string where = "kv_heads=" + std::to_string(kv_heads);
    const Tensor host = sample({B, T, C + 2 * Ckv}, -2, 2, 40 + kv_heads).to(kBFloat16);
    const Tensor weights = sample({B, H, T, D}, -1, 1, 50 + kv_heads).to(kBFloat16);
    const Tensor qkv = host.to(Device::cuda(0)).requires_grad_();
    const TensorList pieces = split(qkv, std::vector<std::int64_t>{C, Ckv, Ckv}, 2);
    Tensor piece_grad;  // the query piece's gradient as split's backward receives it
    pieces[0].register_hook([&](const Tensor& g) {
      piece_grad = g;
      return Tensor();
    });
    auto heads = [&](std::size_t i) { return pieces[i].view({B, T, -1, D}).transpose(1, 2); };
    const Tensor out = scaled_dot_product_attention(heads(0), heads(1), heads(2), {}, 0.0, true);
    const Tensor dqkv = autograd::grad({out}, {qkv}, {weights.to(Device::cuda(0))}).at(0);
    ASSERT_TRUE(piece_grad.defined()) << where;
    EXPECT_TRUE(dqkv.storage().is_same(piece_grad.storage())) << where;
    EXPECT_EQ(dqkv.data_ptr(), piece_grad.data_ptr()) << where;
    EXPECT_TRUE(dqkv.is_contiguous()) << where;

    TensorList inputs;  // (B, heads, T, D) float64 of the same bfloat16 values
    for (const Tensor& piece : split(host.to(kFloat64), std::vector<std::int64_t>{C, Ckv, Ckv}, 2))
      inputs.push_back(piece.view({B, T, -1, D}).transpose(1, 2).contiguous());
    const Outcome separate = attention_run(inputs, weights.to(kFloat64), true, Device::cuda(0), kBFloat16, true);
    auto merged = [&](const Tensor& g) { return g.transpose(1, 2).reshape({B, T, -1}); };
    expect_identical(dqkv.to(Device::cpu()).to(kFloat64),
                     cat({merged(separate.dq), merged(separate.dk), merged(separate.dv)}, 2), where + " dqkv");
  }
}

// Problems the tensor-core kernels do not take (a mask, a head dim of 24) still run in 16
// bits through the float32 kernels, and an empty key set gives NaN rows as on the CPU.
TEST(AttentionCuda, OtherSixteenBitProblemsRunInFloat32) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const Tensor q = sample({1, 2, 9, 24}, -2, 2, 7).to(kBFloat16), k = sample({1, 2, 11, 24}, -2, 2, 8).to(kBFloat16);
  const Tensor v = sample({1, 2, 11, 24}, -2, 2, 9).to(kBFloat16);
  const Tensor want = scaled_dot_product_attention(q.to(kFloat64), k.to(kFloat64), v.to(kFloat64));
  const Tensor got = scaled_dot_product_attention(q.to(Device::cuda(0)), k.to(Device::cuda(0)), v.to(Device::cuda(0)));
  EXPECT_EQ(got.dtype(), kBFloat16);
  EXPECT_LT(relative_error(got.to(Device::cpu()).to(kFloat64), want), 1e-2);

  const Tensor no_keys = empty({1, 2, 0, 64}, {.dtype = kBFloat16, .device = Device::cuda(0)});
  const Tensor q64 = sample({1, 2, 5, 64}, -2, 2, 10).to(kBFloat16).to(Device::cuda(0));
  const auto out = values(scaled_dot_product_attention(q64, no_keys, no_keys).to(Device::cpu()).to(kFloat64));
  ASSERT_EQ(out.size(), 2u * 5 * 64);
  for (double x : out) EXPECT_TRUE(std::isnan(x));
}

}  // namespace
}  // namespace infini::test::attention_cuda_test
