// copy_, fill_, to, clone, contiguous and item: any strides, broadcasting, dtype
// conversion, overlapping self-copies, and large tensors on the OpenMP path.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>
import infini.tensor;

#include "values.h"

namespace copy_test {
using namespace infini;

namespace {

using test::at;
using test::contiguous_values;

TEST(Copy, FromTransposedSource) {
  const Tensor src = arange(12, {.dtype = kFloat32}).view({4, 3});  // src[i][j] = 3 i + j
  Tensor dst = empty({3, 4});
  dst.copy_(src.t());
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 4; ++j) EXPECT_EQ(at<float>(dst, i, j), static_cast<float>(3 * j + i));
}

TEST(Copy, SlicedWithStepOnBothSides) {
  Tensor dst = zeros({10}, {.dtype = kInt64});
  const Tensor src = arange(15).slice(0, 2, 15, 3);  // 2, 5, 8, 11, 14
  dst.slice(0, 1, 10, 2).copy_(src);                  // odd positions
  EXPECT_EQ(contiguous_values<std::int64_t>(dst), (std::vector<std::int64_t>{0, 2, 0, 5, 0, 8, 0, 11, 0, 14}));
}

TEST(Copy, BroadcastsAnExpandableSource) {
  Tensor dst = empty({3, 4}, {.dtype = kInt32});
  dst.copy_(from_vector<std::int32_t>({1, 2, 3, 4}));
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 4; ++j) EXPECT_EQ(at<std::int32_t>(dst, i, j), j + 1);
  dst.copy_(from_vector<std::int32_t>({7, 8, 9}, {3, 1}));
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 4; ++j) EXPECT_EQ(at<std::int32_t>(dst, i, j), 7 + i);
  dst.copy_(scalar_tensor(-5));
  EXPECT_EQ(contiguous_values<std::int32_t>(dst), std::vector<std::int32_t>(12, -5));
}

TEST(Copy, Float64ToIntegersTruncatesAndSaturates) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor src = from_vector<double>({2.7, -2.7, 0.0, 1e10, -1e10, nan, -0.5});
  EXPECT_EQ(contiguous_values<std::int32_t>(src.to(kInt32)),
            (std::vector<std::int32_t>{2, -2, 0, std::numeric_limits<std::int32_t>::max(),
                                       std::numeric_limits<std::int32_t>::min(), 0, 0}));
  EXPECT_EQ(contiguous_values<std::uint8_t>(from_vector<double>({300.0, -1.0, 255.9}).to(kUInt8)),
            (std::vector<std::uint8_t>{255, 0, 255}));
  const Tensor b = src.to(kBool);
  const bool* p = b.data_ptr<bool>();
  EXPECT_EQ((std::vector<bool>(p, p + 7)), (std::vector<bool>{true, true, false, true, true, true, true}));
  EXPECT_EQ(contiguous_values<double>(from_vector<bool>({true, false}).to(kFloat64)), (std::vector<double>{1.0, 0.0}));
}

TEST(Copy, ToSixteenBitFloatsRoundsToNearest) {
  // Expected bit patterns: IEEE binary16 / bfloat16 nearest values of the float64 inputs.
  const Tensor src = from_vector<double>({0.1, 1.0 / 3.0, 65504.0, 1e5, -2.5, 3.14159265});
  const Tensor h = src.to(kFloat16);
  const std::uint16_t half_bits[] = {0x2e66, 0x3555, 0x7bff, 0x7c00, 0xc100, 0x4248};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(h.data_ptr<Half>()[i].bits, half_bits[i]) << i;
  const Tensor b = src.to(kBFloat16);
  const std::uint16_t bf16_bits[] = {0x3dcd, 0x3eab, 0x4780, 0x47c3, 0xc020, 0x4049};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(b.data_ptr<BFloat16>()[i].bits, bf16_bits[i]) << i;
  // And back: 0x2e66 is (1 + 614 / 1024) * 2^-4.
  EXPECT_EQ(h.to(kFloat64).data_ptr<double>()[0], 1638.0 / 16384.0);
  EXPECT_EQ(b.to(kFloat32).data_ptr<float>()[5], 3.140625f);
}

