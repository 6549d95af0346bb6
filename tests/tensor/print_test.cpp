// Tensor::str() against PyTorch's repr (torch/_tensor_str.py, default print options:
// precision 4, threshold 1000, edgeitems 3, linewidth 80). Dtypes print without the
// "torch." prefix ("dtype=float64" where PyTorch writes "dtype=torch.float64").
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
import infini.tensor;

namespace print_test {
using namespace infini;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(Print, FloatVectors) {
  EXPECT_EQ(from_vector<float>({1, 2, 3}).str(), "tensor([1., 2., 3.])");
  EXPECT_EQ(from_vector<float>({0, 0.5}).str(), "tensor([0.0000, 0.5000])");
  EXPECT_EQ(from_vector<float>({-1.5, 2.25}).str(), "tensor([-1.5000,  2.2500])");
  EXPECT_EQ(from_vector<float>({0, 0}).str(), "tensor([0., 0.])");
  EXPECT_EQ(from_vector<float>({-3, 10}).str(), "tensor([-3., 10.])");
}

TEST(Print, Matrices) {
  EXPECT_EQ(from_vector<float>({1.5, 2.25, 3, 4}, {2, 2}).str(),
            "tensor([[1.5000, 2.2500],\n"
            "        [3.0000, 4.0000]])");
  EXPECT_EQ(arange(6).view({2, 3}).t().str(),
            "tensor([[0, 3],\n"
            "        [1, 4],\n"
            "        [2, 5]])");
  EXPECT_EQ(arange(8).view({2, 2, 2}).str(),
            "tensor([[[0, 1],\n"
            "         [2, 3]],\n"
            "\n"
            "        [[4, 5],\n"
            "         [6, 7]]])");
}

TEST(Print, IntegersAndBools) {
  EXPECT_EQ(arange(5).str(), "tensor([0, 1, 2, 3, 4])");
  EXPECT_EQ(from_vector<std::int64_t>({-10, 5, 100}).str(), "tensor([-10,   5, 100])");
  EXPECT_EQ(from_vector<std::int32_t>({1, 2}).str(), "tensor([1, 2], dtype=int32)");
  EXPECT_EQ(from_vector<std::uint8_t>({7, 255}).str(), "tensor([  7, 255], dtype=uint8)");
  EXPECT_EQ(from_vector<bool>({true, false, true}).str(), "tensor([ True, False,  True])");
  EXPECT_EQ(from_vector<bool>({true, true}).str(), "tensor([True, True])");
}

TEST(Print, DtypeSuffix) {
  EXPECT_EQ(from_vector<double>({1.5, 2}).str(), "tensor([1.5000, 2.0000], dtype=float64)");
  EXPECT_EQ(from_vector<float>({1.5, 2}, {}, {.dtype = kFloat16}).str(), "tensor([1.5000, 2.0000], dtype=float16)");
  EXPECT_EQ(from_vector<float>({1, 2}, {}, {.dtype = kBFloat16}).str(), "tensor([1., 2.], dtype=bfloat16)");
}

TEST(Print, ScientificNotation) {
  EXPECT_EQ(from_vector<float>({1e-5f, 1}).str(), "tensor([1.0000e-05, 1.0000e+00])");
  EXPECT_EQ(from_vector<float>({1, 1e9f}).str(), "tensor([1.0000e+00, 1.0000e+09])");   // integral but > 1e8
  EXPECT_EQ(from_vector<float>({0.5, 1000.5}).str(), "tensor([5.0000e-01, 1.0005e+03])");  // range > 1000x
  EXPECT_EQ(from_vector<float>({1, 1000}).str(), "tensor([   1., 1000.])");                // range exactly 1000x
}

TEST(Print, ZeroDim) {
  EXPECT_EQ(scalar_tensor(3.5).str(), "tensor(3.5000)");
  EXPECT_EQ(scalar_tensor(2.0).str(), "tensor(2.)");
  EXPECT_EQ(scalar_tensor(7).str(), "tensor(7)");
  EXPECT_EQ(scalar_tensor(false).str(), "tensor(False)");
  EXPECT_EQ(scalar_tensor(-0.25, {.dtype = kFloat64}).str(), "tensor(-0.2500, dtype=float64)");
}

TEST(Print, Empty) {
  EXPECT_EQ(empty({0}).str(), "tensor([])");
  EXPECT_EQ(empty({0, 3}).str(), "tensor([], size=(0, 3))");
  // With no values to show, every dtype but the default float32 is named.
  EXPECT_EQ(empty({0}, {.dtype = kInt64}).str(), "tensor([], dtype=int64)");
  EXPECT_EQ(empty({2, 0, 1}, {.dtype = kInt32}).str(), "tensor([], size=(2, 0, 1), dtype=int32)");
}

TEST(Print, Summarized) {
  EXPECT_EQ(arange(2000).str(), "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])");
  // Floats 1..1999 span more than 1000x: scientific, and the " ..." counts as an element when wrapping.
  EXPECT_EQ(arange(2000, {.dtype = kFloat32}).str(),
            "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n"
            "        1.9990e+03])");
  EXPECT_EQ(arange(3000).view({3, 1000}).str(),
            "tensor([[   0,    1,    2,  ...,  997,  998,  999],\n"
            "        [1000, 1001, 1002,  ..., 1997, 1998, 1999],\n"
            "        [2000, 2001, 2002,  ..., 2997, 2998, 2999]])");
  EXPECT_EQ(arange(2000).view({400, 5}).str(),
            "tensor([[   0,    1,    2,    3,    4],\n"
            "        [   5,    6,    7,    8,    9],\n"
            "        [  10,   11,   12,   13,   14],\n"
            "        ...,\n"
            "        [1985, 1986, 1987, 1988, 1989],\n"
            "        [1990, 1991, 1992, 1993, 1994],\n"
            "        [1995, 1996, 1997, 1998, 1999]])");
  EXPECT_EQ(arange(1000).str().find("..."), std::string::npos);  // 1000 elements: not summarized
}

TEST(Print, NanAndInf) {
  // The width comes from the nonzero finite values; nan and inf never widen it.
  EXPECT_EQ(from_vector<float>({1, kNaN, kInf}).str(), "tensor([1., nan, inf])");
  EXPECT_EQ(from_vector<float>({1.5, kNaN, -kInf}).str(), "tensor([1.5000,    nan,   -inf])");
  EXPECT_EQ(from_vector<float>({kNaN}).str(), "tensor([nan])");
  EXPECT_EQ(from_vector<float>({0, -kInf}).str(), "tensor([0., -inf])");
  EXPECT_EQ(from_vector<float>({1e-5f, kInf}).str(), "tensor([1.0000e-05,        inf])");
}

TEST(Print, LongRowsWrapAtEightyColumns) {
  EXPECT_EQ(arange(30).str(),
            "tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 17,\n"
            "        18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29])");
  EXPECT_EQ(arange(0.0, 6.0, 0.5).str(),
            "tensor([0.0000, 0.5000, 1.0000, 1.5000, 2.0000, 2.5000, 3.0000, 3.5000, 4.0000,\n"
            "        4.5000, 5.0000, 5.5000])");
}

TEST(Print, StreamOperatorMatchesStr) {
  const Tensor t = from_vector<float>({0.25, -4}, {2, 1});
  std::ostringstream out;
  out << t;
  EXPECT_EQ(out.str(), t.str());
  EXPECT_EQ(out.str(), "tensor([[ 0.2500],\n        [-4.0000]])");
}

}  // namespace

}  // namespace print_test
