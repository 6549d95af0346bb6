// dense_gelu_dense (a transformer's MLP as one node) and the fused GELU epilogues behind it:
// its op-table entry (float64 loops, gradcheck, gradgradcheck; the CUDA parity suite runs it
// too), the composed ops' bits on the CPU, errors; on a GPU, cuBLASLt's GELU_AUX_BIAS and
// DGELU epilogues against float64 loops on the same rounded inputs, bitwise repeatable.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <iostream>
#include <numbers>
#include <string>
#include <vector>

#include "op_info.h"

namespace infini::test::dense_gelu_dense_test {
namespace {

double gelu_of(double x, bool tanh_form) {
  if (!tanh_form) return 0.5 * x * (1 + std::erf(x / std::numbers::sqrt2));
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
}

// d/dx of GELU's tanh form.
double gelu_tanh_slope(double x) {
  const double k = std::sqrt(2 / std::numbers::pi), t = std::tanh(k * (x + 0.044715 * x * x * x));
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
}

// y[r, o] = sum_j gelu(sum_i x[r, i] w1[j, i] + b1[j]) w2[o, j] + b2[o], by loops in float64.
Tensor reference_mlp(const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2, const Tensor& b2,
                     bool tanh_form) {
  const std::int64_t in = w1.size(1), hidden = w1.size(0), out = w2.size(0), rows = x.numel() / in;
  const std::vector<double> xv = values(x), w1v = values(w1), w2v = values(w2);
  const std::vector<double> b1v = b1.defined() ? values(b1) : std::vector<double>(hidden, 0.0);
  const std::vector<double> b2v = b2.defined() ? values(b2) : std::vector<double>(out, 0.0);
  std::vector<double> y(static_cast<std::size_t>(rows * out));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < hidden; ++j) {
      double h = b1v[j];
      for (std::int64_t i = 0; i < in; ++i) h += xv[r * in + i] * w1v[j * in + i];
      const double a = gelu_of(h, tanh_form);
      for (std::int64_t o = 0; o < out; ++o) y[r * out + o] += a * w2v[o * hidden + j];
    }
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t o = 0; o < out; ++o) y[r * out + o] += b2v[o];
  Shape shape = x.shape();
  shape.back() = out;
  return from_vector(y, {static_cast<std::int64_t>(y.size())}).reshape(shape);
}

// Hidden size 8: the CUDA epilogues' aux matrices need rows of a multiple of 8 elements, so
// the parity suite runs them.
const RegisterOp registered{
    {.name = "dense_gelu_dense",
     .fn = [](const TensorList& in) {
       return TensorList{dense_gelu_dense(in[0], in[1], in[2], in[3], in[4], GeluApproximation::Tanh),
                         dense_gelu_dense(in[0], in[1], in[2], in[3], in[4]),
                         dense_gelu_dense(in[0], in[1], Tensor(), in[3], Tensor(), GeluApproximation::Tanh)};
     },
     .reference = [](const TensorList& in) {
       const TensorList d{in[0].detach(), in[1].detach(), in[2].detach(), in[3].detach(), in[4].detach()};
       return TensorList{reference_mlp(d[0], d[1], d[2], d[3], d[4], true),
                         reference_mlp(d[0], d[1], d[2], d[3], d[4], false),
                         reference_mlp(d[0], d[1], Tensor(), d[3], Tensor(), true)};
     },
     .samples = [] {
       auto params = [](std::uint64_t seed) {
         return TensorList{leaf({8, 4}, seed, -1, 1), leaf({8}, seed + 1, -1, 1), leaf({3, 8}, seed + 2, -1, 1),
                           leaf({3}, seed + 3, -1, 1)};
       };
       auto with = [](Tensor x, TensorList p) {
         p.insert(p.begin(), std::move(x));
         return p;
       };
       return std::vector<OpSample>{
           {"(2,3,4) rows", with(leaf({2, 3, 4}, 1), params(2))},
           {"transposed input", with(leaf({2, 4, 3}, 6), params(7)),
            [](const TensorList& l) { return TensorList{l[0].transpose(1, 2), l[1], l[2], l[3], l[4]}; }},
           {"one row", with(leaf({4}, 11), params(12))},
           {"zero rows", with(leaf({0, 4}, 16), params(17))}};
     },
     .gradgrad = true}};

struct Mlp {
  Tensor x, w1, b1, w2, b2;
};

Mlp leaves(DataType dtype, bool biases) {
  Mlp m{sample({2, 5, 16}, -2, 2, 31), sample({24, 16}, -0.5, 0.5, 32), sample({24}, -0.5, 0.5, 33),
        sample({16, 24}, -0.5, 0.5, 34), sample({16}, -0.5, 0.5, 35)};
  for (Tensor* t : {&m.x, &m.w1, &m.b1, &m.w2, &m.b2}) *t = t->to(dtype).requires_grad_();
  if (!biases) m.b1 = m.b2 = Tensor();
  return m;
}

