// kernels::matmul_and_row_sums, the fused (a @ b, row sums of a) behind linear's weight and
// bias gradients: its operand checks and the CPU's answer (no fused form: nullopt) here;
// on a GPU, cuBLASLt's bias-gradient epilogue against float64 loops on the same rounded
// inputs, bitwise repeatable, and linear's gradients through it against the CPU's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "op_info.h"

namespace infini::test::linear_bias_grad_test {
namespace {

TEST(MatmulAndRowSums, TheCpuHasNoFusedForm) {
  const Tensor a = sample({5, 7}), b = sample({7, 3});
  EXPECT_FALSE(kernels::matmul_and_row_sums(a, b).has_value());
  EXPECT_FALSE(kernels::matmul_and_row_sums(a.to(kFloat32), b.to(kFloat32)).has_value());
}

TEST(MatmulAndRowSums, BadOperandsRaiseNamingTheShapesAndDtypes) {
  const Tensor a = sample({5, 7}), b = sample({7, 3});
  expect_error<ShapeError>([&] { kernels::matmul_and_row_sums(a, sample({6, 3})); }, "matmul", {"[5, 7]", "[6, 3]"});
  expect_error<ShapeError>([&] { kernels::matmul_and_row_sums(sample({7}), b); }, "matmul", {"[7]", "(m, k)"});
  expect_error<ShapeError>([&] { kernels::matmul_and_row_sums(sample({2, 5, 7}), b); }, "matmul", {"[2, 5, 7]"});
  expect_error<DTypeError>([&] { kernels::matmul_and_row_sums(a, b.to(kFloat32)); }, "matmul",
                           {"float64", "float32"});
  expect_error<DTypeError>([&] { kernels::matmul_and_row_sums(a.to(kInt32), b.to(kInt32)); }, "matmul", {"int32"});
}

// The float64 product and row sums of a (m, k) and b (k, n) given as float64 values, with
// each result's sum of absolute terms (the scale of its rounding error).
struct Reference {
  std::vector<double> product, product_scale, row_sums, row_sums_scale;
};

Reference reference(const std::vector<double>& a, const std::vector<double>& b, std::int64_t m, std::int64_t k,
                    std::int64_t n) {
  Reference r{std::vector<double>(m * n), std::vector<double>(m * n), std::vector<double>(m), std::vector<double>(m)};
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t p = 0; p < k; ++p) {
      r.row_sums[i] += a[i * k + p];
      r.row_sums_scale[i] += std::abs(a[i * k + p]);
      for (std::int64_t j = 0; j < n; ++j) {
        r.product[i * n + j] += a[i * k + p] * b[p * n + j];
        r.product_scale[i * n + j] += std::abs(a[i * k + p] * b[p * n + j]);
      }
    }
  }
  return r;
}

// Relative rounding of one result of dtype (float32 accumulation for the 16-bit types).
double unit(DataType dtype) {
  if (dtype == kFloat64) return 1e-13;
  if (dtype == kFloat32) return 1e-5;
  return dtype == kBFloat16 ? 1.0 / 128 : 1.0 / 1024;
}

void expect_near_all(const std::vector<double>& got, const std::vector<double>& want,
                     const std::vector<double>& scale, double unit, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], unit * (scale[i] + std::abs(want[i])) + 1e-30) << what << " element " << i;
}

TEST(MatmulAndRowSumsCuda, MatchesFloat64LoopsAndRepeatsBitwise) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const Device gpu = Device::cuda(0);
  // a = g^T (out, rows) read as the column-major view of g, as linear's backward passes it;
  // GPT-2's c_attn shape (2304 outputs over 4096 rows) and a small one with odd sizes.
  struct Case {
    std::int64_t m, k, n;
  };
  for (const Case c : {Case{40, 111, 24}, Case{2304, 4096, 768}})
    for (const DataType dtype : {kBFloat16, kFloat16, kFloat32, kFloat64}) {
      const std::string what = concat(c.m, "x", c.k, "x", c.n, " ", dtype);
      const Tensor g = sample({c.k, c.m}, -1, 1, 60).to(dtype), b = sample({c.k, c.n}, -1, 1, 61).to(dtype);
      const Tensor a_gpu = g.to(gpu).transpose(0, 1), b_gpu = b.to(gpu);
      const auto fused = kernels::matmul_and_row_sums(a_gpu, b_gpu);
      if (dtype == kBFloat16) EXPECT_TRUE(fused.has_value()) << what << ": cuBLASLt gave no bias-gradient epilogue";
      if (!fused) continue;
      const auto again = kernels::matmul_and_row_sums(a_gpu, b_gpu);
      ASSERT_TRUE(again.has_value()) << what;
      EXPECT_EQ(values(again->product), values(fused->product)) << what << ": two runs differ";
      EXPECT_EQ(values(again->row_sums), values(fused->row_sums)) << what << ": two runs differ";
      ASSERT_EQ(fused->product.dtype(), dtype);
      ASSERT_EQ(fused->row_sums.dtype(), dtype);
      ASSERT_EQ(fused->row_sums.shape(), (Shape{c.m}));
      const Reference want = reference(values(g.transpose(0, 1).contiguous()), values(b), c.m, c.k, c.n);
      expect_near_all(values(fused->product), want.product, want.product_scale, unit(dtype), what + " product");
      expect_near_all(values(fused->row_sums), want.row_sums, want.row_sums_scale, unit(dtype), what + " row sums");
    }
}

TEST(LinearBiasGradCuda, GradientsMatchTheCpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const Device gpu = Device::cuda(0);
  for (const DataType dtype : {kBFloat16, kFloat32}) {
    const Tensor x = sample({4, 33, 48}, -1, 1, 62).to(dtype), w = sample({40, 48}, -1, 1, 63).to(dtype);
    const Tensor b = sample({40}, -1, 1, 64).to(dtype), g = sample({4, 33, 40}, -1, 1, 65).to(dtype);
    // The CPU in float64 on the same rounded values, the GPU in dtype.
    auto grads = [&](DataType as, Device device) {
      const Tensor xi = x.to(as).to(device).requires_grad_(), wi = w.to(as).to(device).requires_grad_();
      const Tensor bi = b.to(as).to(device).requires_grad_();
      linear(xi, wi, bi).backward(g.to(as).to(device));
      return TensorList{xi.grad(), wi.grad(), bi.grad()};
    };
    const TensorList want = grads(kFloat64, Device::cpu()), got = grads(dtype, gpu), again = grads(dtype, gpu);
    // Each result rounded once to dtype, after float32 sums of at most 132 terms of size <= 1.
    const double unit = dtype == kFloat32 ? 1e-6 : 1.0 / 256;
    for (std::size_t k = 0; k < want.size(); ++k) {
      const std::string what = concat(dtype, " gradient ", k);
      ASSERT_EQ(got[k].dtype(), dtype) << what;
      EXPECT_EQ(values(again[k]), values(got[k])) << what << ": two runs differ";
      const auto a = values(got[k]), e = values(want[k]);
      ASSERT_EQ(a.size(), e.size()) << what;
      for (std::size_t i = 0; i < a.size(); ++i)
        ASSERT_NEAR(a[i], e[i], unit * std::abs(e[i]) + 1e-4) << what << " element " << i;
    }
  }
}

}  // namespace
}  // namespace infini::test::linear_bias_grad_test
