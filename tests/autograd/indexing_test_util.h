// Helpers shared by the indexing tests (indexing_*_test.cpp): tensors from literal values
// and row-major coordinates (leaves and the error matcher are op_info.h's). References are written with these as naive
// loops over coordinates, never with the library's own index kernels.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "op_info.h"

namespace infini::test::indexing_util {

using Coords = std::vector<std::int64_t>;


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

}  // namespace infini::test::indexing_util
