// DataType names/sizes/promotion and the f16/bf16 conversions on known bit patterns.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
import infini.tensor;

namespace dtype_test {
using namespace infini;

namespace {

std::uint16_t half_bits(float f) { return Half(f).bits; }
std::uint16_t bf16_bits(float f) { return BFloat16(f).bits; }
float from_bits(std::uint32_t b) { return std::bit_cast<float>(b); }

TEST(DataType, NamesAndSizes) {
  EXPECT_EQ(name(kBFloat16), "bfloat16");
  EXPECT_EQ(name(kUInt8), "uint8");
  EXPECT_EQ(itemsize(kBool), 1u);
  EXPECT_EQ(itemsize(kInt16), 2u);
  EXPECT_EQ(itemsize(kFloat16), 2u);
  EXPECT_EQ(itemsize(kInt64), 8u);
  EXPECT_EQ(itemsize(kFloat64), 8u);
  EXPECT_TRUE(is_floating_point(kBFloat16));
  EXPECT_FALSE(is_floating_point(kInt32));
  EXPECT_FALSE(is_signed(kUInt8));
}

TEST(DataType, PromotionMatchesPyTorchTable) {
  // Rows/columns in PyTorch's order u8 i8 i16 i32 i64 f16 f32 f64 bool bf16 (c10/core/ScalarType.cpp).
  const DataType order[] = {kUInt8, kInt8, kInt16, kInt32, kInt64, kFloat16, kFloat32, kFloat64, kBool, kBFloat16};
  const DataType u1 = kUInt8, i1 = kInt8, i2 = kInt16, i4 = kInt32, i8 = kInt64, f2 = kFloat16, f4 = kFloat32,
                 f8 = kFloat64, b1 = kBool, bf = kBFloat16;
  const DataType table[10][10] = {
      /* u1 */ {u1, i2, i2, i4, i8, f2, f4, f8, u1, bf},
      /* i1 */ {i2, i1, i2, i4, i8, f2, f4, f8, i1, bf},
      /* i2 */ {i2, i2, i2, i4, i8, f2, f4, f8, i2, bf},
      /* i4 */ {i4, i4, i4, i4, i8, f2, f4, f8, i4, bf},
      /* i8 */ {i8, i8, i8, i8, i8, f2, f4, f8, i8, bf},
      /* f2 */ {f2, f2, f2, f2, f2, f2, f4, f8, f2, f4},
      /* f4 */ {f4, f4, f4, f4, f4, f4, f4, f8, f4, f4},
      /* f8 */ {f8, f8, f8, f8, f8, f8, f8, f8, f8, f8},
      /* b1 */ {u1, i1, i2, i4, i8, f2, f4, f8, b1, bf},
      /* bf */ {bf, bf, bf, bf, bf, f4, f4, f8, bf, bf},
  };
  for (int r = 0; r < 10; ++r)
    for (int c = 0; c < 10; ++c)
      EXPECT_EQ(promote_types(order[r], order[c]), table[r][c]) << order[r] << " + " << order[c];
}

TEST(Half, ExactValues) {
  EXPECT_EQ(half_bits(1.0f), 0x3c00);
  EXPECT_EQ(half_bits(-2.0f), 0xc000);
  EXPECT_EQ(half_bits(65504.0f), 0x7bff);  // largest finite
  EXPECT_EQ(half_bits(0.0f), 0x0000);
  EXPECT_EQ(half_bits(-0.0f), 0x8000);
  EXPECT_EQ(half_bits(0x1p-14f), 0x0400);  // smallest normal
  EXPECT_EQ(half_bits(0x1p-24f), 0x0001);  // smallest subnormal
  EXPECT_EQ(half_bits(0x3p-24f), 0x0003);
  EXPECT_EQ(static_cast<float>(Half::from_bits(0x0001)), 0x1p-24f);
  EXPECT_EQ(static_cast<float>(Half::from_bits(0x03ff)), 0x3ffp-24f);  // largest subnormal
  EXPECT_EQ(static_cast<float>(Half::from_bits(0x7bff)), 65504.0f);
  EXPECT_EQ(static_cast<float>(Half::from_bits(0xbc00)), -1.0f);
}

TEST(Half, RoundsToNearestEven) {
  // 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: ties go to the even mantissa (1.0).
  EXPECT_EQ(half_bits(1.0f + 0x1p-11f), 0x3c00);
  // 1 + 3 * 2^-11 lies halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even).
  EXPECT_EQ(half_bits(1.0f + 0x3p-11f), 0x3c02);
  // Just above the halfway point rounds up.
  EXPECT_EQ(half_bits(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
  // Subnormal ties: 2.5 * 2^-24 -> 2 * 2^-24, 3.5 * 2^-24 -> 4 * 2^-24.
  EXPECT_EQ(half_bits(0x5p-25f), 0x0002);
  EXPECT_EQ(half_bits(0x7p-25f), 0x0004);
  // Half of the smallest subnormal ties to zero; a bit more rounds up to it.
  EXPECT_EQ(half_bits(0x1p-25f), 0x0000);
  EXPECT_EQ(half_bits(0x1.2p-25f), 0x0001);
}

TEST(Half, OverflowInfAndNaN) {
  EXPECT_EQ(half_bits(65519.0f), 0x7bff);  // below the halfway point to 65536: rounds down
  EXPECT_EQ(half_bits(65520.0f), 0x7c00);  // halfway: ties to even = Inf
  EXPECT_EQ(half_bits(1e10f), 0x7c00);
  EXPECT_EQ(half_bits(-1e10f), 0xfc00);
  EXPECT_EQ(half_bits(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(half_bits(-std::numeric_limits<float>::infinity()), 0xfc00);
  const std::uint16_t nan = half_bits(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  EXPECT_NE(half_bits(from_bits(0x7f800001u)) & 0x03ff, 0);  // signalling NaN with a low payload stays NaN
  EXPECT_TRUE(std::isnan(static_cast<float>(Half::from_bits(0x7e00))));
  EXPECT_TRUE(std::isinf(static_cast<float>(Half::from_bits(0xfc00))));
}

TEST(Half, RoundTripsEveryPattern) {
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const Half h = Half::from_bits(static_cast<std::uint16_t>(b));
    const float f = h;
    if (std::isnan(f)) continue;
    EXPECT_EQ(Half(f).bits, b) << std::hex << b;
  }
}

TEST(BFloat16, KnownPatterns) {
  EXPECT_EQ(bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(bf16_bits(-2.0f), 0xc000);
  EXPECT_EQ(bf16_bits(from_bits(0x3f808000u)), 0x3f80);  // tie, even stays
  EXPECT_EQ(bf16_bits(from_bits(0x3f818000u)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(bf16_bits(from_bits(0x3f808001u)), 0x3f81);  // above the tie
  EXPECT_EQ(bf16_bits(from_bits(0x00008000u)), 0x0000);  // subnormal tie to even (zero)
  EXPECT_EQ(bf16_bits(from_bits(0x00018000u)), 0x0002);
  EXPECT_EQ(bf16_bits(std::numeric_limits<float>::max()), 0x7f80);  // overflows to Inf
  EXPECT_EQ(bf16_bits(-std::numeric_limits<float>::infinity()), 0xff80);
  const std::uint16_t nan = bf16_bits(from_bits(0x7f800001u));  // payload only in the dropped bits
  EXPECT_EQ(nan & 0x7f80, 0x7f80);
  EXPECT_NE(nan & 0x007f, 0);
  EXPECT_EQ(static_cast<float>(BFloat16::from_bits(0x4049)), 3.140625f);
}

TEST(Convert, FloatToIntegerIsDefined) {
  EXPECT_EQ((convert<std::int32_t>(2.9f)), 2);
  EXPECT_EQ((convert<std::int32_t>(-2.9)), -2);
  EXPECT_EQ((convert<std::int8_t>(1000.0)), 127);
  EXPECT_EQ((convert<std::uint8_t>(-5.0f)), 0);
  EXPECT_EQ((convert<std::int64_t>(std::numeric_limits<double>::quiet_NaN())), 0);
  EXPECT_EQ((convert<std::int64_t>(1e300)), std::numeric_limits<std::int64_t>::max());
  EXPECT_TRUE((convert<bool>(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_FALSE((convert<bool>(-0.0)));
}

TEST(Convert, WideSourcesRoundOnceToSixteenBits) {
  // 2^24 + 2^16 + 1 is just above the tie between bf16 neighbours 2^24 and 2^24 + 2^17:
  // correctly rounded it goes up; via float (which drops the +1) it would tie to 2^24.
  const std::int64_t v = (std::int64_t{1} << 24) + (1 << 16) + 1;
  EXPECT_EQ(static_cast<float>(convert<BFloat16>(v)), 16777216.0f + 131072.0f);
  EXPECT_EQ(static_cast<float>(convert<BFloat16>(static_cast<double>(v))), 16777216.0f + 131072.0f);
  EXPECT_EQ(convert<Half>(1.0 + 0x1p-11 + 0x1p-40).bits, 0x3c01);
}

}  // namespace

}  // namespace dtype_test
