// Helpers shared by the convolution and pooling tests (conv_ops_test.cpp, pool_ops_test.cpp):
// float64 tensors from values, sample leaves, index arithmetic and error expectations.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "op_info.h"

namespace infini::test {

// A float64 tensor of `shape` holding `v` (row-major).
inline Tensor make(const Shape& shape, const std::vector<double>& v) {
  return from_vector(v, {static_cast<std::int64_t>(v.size())}).reshape(shape);
}

inline std::int64_t numel_of(const Shape& shape) {
  return std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
}

// A float64 leaf that requires grad, values in [-2, 2).
inline Tensor leaf(const Shape& shape, std::uint64_t seed) { return sample(shape, -2, 2, seed).requires_grad_(); }

// A float64 leaf holding a shuffled 0.1 * (0, 1, ..., n - 1), shifted to be centred on 0:
// all values distinct and 0.1 apart, so a max is unique and stays so under gradcheck's steps.
inline Tensor distinct_leaf(const Shape& shape, std::uint64_t seed) {
  const std::int64_t n = numel_of(shape);
  const std::vector<double> keys = values(sample({n}, 0, 1, seed));
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::ranges::sort(order, [&](std::int64_t a, std::int64_t b) { return keys[a] < keys[b]; });
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t rank = 0; rank < n; ++rank) v[order[rank]] = 0.1 * static_cast<double>(rank) - 0.05 * n;
  return make(shape, v).requires_grad_();
}

// Row-major offset of `index` in `shape`.
inline std::int64_t offset_of(const Shape& shape, const std::vector<std::int64_t>& index) {
  std::int64_t at = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) at = at * shape[d] + index[d];
  return at;
}

// call() throws E whose op() is `op` and whose message contains every one of `parts`.
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