TEST(Copy, OverlappingSelfCopyClonesTheSourceFirst) {
  Tensor a = arange(9, {.dtype = kFloat64}).view({3, 3});
  a.copy_(a.t());
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 3; ++j) EXPECT_EQ(at<double>(a, i, j), static_cast<double>(3 * j + i));

  Tensor v = arange(10);
  v.narrow(0, 1, 9).copy_(v.narrow(0, 0, 9));  // shift right by one, like memmove
  EXPECT_EQ(contiguous_values<std::int64_t>(v), (std::vector<std::int64_t>{0, 0, 1, 2, 3, 4, 5, 6, 7, 8}));

  Tensor same = arange(4);
  same.copy_(same);
  EXPECT_EQ(contiguous_values<std::int64_t>(same), (std::vector<std::int64_t>{0, 1, 2, 3}));
}

TEST(Copy, WritingIntoAnExpandedTensorThrows) {
  const Tensor base = zeros({3});
  Tensor expanded = base.expand({2, 3});
  EXPECT_THROW(expanded.copy_(ones({2, 3})), Error);
  EXPECT_THROW(expanded.fill_(1), Error);
  EXPECT_EQ(contiguous_values<float>(base), (std::vector<float>{0, 0, 0}));  // untouched
  Tensor size_one = base.view({1, 3}).expand({1, 3});  // stride 0 only matters above size 1
  size_one.fill_(2);
  EXPECT_EQ(contiguous_values<float>(base), (std::vector<float>{2, 2, 2}));
}

TEST(Copy, ToReturnsTheSameTensorWhenNothingChanges) {
  const Tensor a = arange(6, {.dtype = kFloat32}).view({2, 3}).t();
  EXPECT_TRUE(a.to(kFloat32).is_same(a));
  EXPECT_TRUE(a.to(Device::cpu()).is_same(a));
  EXPECT_TRUE(a.to(Device::cpu(), kFloat32).is_same(a));
  const Tensor d = a.to(kFloat64);
  EXPECT_FALSE(d.storage().is_same(a.storage()));
  EXPECT_EQ(d.dtype(), kFloat64);
  EXPECT_TRUE(d.is_contiguous());
  EXPECT_EQ(contiguous_values<double>(d), (std::vector<double>{0, 3, 1, 4, 2, 5}));
}

TEST(Copy, CloneAndContiguous) {
  const Tensor a = arange(6).view({2, 3});
  EXPECT_TRUE(a.contiguous().is_same(a));

  Tensor c = a.clone();
  EXPECT_FALSE(c.storage().is_same(a.storage()));
  c.fill_(0);
  EXPECT_EQ(contiguous_values<std::int64_t>(a), (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5}));

  const Tensor t = a.t();
  const Tensor tc = t.contiguous();
  EXPECT_FALSE(tc.storage().is_same(a.storage()));
  EXPECT_EQ(tc.strides(), (Strides{2, 1}));
  EXPECT_EQ(contiguous_values<std::int64_t>(tc), (std::vector<std::int64_t>{0, 3, 1, 4, 2, 5}));
  const Tensor tclone = t.clone();  // clone of a strided tensor is contiguous too
  EXPECT_EQ(tclone.strides(), (Strides{2, 1}));
  EXPECT_EQ(contiguous_values<std::int64_t>(tclone), contiguous_values<std::int64_t>(tc));
}

TEST(Copy, Item) {
  const Scalar s = scalar_tensor(2.5).item();
  EXPECT_TRUE(s.is_floating_point());
  EXPECT_EQ(s.to<double>(), 2.5);
  EXPECT_EQ(scalar_tensor(2.5).item<int>(), 2);
  const Tensor m = arange(10).view({2, 5});
  EXPECT_TRUE(m.narrow(0, 1, 1).narrow(1, 3, 1).item().is_integral());
  EXPECT_EQ(m.narrow(0, 1, 1).narrow(1, 3, 1).item<std::int64_t>(), 8);
  EXPECT_TRUE(full({1}, true).item<bool>());
  EXPECT_TRUE(full({1}, true).item().is_bool());
  EXPECT_EQ(full({}, 0.1, {.dtype = kFloat16}).item<double>(), 1638.0 / 16384.0);
  EXPECT_EQ(full({1, 1, 1}, -3, {.dtype = kInt8}).item<double>(), -3.0);
}

