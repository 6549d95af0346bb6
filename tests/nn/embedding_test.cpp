// Embedding: row lookup, N(0, 1) initialisation with a zero padding row, gradients (none for
// the padding row), state dict, clone and errors.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "layer_test_util.h"

import infini.nn;

namespace infini::nn::test::embedding_test {
namespace {

Tensor indices(const std::vector<std::int64_t>& v, const Shape& shape) { return from_vector(v, shape); }

TEST(Embedding, ForwardPicksRows) {
  Embedding emb(5, 3);
  const std::vector<double> w = values(emb->weight);
  const Tensor y = emb(indices({4, 0, 2, 2, 1, 3}, {2, 3}));
  EXPECT_EQ(y.shape(), (Shape{2, 3, 3}));
  std::vector<double> expected;
  for (std::int64_t r : {4, 0, 2, 2, 1, 3})
    for (int c = 0; c < 3; ++c) expected.push_back(w[r * 3 + c]);
  EXPECT_EQ(values(y), expected);
  EXPECT_EQ(emb(scalar_tensor(3, {.dtype = kInt64})).shape(), (Shape{3}));  // a 0-d index gives one row
}

TEST(Embedding, DefaultInitIsStandardNormalWithAZeroPaddingRow) {
  Embedding emb(1000, 64, -1);  // padding_idx -1 is row 999
  ASSERT_TRUE(emb->padding_idx);
  EXPECT_EQ(*emb->padding_idx, 999);
  const std::vector<double> w = values(emb->weight);
  EXPECT_NEAR(mean_of(w), 0.0, 0.01);
  EXPECT_NEAR(std_of(w), 1.0, 0.01);
  for (int c = 0; c < 64; ++c) EXPECT_EQ(w[999 * 64 + c], 0.0);
  EXPECT_EQ(names(emb->named_parameters()), std::vector<std::string>{"weight"});
  EXPECT_EQ(keys(emb->state_dict()), std::vector<std::string>{"weight"});
  EXPECT_EQ(emb->weight.shape(), (Shape{1000, 64}));
  EXPECT_EQ(emb->str(), "Embedding(1000, 64, padding_idx=999)");
  EXPECT_EQ(Embedding(10, 3)->str(), "Embedding(10, 3)");
}

TEST(Embedding, GradientsSumPerRowAndSkipThePaddingRow) {
  Embedding emb(4, 2, 0);
  emb->to(kFloat64);
  const Tensor idx = indices({1, 0, 1, 3, 0}, {5});
  const Tensor coeff = tensor({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {5, 2});
  sum(mul(emb(idx), coeff)).backward();
  // Row 1 is used at positions 0 and 2, row 3 at 3; row 0 (padding) gets nothing.
  EXPECT_EQ(values(emb->weight.grad()), (std::vector<double>{0, 0, 1 + 5, 2 + 6, 0, 0, 7, 8}));
  Embedding plain(4, 2);
  plain->to(kFloat64);
  expect_gradcheck([&](const TensorList&) { return TensorList{plain(idx)}; }, {plain->weight});
}

TEST(Embedding, CloneIsDeep) {
  Embedding emb(6, 2, 1);
  auto copy = std::dynamic_pointer_cast<EmbeddingImpl>(emb->clone());
  ASSERT_TRUE(copy);
  EXPECT_EQ(*copy->padding_idx, 1);
  EXPECT_EQ(values(copy->weight), values(emb->weight));
  EXPECT_NE(copy->weight.data_ptr(), emb->weight.data_ptr());
}

TEST(Embedding, Errors) {
  expect_error<ShapeError>([] { Embedding(-2, 3); }, "Embedding", "got -2 and 3");
  expect_error<IndexError>([] { Embedding(4, 3, 4); }, "Embedding", "padding_idx 4 must be within [-4, 4)");
  expect_error<IndexError>([] { Embedding(4, 3, -5); }, "Embedding", "padding_idx -5");
  Embedding emb(4, 3);
  expect_error<DTypeError>([&] { emb(zeros({2})); }, "Embedding", "float32");
  expect_error<IndexError>([&] { emb(indices({1, 4}, {2})); }, "Embedding");
}

}  // namespace
}  // namespace infini::nn::test::embedding_test