// Output and every gradient of sum(y * weights), y from the fused node or composed ops.
TensorList run(const Mlp& m, bool fused, GeluApproximation approximate, const Tensor& weights) {
  const Tensor y = fused ? dense_gelu_dense(m.x, m.w1, m.b1, m.w2, m.b2, approximate)
                         : linear(gelu(linear(m.x, m.w1, m.b1), approximate), m.w2, m.b2);
  TensorList inputs{m.x, m.w1, m.w2};
  if (m.b1.defined()) inputs.insert(inputs.end(), {m.b1, m.b2});
  TensorList result = autograd::grad({y}, inputs, {weights.to(y.dtype())});
  result.insert(result.begin(), y);
  return result;
}

// On the CPU the node runs the composed ops' kernels: the same bits, values and gradients,
// in float32 and float64, with either GELU, without biases, and under bfloat16 autocast.
TEST(DenseGeluDense, GivesTheComposedOpsBits) {
  const Tensor weights = sample({2, 5, 16}, -1, 1, 36);
  for (const DataType dtype : {kFloat32, kFloat64})
    for (const GeluApproximation approximate : {GeluApproximation::Tanh, GeluApproximation::None})
      for (const bool biases : {true, false})
        for (const bool autocast : {false, true}) {
          if (autocast && dtype == kFloat64) continue;
          const std::string what = concat(dtype, approximate == GeluApproximation::Tanh ? " tanh" : " erf",
                                          biases ? " with biases" : " without biases", autocast ? " autocast" : "");
          const Mlp m = leaves(dtype, biases);
          TensorList fused, composed;
          {
            const AutocastGuard guard(DeviceType::CPU, kBFloat16, autocast);
            fused = run(m, true, approximate, weights);
            composed = run(m, false, approximate, weights);
          }
          ASSERT_EQ(fused.size(), composed.size()) << what;
          EXPECT_EQ(fused[0].dtype(), autocast ? kBFloat16 : dtype) << what;
          for (std::size_t i = 0; i < fused.size(); ++i) {
            ASSERT_EQ(fused[i].dtype(), composed[i].dtype()) << what << " output " << i;
            EXPECT_EQ(values(fused[i]), values(composed[i])) << what << " output " << i;
          }
        }
}

// With create_graph the gradients are differentiable: the gradient of a gradient's sum
// matches the composed ops' (gradgradcheck in the op table checks it against finite
// differences).
TEST(DenseGeluDense, CreateGraphGradientsMatchTheComposedOps) {
  const Mlp m = leaves(kFloat64, true);
  auto second = [&](bool fused) {
    const Tensor y = fused ? dense_gelu_dense(m.x, m.w1, m.b1, m.w2, m.b2, GeluApproximation::Tanh)
                           : linear(gelu(linear(m.x, m.w1, m.b1), GeluApproximation::Tanh), m.w2, m.b2);
    const Tensor dw1 = autograd::grad({sum(mul(y, y))}, {m.w1}, {}, true, true).at(0);
    EXPECT_TRUE(dw1.requires_grad());
    return autograd::grad({sum(dw1)}, {m.x, m.b2}).at(0);
  };
  const std::vector<double> got = values(second(true)), want = values(second(false));
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12 * (1 + std::abs(want[i]))) << i;
}

TEST(DenseGeluDense, BadInputsRaiseNamingTheOp) {
  const Mlp m = leaves(kFloat32, true);
  expect_error<ShapeError>([&] { dense_gelu_dense(m.x, m.w2, m.b1, m.w2, m.b2); }, "dense_gelu_dense",
                           {"[2, 5, 16]", "[16, 24]"});
  expect_error<ShapeError>([&] { dense_gelu_dense(m.x, m.w1, m.b1, m.w1, m.b2); }, "dense_gelu_dense",
                           {"[24, 16]", "(out, hidden)"});
  expect_error<ShapeError>([&] { dense_gelu_dense(m.x, m.w1, m.b2, m.w2, m.b2); }, "dense_gelu_dense",
                           {"b1", "[24]", "[16]"});
  expect_error<ShapeError>([&] { dense_gelu_dense(m.x, m.w1, m.b1, m.w2, m.b1); }, "dense_gelu_dense",
                           {"b2", "[16]", "[24]"});
  expect_error<DTypeError>([&] { dense_gelu_dense(m.x.to(kFloat64), m.w1, m.b1, m.w2, m.b2); }, "dense_gelu_dense",
                           {"float64", "float32"});
  expect_error<DTypeError>([&] { gelu_backward(m.x, m.x.to(kInt32)); }, "gelu_backward", {"int32"});
}

