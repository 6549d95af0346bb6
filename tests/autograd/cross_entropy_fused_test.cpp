// cross_entropy's fused path (class indices, floating logits (N, C) or (C), no weights,
// no smoothing) against a naive float64 loop: values and gradients at a GPT-2 vocabulary
// width, row-strided logits, ignore_index, infinite logits, empty batches, 16-bit logits
// (computed in float32: the bits of casting them first), gradcheck and gradgradcheck, and
// the errors of the kernel itself; and padded_cross_entropy (padding columns read in place,
// their gradient 0) against the sliced cross_entropy, on the CPU and on a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "op_info.h"

namespace infini::test::cross_entropy_fused_test {
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

// Logits (5, 12) of which the first 9 columns are classes, one target ignored.
struct PaddedCase {
  Tensor wide = sample({5, 12}, -3, 3, 41).requires_grad_();
  Tensor target = from_vector<std::int64_t>({8, 0, -100, 4, 7});
  static constexpr std::int64_t kClasses = 9;
};

TEST(PaddedCrossEntropy, EqualsTheSlicedLossWithZeroPaddingGradients) {
  for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    const PaddedCase c;
    const Tensor sliced_wide = c.wide.detach().clone().requires_grad_();
    const Tensor padded = padded_cross_entropy(c.wide, c.target, c.kClasses, {.reduction = r});
    const Tensor sliced = cross_entropy(sliced_wide.narrow(1, 0, c.kClasses), c.target, {.reduction = r});
    EXPECT_EQ(values(padded), values(sliced));
    sum(padded).backward();
    sum(sliced).backward();
    EXPECT_EQ(values(c.wide.grad()), values(sliced_wide.grad()));  // padding columns 0 in both

    const Reference ref = reference(values(c.wide.detach().narrow(1, 0, c.kClasses).contiguous()), 5, c.kClasses,
                                    {8, 0, -100, 4, 7}, -100);
    const double scale = r == Reduction::Mean ? 0.25 : 1.0;  // 4 counted rows
    const auto grad = values(c.wide.grad());
    for (std::int64_t i = 0; i < 5; ++i)
      for (std::int64_t k = 0; k < 12; ++k)
        ASSERT_NEAR(grad[i * 12 + k], k < c.kClasses ? ref.grad[i * c.kClasses + k] * scale : 0.0, 1e-12);
  }
}

TEST(PaddedCrossEntropy, GradcheckAndGradgradcheck) {
  const PaddedCase c;
  auto fn = [&](const TensorList& in) { return TensorList{padded_cross_entropy(in[0], c.target, c.kClasses)}; };
  const auto first = gradcheck(fn, {c.wide});
  EXPECT_TRUE(first.ok) << first.message;
  const auto second = gradgradcheck(fn, {c.wide});
  EXPECT_TRUE(second.ok) << second.message;
}

TEST(PaddedCrossEntropy, SixteenBitLogitsUnderAutocastGiveTheSlicedBits) {
  const PaddedCase c;
  const Tensor wide = c.wide.detach().to(kBFloat16).requires_grad_();
  const Tensor sliced_wide = wide.detach().clone().requires_grad_();
  Tensor padded, sliced;
  {
    AutocastGuard autocast(DeviceType::CPU, kBFloat16);
    padded = padded_cross_entropy(wide, c.target, c.kClasses);
    sliced = cross_entropy(sliced_wide.narrow(1, 0, c.kClasses), c.target);
  }
  ASSERT_EQ(padded.dtype(), kFloat32);
  EXPECT_EQ(padded.item<float>(), sliced.item<float>());
  padded.backward();
  sliced.backward();
  ASSERT_EQ(wide.grad().dtype(), kBFloat16);
  EXPECT_EQ(values(wide.grad()), values(sliced_wide.grad()));
}

TEST(PaddedCrossEntropy, OtherOptionsTakeTheSlicedPathAndBadArgumentsAreErrors) {
  const PaddedCase c;
  const CrossEntropyOptions smoothed{.label_smoothing = 0.1};
  EXPECT_EQ(padded_cross_entropy(c.wide, c.target, c.kClasses, smoothed).item<double>(),
            cross_entropy(c.wide.narrow(1, 0, c.kClasses), c.target, smoothed).item<double>());
  expect_error([&] { padded_cross_entropy(c.wide, c.target, 0); }, "padded_cross_entropy", "classes must be in [1, 12]");
  expect_error([&] { padded_cross_entropy(c.wide, c.target, 13); }, "padded_cross_entropy", "got 13");
  expect_error([&] { padded_cross_entropy(c.wide.unsqueeze(0), c.target, 9); }, "padded_cross_entropy",
               "expected logits (N, Cp)");
  const auto [rows, lse] = kernels::cross_entropy_forward(c.wide.detach(), c.target, -100);
  expect_error([&] { kernels::cross_entropy_backward(rows, c.wide.detach(), lse, c.target, -100, 11); },
               "cross_entropy", "padded_classes 11 is fewer than the logits' 12 classes");
}

