// Random factories: Philox known answers, distribution statistics, reproducibility
// (seeds, counters, thread counts) and dtype errors.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "infini/math/philox.h"
#include "infini/math/random_transforms.h"
import infini.tensor;

namespace random_test {
using namespace infini;

namespace {

template <class T>
std::vector<double> as_doubles(const Tensor& t) {
  const T* p = t.data_ptr<T>();
  std::vector<double> out(static_cast<std::size_t>(t.numel()));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(p[i]);
  return out;
}

struct Moments {
  double mean = 0, std = 0;
};

Moments moments(const std::vector<double>& v) {
  double sum = 0, sum_sq = 0;
  for (double x : v) sum += x;
  const double mean = sum / static_cast<double>(v.size());
  for (double x : v) sum_sq += (x - mean) * (x - mean);
  return {mean, std::sqrt(sum_sq / static_cast<double>(v.size()))};
}

// Random123's known-answer vectors for Philox4x32-10 (counter words c0..c3, key k0, k1):
// counter = c1:c0, stream = c3:c2, seed = k1:k0.
TEST(Philox, KnownAnswerVectors) {
  EXPECT_EQ(philox4x32(0, 0, 0), (std::array<std::uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32(~0ull, ~0ull, ~0ull),
            (std::array<std::uint32_t, 4>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32(0x299f31d0a4093822ull, 0x85a308d3243f6a88ull, 0x0370734413198a2eull),
            (std::array<std::uint32_t, 4>{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

std::array<std::uint32_t, 4> words(const math::Philox4& r) { return {r.w[0], r.w[1], r.w[2], r.w[3]}; }

// The host/device copy shared with the CUDA kernels is the generator's Philox, bit for bit.
static_assert(math::philox4x32(0, 0, 0).w[0] == 0x6627e8d5 && math::philox4x32(0, 0, 0).w[3] == 0x9b00dbd8);

TEST(Philox, SharedMathCopyMatchesTheGenerator) {
  EXPECT_EQ(words(math::philox4x32(~0ull, ~0ull, ~0ull)),
            (std::array<std::uint32_t, 4>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(words(math::philox4x32(0x299f31d0a4093822ull, 0x85a308d3243f6a88ull, 0x0370734413198a2eull)),
            (std::array<std::uint32_t, 4>{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
  const std::uint64_t seeds[] = {0, 1, 42, 67280421310721ull, 0xffffffffull, 0x100000000ull, ~0ull};
  const std::uint64_t streams[] = {0, 1, 0xdeadbeefcafef00dull, ~0ull};
  const std::uint64_t bases[] = {0, 0xffffffffull - 150, ~0ull - 299};  // the counter's word carry, its wrap
  for (std::uint64_t seed : seeds)
    for (std::uint64_t stream : streams)
      for (std::uint64_t counter = 0; counter < 300; ++counter)
        for (std::uint64_t base : bases) {
          ASSERT_EQ(words(math::philox4x32(seed, base + counter, stream)), philox4x32(seed, base + counter, stream))
              << seed << " " << base + counter << " " << stream;
        }
}

// The shared per-element transforms compute the reference formulas of the random fills, and
// rand, randn and randint apply them to counter offset + i.
TEST(Random, SharedTransformsMatchTheReferenceFormulas) {
  constexpr std::uint64_t seed = 99;
  for (std::uint64_t i = 0; i < 20000; ++i) {
    const auto w = philox4x32(seed, i);
    const math::Philox4 r = math::philox4x32(seed, i);
    const double u53 = static_cast<double>(((std::uint64_t{w[0]} << 32) | w[1]) >> 11) * 0x1p-53;
    ASSERT_EQ(math::unit_uniform<53>(r), u53);
    ASSERT_EQ(math::unit_uniform<24>(r), static_cast<double>(w[0] >> 8) * std::ldexp(1.0, -24));
    ASSERT_EQ(math::unit_uniform<11>(r), static_cast<double>(w[0] >> 21) * std::ldexp(1.0, -11));
    ASSERT_EQ(math::unit_uniform<8>(r), static_cast<double>(w[0] >> 24) * std::ldexp(1.0, -8));
    const double product = u53 * 7.5;
    ASSERT_EQ(math::uniform_sample<53>(r, -2.5, 5.0), -2.5 + product);
    const double u1 = static_cast<double>((((std::uint64_t{w[0]} << 32) | w[1]) >> 11) + 1) * 0x1p-53;
    const double u2 = static_cast<double>(((std::uint64_t{w[2]} << 32) | w[3]) >> 11) * 0x1p-53;
    const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
    const double scaled = 3.0 * z;
    ASSERT_EQ(math::normal_sample(r, 1.0, 3.0), 1.0 + scaled);
    const auto bits = (std::uint64_t{w[0]} << 32) | w[1];
    ASSERT_EQ(math::randint_sample(r, -7, 1000), static_cast<std::int64_t>(bits % 1007) - 7);
  }
  // The full int64 range wraps around: low + r in unsigned arithmetic.
  const math::Philox4 r = math::philox4x32(seed, 5);
  const std::uint64_t bits = (std::uint64_t{r.w[0]} << 32) | r.w[1];
  const auto lowest = std::numeric_limits<std::int64_t>::min(), highest = std::numeric_limits<std::int64_t>::max();
  EXPECT_EQ(math::randint_sample(r, lowest, highest),
            static_cast<std::int64_t>(static_cast<std::uint64_t>(lowest) + bits % ~0ull));

  Generator g(seed);
  const Tensor u = rand({1000}, {}, &g), n = randn({1000}, {.dtype = kFloat64}, &g);
  const Tensor k = randint(-3, 11, {1000}, {.dtype = kInt32}, &g);
  for (std::int64_t i = 0; i < 1000; ++i) {
    const auto at = [&](std::int64_t start) { return math::philox4x32(seed, static_cast<std::uint64_t>(start + i)); };
    ASSERT_EQ(u.data_ptr<float>()[i], static_cast<float>(math::uniform_sample<24>(at(0), 0.0, 1.0)));
    ASSERT_EQ(n.data_ptr<double>()[i], math::normal_sample(at(1000), 0.0, 1.0));
    ASSERT_EQ(k.data_ptr<std::int32_t>()[i], math::randint_sample(at(2000), -3, 11));
  }
}

TEST(Random, RandnMomentsAndShape) {
  constexpr std::int64_t n = 1'000'000;
  Generator g(1234);
  const Tensor t = randn({1000, 1000}, {}, &g);
  EXPECT_EQ(t.dtype(), kFloat32);
  const auto v = as_doubles<float>(t);
  const Moments m = moments(v);
  EXPECT_LT(std::abs(m.mean), 5.0 / std::sqrt(static_cast<double>(n)));
  EXPECT_LT(std::abs(m.std - 1.0), 0.01);
  // P(|z| < 1) = erf(1 / sqrt 2) = 0.682689; the sample fraction's sd is ~0.00047.
  std::int64_t within_one = 0;
  double largest = 0;
  for (double x : v) {
    within_one += std::abs(x) < 1.0;
    largest = std::max(largest, std::abs(x));
  }
  EXPECT_NEAR(static_cast<double>(within_one) / n, std::erf(1.0 / std::sqrt(2.0)), 0.0025);
  EXPECT_LT(largest, 6.5);  // P(|z| > 6.5) per sample ~ 8e-11
  EXPECT_GT(largest, 3.5);
}

TEST(Random, RandIsUniformOnUnitInterval) {
  constexpr std::int64_t n = 1'000'000;
  Generator g(99);
  const auto v = as_doubles<float>(rand({n}, {}, &g));
  std::array<std::int64_t, 10> bins{};
  for (double x : v) {
    ASSERT_GE(x, 0.0);
    ASSERT_LT(x, 1.0);
    ++bins[static_cast<std::size_t>(x * 10)];
  }
  const Moments m = moments(v);
  EXPECT_LT(std::abs(m.mean - 0.5), 5.0 * std::sqrt(1.0 / 12.0 / n));
  EXPECT_NEAR(m.std * m.std, 1.0 / 12.0, 0.001);
  for (std::int64_t count : bins) EXPECT_NEAR(static_cast<double>(count), n / 10.0, 5 * std::sqrt(n * 0.09));
}

TEST(Random, RandintCoversTheRangeEvenly) {
  constexpr std::int64_t n = 800'000;
  Generator g(7);
  const Tensor t = randint(-3, 5, {n}, {}, &g);
  EXPECT_EQ(t.dtype(), kInt64);
  std::array<std::int64_t, 8> counts{};
  const std::int64_t* p = t.data_ptr<std::int64_t>();
  for (std::int64_t i = 0; i < n; ++i) {
    ASSERT_GE(p[i], -3);
    ASSERT_LT(p[i], 5);
    ++counts[static_cast<std::size_t>(p[i] + 3)];
  }
  for (std::int64_t count : counts) EXPECT_NEAR(static_cast<double>(count), n / 8.0, 5 * std::sqrt(n / 8.0 * 7 / 8));

  const Tensor small = randint(0, 2, {1000}, {.dtype = kInt16}, &g);
  EXPECT_EQ(small.dtype(), kInt16);
  int ones = 0;
  for (std::int64_t i = 0; i < 1000; ++i) {
    ASSERT_TRUE(small.data_ptr<std::int16_t>()[i] == 0 || small.data_ptr<std::int16_t>()[i] == 1);
    ones += small.data_ptr<std::int16_t>()[i];
  }
  EXPECT_NEAR(ones, 500, 5 * std::sqrt(250.0));
}

TEST(Random, SameSeedSameValuesDifferentSeedsDiffer) {
  Generator a(42), b(42), c(43);
  const auto first = as_doubles<float>(randn({4096}, {}, &a));
  EXPECT_EQ(first, as_doubles<float>(randn({4096}, {}, &b)));
  EXPECT_NE(first, as_doubles<float>(randn({4096}, {}, &c)));
  EXPECT_NE(first, as_doubles<float>(randn({4096}, {}, &a)));  // the counter moved on
}

TEST(Random, ConsecutiveCallsContinueTheCounter) {
  Generator split(9), whole(9);
  const auto head = as_doubles<float>(rand({100}, {}, &split));
  const auto tail = as_doubles<float>(rand({150}, {}, &split));
  EXPECT_EQ(split.state().offset, 250u);
  const auto all = as_doubles<float>(rand({250}, {}, &whole));
  std::vector<double> joined = head;
  joined.insert(joined.end(), tail.begin(), tail.end());
  EXPECT_EQ(joined, all);

  Generator restored(1);
  restored.set_state({.seed = 9, .offset = 100});
  EXPECT_EQ(as_doubles<float>(rand({150}, {}, &restored)), tail);
}

TEST(Random, DefaultGeneratorFollowsManualSeed) {
  manual_seed(7);
  const auto first = as_doubles<float>(randn({1000}));
  manual_seed(7);
  EXPECT_EQ(as_doubles<float>(randn({1000})), first);
  Generator seven(7);
  EXPECT_EQ(as_doubles<float>(randn({1000}, {}, &seven)), first);
}

TEST(Random, ValuesDoNotDependOnThreadCount) {
  constexpr std::int64_t n = 100'000;  // above the 32768-element parallel grain
  const int saved = omp_get_max_threads();
  auto draw = [](int threads) {
    omp_set_num_threads(threads);
    Generator g(5);
    std::vector<double> out = as_doubles<float>(randn({n}, {}, &g));
    const auto u = as_doubles<double>(rand({n}, {.dtype = kFloat64}, &g));
    const auto i = as_doubles<std::int64_t>(randint(0, 1000, {n}, {}, &g));
    out.insert(out.end(), u.begin(), u.end());
    out.insert(out.end(), i.begin(), i.end());
    return out;
  };
  const auto one = draw(1);
  const auto two = draw(2);
  omp_set_num_threads(saved);
  ASSERT_EQ(one.size(), static_cast<std::size_t>(3 * n));
  EXPECT_EQ(one, two);
}

TEST(Random, RandnInFloat64AndFloat16) {
  constexpr std::int64_t n = 200'000;
  Generator g(2024);
  const Tensor d = randn({n}, {.dtype = kFloat64}, &g);
  EXPECT_EQ(d.dtype(), kFloat64);
  const Moments md = moments(as_doubles<double>(d));
  EXPECT_LT(std::abs(md.mean), 5.0 / std::sqrt(static_cast<double>(n)));
  EXPECT_LT(std::abs(md.std - 1.0), 0.01);

  const Tensor h = randn({n}, {.dtype = kFloat16}, &g);
  EXPECT_EQ(h.dtype(), kFloat16);
  const auto hv = as_doubles<Half>(h);
  const Moments mh = moments(hv);
  EXPECT_LT(std::abs(mh.mean), 5.0 / std::sqrt(static_cast<double>(n)));
  EXPECT_LT(std::abs(mh.std - 1.0), 0.01);
  for (double x : hv) ASSERT_TRUE(std::isfinite(x));

  for (double x : as_doubles<Half>(rand({n}, {.dtype = kFloat16}, &g))) ASSERT_TRUE(x >= 0.0 && x < 1.0) << x;
  for (double x : as_doubles<BFloat16>(rand({n}, {.dtype = kBFloat16}, &g))) ASSERT_TRUE(x >= 0.0 && x < 1.0) << x;
}

TEST(Random, DTypeErrors) {
  try {
    rand({4}, {.dtype = kInt32});
    ADD_FAILURE() << "expected DTypeError";
  } catch (const DTypeError& e) {
    EXPECT_EQ(e.op(), "rand");
    EXPECT_NE(std::string(e.what()).find("int32"), std::string::npos) << e.what();
  }
  EXPECT_THROW(randn({4}, {.dtype = kBool}), DTypeError);
  EXPECT_THROW(randint(0, 2, {4}, {.dtype = kBool}), DTypeError);
  EXPECT_THROW(randint(3, 3, {4}), Error);
  EXPECT_THROW(randint(0, 300, {4}, {.dtype = kUInt8}), DTypeError);
  EXPECT_THROW(randint(-1, 5, {4}, {.dtype = kUInt8}), DTypeError);
  // The whole range of a type is fine: int8 in [-128, 128) hits both ends over 4096 draws.
  Generator g(7);
  const Tensor full_range = randint(-128, 128, {4096}, {.dtype = kInt8}, &g);
  const std::int8_t* v = full_range.data_ptr<std::int8_t>();
  EXPECT_EQ(*std::min_element(v, v + 4096), -128);
  EXPECT_EQ(*std::max_element(v, v + 4096), 127);
}

}  // namespace

}  // namespace random_test