TEST(Fill, StridedView) {
  Tensor m = zeros({4, 5}, {.dtype = kInt16});
  m.slice(1, 1, 5, 2).fill_(7);  // columns 1 and 3
  m.diagonal().fill_(-1);
  for (std::int64_t i = 0; i < 4; ++i)
    for (std::int64_t j = 0; j < 5; ++j)
      EXPECT_EQ(at<std::int16_t>(m, i, j), i == j ? -1 : j % 2 == 1 ? 7 : 0) << i << ", " << j;
}

// Sizes above 32768 elements run the OpenMP path of the strided loop.
TEST(CopyLarge, SlicedSourceIntoTransposedDestinationWithConversion) {
  const Tensor src = arange(600 * 400, {.dtype = kFloat64}).view({600, 400}).slice(1, 1, 400, 3);  // (600, 133)
  ASSERT_GT(src.numel(), 32768);
  Tensor dst = empty({133, 600}, {.dtype = kFloat32}).t();  // strides (1, 600)
  dst.copy_(src);
  for (std::int64_t i = 0; i < 600; ++i)
    for (std::int64_t j = 0; j < 133; ++j)
      ASSERT_EQ(at<float>(dst, i, j), static_cast<float>(400 * i + 1 + 3 * j)) << i << ", " << j;
}

TEST(CopyLarge, TransposedToContiguousAndBroadcastRows) {
  const Tensor t = arange(300 * 200).view({300, 200}).t().to(kInt32);  // (200, 300)
  ASSERT_TRUE(t.is_contiguous());
  for (std::int64_t i = 0; i < 200; ++i)
    for (std::int64_t j = 0; j < 300; ++j) ASSERT_EQ(at<std::int32_t>(t, i, j), 200 * j + i);

  Tensor rows = empty({100, 1000});
  rows.copy_(arange(1000, {.dtype = kFloat32}));
  for (std::int64_t i = 0; i < 100; ++i)
    for (std::int64_t j = 0; j < 1000; ++j) ASSERT_EQ(at<float>(rows, i, j), static_cast<float>(j));
}

TEST(CopyLarge, SelfTransposeAndStridedFill) {
  Tensor a = arange(300 * 300, {.dtype = kFloat64}).view({300, 300});
  a.copy_(a.t());
  for (std::int64_t i = 0; i < 300; ++i)
    for (std::int64_t j = 0; j < 300; ++j) ASSERT_EQ(at<double>(a, i, j), static_cast<double>(300 * j + i));

  Tensor z = zeros({1000, 300});
  Tensor view = z.slice(0, 0, 1000, 2).slice(1, 1, 300, 3);  // 500 x 100
  ASSERT_GT(view.numel(), 32768);
  view.fill_(5);
  for (std::int64_t i = 0; i < 1000; ++i)
    for (std::int64_t j = 0; j < 300; ++j)
      ASSERT_EQ(at<float>(z, i, j), i % 2 == 0 && j % 3 == 1 ? 5.0f : 0.0f) << i << ", " << j;
}

// Batched transposes take the tiled path: sizes that are not multiples of the 32 x 32 tile,
// a batch dim, a dtype conversion, both below and above the parallel threshold.
TEST(CopyLarge, BatchedTransposeTiles) {
  for (std::int64_t batch : {2, 13}) {
    const std::int64_t rows = 70, cols = 45;
    const Tensor src = arange(batch * cols * rows, {.dtype = kFloat32}).view({batch, cols, rows}).transpose(1, 2);
    Tensor dst = empty({batch, rows, cols}, {.dtype = kFloat64});
    dst.copy_(src);
    const double* out = dst.data_ptr<double>();
    for (std::int64_t b = 0; b < batch; ++b)
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c)
          ASSERT_EQ(out[(b * rows + r) * cols + c], static_cast<double>((b * cols + c) * rows + r)) << b << r << c;
  }
}

}  // namespace

}  // namespace copy_test
