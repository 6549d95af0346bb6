// Error paths: each throws the documented infini::Error subclass, names the op and says
// what was wrong (shapes, indices, dtypes, devices).
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
import infini.tensor;

namespace errors_test {
using namespace infini;

namespace {

// Runs `f` expecting exactly an E from op `op` whose message contains every one of `parts`.
template <class E>
void check_error(const std::function<void()>& f, std::string_view op, std::initializer_list<std::string_view> parts) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_TRUE(typeid(e) == typeid(E)) << "got " << typeid(e).name() << ": " << e.what();
    EXPECT_EQ(e.op(), op) << e.what();
    const std::string what = e.what();
    EXPECT_TRUE(what.starts_with(std::string(op) + ": ")) << what;
    for (std::string_view part : parts)
      EXPECT_NE(what.find(part), std::string::npos) << "'" << part << "' not in: " << what;
    return;
  }
  ADD_FAILURE() << "nothing was thrown";
}

#define EXPECT_ERROR(E, statement, op, ...)                \
  do {                                                     \
    SCOPED_TRACE(#statement);                              \
    check_error<E>([&] { statement; }, op, {__VA_ARGS__}); \
  } while (0)

bool same_stats(const MemoryStats& a, const MemoryStats& b) {
  return a.allocated_bytes == b.allocated_bytes && a.reserved_bytes == b.reserved_bytes &&
         a.live_allocations == b.live_allocations && a.peak_allocated_bytes == b.peak_allocated_bytes;
}

TEST(Errors, Hierarchy) {
  static_assert(std::is_base_of_v<Error, ShapeError> && std::is_base_of_v<Error, IndexError> &&
                std::is_base_of_v<Error, DTypeError> && std::is_base_of_v<Error, DeviceError> &&
                std::is_base_of_v<Error, OutOfMemoryError> && std::is_base_of_v<std::runtime_error, Error>);
  const ShapeError e("view", "bad shape [2, 3]");
  EXPECT_EQ(e.op(), "view");
  EXPECT_STREQ(e.what(), "view: bad shape [2, 3]");
  EXPECT_THROW(zeros({2, 3}).view({7}), std::runtime_error);
}

TEST(Errors, WrongElementCountAndBadSizes) {
  const Tensor a = zeros({2, 3});
  EXPECT_ERROR(ShapeError, a.view({4, 2}), "view", "[4, 2]", "size 6");
  EXPECT_ERROR(ShapeError, a.view({-1, -1}), "view", "more than one -1");
  EXPECT_ERROR(ShapeError, a.reshape({-2, 3}), "reshape", "invalid size -2");
  EXPECT_ERROR(ShapeError, a.reshape({4, -1}), "reshape", "[4, -1]", "size 6");
  EXPECT_ERROR(ShapeError, empty({2, -3}), "empty", "negative size -3", "[2, -3]");
  EXPECT_ERROR(ShapeError, a.unflatten(1, {2, -1}), "unflatten", "[2, -1]", "size 3");
}

TEST(Errors, DimensionOutOfRange) {
  const Tensor a = zeros({2, 3});
  EXPECT_ERROR(IndexError, a.transpose(0, 2), "transpose", "dimension 2", "2-d", "[-2, 1]");
  EXPECT_ERROR(IndexError, a.size(5), "size", "dimension 5");
  EXPECT_ERROR(IndexError, a.stride(-3), "stride", "dimension -3");
  EXPECT_ERROR(IndexError, a.unsqueeze(4), "unsqueeze", "dimension 4", "[-3, 2]");
  EXPECT_ERROR(IndexError, a.squeeze(2), "squeeze", "dimension 2");
  EXPECT_ERROR(IndexError, a.flatten(1, 0), "flatten", "start_dim 1", "end_dim 0");
  EXPECT_ERROR(IndexError, scalar_tensor(1.0).size(0), "size", "0-d");
}

TEST(Errors, IndexOutOfRange) {
  const Tensor a = zeros({2, 3});
  EXPECT_ERROR(IndexError, a.select(1, 3), "select", "index 3", "dimension 1 of size 3");
  EXPECT_ERROR(IndexError, a.select(0, -3), "select", "index -3", "size 2");
  EXPECT_ERROR(IndexError, scalar_tensor(1).select(0, 0), "select", "0-d");
  EXPECT_ERROR(IndexError, a.narrow(1, 2, 2), "narrow", "start 2 + length 2", "size 3");
  EXPECT_ERROR(IndexError, a.narrow(1, -4, 1), "narrow", "start -4", "size 3");
  EXPECT_ERROR(IndexError, a.narrow(0, 0, -1), "narrow", "length -1");
  EXPECT_ERROR(IndexError, a.slice(1, 0, 3, 0), "slice", "step must be positive, got 0");
}

TEST(Errors, OverflowingShapesThrowBeforeAllocating) {
  const MemoryStats before = memory_stats(Device::cpu());
  constexpr std::int64_t k32 = std::int64_t{1} << 32;
  EXPECT_ERROR(ShapeError, empty({k32, k32, k32}), "empty", "[4294967296, 4294967296, 4294967296]",
               "more than 2^63 - 1 elements");
  // 2^62 elements fit in int64, 2^65 bytes do not.
  constexpr std::int64_t k31 = std::int64_t{1} << 31;
  EXPECT_ERROR(ShapeError, empty({k31, k31}, {.dtype = kFloat64}), "empty", "[2147483648, 2147483648]", "8-byte",
               "bytes");
  EXPECT_ERROR(ShapeError, zeros({k31, k31}, {.dtype = kInt32}), "empty", "4-byte");
  EXPECT_TRUE(same_stats(memory_stats(Device::cpu()), before));
  // A zero anywhere makes an overflowing product empty, as in PyTorch.
  EXPECT_EQ(empty({k32, 0, k32}).numel(), 0);
}

TEST(Errors, NonViewableStrides) {
  const Tensor t = zeros({2, 3}).t();
  EXPECT_ERROR(ShapeError, t.view({6}), "view", "[3, 2]", "strides [1, 3]", "[6]");
  EXPECT_ERROR(ShapeError, zeros({2, 3, 4}).permute({1, 0, 2}).view({6, 4}), "view", "[3, 2, 4]");
  EXPECT_ERROR(ShapeError, zeros({4}).expand({3, 4}).view({12}), "view", "strides [0, 1]");
}

TEST(Errors, BadPermute) {
  const Tensor a = zeros({2, 3});
  EXPECT_ERROR(IndexError, a.permute({0, 0}), "permute", "dimension 0 repeats in [0, 0]");
  EXPECT_ERROR(IndexError, a.permute({1, -1}), "permute", "dimension -1 repeats in [1, -1]");
  EXPECT_ERROR(ShapeError, a.permute({0}), "permute", "[0]", "[2, 3]");
  EXPECT_ERROR(IndexError, a.permute({0, 2}), "permute", "dimension 2");
}

TEST(Errors, ExpandAndCopyShapeMismatch) {
  const Tensor a = ones({2, 3});
  EXPECT_ERROR(ShapeError, a.expand({4, 3}), "expand", "[2, 3]", "[4, 3]", "size 2 at dim 0");
  EXPECT_ERROR(ShapeError, a.expand({3}), "expand", "[3]", "fewer dims");
  EXPECT_ERROR(ShapeError, a.expand({-1, 2, 3}), "expand", "[-1, 2, 3]");
  Tensor dst = zeros({2, 3});
  EXPECT_ERROR(ShapeError, dst.copy_(ones({4})), "copy_", "[4]", "[2, 3]");
  EXPECT_ERROR(ShapeError, dst.copy_(ones({2, 2, 3})), "copy_", "[2, 2, 3]");
}

TEST(Errors, WritingToOverlappingElements) {
  Tensor e = zeros({3}).expand({2, 3});
  EXPECT_ERROR(Error, e.copy_(ones({2, 3})), "copy_", "[2, 3]", "strides [0, 1]");
  EXPECT_ERROR(Error, e.fill_(1), "fill_", "[2, 3]", "strides [0, 1]");
  EXPECT_ERROR(Error, zeros({2}).as_strided({2, 2}, {1, 0}).zero_(), "fill_", "strides [1, 0]");
}

TEST(Errors, OtherViewMisuse) {
  EXPECT_ERROR(ShapeError, zeros({2, 3, 4}).t(), "t", "[2, 3, 4]");
  EXPECT_ERROR(ShapeError, zeros({3}).diagonal(), "diagonal", "[3]");
  EXPECT_ERROR(IndexError, zeros({3, 3}).diagonal(0, 1, -1), "diagonal", "both 1");
  EXPECT_ERROR(ShapeError, zeros({3}).split(std::vector<std::int64_t>{2, 2}), "split", "[2, 2]", "sum to 4",
               "size 3");
  EXPECT_ERROR(ShapeError, zeros({3}).split(0), "split", "split_size 0");
  EXPECT_ERROR(ShapeError, zeros({3}).chunk(0), "chunk", "got 0");
  EXPECT_ERROR(ShapeError, zeros({3}).unfold(0, 4, 1), "unfold", "window size 4", "size 3");
  EXPECT_ERROR(ShapeError, zeros({3}).unfold(0, 2, 0), "unfold", "step");
  EXPECT_ERROR(ShapeError, zeros({3}).as_strided({2}, {-1}), "as_strided", "negative strides");
  // A view that reaches past the end of the storage.
  EXPECT_ERROR(ShapeError, zeros({6}).as_strided({3, 3}, {3, 1}), "as_strided", "[3, 3]", "element 8",
               "storage holding 6");
}

TEST(Errors, DTypeMismatch) {
  const Tensor f = zeros({2});
  EXPECT_ERROR(DTypeError, f.data_ptr<std::int32_t>(), "data_ptr", "requested int32 from a float32 tensor");
  EXPECT_ERROR(DTypeError, zeros({2}, {.dtype = kFloat16}).data_ptr<float>(), "data_ptr", "float32", "float16");
  EXPECT_ERROR(DTypeError, rand({2}, {.dtype = kInt64}), "rand", "int64");
  EXPECT_NO_THROW(f.data_ptr<float>());
}

TEST(Errors, ItemNeedsExactlyOneElement) {
  EXPECT_ERROR(ShapeError, zeros({2, 3}).item(), "item", "6 elements", "[2, 3]");
  EXPECT_ERROR(ShapeError, zeros({0}).item<float>(), "item", "0 elements");
}

TEST(Errors, Devices) {
  EXPECT_ERROR(DeviceError, Device::parse("gpu"), "Device::parse", "'gpu'", "'cpu' or 'cuda:N'");
  EXPECT_ERROR(DeviceError, Device::parse("cuda:x"), "Device::parse", "'cuda:x'");
  EXPECT_ERROR(DeviceError, Device::parse("cuda:"), "Device::parse", "'cuda:'");
  EXPECT_EQ(Device::parse("cuda:12"), Device::cuda(12));
  EXPECT_EQ(Device::parse("cpu"), Device::cpu());
}

TEST(Errors, UndefinedTensor) {
  const Tensor u;
  EXPECT_FALSE(u.defined());
  EXPECT_EQ(u.str(), "tensor(undefined)");
  EXPECT_ERROR(Error, u.shape(), "Tensor", "undefined");
  EXPECT_ERROR(Error, u.numel(), "Tensor", "undefined");
  EXPECT_ERROR(Error, u.view({1}), "Tensor", "undefined");
  EXPECT_ERROR(Error, u.clone(), "Tensor", "undefined");
  EXPECT_ERROR(Error, Tensor(u).fill_(1), "Tensor", "undefined");
  EXPECT_ERROR(Error, u.item(), "Tensor", "undefined");
  Tensor dst = zeros({2});
  EXPECT_ERROR(Error, dst.copy_(u), "Tensor", "undefined");
  EXPECT_EQ(dst.data_ptr<float>()[0], 0.0f);
}

TEST(Errors, ConstructionFromStorage) {
  const Storage s = Storage::allocate(16, Device::cpu());
  EXPECT_ERROR(ShapeError, Tensor(s, {5}, {1}, 0, kFloat32), "Tensor", "storage holding 4 float32");
  EXPECT_ERROR(ShapeError, Tensor(s, {2}, {1, 1}, 0, kFloat32), "Tensor", "[2]", "[1, 1]");
  EXPECT_ERROR(ShapeError, Tensor(s, {2}, {1}, -1, kFloat32), "Tensor", "negative storage offset -1");
  EXPECT_ERROR(Error, Tensor(Storage(), {1}, {1}, 0, kFloat32), "Tensor", "storage is undefined");
  EXPECT_ERROR(Error, from_blob(nullptr, {4}, kFloat32), "from_blob", "null pointer");
  EXPECT_ERROR(ShapeError, from_vector<int>({1, 2, 3}, {2, 2}), "from_vector", "3 values", "[2, 2]");
}

}  // namespace

}  // namespace errors_test
