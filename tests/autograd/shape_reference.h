// Naive references for shape and view ops: read a tensor's values by multi-index and build
// a float64 tensor element by element. Independent of the library's kernels (values()
// only converts to contiguous float64).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "op_info.h"

namespace infini::test {

using Index = std::vector<std::int64_t>;

// Row-major position of multi-index i in `shape`, and back.
inline std::int64_t flat_index(const Shape& shape, const Index& i) {
  std::int64_t flat = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + i[d];
  return flat;
}
inline Index multi_index(const Shape& shape, std::int64_t flat) {
  Index i(shape.size());
  for (std::int64_t d = static_cast<std::int64_t>(shape.size()) - 1; d >= 0; --d) {
    i[d] = flat % shape[d];
    flat /= shape[d];
  }
  return i;
}

// The values of t, addressed by multi-index (row-major).
class Values {
 public:
  explicit Values(const Tensor& t) : shape_(t.shape()), v_(values(t)) {}
  double operator()(const Index& i) const { return flat(flat_index(shape_, i)); }
  // Element `flat` in row-major order.
  double flat(std::int64_t k) const { return v_[static_cast<std::size_t>(k)]; }
  const Shape& shape() const { return shape_; }

 private:
  Shape shape_;
  std::vector<double> v_;
};

// A float64 tensor of `shape` whose element at multi-index j is f(j).
inline Tensor build(const Shape& shape, const std::function<double(const Index&)>& f) {
  std::int64_t numel = 1;
  for (std::int64_t s : shape) numel *= s;
  std::vector<double> out;
  out.reserve(static_cast<std::size_t>(numel));
  Index j(shape.size(), 0);
  for (std::int64_t n = 0; n < numel; ++n) {
    out.push_back(f(j));
    for (std::int64_t d = static_cast<std::int64_t>(shape.size()) - 1; d >= 0; --d) {
      if (++j[d] < shape[d]) break;
      j[d] = 0;
    }
  }
  return from_vector(out, {numel}).reshape(shape);
}

}  // namespace infini::test