TEST(GeluEpilogues, TheCpuHasNoFusedFormAndChecksOperands) {
  const Tensor a = sample({5, 7}), b = sample({7, 8}), bias = sample({8}), pre = sample({5, 8});
  EXPECT_FALSE(kernels::matmul_bias_gelu(a, b, bias).has_value());
  EXPECT_FALSE(kernels::matmul_gelu_grad(a, b, pre).has_value());
  expect_error<ShapeError>([&] { kernels::matmul_bias_gelu(a, b, sample({7})); }, "matmul_bias_gelu",
                           {"bias", "[8]", "[7]"});
  expect_error<DTypeError>([&] { kernels::matmul_bias_gelu(a, b, bias.to(kFloat32)); }, "matmul_bias_gelu",
                           {"bias", "float64", "float32"});
  expect_error<ShapeError>([&] { kernels::matmul_gelu_grad(a, b, sample({8, 5})); }, "matmul_gelu_grad",
                           {"pre-activation", "[5, 8]", "[8, 5]"});
  expect_error<ShapeError>([&] { kernels::matmul_gelu_grad(a, sample({6, 8}), pre); }, "matmul_gelu_grad",
                           {"[5, 7]", "[6, 8]"});
}

// Relative rounding of one 16-bit result (float32 accumulation).
double unit(DataType dtype) { return dtype == kBFloat16 ? 1.0 / 128 : 1.0 / 1024; }

// cuBLASLt's epilogues against float64 loops on the same rounded inputs: pre = a @ b + bias
// and gelu(pre) with GELU's tanh form, and (a @ b) gelu'(pre). The bounds leave room for a
// hardware tanh (relative error about 5e-4) in GELU and its slope. GPT-2's c_fc shape (4096
// rows) and a small one. bfloat16 must have both epilogues (GPT-2's autocast runs them);
// NVIDIA promises no float16 form, whose absence is reported and skipped. float32 products
// never take them (their GELU stays the composed kernels' accurate one).
TEST(GeluEpiloguesCuda, MatchFloat64LoopsAndRepeatBitwise) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const Device gpu = Device::cuda(0);
  struct Case {
    std::int64_t m, k, n;
  };
  for (const Case c : {Case{40, 111, 24}, Case{4096, 768, 3072}})
    for (const DataType dtype : {kBFloat16, kFloat16, kFloat32}) {
      const std::string what = concat(c.m, "x", c.k, "x", c.n, " ", dtype);
      if (dtype == kFloat32) {
        const Tensor a = sample({c.m, c.k}, -1, 1, 70).to(dtype).to(gpu), b = sample({c.k, c.n}).to(dtype).to(gpu);
        EXPECT_FALSE(kernels::matmul_bias_gelu(a, b, sample({c.n}).to(dtype).to(gpu)).has_value()) << what;
        EXPECT_FALSE(kernels::matmul_gelu_grad(a, b, sample({c.m, c.n}).to(dtype).to(gpu)).has_value()) << what;
        continue;
      }
      const double s = 2.0 / std::sqrt(static_cast<double>(c.k));  // pre of about unit size
      const Tensor a = sample({c.m, c.k}, -1, 1, 70).to(dtype), b = sample({c.k, c.n}, -s, s, 71).to(dtype);
      const Tensor bias = sample({c.n}, -1, 1, 72).to(dtype), pre = sample({c.m, c.n}, -3, 3, 73).to(dtype);
      const Tensor a_gpu = a.to(gpu), b_gpu = b.to(gpu), bias_gpu = bias.to(gpu), pre_gpu = pre.to(gpu);
      const auto forward = kernels::matmul_bias_gelu(a_gpu, b_gpu, bias_gpu);
      const auto backward = kernels::matmul_gelu_grad(a_gpu, b_gpu, pre_gpu);
      if (dtype == kBFloat16) {
        EXPECT_TRUE(forward.has_value()) << what << ": cuBLASLt gave no GELU_AUX_BIAS epilogue";
        EXPECT_TRUE(backward.has_value()) << what << ": cuBLASLt gave no DGELU epilogue";
      }
      if (!forward || !backward) {
        std::cout << what << ": no GELU epilogue (forward " << forward.has_value() << ", backward "
                  << backward.has_value() << "); not checked\n";
        continue;
      }
      const auto forward_again = kernels::matmul_bias_gelu(a_gpu, b_gpu, bias_gpu);
      const auto backward_again = kernels::matmul_gelu_grad(a_gpu, b_gpu, pre_gpu);
      ASSERT_TRUE(forward_again && backward_again) << what << ": a second call lost its epilogue";
      EXPECT_EQ(values(forward_again->activation), values(forward->activation)) << what << ": two runs differ";
      EXPECT_EQ(values(*backward_again), values(*backward)) << what << ": two runs differ";

      const std::vector<double> av = values(a), bv = values(b), biasv = values(bias), prev = values(pre);
      const std::vector<double> pre_got = values(forward->pre), act_got = values(forward->activation);
      const std::vector<double> grad_got = values(*backward);
      for (std::int64_t i = 0; i < c.m; i += c.m > 100 ? 37 : 1)  // every 37th row of the large case
        for (std::int64_t j = 0; j < c.n; ++j) {
          double product = 0, scale = 0;
          for (std::int64_t p = 0; p < c.k; ++p) {
            product += av[i * c.k + p] * bv[p * c.n + j];
            scale += std::abs(av[i * c.k + p] * bv[p * c.n + j]);
          }
          const std::size_t e = static_cast<std::size_t>(i * c.n + j);
          const double h = product + biasv[j], bound = unit(dtype) * (scale + std::abs(h) + std::abs(biasv[j]));
          ASSERT_NEAR(pre_got[e], h, bound + 1e-30) << what << " pre " << i << "," << j;
          const double act = gelu_of(h, true);
          ASSERT_NEAR(act_got[e], act, 1.2 * bound + unit(dtype) * std::abs(act) + 5e-4 * std::abs(h))
              << what << " gelu " << i << "," << j;
          const double slope = gelu_tanh_slope(prev[e]), want = product * slope;
          ASSERT_NEAR(grad_got[e], want,
                      1.2 * unit(dtype) * (scale + std::abs(product)) * std::abs(slope) + 2e-3 * std::abs(product))
              << what << " gelu gradient " << i << "," << j;
        }
    }
}

