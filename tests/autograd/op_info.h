// The op table (PyTorch's OpInfo, simplified): each op of the library registers an entry
// with sample inputs and an independent reference; op_table_test.cpp runs every entry
// through the same checks and fails when an op of infini::op_names() has none.
//
// An entry's checks, for each sample:
//   - forward: fn(view(leaves)) against reference(view(leaves)) (naive float64 loops or
//     closed forms written in the test), to `tolerance`;
//   - layout: the same op on a non-contiguous copy of every input gives the same values;
//   - gradcheck in float64 on the leaves that require grad (when differentiable);
//   - gradgradcheck (when gradgrad).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <vector>
import infini.autograd;

namespace infini::test {

using Fn = std::function<TensorList(const TensorList&)>;

struct OpSample {
  std::string label;   // e.g. "broadcast (3,1) x (1,4)"
  TensorList leaves;   // float64 where the op allows; set requires_grad on the ones to check
  Fn view = nullptr;   // optional: maps leaves to the op's arguments (expand, transpose, ...)
};

struct OpInfo {
  std::string name;                              // as in infini::op_names()
  Fn fn;                                         // calls the op
  Fn reference;                                  // independent expected outputs
  std::function<std::vector<OpSample>()> samples;
  bool differentiable = true;
  bool gradgrad = false;
  double tolerance = 1e-10;                      // max |out - ref| / (1 + |ref|)
};

std::vector<OpInfo>& op_registry();

// Registers an entry at static-initialisation time: `const RegisterOp r{{...}};`
struct RegisterOp {
  explicit RegisterOp(OpInfo info) { op_registry().push_back(std::move(info)); }
};

// Float64 tensor of `shape` filled with a fixed pseudo-random pattern in [lo, hi).
Tensor sample(const Shape& shape, double lo = -2, double hi = 2, std::uint64_t seed = 1);

// The values of t as float64, row-major.
std::vector<double> values(const Tensor& t);

// A float64 leaf of `shape` (values in [lo, hi)) that requires grad.
inline Tensor leaf(const Shape& shape, std::uint64_t seed, double lo = -2, double hi = 2) {
  return sample(shape, lo, hi, seed).requires_grad_();
}

inline std::int64_t numel_of(const Shape& shape) {
  std::int64_t n = 1;
  for (std::int64_t s : shape) n *= s;
  return n;
}

// Expects call() to throw an infini::Error from `op` whose message contains `part`.
template <class Call>
void expect_error(Call&& call, const std::string& op, const std::string& part) {
  try {
    call();
    ADD_FAILURE() << "expected an error from " << op;
  } catch (const Error& e) {
    EXPECT_EQ(e.op(), op);
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

// Expects call() to throw E whose op() is `op` and whose message contains every one of
// `parts`.
template <class E, class Call>
void expect_error(Call&& call, const std::string& op, const std::vector<std::string>& parts) {
  try {
    call();
    ADD_FAILURE() << "expected an error from " << op;
  } catch (const E& e) {
    EXPECT_EQ(e.op(), op) << e.what();
    for (const std::string& part : parts)
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << "'" << part << "' not in: " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type from " << op << ": " << e.what();
  }
}

}  // namespace infini::test
