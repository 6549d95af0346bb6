// Reductions beyond the op table: error paths (type, op name, message), result dtypes,
// special values, and results that do not depend on the thread count.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "op_info.h"

namespace infini::test::reduction_checks_test {
namespace {

const double inf = std::numeric_limits<double>::infinity();

// call() raises E whose op() is `op` and whose message contains `part`.
template <class E, class Call>
void expect_error(Call&& call, const std::string& op, const std::string& part) {
  try {
    call();
    ADD_FAILURE() << "expected an error from " << op;
  } catch (const E& e) {
    EXPECT_EQ(e.op(), op);
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong error type from " << op << ": " << e.what();
  }
}

TEST(ReductionErrors, BadDims) {
  const Tensor x = zeros({2, 3});
  expect_error<IndexError>([&] { sum(x, {2}); }, "sum", "2");
  expect_error<IndexError>([&] { sum(x, {1, -1}); }, "sum", "appears more than once");
  expect_error<IndexError>([&] { var(x, {-3}); }, "var", "-3");
  expect_error<IndexError>([&] { std(x, {0, 0}); }, "std", "more than once");
  expect_error<IndexError>([&] { amax(x, {5}); }, "amax", "5");
  expect_error<IndexError>([&] { prod(x, {2}); }, "prod", "2");
  expect_error<IndexError>([&] { logsumexp(x, {7}); }, "logsumexp", "7");
  expect_error<IndexError>([&] { norm(x, 2, {3}); }, "norm", "3");
  expect_error<IndexError>([&] { all(x, {2}); }, "all", "2");
  expect_error<IndexError>([&] { any(x, {-4}); }, "any", "-4");
  expect_error<IndexError>([&] { max(x, 2); }, "max", "2");
  expect_error<IndexError>([&] { min(x, -3); }, "min", "-3");
  expect_error<IndexError>([&] { argmax(x, 2); }, "argmax", "2");
  expect_error<IndexError>([&] { cumsum(x, 2); }, "cumsum", "2");
  expect_error<IndexError>([&] { cumprod(x, -3); }, "cumprod", "-3");
  expect_error<ShapeError>([&] { sum_to(x, {3, 3}); }, "sum_to", "[3, 3]");
}

TEST(ReductionErrors, EmptyReductionsWithoutIdentity) {
  const Tensor e = zeros({2, 0});
  expect_error<IndexError>([&] { max(e); }, "max", "[2, 0]");
  expect_error<IndexError>([&] { min(e); }, "min", "size 0");
  expect_error<IndexError>([&] { amax(e, {1}); }, "amax", "dimension 1 of size 0");
  expect_error<IndexError>([&] { amin(e); }, "amin", "size 0");
  expect_error<IndexError>([&] { max(e, 1); }, "max", "dimension 1 of size 0");
  expect_error<IndexError>([&] { argmin(e); }, "argmin", "empty tensor of shape [2, 0]");
  expect_error<IndexError>([&] { argmax(e, 1); }, "argmax", "size 0");
  expect_error<IndexError>([&] { norm(e, inf); }, "norm", "size 0");
  // Reductions over the non-empty dim are fine: shape (0) results.
  EXPECT_EQ(amax(zeros({0, 3}), {1}).shape(), (Shape{0}));
  EXPECT_EQ(argmax(zeros({0, 3}), 1).shape(), (Shape{0}));
}

TEST(ReductionErrors, DTypes) {
  const Tensor i = from_vector<std::int64_t>({1, 2});
  expect_error<DTypeError>([&] { mean(i); }, "mean", "int64");
  expect_error<DTypeError>([&] { var(i); }, "var", "floating-point");
  expect_error<DTypeError>([&] { std(from_vector<bool>({true})); }, "std", "bool");
  expect_error<DTypeError>([&] { norm(i); }, "norm", "int64");
  expect_error<Error>([&] { norm(zeros({3}), std::nan("")); }, "norm", "p is NaN");
}

TEST(ReductionDTypes, ResultTypes) {
  const Tensor i32 = from_vector<std::int32_t>({1, 2, 3});
  const Tensor b = from_vector<bool>({true, true, false});
  EXPECT_EQ(sum(i32).dtype(), kInt64);
  EXPECT_EQ(sum(b).item<std::int64_t>(), 2);
  EXPECT_EQ(prod(i32).dtype(), kInt64);
  EXPECT_EQ(prod(i32).item<std::int64_t>(), 6);
  EXPECT_EQ(prod(b).dtype(), kInt64);
  // Integer overflow wraps around (two's complement), like PyTorch.
  const std::int64_t top = std::numeric_limits<std::int64_t>::max();
  EXPECT_EQ(sum(from_vector<std::int64_t>({top, 1})).item<std::int64_t>(), std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(cumsum(from_vector<std::int64_t>({top, 2}), 0).select(0, 1).item<std::int64_t>(),
            std::numeric_limits<std::int64_t>::min() + 1);
  EXPECT_EQ(prod(from_vector<std::int64_t>({std::int64_t{1} << 62, 4})).item<std::int64_t>(), 0);
  EXPECT_EQ(logsumexp(i32, {}).dtype(), kFloat32);
  EXPECT_NEAR(logsumexp(i32, {}).item<double>(), std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)), 1e-6);
  EXPECT_EQ(all(i32).dtype(), kBool);
  EXPECT_FALSE(all(b).item<bool>());
  EXPECT_TRUE(any(b).item<bool>());
  EXPECT_TRUE(all(from_vector<float>({1, std::nanf("")})).item<bool>());  // NaN is nonzero
  EXPECT_FALSE(any(zeros({2, 2})).item<bool>());
  EXPECT_TRUE(all(zeros({0})).item<bool>());
  EXPECT_EQ(any(zeros({2, 3}), {1}, true).shape(), (Shape{2, 1}));
  for (DataType t : {kFloat16, kBFloat16, kFloat32}) {
    const Tensor x = from_vector<double>({1, 2, 3, 6}).to(t);
    EXPECT_EQ(sum(x).dtype(), t);
    EXPECT_EQ(var(x).dtype(), t);
    EXPECT_NEAR(var(x).item<double>(), 14.0 / 3.0, 0.02);
    EXPECT_NEAR(std(x, {}, 0).item<double>(), std::sqrt(3.5), 0.01);
    EXPECT_EQ(norm(x).dtype(), t);
    EXPECT_NEAR(norm(x).item<double>(), std::sqrt(50.0), 0.05);
    EXPECT_EQ(logsumexp(x, {0}).dtype(), t);
    EXPECT_EQ(prod(x).item<double>(), 36);
  }
  // float16 squares would overflow: var and norm compute in float32.
  const Tensor big = from_vector<double>({300, 400}).to(kFloat16);
  EXPECT_EQ(norm(big).item<double>(), 500);
  EXPECT_EQ(var(big).item<double>(), 5000);
}

TEST(ReductionValues, SpecialValues) {
  // logsumexp subtracts the max: no overflow at 1000, and exact limits at +-inf and over nothing.
  const Tensor big = from_vector<double>({1000, 1000, 999});
  EXPECT_NEAR(logsumexp(big, {0}).item<double>(), 1000 + std::log(2 + std::exp(-1.0)), 1e-12);
  EXPECT_NEAR(logsumexp(big.to(kFloat32), {0}).item<double>(), 1000 + std::log(2 + std::exp(-1.0)), 1e-3);
  EXPECT_EQ(logsumexp(from_vector<double>({-inf, -inf}), {0}).item<double>(), -inf);
  EXPECT_EQ(logsumexp(from_vector<double>({inf, -inf, 1}), {0}).item<double>(), inf);
  EXPECT_EQ(logsumexp(from_vector<double>({-inf, 0}), {0}).item<double>(), 0);
  EXPECT_TRUE(std::isnan(logsumexp(from_vector<double>({1, std::nan("")}), {0}).item<double>()));
  EXPECT_EQ(values(logsumexp(zeros({2, 0}), {1})), (std::vector<double>{-inf, -inf}));
  // float32 rows long enough for the vectorised and chunked paths (70000 > one chunk).
  for (std::int64_t n : {1000, 70000}) {
    Tensor row = zeros({n});
    EXPECT_NEAR(logsumexp(row, {0}).item<double>(), std::log(static_cast<double>(n)), 1e-5);
    NoGradGuard no_grad;
    row.select(0, n - 3).fill_(inf);
    EXPECT_EQ(logsumexp(row, {0}).item<double>(), inf);
    row.select(0, 5).fill_(std::nan(""));
    EXPECT_TRUE(std::isnan(logsumexp(row, {0}).item<double>()));
    row.select(0, n - 3).fill_(0);
    EXPECT_TRUE(std::isnan(logsumexp(row, {0}).item<double>()));
    Tensor low = full({n}, -inf);
    EXPECT_EQ(logsumexp(low, {0}).item<double>(), -inf);
    low.select(0, n / 2).fill_(std::nan(""));
    EXPECT_TRUE(std::isnan(logsumexp(low, {0}).item<double>()));
  }
  EXPECT_EQ(prod(zeros({0})).item<double>(), 1);
  EXPECT_EQ(sum(zeros({0})).item<double>(), 0);
  EXPECT_TRUE(std::isnan(var(from_vector<double>({2}), {}).item<double>()));  // N - correction = 0
  EXPECT_EQ(var(from_vector<double>({2}), {}, 0).item<double>(), 0);
  EXPECT_EQ(norm(zeros({0})).item<double>(), 0);
}

TEST(ReductionValues, GradientsAtZero) {
  // prod: the zero gets the product of the others; with two zeros everything gets 0.
  Tensor x = from_vector<double>({2, 0, 3}).detach().requires_grad_();
  prod(x).backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{0, 6, 0}));
  x = from_vector<double>({2, 0, 0}).detach().requires_grad_();
  prod(x).backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{0, 0, 0}));
  // norm p=2 at 0: gradient 0, not NaN; p=1: sign.
  x = zeros({3}, {.dtype = kFloat64}).requires_grad_();
  norm(x).backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{0, 0, 0}));
  x = from_vector<double>({-2, 0, 3}).detach().requires_grad_();
  norm(x, 1).backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{-1, 0, 1}));
}