TEST(PaddedCrossEntropyCuda, MatchesTheCpuAtVocabularyWidth) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  // GPT-2's padded vocabulary, bfloat16 logits under autocast, as the trainer runs it.
  constexpr std::int64_t N = 64, V = 50257, Vp = 50304;
  const Tensor logits = mul(sample({N, Vp}, -4, 4, 51), 2.0).to(kBFloat16);
  std::vector<std::int64_t> targets;
  for (std::int64_t i = 0; i < N; ++i) targets.push_back(i == 5 ? -100 : (i * 7919) % V);
  const Tensor target = from_vector(targets);
  auto run = [&](Device device) {
    const Tensor x = logits.to(device).detach().requires_grad_();
    AutocastGuard autocast(device.type, kBFloat16);
    const Tensor loss = padded_cross_entropy(x, target.to(device), V);
    loss.backward();
    return std::pair{loss.to(Device::cpu()).item<double>(), values(x.grad())};
  };
  const auto [cpu_loss, cpu_grad] = run(Device::cpu());
  const auto [gpu_loss, gpu_grad] = run(Device::cuda(0));
  EXPECT_NEAR(gpu_loss, cpu_loss, 1e-5 * cpu_loss);
  double worst = 0;
  for (std::int64_t i = 0; i < N; ++i)
    for (std::int64_t k = 0; k < Vp; ++k) {
      if (k >= V) ASSERT_EQ(gpu_grad[i * Vp + k], 0.0) << "padding column " << k;
      worst = std::max(worst, std::abs(gpu_grad[i * Vp + k] - cpu_grad[i * Vp + k]));
    }
  EXPECT_LT(worst, 1e-4);  // a few bfloat16 units of the largest gradients (about 1 / N)
}

// Rows read in 16-byte packs (contiguous logits) and element by element (rows of an odd
// stride, starting one element in): both against the CPU, in every floating dtype, with
// enough classes for many packs per thread.
TEST(CrossEntropyCuda, PackedAndUnalignedRowsMatchTheCpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  constexpr std::int64_t N = 5, C = 1000;
  const Tensor target = from_vector(std::vector<std::int64_t>{3, 999, -100, 0, 512});
  for (const DataType dtype : {kFloat64, kFloat32, kFloat16, kBFloat16})
    for (const bool aligned : {true, false}) {
      const std::string what = concat(dtype, aligned ? " contiguous" : " rows of stride 1003 from offset 1");
      const Tensor wide = mul(sample({N, C + 3}, -4, 4, 61), 2.0).to(dtype);
      auto run = [&](Device device) {
        const Tensor leaf = (aligned ? wide.narrow(1, 1, C).contiguous() : wide).to(device).detach().requires_grad_();
        const Tensor logits = aligned ? leaf : leaf.narrow(1, 1, C);
        const Tensor loss = cross_entropy(logits, target.to(device));
        loss.backward();
        return std::pair{loss.to(Device::cpu()).to(kFloat64).item<double>(), values(leaf.grad())};
      };
      const auto [cpu_loss, cpu_grad] = run(Device::cpu());
      const auto [gpu_loss, gpu_grad] = run(Device::cuda(0));
      const double unit = dtype == kFloat64 ? 1e-14 : dtype == kFloat32 ? 1e-6 : dtype == kFloat16 ? 1e-3 : 8e-3;
      EXPECT_NEAR(gpu_loss, cpu_loss, 4 * unit * std::abs(cpu_loss)) << what;
      ASSERT_EQ(gpu_grad.size(), cpu_grad.size()) << what;
      double worst = 0;
      for (std::size_t i = 0; i < gpu_grad.size(); ++i) worst = std::max(worst, std::abs(gpu_grad[i] - cpu_grad[i]));
      EXPECT_LE(worst, unit) << what;  // gradients of at most 1 / 4 (the mean over 4 rows)
    }
}

}  // namespace
}  // namespace infini::test::cross_entropy_fused_test
