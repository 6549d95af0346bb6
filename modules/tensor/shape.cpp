module;
#include <cstdint>
module infini.tensor;
import infini.std;

namespace infini {

std::int64_t checked_numel(std::string_view op, const Shape& shape) {
  std::int64_t numel = 1;
  bool overflow = false;
  for (std::int64_t size : shape) {
    if (size < 0) throw ShapeError(op, concat("negative size ", size, " in shape ", shape));
    overflow = overflow || __builtin_mul_overflow(numel, size, &numel);
  }
  // A zero anywhere makes the product 0 even when a partial product overflowed.
  if (std::ranges::find(shape, 0) != shape.end()) return 0;
  if (overflow) throw ShapeError(op, concat("shape ", shape, " has more than 2^63 - 1 elements"));
  return numel;
}

std::int64_t checked_nbytes(std::string_view op, const Shape& shape, std::size_t itemsize) {
  std::int64_t nbytes = 0;
  if (__builtin_mul_overflow(checked_numel(op, shape), static_cast<std::int64_t>(itemsize), &nbytes))
    throw ShapeError(op, concat("shape ", shape, " with ", itemsize, "-byte elements needs more than 2^63 - 1 bytes"));
  return nbytes;
}

Strides contiguous_strides(const Shape& shape) {
  Strides strides(shape.size());
  std::int64_t stride = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    // Only a zero-size tensor (whose strides are never used to address memory) can overflow
    // here; saturate rather than wrap.
    if (i > 0 && __builtin_mul_overflow(stride, std::max<std::int64_t>(shape[i], 1), &stride))
      stride = std::numeric_limits<std::int64_t>::max();
  }
  return strides;
}

std::int64_t wrap_dim(std::string_view op, std::int64_t dim, std::int64_t ndim) {
  const std::int64_t n = std::max<std::int64_t>(ndim, 1);
  if (dim < -n || dim >= n)
    throw IndexError(op, concat("dimension ", dim, " is out of range for a ", ndim, "-d tensor (expected [", -n, ", ",
                                n - 1, "])"));
  return dim < 0 ? dim + n : dim;
}

Shape infer_size(std::string_view op, const Shape& shape, std::int64_t numel) {
  Shape result = shape;
  std::int64_t known = 1;
  std::int64_t infer_at = -1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer_at >= 0) throw ShapeError(op, concat("shape ", shape, " has more than one -1"));
      infer_at = static_cast<std::int64_t>(i);
    } else if (shape[i] < 0) {
      throw ShapeError(op, concat("invalid size ", shape[i], " in shape ", shape));
    } else if (__builtin_mul_overflow(known, shape[i], &known)) {
      throw ShapeError(op, concat("shape ", shape, " is invalid for input of size ", numel));
    }
  }
  if (infer_at >= 0) {
    if (known == 0 || numel % known != 0)
      throw ShapeError(op, concat("shape ", shape, " is invalid for input of size ", numel));
    result[infer_at] = numel / known;
  } else if (known != numel) {
    throw ShapeError(op, concat("shape ", shape, " is invalid for input of size ", numel));
  }
  return result;
}

bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const std::size_t lead = to.size() - from.size();
  for (std::size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[lead + i]) return false;
  return true;
}

Shape broadcast_shapes(std::string_view op, const Shape& a, const Shape& b) {
  const std::size_t ndim = std::max(a.size(), b.size());
  Shape result(ndim);
  for (std::size_t i = 0; i < ndim; ++i) {
    const std::int64_t sa = i < ndim - a.size() ? 1 : a[i - (ndim - a.size())];
    const std::int64_t sb = i < ndim - b.size() ? 1 : b[i - (ndim - b.size())];
    if (sa != sb && sa != 1 && sb != 1)
      throw ShapeError(op, concat("shapes ", a, " and ", b, " cannot be broadcast: size ", sa, " vs ", sb,
                                  " at dimension ", i));
    result[i] = sa == 1 ? sb : sa;
  }
  return result;
}

}  // namespace infini