// float32 sum, logsumexp and amax over all elements and over rows, bit for bit, with 1, 2
// and 3 threads (shapes above the parallel and chunk thresholds).
TEST(ReductionDeterminism, IndependentOfThreadCount) {
  Generator generator(7);
  const Tensor x = randn({5, 70001}, {}, &generator);
  auto run = [&] {
    return TensorList{sum(x), sum(x, {1}), sum(x, {0}), logsumexp(x, {1}), logsumexp(x, {}), amax(x, {1}),
                      var(x, {1}), cumsum(x, 1), prod(x.slice(1, 0, 40), {1}), argmax(x, 1)};
  };
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const TensorList one = run();
  for (int threads : {2, 3}) {
    omp_set_num_threads(threads);
    const TensorList many = run();
    for (std::size_t k = 0; k < one.size(); ++k) {
      const Tensor a = one[k].contiguous(), b = many[k].contiguous();
      ASSERT_EQ(a.nbytes(), b.nbytes());
      EXPECT_EQ(std::memcmp(a.data_ptr(), b.data_ptr(), static_cast<std::size_t>(a.nbytes())), 0)
          << "result " << k << " with " << threads << " threads";
    }
  }
  omp_set_num_threads(saved);
  // And close to a float64 computation.
  EXPECT_NEAR(sum(x).item<double>(), sum(x.to(kFloat64)).item<double>(), 1e-3);
}

