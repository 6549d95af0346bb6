module;
#include <cstdint>
#include <vector>
module infini.autograd;

namespace infini {
namespace {

// Brings a reduction's gradient back to the input's shape: re-inserts the reduced dims
// (unless kept) and expands over them.
Tensor expand_reduced(const Tensor& g, const Shape& shape, const std::vector<bool>& mask, bool keepdim) {
  Tensor out = g;
  if (!keepdim)
    for (std::size_t d = 0; d < mask.size(); ++d)
      if (mask[d]) out = out.unsqueeze(static_cast<std::int64_t>(d));
  return out.expand(shape);
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  Tensor y = kernels::reduce(ReduceOp::Sum, x, dims, keepdim);
  const std::vector<bool> mask = kernels::reduction_mask("sum", dims, x.dim());
  record("sum", {x}, {y}, {}, [shape = x.shape(), mask, keepdim](const TensorList& g, const TensorList&) {
    return TensorList{expand_reduced(g[0], shape, mask, keepdim)};
  });
  return y;
}

Tensor sum(const Tensor& x) { return sum(x, {}, false); }

Tensor mean(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  if (!is_floating_point(x.dtype()))
    throw DTypeError("mean", concat("expected a floating-point tensor, got ", x.dtype()));
  const std::vector<bool> mask = kernels::reduction_mask("mean", dims, x.dim());
  std::int64_t count = 1;
  for (std::int64_t d = 0; d < x.dim(); ++d)
    if (mask[d]) count *= x.shape()[d];
  return div(sum(x, dims, keepdim), static_cast<double>(count));
}

Tensor mean(const Tensor& x) { return mean(x, {}, false); }

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  return sum(x, kernels::sum_to_dims(x.shape(), shape), true).reshape(shape);
}

}  // namespace infini
