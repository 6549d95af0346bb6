// Identity and Flatten: shapes, values, gradients, clone and errors.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "layer_test_util.h"

import infini.nn;

namespace infini::nn::test::flatten_test {
namespace {

TEST(Flatten, MergesTheChosenDims) {
  const Tensor x = random_input({2, 3, 4, 5}, 1, false);
  EXPECT_EQ(Flatten()(x).shape(), (Shape{2, 60}));
  EXPECT_EQ(Flatten(0, 1)(x).shape(), (Shape{6, 4, 5}));
  EXPECT_EQ(Flatten(-3, -2)(x).shape(), (Shape{2, 12, 5}));
  EXPECT_EQ(Flatten(0)(x).shape(), (Shape{120}));
  EXPECT_EQ(values(Flatten()(x)), values(x));  // row-major order is kept
  const Tensor t = x.transpose(0, 3);           // non-contiguous input
  EXPECT_EQ(values(Flatten()(t)), values(t));
  EXPECT_EQ(Flatten(2, 3)->str(), "Flatten(start_dim=2, end_dim=3)");
}

TEST(Flatten, GradientsIdentityAndClone) {
  const Tensor x = random_input({2, 3, 2}, 2);
  Flatten f;
  expect_gradcheck([&](const TensorList&) { return TensorList{f(x)}; }, {x});
  Identity id;
  EXPECT_TRUE(id(x).is_same(x));
  EXPECT_EQ(id->str(), "Identity()");
  auto copy = std::dynamic_pointer_cast<FlattenImpl>(Flatten(0, 2)->clone());
  ASSERT_TRUE(copy);
  EXPECT_EQ(copy->end_dim, 2);
}

TEST(Flatten, Errors) {
  expect_error<IndexError>([] { Flatten(3)(zeros({2, 3})); }, "Flatten");
  expect_error<IndexError>([] { Flatten(1, 0)(zeros({2, 3})); }, "Flatten", "start_dim 1 comes after end_dim 0");
}

}  // namespace
}  // namespace infini::nn::test::flatten_test