// float32 logsumexp exponentiates contiguous runs in place and gathers strided ones first:
// the same values in another layout give the same bits, and both match float64.
TEST(ReductionDeterminism, Float32LogSumExpIndependentOfLayout) {
  Generator generator(8);
  const Tensor x = mul(randn({37, 300}, {}, &generator), 4.0);
  const Tensor strided = x.t().contiguous().t();  // the same values, rows at stride 37
  const Tensor rows = logsumexp(x, {1}), rows_strided = logsumexp(strided, {1});
  ASSERT_EQ(std::memcmp(rows.data_ptr(), rows_strided.data_ptr(), static_cast<std::size_t>(rows.nbytes())), 0);
  const std::vector<double> v = values(x), got_rows = values(rows), got_cols = values(logsumexp(x, {0}));
  auto reference = [&](std::int64_t first, std::int64_t count, std::int64_t step) {
    double max = -inf, total = 0;
    for (std::int64_t j = 0; j < count; ++j) max = std::max(max, v[first + j * step]);
    for (std::int64_t j = 0; j < count; ++j) total += std::exp(v[first + j * step] - max);
    return max + std::log(total);
  };
  for (std::int64_t i = 0; i < 37; ++i) EXPECT_NEAR(got_rows[i], reference(i * 300, 300, 1), 1e-5) << "row " << i;
  for (std::int64_t j = 0; j < 300; ++j) EXPECT_NEAR(got_cols[j], reference(j, 37, 300), 1e-5) << "column " << j;
}

}  // namespace
}  // namespace infini::test::reduction_checks_test
