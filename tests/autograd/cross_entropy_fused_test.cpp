// cross_entropy's fused path (class indices, floating logits (N, C) or (C), no weights,
// no smoothing) against a naive float64 loop: values and gradients at a GPT-2 vocabulary
// width, row-strided logits, ignore_index, infinite logits, empty batches, 16-bit logits
// (computed in float32: the bits of casting them first), gradcheck and gradgradcheck, and
// the errors of the kernel itself.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "op_info.h"

namespace infini::test {
namespace {

using autograd::gradcheck;
using autograd::gradgradcheck;

struct Reference {
  std::vector<double> loss;  // per row, 0 where ignored
  std::vector<double> grad;  // d(sum of losses)/d(logits), row-major (N, C)
};

// Per-row loss lse - x[t] and its gradient softmax - onehot, in float64 from the values.
Reference reference(const std::vector<double>& x, std::int64_t n, std::int64_t c, const std::vector<std::int64_t>& t,
                    std::int64_t ignore) {
  Reference r{std::vector<double>(n, 0.0), std::vector<double>(n * c, 0.0)};
  for (std::int64_t i = 0; i < n; ++i) {
    if (t[i] == ignore) continue;
    double max = -std::numeric_limits<double>::infinity();
    for (std::int64_t k = 0; k < c; ++k) max = std::max(max, x[i * c + k]);
    double sum = 0;
    for (std::int64_t k = 0; k < c; ++k) sum += std::exp(x[i * c + k] - max);
    const double lse = max + std::log(sum);
    r.loss[i] = lse - x[i * c + t[i]];
    for (std::int64_t k = 0; k < c; ++k) r.grad[i * c + k] = std::exp(x[i * c + k] - lse) - (k == t[i] ? 1 : 0);
  }
  return r;
}

TEST(CrossEntropyFused, Float32AtVocabularyWidthWithPaddedRowsAndIgnoredTargets) {
  // (N, Vp) logits of which the first V columns are the classes: rows are Vp apart, like
  // GPT-2's padded vocabulary.
  constexpr std::int64_t N = 6, V = 50257, Vp = 50304;
  const Tensor padded = mul(sample({N, Vp}, -4, 4, 7), 2.0).to(kFloat32).requires_grad_();
  const Tensor logits = padded.slice(1, 0, V);
  const std::vector<std::int64_t> targets{17, 50256, -100, 0, 31337, 15496};
  const Tensor loss = cross_entropy(logits, from_vector(targets));
  loss.backward();

  const Reference ref = reference(values(logits.detach().contiguous()), N, V, targets, -100);
  double expected = 0;
  for (double l : ref.loss) expected += l / 5;  // 5 counted rows
  EXPECT_NEAR(loss.item<double>(), expected, 2e-5 * expected);
  const auto grad = values(padded.grad());
  double worst = 0;
  for (std::int64_t i = 0; i < N; ++i)
    for (std::int64_t k = 0; k < Vp; ++k) {
      const double want = k < V ? ref.grad[i * V + k] / 5 : 0.0;
      worst = std::max(worst, std::abs(grad[i * Vp + k] - want));
    }
  EXPECT_LT(worst, 1e-7);
  for (std::int64_t k = 0; k < V; ++k) ASSERT_EQ(grad[2 * Vp + k], 0.0) << "the ignored row has no gradient";
}

TEST(CrossEntropyFused, ReductionsMatchTheReferenceInFloat64) {
  constexpr std::int64_t N = 5, C = 7;
  const Tensor x = sample({N, C}, -3, 3, 11);
  const std::vector<std::int64_t> targets{3, 0, 6, 2, 3};
  const Reference ref = reference(values(x), N, C, targets, 2);  // ignore class 2 (row 3)
  const Tensor t = from_vector(targets);
  const auto none = values(cross_entropy(x, t, {.ignore_index = 2, .reduction = Reduction::None}));
  double total = 0;
  for (std::int64_t i = 0; i < N; ++i) {
    EXPECT_NEAR(none[i], ref.loss[i], 1e-12);
    total += ref.loss[i];
  }
  EXPECT_NEAR(cross_entropy(x, t, {.ignore_index = 2, .reduction = Reduction::Sum}).item<double>(), total, 1e-12);
  EXPECT_NEAR(cross_entropy(x, t, {.ignore_index = 2}).item<double>(), total / 4, 1e-12);
  // One sample: (C) logits and a scalar target.
  EXPECT_NEAR(cross_entropy(x.select(0, 4), scalar_tensor(3, {.dtype = kInt64})).item<double>(), ref.loss[4], 1e-12);
}

TEST(CrossEntropyFused, InfiniteLogits) {
  const double inf = std::numeric_limits<double>::infinity();
  // A class at -inf takes no probability; the target's row stays finite.
  const Tensor masked = from_vector<double>({1.0, -inf, 0.5, -inf}, {1, 4});
  EXPECT_NEAR(cross_entropy(masked, from_vector<std::int64_t>({0})).item<double>(),
              std::log(std::exp(1.0) + std::exp(0.5)) - 1.0, 1e-12);
  // +inf elsewhere than the target: infinite loss, like torch.
  const Tensor huge = from_vector<double>({1.0, inf, 0.5}, {1, 3});
  EXPECT_EQ(cross_entropy(huge, from_vector<std::int64_t>({0})).item<double>(), inf);
}

TEST(CrossEntropyFused, EmptyBatch) {
  const Tensor x = zeros({0, 5}, {.dtype = kFloat32}).requires_grad_();
  const Tensor t = zeros({0}, {.dtype = kInt64});
  EXPECT_TRUE(std::isnan(cross_entropy(x, t).item<double>()));  // 0 / 0 counted rows, like torch
  const Tensor s = cross_entropy(x, t, {.reduction = Reduction::Sum});
  EXPECT_EQ(s.item<double>(), 0.0);
  s.backward();
  EXPECT_EQ(x.grad().shape(), (Shape{0, 5}));
}

TEST(CrossEntropyFused, GradcheckAndGradgradcheckOnStridedLogits) {
  const Tensor wide = sample({4, 9}, -2, 2, 21).requires_grad_();
  const Tensor t = from_vector<std::int64_t>({1, -100, 5, 0});
  for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    auto fn = [&](const TensorList& in) {
      return TensorList{cross_entropy(in[0].slice(1, 1, 8), t, {.reduction = r})};  // rows 9 apart, 7 classes
    };
    const auto first = gradcheck(fn, {wide});
    EXPECT_TRUE(first.ok) << first.message;
    const auto second = gradgradcheck(fn, {wide});
    EXPECT_TRUE(second.ok) << second.message;
  }
}

TEST(CrossEntropyFused, SixteenBitLogitsGiveTheBitsOfCastingFirst) {
  // (N, C) 16-bit logits, rows C + 3 apart, one target ignored: under autocast the loss is
  // float32 and the gradient 16-bit, bit for bit what the float32 kernel gives on the
  // widened logits (gradient rounded once); without autocast the loss is rounded to the
  // logits' dtype. Both against the naive float64 loop too.
  constexpr std::int64_t N = 5, C = 1000;
  const std::vector<std::int64_t> targets{3, 999, -100, 0, 512};
  const Tensor t = from_vector(targets);
  for (DataType dtype : {kBFloat16, kFloat16}) {
    SCOPED_TRACE(name(dtype));
    const Tensor wide = mul(sample({N, C + 3}, -4, 4, 31), 2.0).to(dtype).requires_grad_();
    const Tensor wide32 = wide.detach().to(kFloat32).requires_grad_();
    Tensor loss;
    {
      AutocastGuard autocast(DeviceType::CPU, dtype);
      loss = cross_entropy(wide.slice(1, 0, C), t);
    }
    const Tensor loss32 = cross_entropy(wide32.slice(1, 0, C), t);
    ASSERT_EQ(loss.dtype(), kFloat32);
    EXPECT_EQ(loss.item<float>(), loss32.item<float>());
    loss.backward();
    loss32.backward();
    ASSERT_EQ(wide.grad().dtype(), dtype);
    EXPECT_EQ(values(wide.grad()), values(wide32.grad().to(dtype)));

    const Reference ref = reference(values(wide32.detach().slice(1, 0, C).contiguous()), N, C, targets, -100);
    double expected = 0;
    for (double l : ref.loss) expected += l / 4;  // 4 counted rows
    EXPECT_NEAR(loss.item<double>(), expected, 1e-5 * expected);
    const auto grad = values(wide32.grad());
    for (std::int64_t i = 0; i < N; ++i)
      for (std::int64_t k = 0; k < C; ++k) ASSERT_NEAR(grad[i * (C + 3) + k], ref.grad[i * C + k] / 4, 1e-7);

    const Tensor plain = cross_entropy(wide.detach().slice(1, 0, C), t, {.reduction = Reduction::None});
    ASSERT_EQ(plain.dtype(), dtype);
    EXPECT_EQ(values(plain), values(cross_entropy(wide32.detach().slice(1, 0, C), t, {.reduction = Reduction::None})
                                        .to(dtype)));
  }
}

TEST(CrossEntropyFused, OutOfRangeTargetsNameTheRow) {
  const Tensor x = zeros({3, 4});
  expect_error([&] { cross_entropy(x, from_vector<std::int64_t>({0, 4, 1})); }, "cross_entropy", "target 4 at row 1");
  expect_error([&] { cross_entropy(x, from_vector<std::int64_t>({-1, 0, 1})); }, "cross_entropy", "target -1 at row 0");
  // The kernel entry points check their own arguments too.
  expect_error([&] { kernels::cross_entropy_forward(zeros({3, 4}, {.dtype = kInt32}), zeros({3}, {.dtype = kInt64}), -100); },
               "cross_entropy", "float64, float32, bfloat16 or float16, got int32");
  expect_error([&] { kernels::cross_entropy_forward(x, zeros({2}, {.dtype = kInt64}), -100); }, "cross_entropy",
               "[2]");
  expect_error([&] { kernels::cross_entropy_forward(x, zeros({3}), -100); }, "cross_entropy", "int64");
}

}  // namespace
}  // namespace infini::test
