// The precision checker (numerics.cppm): statistics, the first non-finite output of a forward
// op (recorded or not) and of a backward node, with the op, forward/backward and the inputs'
// statistics in the message; nothing checked while it is off.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>
import infini.autograd;

namespace numerics_test {
using namespace infini;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// The message of the Error `f` raises (op check_numerics); "" when it raises none.
template <class F>
std::string numerics_error(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.op(), "check_numerics") << e.what();
    return e.what();
  }
  return "";
}

void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "expected \"" << part << "\" in\n" << text;
}

TEST(Numerics, StatsCountNonFiniteAndSummariseTheRest) {
  const Tensor t = from_vector<double>({1, kNaN, -kInf, 3, -2}, {5});
  const numerics::Stats s = numerics::stats_of(t);
  EXPECT_EQ(s.numel, 5);
  EXPECT_EQ(s.nan, 1);
  EXPECT_EQ(s.inf, 1);
  EXPECT_EQ(s.min, -2);
  EXPECT_EQ(s.max, 3);
  EXPECT_DOUBLE_EQ(s.mean, 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(s.rms, std::sqrt(14.0 / 3.0));
  // No finite element: NaN statistics. Non-contiguous and bfloat16 tensors are read as values.
  EXPECT_TRUE(std::isnan(numerics::stats_of(from_vector<double>({kNaN}, {1})).min));
  const Tensor strided = from_vector<float>({1, 100, 2, 100}, {2, 2}).slice(1, 0, 1);  // {1, 2}
  EXPECT_EQ(numerics::stats_of(strided).max, 2);
  EXPECT_EQ(numerics::stats_of(from_vector<float>({-3, 5}, {2}).to(kBFloat16)).min, -3);
  EXPECT_EQ(numerics::describe(from_vector<float>({-1, 1, 2}, {3})),
            "float32 [3]: min -1 max 2 mean 0.666666667 (0 NaN, 0 Inf of 3)");
}

TEST(Numerics, AllFiniteLooksAgainWhenTheSumOverflows) {
  EXPECT_TRUE(numerics::all_finite(from_vector<float>({3e38f, 3e38f}, {2})));  // the float32 sum is inf
  EXPECT_FALSE(numerics::all_finite(from_vector<float>({1, std::numeric_limits<float>::infinity()}, {2})));
  EXPECT_FALSE(numerics::all_finite(from_vector<double>({kNaN, 1}, {2})));
  EXPECT_TRUE(numerics::all_finite(from_vector<std::int64_t>({1, 2}, {2})));  // integers are finite
  EXPECT_TRUE(numerics::all_finite(empty({0, 3})));
}

TEST(Numerics, ForwardNamesTheOpAndItsInputs) {
  const numerics::CheckNumericsGuard checking;
  const Tensor x = from_vector<float>({-1, 1, 2}, {3}).requires_grad_();
  const std::string message = numerics_error([&] { log(x); });
  expect_contains(message, "check_numerics: op 'log' (forward) outside any module: output 0 is float32 [3]: ");
  expect_contains(message, "(1 NaN, 0 Inf of 3)");
  expect_contains(message, "inputs: 0: float32 [3]: min -1 max 2 mean 0.666666667 (0 NaN, 0 Inf of 3)");
}

TEST(Numerics, ForwardChecksOpsThatRecordNoHistory) {
  const numerics::CheckNumericsGuard checking;
  const Tensor a = from_vector<float>({1, std::numeric_limits<float>::infinity()}, {1, 2});
  const Tensor b = from_vector<float>({2, -std::numeric_limits<float>::infinity()}, {1, 2});
  const std::string message = numerics_error([&] { add(a, b); });
  expect_contains(message, "op 'add' (forward) outside any module: output 0 is float32 [1, 2]: min 3 max 3 mean 3 "
                           "(1 NaN, 0 Inf of 2)");
  expect_contains(message, "1: float32 [1, 2]: min 2 max 2 mean 2 (0 NaN, 1 Inf of 2)");
  const Tensor w = from_vector<float>({1e30f, 1e30f}, {1, 2});
  expect_contains(numerics_error([&] { matmul(w, w.t()); }), "op 'matmul' (forward)");  // 2e60 overflows
  const NoGradGuard no_grad;
  expect_contains(numerics_error([&] { sqrt(from_vector<float>({-4}, {1})); }), "op 'sqrt' (forward)");
}

TEST(Numerics, BackwardNamesTheNodeTheForwardOpAndTheIncomingGradient) {
  const numerics::CheckNumericsGuard checking;
  const Tensor x = from_vector<float>({0, 4}, {2}).requires_grad_();
  const Tensor y = sqrt(x);  // finite; its gradient 1 / (2 sqrt(x)) is not at 0
  const std::string message = numerics_error([&] { sum(y).backward(); });
  expect_contains(message, "op 'sqrt' (backward, SqrtBackward) outside any module: gradient 0 is float32 [2]: "
                           "min 0.25 max 0.25 mean 0.25 (0 NaN, 1 Inf of 2)");
  expect_contains(message, "incoming gradients: 0: float32 [2]: min 1 max 1 mean 1 (0 NaN, 0 Inf of 2)");
}

TEST(Numerics, ModuleScopesNameTheInnermostModule) {
  const numerics::CheckNumericsGuard checking;
  const std::string outer = "h.3", outer_type = "Block", inner = "h.3.mlp.c_fc", inner_type = "Linear", root = "",
                    root_type = "GPT2";
  EXPECT_EQ(numerics::current_module(), "");
  const numerics::ModuleScope a(root, root_type);
  EXPECT_EQ(numerics::current_module(), "GPT2");  // the labelled root
  const Tensor x = from_vector<float>({0}, {1}).requires_grad_();
  Tensor y;
  {
    const numerics::ModuleScope b(outer, outer_type);
    const numerics::ModuleScope c(inner, inner_type);
    EXPECT_EQ(numerics::current_module(), "h.3.mlp.c_fc (Linear)");
    expect_contains(numerics_error([&] { div(x, x); }), "op 'div' (forward) in module h.3.mlp.c_fc (Linear): ");
    y = sqrt(x);
  }
  EXPECT_EQ(numerics::current_module(), "GPT2");
  // Backward runs outside the scopes: the node remembers where its forward ran.
  expect_contains(numerics_error([&] { sum(y).backward(); }), "in module h.3.mlp.c_fc (Linear): gradient 0");
}

TEST(Numerics, OffChecksNothing) {
  numerics::set_checking(false);
  const Tensor x = from_vector<float>({-1, 0}, {2}).requires_grad_();
  const Tensor y = sqrt(x);  // NaN and 0: no error
  EXPECT_TRUE(std::isnan(y.detach().to(kFloat64).data_ptr<double>()[0]));
  sum(y).backward();
  EXPECT_TRUE(std::isinf(x.grad().to(kFloat64).data_ptr<double>()[1]));
}

}  // namespace

}  // namespace numerics_test
