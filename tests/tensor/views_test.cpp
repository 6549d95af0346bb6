// View ops: shape, strides, storage offset and values of every view, checked against
// naive index formulas over an arange base; views share storage and write through.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>
import infini.tensor;

namespace views_test {
using namespace infini;

namespace {

// The elements of `t` in row-major order, read straight from its storage through
// (shape, strides, storage offset): independent of the copy kernel.
std::vector<std::int64_t> elements(const Tensor& t) {
  const auto* base = static_cast<const std::int64_t*>(t.storage().data());
  std::vector<std::int64_t> out;
  std::vector<std::int64_t> index(t.dim(), 0);
  for (std::int64_t n = 0; n < t.numel(); ++n) {
    std::int64_t at = t.storage_offset();
    for (std::int64_t d = 0; d < t.dim(); ++d) at += index[d] * t.strides()[d];
    out.push_back(base[at]);
    for (std::int64_t d = t.dim() - 1; d >= 0; --d) {
      if (++index[d] < t.shape()[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

// Values f(i, j, k) over a 3-d index space in row-major order.
template <class F>
std::vector<std::int64_t> table(std::int64_t n0, std::int64_t n1, std::int64_t n2, F f) {
  std::vector<std::int64_t> out;
  for (std::int64_t i = 0; i < n0; ++i)
    for (std::int64_t j = 0; j < n1; ++j)
      for (std::int64_t k = 0; k < n2; ++k) out.push_back(f(i, j, k));
  return out;
}

// A (2, 3, 4) int64 tensor holding a[i][j][k] = 12 i + 4 j + k.
Tensor base234() { return arange(24).view({2, 3, 4}); }

TEST(Views, ViewInfersMinusOneAndSharesStorage) {
  const Tensor flat = arange(24);
  const Tensor a = flat.view({2, -1, 4});
  EXPECT_EQ(a.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(a.strides(), (Strides{12, 4, 1}));
  EXPECT_EQ(a.storage_offset(), 0);
  EXPECT_TRUE(a.storage().is_same(flat.storage()));
  EXPECT_EQ(a.data_ptr(), flat.data_ptr());
  EXPECT_EQ(elements(a), table(2, 3, 4, [](auto i, auto j, auto k) { return 12 * i + 4 * j + k; }));
}

TEST(Views, ViewOfTransposedSplitsOnlyContiguousDims) {
  const Tensor t = arange(24).view({6, 4}).t();  // (4, 6), t[i][c] = 4 c + i
  const Tensor v = t.view({4, 2, 3});            // splits the strided dim: allowed
  EXPECT_EQ(v.strides(), (Strides{1, 12, 4}));
  EXPECT_TRUE(v.storage().is_same(t.storage()));
  EXPECT_EQ(elements(v), table(4, 2, 3, [](auto i, auto p, auto q) { return 4 * (3 * p + q) + i; }));
}

TEST(Views, ReshapeCopiesOnlyWhenStridesDemand) {
  const Tensor a = base234();
  const Tensor r = a.reshape({4, 6});
  EXPECT_TRUE(r.storage().is_same(a.storage()));
  EXPECT_EQ(r.strides(), (Strides{6, 1}));

  // Narrowed columns keep rows splittable: still a view.
  const Tensor cols = arange(24).view({4, 6}).narrow(1, 0, 3);  // strides (6, 1)
  const Tensor split = cols.reshape({2, 2, 3});
  EXPECT_TRUE(split.storage().is_same(cols.storage()));
  EXPECT_EQ(split.strides(), (Strides{12, 6, 1}));
  EXPECT_EQ(elements(split), table(2, 2, 3, [](auto i, auto j, auto k) { return 6 * (2 * i + j) + k; }));

  // A transposed tensor cannot be flattened in place: reshape copies.
  const Tensor t = arange(12).view({3, 4}).t();  // t[i][j] = 4 j + i
  const Tensor flat = t.reshape({-1});
  EXPECT_FALSE(flat.storage().is_same(t.storage()));
  EXPECT_TRUE(flat.is_contiguous());
  EXPECT_EQ(elements(flat), table(1, 4, 3, [](auto, auto i, auto j) { return 4 * j + i; }));
}

TEST(Views, PermuteTransposeAndT) {
  const Tensor a = base234();
  const Tensor p = a.permute({2, 0, -2});  // (4, 2, 3), p[k][i][j] = a[i][j][k]
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.strides(), (Strides{1, 12, 4}));
  EXPECT_FALSE(p.is_contiguous());
  EXPECT_EQ(elements(p), table(4, 2, 3, [](auto k, auto i, auto j) { return 12 * i + 4 * j + k; }));

  const Tensor tr = a.transpose(0, -1);  // (4, 3, 2)
  EXPECT_EQ(tr.strides(), (Strides{1, 4, 12}));
  EXPECT_EQ(elements(tr), table(4, 3, 2, [](auto k, auto j, auto i) { return 12 * i + 4 * j + k; }));

  const Tensor m = arange(6).view({2, 3});
  EXPECT_EQ(elements(m.t()), (std::vector<std::int64_t>{0, 3, 1, 4, 2, 5}));
  const Tensor v = arange(3);
  EXPECT_TRUE(v.t().is_same(v));  // t() of a 1-d tensor is itself
}

TEST(Views, NarrowAndSelect) {
  const Tensor a = base234();
  const Tensor n = a.narrow(1, 1, 2);  // (2, 2, 4)
  EXPECT_EQ(n.shape(), (Shape{2, 2, 4}));
  EXPECT_EQ(n.strides(), a.strides());
  EXPECT_EQ(n.storage_offset(), 4);
  EXPECT_EQ(elements(n), table(2, 2, 4, [](auto i, auto j, auto k) { return 12 * i + 4 * (j + 1) + k; }));
  const Tensor last = a.narrow(2, -1, 1);  // negative start counts from the end
  EXPECT_EQ(last.storage_offset(), 3);
  EXPECT_EQ(elements(last), table(2, 3, 1, [](auto i, auto j, auto) { return 12 * i + 4 * j + 3; }));

  const Tensor s = a.select(1, -1);  // (2, 4): a[i][2][k]
  EXPECT_EQ(s.shape(), (Shape{2, 4}));
  EXPECT_EQ(s.strides(), (Strides{12, 1}));
  EXPECT_EQ(s.storage_offset(), 8);
  EXPECT_EQ(elements(s), table(1, 2, 4, [](auto, auto i, auto k) { return 12 * i + 8 + k; }));
  const Tensor scalar = a.select(0, 1).select(0, 2).select(0, 3);
  EXPECT_EQ(scalar.dim(), 0);
  EXPECT_EQ(scalar.item<std::int64_t>(), 12 + 8 + 3);
}

TEST(Views, SliceWithStepAndNegativeOrClampedBounds) {
  const Tensor v = arange(10);
  const Tensor stepped = v.slice(0, 1, 8, 3);
  EXPECT_EQ(stepped.strides(), (Strides{3}));
  EXPECT_EQ(stepped.storage_offset(), 1);
  EXPECT_EQ(elements(stepped), (std::vector<std::int64_t>{1, 4, 7}));
  EXPECT_EQ(elements(v.slice(0, -4, -1)), (std::vector<std::int64_t>{6, 7, 8}));
  EXPECT_EQ(elements(v.slice(0, -100, 100, 4)), (std::vector<std::int64_t>{0, 4, 8}));
  EXPECT_EQ(elements(v.slice(0, 8)), (std::vector<std::int64_t>{8, 9}));
  EXPECT_EQ(elements(v.slice(0, {}, 2)), (std::vector<std::int64_t>{0, 1}));
  EXPECT_EQ(v.slice(0, 7, 3).numel(), 0);  // end before start: empty
  EXPECT_EQ(v.slice(0, 20, 30).shape(), (Shape{0}));

  const Tensor a = base234();
  const Tensor cols = a.slice(2, 1, {}, 2);  // k = 1, 3
  EXPECT_EQ(cols.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(cols.strides(), (Strides{12, 4, 2}));
  EXPECT_EQ(elements(cols), table(2, 3, 2, [](auto i, auto j, auto k) { return 12 * i + 4 * j + 2 * k + 1; }));
}

TEST(Views, SqueezeAndUnsqueeze) {
  const Tensor a = arange(24).view({1, 6, 1, 4});
  EXPECT_EQ(a.squeeze().shape(), (Shape{6, 4}));
  EXPECT_EQ(a.squeeze().strides(), (Strides{4, 1}));
  EXPECT_EQ(a.squeeze(0).shape(), (Shape{6, 1, 4}));
  EXPECT_EQ(a.squeeze(-2).shape(), (Shape{1, 6, 4}));
  EXPECT_EQ(a.squeeze(1).shape(), a.shape());  // size 6: unchanged
  EXPECT_TRUE(a.squeeze().storage().is_same(a.storage()));

  const Tensor b = base234();
  const Tensor u = b.unsqueeze(1);
  EXPECT_EQ(u.shape(), (Shape{2, 1, 3, 4}));
  EXPECT_EQ(u.strides(), (Strides{12, 12, 4, 1}));
  EXPECT_EQ(b.unsqueeze(-1).shape(), (Shape{2, 3, 4, 1}));
  EXPECT_EQ(b.unsqueeze(-1).strides(), (Strides{12, 4, 1, 1}));
  EXPECT_EQ(elements(u), elements(b));
  EXPECT_TRUE(u.unsqueeze(0).is_contiguous());
}

TEST(Views, FlattenAndUnflatten) {
  const Tensor a = base234();
  const Tensor f = a.flatten(1);
  EXPECT_EQ(f.shape(), (Shape{2, 12}));
  EXPECT_TRUE(f.storage().is_same(a.storage()));
  EXPECT_EQ(a.flatten().shape(), (Shape{24}));
  EXPECT_EQ(a.flatten(0, 1).shape(), (Shape{6, 4}));

  const Tensor t = a.transpose(1, 2);  // (2, 4, 3): flattening dims 1..2 must copy
  const Tensor tf = t.flatten(1);
  EXPECT_FALSE(tf.storage().is_same(a.storage()));
  EXPECT_EQ(elements(tf), table(2, 4, 3, [](auto i, auto k, auto j) { return 12 * i + 4 * j + k; }));

  const Tensor u = a.unflatten(2, {2, -1});
  EXPECT_EQ(u.shape(), (Shape{2, 3, 2, 2}));
  EXPECT_EQ(u.strides(), (Strides{12, 4, 2, 1}));
  EXPECT_TRUE(u.storage().is_same(a.storage()));
  EXPECT_EQ(elements(u), elements(a));
}

TEST(Views, ExpandAndBroadcastTo) {
  const Tensor col = arange(3).view({3, 1});
  const Tensor e = col.expand({2, 3, 4});
  EXPECT_EQ(e.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(e.strides(), (Strides{0, 1, 0}));
  EXPECT_TRUE(e.storage().is_same(col.storage()));
  EXPECT_EQ(elements(e), table(2, 3, 4, [](auto, auto j, auto) { return j; }));

  const Tensor keep = col.expand({-1, 5});
  EXPECT_EQ(keep.shape(), (Shape{3, 5}));
  EXPECT_EQ(keep.strides(), (Strides{1, 0}));
  const Tensor b = arange(4).broadcast_to({3, 4});
  EXPECT_EQ(b.strides(), (Strides{0, 1}));
  EXPECT_EQ(elements(b), table(1, 3, 4, [](auto, auto, auto k) { return k; }));
  EXPECT_EQ(elements(arange(4).expand_as(zeros({2, 4}))), table(1, 2, 4, [](auto, auto, auto k) { return k; }));
}

TEST(Views, AsStrided) {
  const Tensor v = arange(10);
  const Tensor windows = v.as_strided({3, 4}, {2, 1}, 1);  // w[i][j] = 1 + 2 i + j
  EXPECT_EQ(windows.storage_offset(), 1);
  EXPECT_EQ(elements(windows), table(1, 3, 4, [](auto, auto i, auto j) { return 1 + 2 * i + j; }));
  const Tensor keep_offset = v.narrow(0, 5, 5).as_strided({2}, {2});
  EXPECT_EQ(elements(keep_offset), (std::vector<std::int64_t>{5, 7}));
}

TEST(Views, DiagonalWithOffsetsAndDims) {
  const Tensor m = arange(12).view({3, 4});  // m[i][j] = 4 i + j
  EXPECT_EQ(m.diagonal().strides(), (Strides{5}));
  EXPECT_EQ(elements(m.diagonal()), (std::vector<std::int64_t>{0, 5, 10}));
  EXPECT_EQ(elements(m.diagonal(1)), (std::vector<std::int64_t>{1, 6, 11}));
  EXPECT_EQ(elements(m.diagonal(-1)), (std::vector<std::int64_t>{4, 9}));
  EXPECT_EQ(elements(m.diagonal(3)), (std::vector<std::int64_t>{3}));
  EXPECT_EQ(m.diagonal(4).numel(), 0);
  EXPECT_EQ(m.diagonal(-5).numel(), 0);

  const Tensor a = base234();
  const Tensor d = a.diagonal(1, 0, 2);  // d[j][k] = a[k][j][k + 1]
  EXPECT_EQ(d.shape(), (Shape{3, 2}));
  EXPECT_EQ(d.strides(), (Strides{4, 13}));
  EXPECT_EQ(elements(d), table(1, 3, 2, [](auto, auto j, auto k) { return 12 * k + 4 * j + k + 1; }));
  const Tensor d2 = a.diagonal(0, -1, -2);  // d2[i][k] = a[i][k][k]
  EXPECT_EQ(d2.shape(), (Shape{2, 3}));
  EXPECT_EQ(elements(d2), table(1, 2, 3, [](auto, auto i, auto k) { return 12 * i + 5 * k; }));
}

TEST(Views, SplitAndChunk) {
  const Tensor v = arange(10);
  const auto parts = v.split(3);
  ASSERT_EQ(parts.size(), 4u);
  for (std::size_t p = 0; p < parts.size(); ++p) {
    EXPECT_EQ(parts[p].storage_offset(), static_cast<std::int64_t>(3 * p));
    EXPECT_TRUE(parts[p].storage().is_same(v.storage()));
  }
  EXPECT_EQ(elements(parts[3]), (std::vector<std::int64_t>{9}));

  const auto sized = v.split(std::vector<std::int64_t>{2, 5, 0, 3});
  ASSERT_EQ(sized.size(), 4u);
  EXPECT_EQ(elements(sized[0]), (std::vector<std::int64_t>{0, 1}));
  EXPECT_EQ(elements(sized[1]), (std::vector<std::int64_t>{2, 3, 4, 5, 6}));
  EXPECT_EQ(sized[2].numel(), 0);
  EXPECT_EQ(elements(sized[3]), (std::vector<std::int64_t>{7, 8, 9}));

  const auto columns = base234().split(std::vector<std::int64_t>{1, 3}, -1);
  EXPECT_EQ(columns[1].shape(), (Shape{2, 3, 3}));
  EXPECT_EQ(elements(columns[1]), table(2, 3, 3, [](auto i, auto j, auto k) { return 12 * i + 4 * j + k + 1; }));

  const auto four = v.chunk(4);  // ceil(10 / 4) = 3 per chunk
  ASSERT_EQ(four.size(), 4u);
  EXPECT_EQ(four[2].shape(), (Shape{3}));
  EXPECT_EQ(elements(four[3]), (std::vector<std::int64_t>{9}));
  EXPECT_EQ(arange(6).chunk(4).size(), 3u);  // like PyTorch: ceil(6 / 4) = 2 per chunk, 3 chunks
  const auto rows = base234().chunk(2, 1);
  EXPECT_EQ(rows[1].shape(), (Shape{2, 1, 4}));
  EXPECT_EQ(elements(rows[1]), table(2, 1, 4, [](auto i, auto, auto k) { return 12 * i + 8 + k; }));
}

TEST(Views, Unfold) {
  const Tensor w = arange(7).unfold(0, 3, 2);  // w[i][j] = 2 i + j
  EXPECT_EQ(w.shape(), (Shape{3, 3}));
  EXPECT_EQ(w.strides(), (Strides{2, 1}));
  EXPECT_EQ(elements(w), table(1, 3, 3, [](auto, auto i, auto j) { return 2 * i + j; }));

  const Tensor a = base234().unfold(2, 2, 1);  // (2, 3, 3, 2): a[i][j][k + m]
  EXPECT_EQ(a.shape(), (Shape{2, 3, 3, 2}));
  EXPECT_EQ(a.strides(), (Strides{12, 4, 1, 1}));
  std::vector<std::int64_t> expected;
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 3; ++j)
      for (std::int64_t k = 0; k < 3; ++k)
        for (std::int64_t m = 0; m < 2; ++m) expected.push_back(12 * i + 4 * j + k + m);
  EXPECT_EQ(elements(a), expected);
}

TEST(Views, WritesThroughViewsReachTheBase) {
  Tensor a = base234();
  a.narrow(1, 1, 1).fill_(-1);                                                     // a[:, 1, :]
  a.select(2, 3).copy_(from_vector<std::int64_t>({100, 101, 102, 103, 104, 105}, {2, 3}));  // a[:, :, 3]
  a.permute({2, 1, 0}).select(0, 0).select(0, 0).fill_(-7);                        // a[:, 0, 0]
  const auto expected = table(2, 3, 4, [](auto i, auto j, auto k) -> std::int64_t {
    if (k == 3) return 100 + 3 * i + j;
    if (j == 1) return -1;
    if (j == 0 && k == 0) return -7;
    return 12 * i + 4 * j + k;
  });
  EXPECT_EQ(elements(a), expected);
}

TEST(Views, ChainPermuteNarrowExpandContiguous) {
  const Tensor a = base234();
  const Tensor p = a.permute({2, 0, 1});               // (4, 2, 3): p[k][i][j] = 12 i + 4 j + k
  const Tensor n = p.narrow(0, 1, 2).narrow(2, 1, 1);  // (2, 2, 1): 12 i + 4 + (k + 1)
  const Tensor e = n.expand({3, 2, 2, 5});
  EXPECT_EQ(e.strides(), (Strides{0, 1, 12, 0}));
  EXPECT_TRUE(e.storage().is_same(a.storage()));
  const Tensor c = e.contiguous();
  EXPECT_FALSE(c.storage().is_same(a.storage()));
  EXPECT_EQ(c.strides(), (Strides{20, 10, 5, 1}));
  std::vector<std::int64_t> expected;
  for (int r = 0; r < 3; ++r)
    for (std::int64_t k = 0; k < 2; ++k)
      for (std::int64_t i = 0; i < 2; ++i)
        for (int m = 0; m < 5; ++m) expected.push_back(12 * i + 4 + k + 1);
  EXPECT_EQ(elements(c), expected);
}

TEST(Views, ZeroSizeTensors) {
  const Tensor z = empty({0, 3}, {.dtype = kInt64});
  EXPECT_EQ(z.numel(), 0);
  EXPECT_TRUE(z.is_contiguous());
  EXPECT_EQ(z.reshape({-1, 3}).shape(), (Shape{0, 3}));
  EXPECT_EQ(z.view({3, 0}).shape(), (Shape{3, 0}));
  EXPECT_EQ(z.t().shape(), (Shape{3, 0}));
  EXPECT_EQ(z.t().strides(), (Strides{1, 3}));
  EXPECT_EQ(z.unsqueeze(0).shape(), (Shape{1, 0, 3}));
  EXPECT_EQ(z.expand({2, 0, 3}).numel(), 0);
  const auto parts = z.split(2);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].shape(), (Shape{0, 3}));
  const Tensor empty_rows = base234().narrow(1, 3, 0);
  EXPECT_EQ(empty_rows.shape(), (Shape{2, 0, 4}));
  EXPECT_EQ(empty_rows.storage_offset(), 12);
  EXPECT_EQ(empty_rows.contiguous().numel(), 0);
}

TEST(Views, ZeroDimTensors) {
  const Tensor s = scalar_tensor(std::int64_t{5});
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  const Tensor u = s.unsqueeze(0);
  EXPECT_EQ(u.shape(), (Shape{1}));
  EXPECT_EQ(u.strides(), (Strides{1}));
  EXPECT_EQ(elements(u), (std::vector<std::int64_t>{5}));
  EXPECT_EQ(s.view({1, 1}).shape(), (Shape{1, 1}));
  EXPECT_EQ(s.flatten().shape(), (Shape{1}));
  EXPECT_EQ(u.select(0, 0).dim(), 0);
  EXPECT_EQ(u.squeeze().dim(), 0);
  EXPECT_EQ(arange(5).narrow(0, 3, 1).reshape({}).item<std::int64_t>(), 3);
  const Tensor e = s.expand({2, 3});
  EXPECT_EQ(e.strides(), (Strides{0, 0}));
  EXPECT_EQ(elements(e), (std::vector<std::int64_t>(6, 5)));
  EXPECT_TRUE(s.t().is_same(s));
  EXPECT_EQ(s.transpose(0, -1).dim(), 0);
  EXPECT_EQ(elements(s.unfold(0, 1, 1)), (std::vector<std::int64_t>{5}));
}

}  // namespace

}  // namespace views_test