// The node on the GPU (in bfloat16 both epilogues, in GPT-2's configuration; float32 composed)
// against the CPU in float64 on the same rounded values, and repeatable bit for bit. In
// bfloat16 the fused products must run on the operands the node gives them (w1^T and dh^T
// as column-major views), or this would pass on the composed fallback alone.
TEST(DenseGeluDenseCuda, MatchesTheCpuAndRepeatsBitwise) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const Device gpu = Device::cuda(0);
  const Tensor weights = sample({2, 5, 16}, -1, 1, 36);
  for (const DataType dtype : {kBFloat16, kFloat32}) {
    const Mlp rounded = leaves(dtype, true);
    if (dtype == kBFloat16) {
      const Tensor x2 = rounded.x.detach().to(gpu).reshape({-1, 16}), w1 = rounded.w1.detach().to(gpu);
      const Tensor b1 = rounded.b1.detach().to(gpu), w2 = rounded.w2.detach().to(gpu);
      const auto forward = kernels::matmul_bias_gelu(x2, w1.t(), b1);
      ASSERT_TRUE(forward.has_value()) << "GELU_AUX_BIAS on x @ w1^T";
      const Tensor g2 = weights.to(dtype).to(gpu).reshape({-1, 16});
      const auto dh = kernels::matmul_gelu_grad(g2, w2, forward->pre);
      ASSERT_TRUE(dh.has_value()) << "DGELU on g @ w2";
      EXPECT_TRUE(kernels::matmul_and_row_sums(dh->transpose(0, 1), x2).has_value()) << "BGRADB on dh^T @ x";
    }
    auto on = [&](DataType as, Device device) {
      Mlp m;
      Tensor* to[] = {&m.x, &m.w1, &m.b1, &m.w2, &m.b2};
      const Tensor from[] = {rounded.x, rounded.w1, rounded.b1, rounded.w2, rounded.b2};
      for (int i = 0; i < 5; ++i) *to[i] = from[i].detach().to(as).to(device).requires_grad_();
      return run(m, true, GeluApproximation::Tanh, weights.to(as).to(device));
    };
    const TensorList want = on(kFloat64, Device::cpu()), got = on(dtype, gpu), again = on(dtype, gpu);
    const double tolerance = dtype == kFloat32 ? 1e-5 : 3e-2;
    for (std::size_t k = 0; k < want.size(); ++k) {
      const std::string what = concat(dtype, " output ", k);
      ASSERT_EQ(got[k].dtype(), dtype) << what;
      EXPECT_EQ(values(again[k]), values(got[k])) << what << ": two runs differ";
      const std::vector<double> g = values(got[k]), w = values(want[k]);
      double worst = 0, scale = 0;
      for (std::size_t i = 0; i < g.size(); ++i) {
        worst = std::max(worst, std::abs(g[i] - w[i]));
        scale = std::max(scale, std::abs(w[i]));
      }
      EXPECT_LT(worst, tolerance * std::max(scale, 1.0)) << what;
    }
  }
}

}  // namespace
}  // namespace infini::test::dense_gelu_dense_test
