// Factories: sizes, dtypes (defaults and inference), values and error cases of
// empty/zeros/ones/full, *_like, scalar_tensor, arange, linspace, eye, from_vector, from_blob.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>
import infini.tensor;

#include "values.h"

namespace factories_test {
using namespace infini;

namespace {

template <class T>
std::vector<T> values(const Tensor& t) {
  EXPECT_TRUE(t.is_contiguous());
  return test::contiguous_values<T>(t);
}

TEST(Factories, EmptyHasContiguousLayout) {
  const Tensor e = empty({2, 3, 4});
  EXPECT_EQ(e.dtype(), kFloat32);
  EXPECT_EQ(e.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(e.strides(), (Strides{12, 4, 1}));
  EXPECT_EQ(e.numel(), 24);
  EXPECT_EQ(e.nbytes(), 96);
  EXPECT_EQ(e.storage_offset(), 0);
  EXPECT_GE(e.storage().nbytes(), 96);
  EXPECT_EQ(e.device(), Device::cpu());
  EXPECT_EQ(empty({5}, {.dtype = kInt16}).nbytes(), 10);
  EXPECT_EQ(empty({}).numel(), 1);  // 0-d: one element
  EXPECT_EQ(empty({3, 0}).numel(), 0);
}

TEST(Factories, ZerosOnesFull) {
  EXPECT_EQ(values<float>(zeros({2, 2})), std::vector<float>(4, 0.0f));
  EXPECT_EQ(values<std::int32_t>(ones({3}, {.dtype = kInt32})), std::vector<std::int32_t>(3, 1));
  EXPECT_EQ(ones({2}).dtype(), kFloat32);

  const Tensor i = full({2, 3}, 7);
  EXPECT_EQ(i.dtype(), kInt64);
  EXPECT_EQ(values<std::int64_t>(i), std::vector<std::int64_t>(6, 7));
  const Tensor f = full({2}, 2.5);
  EXPECT_EQ(f.dtype(), kFloat32);
  EXPECT_EQ(values<float>(f), std::vector<float>(2, 2.5f));
  const Tensor b = full({3}, true);
  EXPECT_EQ(b.dtype(), kBool);
  EXPECT_TRUE(b.data_ptr<bool>()[2]);
  const Tensor d = full({2}, 1, {.dtype = kFloat64});
  EXPECT_EQ(values<double>(d), std::vector<double>(2, 1.0));
  EXPECT_EQ(values<std::int8_t>(full({2}, 3.9, {.dtype = kInt8})), std::vector<std::int8_t>(2, 3));
}

TEST(Factories, LikeFactories) {
  const Tensor a = empty({3, 2}, {.dtype = kInt32}).t();  // (2, 3), not contiguous
  const Tensor z = zeros_like(a);
  EXPECT_EQ(z.shape(), (Shape{2, 3}));
  EXPECT_EQ(z.dtype(), kInt32);
  EXPECT_EQ(z.strides(), (Strides{3, 1}));
  EXPECT_EQ(values<std::int32_t>(z), std::vector<std::int32_t>(6, 0));
  const Tensor o = ones_like(a, TensorOptions{.dtype = kFloat64});
  EXPECT_EQ(o.dtype(), kFloat64);
  EXPECT_EQ(values<double>(o), std::vector<double>(6, 1.0));
  const Tensor f = full_like(a, -4);
  EXPECT_EQ(f.dtype(), kInt32);
  EXPECT_EQ(values<std::int32_t>(f), std::vector<std::int32_t>(6, -4));
  const Tensor e = empty_like(a);
  EXPECT_EQ(e.shape(), a.shape());
  EXPECT_EQ(e.dtype(), kInt32);
  EXPECT_FALSE(e.storage().is_same(a.storage()));
}

TEST(Factories, ScalarTensor) {
  const Tensor i = scalar_tensor(3);
  EXPECT_EQ(i.dim(), 0);
  EXPECT_EQ(i.dtype(), kInt64);
  EXPECT_EQ(i.item<std::int64_t>(), 3);
  EXPECT_EQ(scalar_tensor(true).dtype(), kBool);
  EXPECT_EQ(scalar_tensor(1.5).dtype(), kFloat32);
  EXPECT_EQ(scalar_tensor(1.5).item<double>(), 1.5);
  const Tensor d = scalar_tensor(0.1, {.dtype = kFloat64});
  EXPECT_EQ(d.dtype(), kFloat64);
  EXPECT_EQ(d.item<double>(), 0.1);
}

TEST(Factories, ArangeIntegers) {
  const Tensor a = arange(5);
  EXPECT_EQ(a.dtype(), kInt64);
  EXPECT_EQ(values<std::int64_t>(a), (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(values<std::int64_t>(arange(10, 0, -3)), (std::vector<std::int64_t>{10, 7, 4, 1}));
  EXPECT_EQ(values<std::int64_t>(arange(-2, 9, 5)), (std::vector<std::int64_t>{-2, 3, 8}));
  const Tensor d = arange(0, 5, 2, {.dtype = kFloat64});
  EXPECT_EQ(d.dtype(), kFloat64);
  EXPECT_EQ(values<double>(d), (std::vector<double>{0, 2, 4}));
  const Tensor none = arange(3, 3);
  EXPECT_EQ(none.shape(), (Shape{0}));
  EXPECT_EQ(none.dtype(), kInt64);
}

TEST(Factories, ArangeFloats) {
  const Tensor a = arange(1, 2.5, 0.5);
  EXPECT_EQ(a.dtype(), kFloat32);
  EXPECT_EQ(values<float>(a), (std::vector<float>{1.0f, 1.5f, 2.0f}));
  EXPECT_EQ(arange(5.0).dtype(), kFloat32);
  EXPECT_EQ(values<float>(arange(1.0, -1.0, -0.5)), (std::vector<float>{1.0f, 0.5f, 0.0f, -0.5f}));
  const Tensor tenths = arange(0.0, 1.0, 0.1, {.dtype = kFloat64});
  ASSERT_EQ(tenths.numel(), 10);
  for (int i = 0; i < 10; ++i) EXPECT_DOUBLE_EQ(tenths.data_ptr<double>()[i], i / 10.0);
  EXPECT_EQ(arange(0.5, 0.5, 0.1).numel(), 0);
}

TEST(Factories, ArangeErrors) {
  try {
    arange(0, 10, -1);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.op(), "arange");
    EXPECT_NE(std::string(e.what()).find("inconsistent"), std::string::npos) << e.what();
  }
  try {
    arange(0.0, 1.0, 0.0);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.op(), "arange");
    EXPECT_NE(std::string(e.what()).find("nonzero"), std::string::npos) << e.what();
  }
  EXPECT_THROW(arange(5, 0), Error);
}

TEST(Factories, LinspaceEndpointsAreExact) {
  EXPECT_EQ(values<float>(linspace(0, 1, 5)), (std::vector<float>{0.0f, 0.25f, 0.5f, 0.75f, 1.0f}));
  const Tensor t = linspace(0.1, 0.7, 7, {.dtype = kFloat64});
  const double* p = t.data_ptr<double>();
  EXPECT_EQ(p[0], 0.1);
  EXPECT_EQ(p[6], 0.7);  // start + 6 * step would give 0.7000000000000001
  for (int i = 1; i < 6; ++i) EXPECT_NEAR(p[i], 0.1 + 0.1 * i, 1e-15);
  const Tensor f = linspace(-1, 1, 7);
  EXPECT_EQ(f.data_ptr<float>()[0], -1.0f);
  EXPECT_EQ(f.data_ptr<float>()[6], 1.0f);
  for (int i = 0; i < 7; ++i) EXPECT_FLOAT_EQ(f.data_ptr<float>()[i], static_cast<float>(-1.0 + i / 3.0));
  EXPECT_EQ(values<float>(linspace(5, 10, 2)), (std::vector<float>{5.0f, 10.0f}));
  EXPECT_EQ(values<float>(linspace(2, 1, 3)), (std::vector<float>{2.0f, 1.5f, 1.0f}));
}

TEST(Factories, LinspaceStepCounts) {
  EXPECT_EQ(linspace(0, 1, 0).shape(), (Shape{0}));
  EXPECT_EQ(values<float>(linspace(3, 10, 1)), (std::vector<float>{3.0f}));  // like torch: the start
  EXPECT_THROW(linspace(0, 1, -1), ShapeError);
}

TEST(Factories, Eye) {
  const Tensor square = eye(3);
  EXPECT_EQ(square.shape(), (Shape{3, 3}));
  EXPECT_EQ(square.dtype(), kFloat32);
  const Tensor wide = eye(2, 4);
  const Tensor tall = eye(4, 2, {.dtype = kInt32});
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 3; ++j) EXPECT_EQ(square.data_ptr<float>()[3 * i + j], i == j ? 1.0f : 0.0f);
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 4; ++j) {
      EXPECT_EQ(wide.data_ptr<float>()[4 * i + j], i == j ? 1.0f : 0.0f);
      EXPECT_EQ(tall.data_ptr<std::int32_t>()[2 * j + i], i == j ? 1 : 0);
    }
  const Tensor b = eye(3, {.dtype = kBool});
  for (std::int64_t k = 0; k < 9; ++k) EXPECT_EQ(b.data_ptr<bool>()[k], k % 4 == 0) << k;
  EXPECT_EQ(eye(0).shape(), (Shape{0, 0}));
}

TEST(Factories, FromVector) {
  const Tensor a = from_vector<std::int32_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(a.dtype(), kInt32);
  EXPECT_EQ(a.shape(), (Shape{2, 3}));
  EXPECT_EQ(values<std::int32_t>(a), (std::vector<std::int32_t>{1, 2, 3, 4, 5, 6}));
  const Tensor d = from_vector<float>({0.5f, -1.5f}, {}, {.dtype = kFloat64});
  EXPECT_EQ(d.shape(), (Shape{2}));
  EXPECT_EQ(values<double>(d), (std::vector<double>{0.5, -1.5}));
  try {
    from_vector<float>({1, 2, 3, 4, 5}, {2, 3});
    ADD_FAILURE() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_EQ(e.op(), "from_vector");
    EXPECT_NE(std::string(e.what()).find("[2, 3]"), std::string::npos) << e.what();
  }
}

TEST(Factories, FromBlobSharesMemoryAndRunsDeleterOnce) {
  float buffer[6] = {0, 1, 2, 3, 4, 5};
  int deleted = 0;
  {
    Tensor view;
    {
      const Tensor t = from_blob(buffer, {2, 3}, kFloat32, Device::cpu(), [&](void* p) {
        EXPECT_EQ(p, buffer);
        ++deleted;
      });
      EXPECT_EQ(t.data_ptr(), buffer);
      EXPECT_EQ(t.strides(), (Strides{3, 1}));
      view = t.t();
      t.narrow(1, 2, 1).fill_(-1);  // buffer[2], buffer[5]
    }
    EXPECT_EQ(deleted, 0);  // the view keeps the memory alive
    EXPECT_EQ(view.data_ptr<float>()[view.stride(1)], 3.0f);  // view[0][1] = t[1][0]
  }
  EXPECT_EQ(deleted, 1);
  EXPECT_EQ(buffer[2], -1.0f);
  EXPECT_EQ(buffer[5], -1.0f);
  EXPECT_EQ(buffer[4], 4.0f);

  std::int64_t strided[12];
  for (int k = 0; k < 12; ++k) strided[k] = 10 * k;
  const Tensor s = from_blob(strided, {3, 2}, {4, 2}, kInt64);  // s[i][j] = strided[4 i + 2 j]
  EXPECT_EQ(s.data_ptr(), strided);
  EXPECT_EQ(values<std::int64_t>(s.contiguous()), (std::vector<std::int64_t>{0, 20, 40, 60, 80, 100}));
}

}  // namespace

}  // namespace factories_test
