// Op table entries for cumsum and cumprod (along each dim, with zeros for cumprod), with
// running float64 references; dtypes and long lines in plain tests.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "reduction_reference.h"

namespace infini::test::reduction_scan_test {
namespace {

// Running sum (product) of x along dim, by row-major index arithmetic.
Tensor scan_ref(const Tensor& x, std::int64_t dim, bool product) {
  std::vector<double> v = values(x);
  if (x.dim() == 0) return from_vector(v, {1}).reshape({});
  const std::int64_t d = dim < 0 ? dim + x.dim() : dim;
  std::int64_t step = 1;  // distance between neighbours along d
  for (std::int64_t k = d + 1; k < x.dim(); ++k) step *= x.shape()[k];
  for (std::size_t n = 0; n < v.size(); ++n) {
    const std::int64_t along = static_cast<std::int64_t>(n) / step % x.shape()[d];
    if (along > 0) v[n] = product ? v[n - step] * v[n] : v[n - step] + v[n];
  }
  return from_vector(v, {static_cast<std::int64_t>(v.size())}).reshape(x.shape());
}

// (2,3,4) in [0.5, 1.5) with zeros set at `positions` (flat indices).
Tensor with_zeros(const std::vector<std::int64_t>& positions, std::uint64_t seed) {
  Tensor x = sample({2, 3, 4}, 0.5, 1.5, seed);
  NoGradGuard no_grad;
  for (std::int64_t p : positions) x.view({24}).select(0, p).fill_(0);
  return x;
}

void scan_entry(const std::string& name, bool product, std::function<std::vector<OpSample>()> samples) {
  op_registry().push_back({.name = name,
                           .fn = [product](const TensorList& in) {
                             TensorList out;
                             const std::vector<std::int64_t> dims = in[0].dim() == 0 ? std::vector<std::int64_t>{0, -1}
                                                                                    : std::vector<std::int64_t>{0, 1, -1};
                             for (std::int64_t d : dims) out.push_back(product ? cumprod(in[0], d) : cumsum(in[0], d));
                             return out;
                           },
                           .reference = [product](const TensorList& in) {
                             TensorList out;
                             const std::vector<std::int64_t> dims = in[0].dim() == 0 ? std::vector<std::int64_t>{0, -1}
                                                                                    : std::vector<std::int64_t>{0, 1, -1};
                             for (std::int64_t d : dims) out.push_back(scan_ref(in[0], d, product));
                             return out;
                           },
                           .samples = std::move(samples),
                           .gradgrad = true,
                           .tolerance = 1e-12});
}

std::vector<OpSample> plain_samples(double lo, double hi) {
  std::vector<OpSample> s = samples_3d(lo, hi, true);
  for (OpSample& z : samples_0d(lo, hi)) s.push_back(std::move(z));
  return s;
}

const bool registered = [] {
  scan_entry("cumsum", false, [] { return plain_samples(-2, 2); });
  scan_entry("cumprod", true, [] { return plain_samples(-1.5, 1.5); });
  // At most one zero in every line of every dim: 0 = (0,0,0), 17 = (1,1,1).
  scan_entry("cumprod", true, [] {
    return std::vector<OpSample>{{"one zero per line", {with_zeros({0, 17}, 31).requires_grad_()}},
                                 {"one zero per line, transposed",
                                  {with_zeros({0, 17}, 32).permute({2, 1, 0}).contiguous().requires_grad_()},
                                  [](const TensorList& l) { return TensorList{l[0].permute({2, 1, 0})}; }}};
  });
  // Several zeros in a line: 0, 1, 3 in the line x[0, 0, :]; 0 and 4 in x[0, :, 0]; 0 and
  // 12 in x[:, 0, 0]; 21, 22 in x[1, 2, :].
  scan_entry("cumprod", true, [] {
    return std::vector<OpSample>{
        {"several zeros per line", {with_zeros({0, 1, 3, 4, 12, 21, 22}, 33).requires_grad_()}}};
  });
  return true;
}();

TEST(ReductionScans, DTypes) {
  const Tensor i = from_vector<std::int32_t>({1, 2, 3, 4});
  EXPECT_EQ(cumsum(i, 0).dtype(), kInt64);
  EXPECT_EQ(values(cumsum(i, 0)), (std::vector<double>{1, 3, 6, 10}));
  EXPECT_EQ(values(cumprod(i, -1)), (std::vector<double>{1, 2, 6, 24}));
  const Tensor b = from_vector<bool>({true, false, true});
  EXPECT_EQ(cumsum(b, 0).dtype(), kInt64);
  EXPECT_EQ(values(cumsum(b, 0)), (std::vector<double>{1, 1, 2}));
  const Tensor h = from_vector<float>({0.5f, 0.25f, 2.0f}).to(kFloat16);
  EXPECT_EQ(cumsum(h, 0).dtype(), kFloat16);
  EXPECT_EQ(values(cumprod(h, 0)), (std::vector<double>{0.5, 0.125, 0.25}));
  EXPECT_EQ(cumsum(zeros({3, 0}), 1).shape(), (Shape{3, 0}));
}

TEST(ReductionScans, LongLinesAlongEveryDim) {
  // 300 x 200 float32 (above the parallel threshold): each line accumulates in float64.
  const Tensor x = rand({300, 200});
  for (std::int64_t d : {0, 1}) {
    const std::vector<double> got = values(cumsum(x, d)), ref = values(scan_ref(x.to(kFloat64), d, false));
    for (std::size_t k = 0; k < got.size(); ++k)
      ASSERT_EQ(got[k], static_cast<double>(static_cast<float>(ref[k]))) << "dim " << d << " element " << k;
  }
}

TEST(ReductionScans, CumprodGradientWithZeros) {
  // d/dx_i of sum(cumprod(x)) = sum over k >= i of prod_{j <= k, j != i} x_j.
  const Tensor x = from_vector<double>({2, 0, 3, 0, 5}).detach().requires_grad_();
  sum(cumprod(x, 0)).backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{1, 2 + 6, 0, 0, 0}));
}

}  // namespace
}  // namespace infini::test::reduction_scan_test
