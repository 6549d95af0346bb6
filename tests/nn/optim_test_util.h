// Helpers of the optimizer tests: float64 parameters from values, grads, value lists and
// typed error checks.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

import infini.nn;

#include "layer_test_util.h"

namespace infini::optim::test {

// A leaf parameter that requires grad, holding `values` (1-d) in `dtype`.
inline Tensor param(const std::vector<double>& values, DataType dtype = kFloat64) {
  Tensor p = from_vector(values).to(dtype);
  return p.requires_grad_();
}

inline void set_grad(const Tensor& p, const std::vector<double>& values) {
  p.set_grad(from_vector(values).to(p.dtype()).view(p.shape()));
}

// The values of t as float64, row-major.
inline std::vector<double> values(const Tensor& t) {
  const Tensor c = t.detach().to(Device::cpu(), kFloat64).contiguous();  // any device
  const double* d = c.data_ptr<double>();
  return std::vector<double>(d, d + c.numel());
}

// |actual - expected| <= tol * max(1, |expected|) element by element.
inline void expect_close(const std::vector<double>& actual, const std::vector<double>& expected, double tol,
                         const std::string& what = "") {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (std::size_t i = 0; i < actual.size(); ++i)
    EXPECT_NEAR(actual[i], expected[i], tol * std::max(1.0, std::abs(expected[i]))) << what << " element " << i;
}

// Bit-for-bit equality of two tensors' values (same dtype).
inline void expect_identical(const Tensor& a, const Tensor& b, const std::string& what = "") {
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  ASSERT_EQ(a.shape(), b.shape()) << what;
  const std::vector<double> x = values(a), y = values(b);
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_EQ(x[i], y[i]) << what << " element " << i;
}

using nn::test::expect_error;

}  // namespace infini::optim::test
