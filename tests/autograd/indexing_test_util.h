// Helpers shared by the indexing tests (indexing_*_test.cpp): tensors from literal values,
// row-major coordinates, and an error matcher. References are written with these as naive
// loops over coordinates, never with the library's own index kernels.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "op_info.h"

namespace infini::test::indexing_util {

using Coords = std::vector<std::int64_t>;

inline std::int64_t numel_of(const Shape& shape) {
  std::int64_t n = 1;
  for (std::int64_t s : shape) n *= s;
  return n;
}

// A float64 tensor of `shape` holding v (row-major); works for 0-d and empty shapes.
inline Tensor f64(const Shape& shape, const std::vector<double>& v) {
  return from_vector(v, {static_cast<std::int64_t>(v.size())}).reshape(shape);
}

// An int64 tensor of `shape` holding v.
inline Tensor i64(const Shape& shape, const std::vector<std::int64_t>& v) {
  return from_vector(v, {static_cast<std::int64_t>(v.size())}).reshape(shape);
}

// The values of an integer tensor, row-major.
inline std::vector<std::int64_t> ints(const Tensor& t) {
  std::vector<std::int64_t> out;
  for (double v : values(t)) out.push_back(static_cast<std::int64_t>(v));
  return out;
}

// Coordinates of element k (row-major) of shape, and back.
inline Coords unravel(std::int64_t k, const Shape& shape) {
  Coords c(shape.size());
  for (std::int64_t d = static_cast<std::int64_t>(shape.size()) - 1; d >= 0; --d) {
    c[d] = k % shape[d];
    k /= shape[d];
  }
  return c;
}
inline std::int64_t ravel(const Coords& c, const Shape& shape) {
  std::int64_t k = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) k = k * shape[d] + c[d];
  return k;
}

// Python's wrap of a possibly negative index.
inline std::int64_t wrap(std::int64_t i, std::int64_t size) { return i < 0 ? i + size : i; }

// A float64 leaf of `shape` (values in [lo, hi)) that requires grad.
inline Tensor leaf(const Shape& shape, std::uint64_t seed, double lo = -2, double hi = 2) {
  return sample(shape, lo, hi, seed).requires_grad_();
}

// Expects call() to throw E whose op() is `op` and whose message contains every part.
template <class E, class Call>
void expect_error(Call&& call, const std::string& op, const std::vector<std::string>& parts) {
  try {
    call();
    ADD_FAILURE() << "expected an error from " << op;
  } catch (const Error& e) {
    EXPECT_NE(dynamic_cast<const E*>(&e), nullptr) << "wrong error type from " << op << ": " << e.what();
    EXPECT_EQ(e.op(), op) << e.what();
    for (const std::string& part : parts)
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << "'" << part << "' not in: " << e.what();
  }
}

}  // namespace infini::test::indexing_util
