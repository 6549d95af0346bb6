// Image transforms against values worked out by hand.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

import infini.nn;

#include "data_test_util.h"

namespace infini::data::data_transforms_test {
namespace {

using test::expect_error;

std::vector<double> values(const Tensor& t) {
  const Tensor flat = t.to(kFloat64).contiguous();
  const double* p = flat.data_ptr<double>();
  return std::vector<double>(p, p + flat.numel());
}

// A (1, 3, 3) image 1..9: [[1 2 3] [4 5 6] [7 8 9]].
Tensor image3x3() { return arange(1, 10, 1, {.dtype = kFloat32}).view({1, 3, 3}); }

TEST(DataTransforms, NormalizePerChannel) {
  // Channel 0: {0, 2, 4, 6}, channel 1: {1, 3, 5, 7}; mean {1, 2}, std {2, 4}.
  const Tensor x = from_vector<float>({0, 2, 4, 6, 1, 3, 5, 7}, {2, 2, 2});
  const Tensor y = Normalize({1, 2}, {2, 4})(x);
  EXPECT_EQ(y.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(y.dtype(), kFloat32);
  EXPECT_EQ(values(y), (std::vector<double>{-0.5, 0.5, 1.5, 2.5, -0.25, 0.25, 0.75, 1.25}));
  // A batch (N, C, H, W) uses the same per-channel statistics.
  const Tensor batch = stack({x, mul(x, 2.0)}, 0);
  EXPECT_EQ(values(Normalize({1, 2}, {2, 4})(batch)),
            (std::vector<double>{-0.5, 0.5, 1.5, 2.5, -0.25, 0.25, 0.75, 1.25,  //
                                 -0.5, 1.5, 3.5, 5.5, 0.0, 1.0, 2.0, 3.0}));
}

TEST(DataTransforms, NormalizeErrors) {
  expect_error<Error>([] { Normalize({0.5}, {1, 2}); }, "Normalize", "1 and 2");
  expect_error<Error>([] { Normalize({}, {}); }, "Normalize", "per channel");
  expect_error<Error>([] { Normalize({0, 0}, {1, 0}); }, "Normalize", "std[1]");
  expect_error<ShapeError>([] { Normalize({0, 0}, {1, 1})(zeros({3, 2, 2})); }, "Normalize", "[3, 2, 2]");
  expect_error<ShapeError>([] { Normalize({0}, {1})(zeros({2, 2})); }, "Normalize", "[2, 2]");
  expect_error<DTypeError>([] { Normalize({0}, {1})(zeros({1, 2, 2}, {.dtype = kUInt8})); }, "Normalize", "uint8");
}

TEST(DataTransforms, HorizontalFlip) {
  EXPECT_EQ(values(RandomHorizontalFlip(1.0)(image3x3())), (std::vector<double>{3, 2, 1, 6, 5, 4, 9, 8, 7}));
  EXPECT_EQ(values(RandomHorizontalFlip(0.0)(image3x3())), values(image3x3()));
  // A batch flips as one (one draw per call, like torchvision).
  const Tensor batch = stack({image3x3(), mul(image3x3(), 10.0)}, 0);
  EXPECT_EQ(values(RandomHorizontalFlip(1.0)(batch)),
            (std::vector<double>{3, 2, 1, 6, 5, 4, 9, 8, 7, 30, 20, 10, 60, 50, 40, 90, 80, 70}));
}

TEST(DataTransforms, HorizontalFlipIsSeeded) {
  // The flip happens when a uniform float64 draw of the generator is below p.
  Generator g(17), reference(17);
  RandomHorizontalFlip flip(0.5, &g);
  int flips = 0;
  for (int i = 0; i < 200; ++i) {
    const bool expected = rand({}, {.dtype = kFloat64}, &reference).item<double>() < 0.5;
    const bool flipped = values(flip(image3x3()))[0] == 3.0;
    EXPECT_EQ(flipped, expected) << "call " << i;
    flips += flipped;
  }
  EXPECT_GT(flips, 70);
  EXPECT_LT(flips, 130);
  // Without a generator, draws come from batch_generator(), here a scope's.
  std::vector<double> first, second;
  {
    BatchGeneratorScope scope(99);
    for (int i = 0; i < 20; ++i) first.push_back(values(RandomHorizontalFlip()(image3x3()))[0]);
  }
  {
    BatchGeneratorScope scope(99);
    for (int i = 0; i < 20; ++i) second.push_back(values(RandomHorizontalFlip()(image3x3()))[0]);
  }
  EXPECT_EQ(first, second);
}

TEST(DataTransforms, RandomCropWithPadding) {
  // 3x3 image padded by 1 -> 5x5; a 2x2 crop at top t, left l (each uniform in [0, 3]).
  const std::vector<double> padded = {0, 0, 0, 0, 0,  //
                                      0, 1, 2, 3, 0,  //
                                      0, 4, 5, 6, 0,  //
                                      0, 7, 8, 9, 0,  //
                                      0, 0, 0, 0, 0};
  Generator g(3), reference(3);
  RandomCrop crop(2, 1, &g);
  std::vector<int> seen(16, 0);
  for (int i = 0; i < 100; ++i) {
    const std::int64_t top = randint(0, 4, {}, {}, &reference).item<std::int64_t>();
    const std::int64_t left = randint(0, 4, {}, {}, &reference).item<std::int64_t>();
    const Tensor out = crop(image3x3());
    EXPECT_EQ(out.shape(), (Shape{1, 2, 2}));
    const std::vector<double> expected = {padded[top * 5 + left], padded[top * 5 + left + 1],
                                          padded[(top + 1) * 5 + left], padded[(top + 1) * 5 + left + 1]};
    EXPECT_EQ(values(out), expected) << "top " << top << " left " << left;
    ++seen[top * 4 + left];
  }
  for (int cell = 0; cell < 16; ++cell) EXPECT_GT(seen[cell], 0) << "offset " << cell << " never drawn";
  // Rectangular crop without padding; the only position is the whole width.
  EXPECT_EQ(values(RandomCrop({2, 3}, 0, &g)(image3x3())).size(), 6u);
  EXPECT_EQ(values(RandomCrop({3, 3}, 0, &g)(image3x3())), values(image3x3()));
}

TEST(DataTransforms, RandomCropErrors) {
  expect_error<ShapeError>([] { RandomCrop(4)(image3x3()); }, "RandomCrop", "larger than the padded image 3 x 3");
  expect_error<ShapeError>([] { RandomCrop(2)(zeros({5})); }, "RandomCrop", "[5]");
  expect_error<Error>([] { RandomCrop(0); }, "RandomCrop", "size");
  expect_error<Error>([] { RandomCrop(2, -1); }, "RandomCrop", "padding -1");
  expect_error<Error>([] { RandomHorizontalFlip(1.5); }, "RandomHorizontalFlip", "1.5");
  expect_error<ShapeError>([] { RandomHorizontalFlip()(zeros({3})); }, "RandomHorizontalFlip", "[3]");
}

TEST(DataTransforms, ComposeAppliesInOrder) {
  // Normalize (mean 5, std 2) then flip: row [1 2 3] -> [-2 -1.5 -1] -> [-1 -1.5 -2].
  const Compose both({Normalize({5}, {2}), RandomHorizontalFlip(1.0)});
  EXPECT_EQ(values(both(image3x3())), (std::vector<double>{-1, -1.5, -2, 0.5, 0, -0.5, 2, 1.5, 1}));
  EXPECT_EQ(values(Compose({})(image3x3())), values(image3x3()));
}

}  // namespace
}  // namespace infini::data::data_transforms_test
