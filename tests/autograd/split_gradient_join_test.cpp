// split's backward joins its pieces' gradients without a copy when they already tile one
// buffer as the join lays it out (the CUDA tensor-core attention writes dq, dk and dv so for
// the heads of a split qkv projection), and copies them otherwise; the values are the same
// either way. attention_cuda_test.cpp checks the attention half on a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "op_info.h"

namespace infini::test::split_gradient_join_test {
namespace {

// x (2, 3, 12) split into three pieces of 4 along the last dim.
struct Split {
  Tensor x = leaf({2, 3, 12}, 1);
  TensorList pieces = split(x, 4, 2);
};

TensorList slices_of(const Tensor& buffer, const std::vector<std::int64_t>& starts) {
  TensorList slices;
  for (std::int64_t start : starts) slices.push_back(buffer.narrow(2, start, 4));
  return slices;
}

TEST(SplitGradientJoin, GradientsTilingOneBufferAreJoinedWithoutACopy) {
  Split s;
  const Tensor buffer = sample({2, 3, 12}, -1, 1, 7);
  const Tensor dx = autograd::grad(s.pieces, {s.x}, slices_of(buffer, {0, 4, 8})).at(0);
  EXPECT_TRUE(dx.storage().is_same(buffer.storage()));
  EXPECT_EQ(dx.storage_offset(), 0);
  EXPECT_EQ(dx.shape(), buffer.shape());
  EXPECT_EQ(values(dx), values(buffer));
}

// GPT-2's attention heads: pieces (B, T, C) viewed as (B, T, H, D) and transposed to
// (B, H, T, D); their gradients are heads of one (B, T, 3 H, D) buffer. The transpose's and
// the view's backward are views, so the join finds the buffer itself.
TEST(SplitGradientJoin, HeadsOfOneBufferGiveTheBufferAsTheProjectionsGradient) {
  const std::int64_t B = 2, T = 5, H = 3, D = 4, C = H * D;
  const Tensor qkv = leaf({B, T, 3 * C}, 3);
  TensorList heads;
  for (const Tensor& piece : split(qkv, C, 2)) heads.push_back(piece.view({B, T, H, D}).transpose(1, 2));
  const Tensor buffer = sample({B, T, 3 * H, D}, -1, 1, 11);
  TensorList head_grads;
  for (std::int64_t i = 0; i < 3; ++i) head_grads.push_back(buffer.narrow(2, i * H, H).transpose(1, 2));
  const Tensor dqkv = autograd::grad(heads, {qkv}, head_grads).at(0);
  EXPECT_TRUE(dqkv.storage().is_same(buffer.storage()));
  EXPECT_EQ(dqkv.shape(), qkv.shape());
  EXPECT_TRUE(dqkv.is_contiguous());
  EXPECT_EQ(values(dqkv), values(buffer));
}

// Pieces of one buffer in another order, with a gap, or from different buffers: a copy with
// the pieces' values in their places.
TEST(SplitGradientJoin, OtherLayoutsAreCopied) {
  const Tensor buffer = sample({2, 3, 16}, -1, 1, 13);
  for (const std::vector<std::int64_t>& starts : {std::vector<std::int64_t>{4, 0, 8}, {0, 4, 12}, {0, 8, 4}}) {
    Split s;
    const TensorList grads = slices_of(buffer, starts);
    const Tensor dx = autograd::grad(s.pieces, {s.x}, grads).at(0);
    EXPECT_FALSE(dx.storage().is_same(buffer.storage()));
    EXPECT_EQ(values(dx), values(cat(grads, 2)));
  }
  Split s;
  const TensorList separate{sample({2, 3, 4}, -1, 1, 17), sample({2, 3, 4}, -1, 1, 19), sample({2, 3, 4}, -1, 1, 23)};
  EXPECT_EQ(values(autograd::grad(s.pieces, {s.x}, separate).at(0)), values(cat(separate, 2)));
}

// A piece without a gradient gets zeros, so nothing is joined in place.
TEST(SplitGradientJoin, AMissingGradientIsZerosInACopy) {
  Split s;
  const Tensor buffer = sample({2, 3, 12}, -1, 1, 29);
  const Tensor dx =
      autograd::grad({s.pieces[0], s.pieces[2]}, {s.x}, {buffer.narrow(2, 0, 4), buffer.narrow(2, 8, 4)}).at(0);
  EXPECT_FALSE(dx.storage().is_same(buffer.storage()));
  const std::vector<double> b = values(buffer), d = values(dx);
  for (std::size_t i = 0; i < d.size(); ++i) EXPECT_EQ(d[i], i % 12 >= 4 && i % 12 < 8 ? 0.0 : b[i]) << i;
}

// With create_graph the gradients carry a graph: the join is the recorded cat, whose own
// gradient flows back to the pieces' gradients.
TEST(SplitGradientJoin, CreateGraphJoinsWithARecordedCat) {
  Split s;
  const Tensor buffer = leaf({2, 3, 12}, 31);
  const Tensor dx = autograd::grad(s.pieces, {s.x}, slices_of(buffer, {0, 4, 8}), true, true).at(0);
  ASSERT_TRUE(dx.requires_grad());
  EXPECT_FALSE(dx.storage().is_same(buffer.storage()));
  EXPECT_EQ(values(dx), values(buffer));
  const Tensor weights = sample({2, 3, 12}, -1, 1, 37);
  sum(mul(dx, weights)).backward();
  EXPECT_EQ(values(buffer.grad()), values(weights));
}

// The engine sums into a joined gradient in place only when nothing else sees its buffer:
// two backward passes accumulate, and the buffer the gradients came from is left alone.
TEST(SplitGradientJoin, AccumulationLeavesTheSourceBufferAlone) {
  Split s;
  const Tensor buffer = sample({2, 3, 12}, -1, 1, 41);
  const std::vector<double> before = values(buffer);
  for (int pass = 0; pass < 2; ++pass) autograd::backward(s.pieces, slices_of(buffer, {0, 4, 8}), true);
  EXPECT_EQ(values(buffer), before);
  const std::vector<double> g = values(s.x.grad());
  for (std::size_t i = 0; i < g.size(); ++i) EXPECT_EQ(g[i], 2 * before[i]) << i;
}

}  // namespace
}  // namespace infini::test::split_gradient_join_test
