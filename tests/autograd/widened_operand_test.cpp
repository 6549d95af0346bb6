// Add, Sub and Mul of a float32 tensor and a float16/bfloat16 one (an autocast model's
// residual adds): the kernels read the 16-bit operand widened instead of converting it in
// a pass of its own (BinaryKernel). Results against a float64 reference and against the
// converted form bit for bit, over layouts and in place; gradients keep each operand's
// dtype; other pairs and ops still convert first; the same bits on CUDA.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "op_info.h"

namespace infini::test::widened_operand_test {
namespace {

struct ArithmeticOp {
  std::string name;
  std::function<Tensor(const Tensor&, const Tensor&)> fn;
  std::function<void(Tensor&, const Tensor&)> in_place;
  std::function<double(double, double)> exact;
};

const std::vector<ArithmeticOp>& arithmetic_ops() {
  static const std::vector<ArithmeticOp> ops = {
      {"add", [](const Tensor& a, const Tensor& b) { return add(a, b); },
       [](Tensor& a, const Tensor& b) { add_(a, b); }, [](double x, double y) { return x + y; }},
      {"sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); },
       [](Tensor& a, const Tensor& b) { sub_(a, b); }, [](double x, double y) { return x - y; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); },
       [](Tensor& a, const Tensor& b) { mul_(a, b); }, [](double x, double y) { return x * y; }},
  };
  return ops;
}

const std::vector<DataType> kHalfTypes = {kBFloat16, kFloat16};

// op(x, y) for a float32 and a 16-bit operand (either order) is float32 and each element
// is the float32 rounding of the exact result on the widened values (float64 holds every
// sum, difference and product of two floats closely enough to round once), which is also
// what converting the 16-bit operand first gives.
void expect_widened(const ArithmeticOp& op, const Tensor& x, const Tensor& y, const std::string& what) {
  const Tensor got = op.fn(x, y);
  ASSERT_EQ(got.dtype(), kFloat32) << op.name << " " << what;
  const Shape& shape = got.shape();
  const std::vector<double> vg = values(got), vc = values(op.fn(x.to(kFloat32), y.to(kFloat32)));
  const std::vector<double> vx = values(x.expand(shape)), vy = values(y.expand(shape));
  ASSERT_EQ(vg.size(), static_cast<std::size_t>(numel_of(shape)));
  for (std::size_t i = 0; i < vg.size(); ++i) {
    ASSERT_EQ(vg[i], static_cast<double>(static_cast<float>(op.exact(vx[i], vy[i]))))
        << op.name << " " << what << ", element " << i;
    ASSERT_EQ(vg[i], vc[i]) << op.name << " " << what << ", element " << i;
  }
}

// (label, float32 operand, 16-bit operand) over layouts: contiguous with a tail past any
// vector width, broadcast rows and columns, transposed either side, zero-size.
std::vector<std::tuple<std::string, Tensor, Tensor>> operand_pairs(DataType half) {
  auto f32 = [](const Shape& s, std::uint64_t seed) { return sample(s, -3, 3, seed).to(kFloat32); };
  auto f16 = [half](const Shape& s, std::uint64_t seed) { return sample(s, -3, 3, seed).to(half); };
  return {
      {"contiguous (3, 67)", f32({3, 67}, 1), f16({3, 67}, 2)},
      {"broadcast row (67)", f32({3, 67}, 3), f16({67}, 4)},
      {"broadcast column (3, 1)", f32({3, 67}, 5), f16({3, 1}, 6)},
      {"float32 broadcast", f32({67}, 7), f16({3, 67}, 8)},
      {"16-bit transposed", f32({3, 67}, 9), f16({67, 3}, 10).t()},
      {"float32 transposed", f32({67, 3}, 11).t(), f16({3, 67}, 12)},
      {"zero-size", f32({0, 4}, 13), f16({0, 4}, 14)},
  };
}

TEST(WidenedOperand, Float32WithA16BitOperandOverLayouts) {
  for (DataType half : kHalfTypes)
    for (const auto& [label, a, b] : operand_pairs(half))
      for (const ArithmeticOp& op : arithmetic_ops()) {
        expect_widened(op, a, b, concat(label, " ", half));
        expect_widened(op, b, a, concat(label, " ", half, " swapped"));
      }
}

TEST(WidenedOperand, InPlaceIntoFloat32) {
  for (DataType half : kHalfTypes)
    for (const ArithmeticOp& op : arithmetic_ops()) {
      const Tensor a = sample({4, 9}, -3, 3, 21).to(kFloat32);
      const Tensor b = sample({9}, -3, 3, 22).to(half);
      Tensor x = a.clone();
      op.in_place(x, b);
      EXPECT_EQ(x.dtype(), kFloat32);
      EXPECT_EQ(values(x), values(op.fn(a, b.to(kFloat32)))) << op.name << " " << half;
      Tensor strided = sample({9, 4}, -3, 3, 23).to(kFloat32).t();  // a non-contiguous destination
      const Tensor before = strided.clone();
      op.in_place(strided, b);
      EXPECT_EQ(values(strided), values(op.fn(before, b.to(kFloat32)))) << op.name << " " << half << " strided";
    }
}

TEST(WidenedOperand, GradientsKeepEachOperandsDtype) {
  for (DataType half : kHalfTypes) {
    const Tensor a = sample({2, 5}, -3, 3, 31).to(kFloat32).requires_grad_();
    const Tensor b = sample({2, 5}, -3, 3, 32).to(half).requires_grad_();
    sum(mul(a, b)).backward();
    ASSERT_EQ(a.grad().dtype(), kFloat32);
    ASSERT_EQ(b.grad().dtype(), half);
    EXPECT_EQ(values(a.grad()), values(b));                     // b widened: exact
    EXPECT_EQ(values(b.grad()), values(a.detach().to(half)));  // a rounded to b's dtype
  }
}

// The kernels refuse any other pair of dtypes, naming them.
void expect_other_pairs_refused(Device device) {
  const Tensor out = empty({7}, {.dtype = kFloat32, .device = device});
  const Tensor a = sample({7}, -1, 1, 45).to(device), b = sample({7}, -1, 1, 46).to(kBFloat16).to(device);
  expect_error<DTypeError>([&] { KernelTable<BinaryKernel>::call(device, out, a, b, BinaryOp::Add); }, "binary",
                           {"operands of float64 and bfloat16 into float32"});
  expect_error<DTypeError>([&] { KernelTable<BinaryKernel>::call(device, out, out, b, BinaryOp::Div); }, "binary",
                           {"float32 and bfloat16 into float32"});
}

TEST(WidenedOperand, OtherPairsAndOpsConvertFirst) {
  EXPECT_TRUE(kernels::reads_widened(BinaryOp::Add, kFloat32, kBFloat16, kFloat32));
  EXPECT_TRUE(kernels::reads_widened(BinaryOp::Mul, kFloat32, kFloat16, kFloat32));
  EXPECT_FALSE(kernels::reads_widened(BinaryOp::Div, kFloat32, kBFloat16, kFloat32));
  EXPECT_FALSE(kernels::reads_widened(BinaryOp::Add, kFloat32, kBFloat16, kFloat16));  // both 16-bit
  EXPECT_FALSE(kernels::reads_widened(BinaryOp::Add, kFloat64, kBFloat16, kFloat64));
  EXPECT_FALSE(kernels::reads_widened(BinaryOp::Add, kFloat32, kFloat32, kFloat32));
  // bfloat16 + float16 computes in float32 from two converted operands.
  const Tensor x = sample({7}, -3, 3, 41).to(kBFloat16), y = sample({7}, -3, 3, 42).to(kFloat16);
  const Tensor sum16 = add(x, y);
  ASSERT_EQ(sum16.dtype(), kFloat32);
  const std::vector<double> vs = values(sum16), vx = values(x), vy = values(y);
  for (std::size_t i = 0; i < vs.size(); ++i) EXPECT_EQ(vs[i], static_cast<double>(static_cast<float>(vx[i] + vy[i])));
  // Division reads converted operands.
  const Tensor a = sample({7}, -3, 3, 43).to(kFloat32), b = sample({7}, 0.5, 2, 44).to(kBFloat16);
  EXPECT_EQ(values(div(a, b)), values(div(a, b.to(kFloat32))));
  expect_other_pairs_refused(Device::cpu());
}

TEST(WidenedOperandCuda, MatchesTheCpuBitwise) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const Device gpu = Device::cuda(0);
  expect_other_pairs_refused(gpu);
  for (DataType half : kHalfTypes) {
    // A residual add's size with a tail past the vector width, and the layouts above.
    auto pairs = operand_pairs(half);
    pairs.emplace_back("(4, 1025)", sample({4, 1025}, -3, 3, 51).to(kFloat32), sample({4, 1025}, -3, 3, 52).to(half));
    for (const auto& [label, a, b] : pairs)
      for (const ArithmeticOp& op : arithmetic_ops()) {
        const std::string what = concat(op.name, " ", label, " ", half);
        EXPECT_EQ(values(op.fn(a.to(gpu), b.to(gpu))), values(op.fn(a, b))) << what;
        EXPECT_EQ(values(op.fn(b.to(gpu), a.to(gpu))), values(op.fn(b, a))) << what << " swapped";
        Tensor x = a.to(gpu).clone();
        if (x.shape() != broadcast_shapes(op.name, a.shape(), b.shape())) continue;  // no in-place broadcast of a
        op.in_place(x, b.to(gpu));
        EXPECT_EQ(values(x), values(op.fn(a, b))) << what << " in place";
      }
  }
}

}  // namespace
}  // namespace infini::test::widened_operand_test
