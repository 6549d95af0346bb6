// Helpers of the init and layer tests: values as float64 vectors, closeness, statistics,
// typed error checks and gradcheck.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

import infini.nn;

namespace infini::nn::test {

// The values of t as float64, row-major.
inline std::vector<double> values(const Tensor& t) {
  const Tensor c = t.detach().to(Device::cpu(), kFloat64).contiguous();  // any device
  const double* d = c.data_ptr<double>();
  return std::vector<double>(d, d + c.numel());
}

// A float64 tensor of `shape` holding `v` (row-major).
inline Tensor tensor(const std::vector<double>& v, const Shape& shape, DataType dtype = kFloat64) {
  return from_vector(v, shape).to(dtype);
}

// Sets a parameter's values in place (no history).
inline void assign(const Tensor& param, const std::vector<double>& v) {
  NoGradGuard no_grad;
  param.detach().copy_(from_vector(v, param.shape()));
}

// |actual - expected| <= tol * max(1, |expected|) element by element.
inline void expect_close(const std::vector<double>& actual, const std::vector<double>& expected, double tol,
                         const std::string& what = "") {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (std::size_t i = 0; i < actual.size(); ++i)
    EXPECT_NEAR(actual[i], expected[i], tol * std::max(1.0, std::abs(expected[i]))) << what << " element " << i;
}

inline double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

// Population standard deviation.
inline double std_of(const std::vector<double>& v) {
  const double m = mean_of(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size()));
}

inline double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

// Expects call() to throw an E (or subclass) from `op` whose message contains `part`.
template <class E = Error, class Call>
void expect_error(Call&& call, const std::string& op, const std::string& part = "") {
  try {
    call();
    ADD_FAILURE() << "expected an error from " << op << " mentioning \"" << part << "\"";
  } catch (const E& e) {
    EXPECT_EQ(e.op(), op) << e.what();
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong error type: " << e.what();
  }
}

// Finite differences against the engine's gradients for every input that requires grad.
inline void expect_gradcheck(const autograd::DifferentiableFn& fn, const TensorList& inputs) {
  const autograd::GradcheckResult r = autograd::gradcheck(fn, inputs);
  EXPECT_TRUE(r.ok) << r.message;
}

inline std::vector<std::string> names(const Named<Tensor>& list) {
  std::vector<std::string> out;
  for (const auto& [name, t] : list) out.push_back(name);
  return out;
}

inline std::vector<std::string> keys(const StateDict& state) {
  std::vector<std::string> out;
  for (const auto& [name, t] : state) out.push_back(name);
  return out;
}

// A float64 leaf of `shape` with values from N(0, 1) under `seed`, requiring grad.
inline Tensor random_input(const Shape& shape, std::uint64_t seed, bool requires_grad = true) {
  Generator g(seed);
  Tensor t = randn(shape, {.dtype = kFloat64}, &g);
  if (requires_grad) t.requires_grad_();
  return t;
}


// A float64 tensor of `shape` holding `v` (row-major).
inline Tensor make(const Shape& shape, const std::vector<double>& v) { return tensor(v, shape); }

// Seeded N(0, 1) values.
inline std::vector<double> sample(const Shape& shape, std::uint64_t seed) {
  return values(random_input(shape, seed, false));
}

// actual has `shape` and holds `expected` (row-major) to within tolerance (relative above 1).
inline void expect_all_near(const Tensor& actual, const Shape& shape, const std::vector<double>& expected,
                            double tolerance) {
  EXPECT_EQ(actual.shape(), shape);
  expect_close(values(actual), expected, tolerance);
}

// Gives a layer's weight and bias (where defined) seeded values; returns them.
template <class Layer>
std::pair<std::vector<double>, std::vector<double>> seed_parameters(const Layer& layer, std::uint64_t seed) {
  const std::vector<double> w = sample(layer->weight.shape(), seed);
  const std::vector<double> b = layer->bias.defined() ? sample(layer->bias.shape(), seed + 1) : std::vector<double>{};
  assign(layer->weight, w);
  if (layer->bias.defined()) assign(layer->bias, b);
  return {w, b};
}

// Every |value| <= bound, and the largest close to it (the values fill the range).
inline void expect_uniform_within(const Tensor& t, double bound) {
  const double largest = max_abs(values(t));
  EXPECT_LE(largest, bound);
  EXPECT_GE(largest, 0.9 * bound);
}

}  // namespace infini::nn::test
