// Raw argmax/argmin, scans and running max/min: argument checks and result allocation
// around the kernels.
module;
#include <cstdint>
module infini.kernels;
import infini.std;

namespace infini::kernels {

std::pair<Tensor, Tensor> arg_reduce(std::string_view name, ReduceOp op, const Tensor& x, std::optional<std::int64_t> dim,
                                     bool keepdim) {
  NoGradGuard no_grad;
  if (op != ReduceOp::Max && op != ReduceOp::Min)
    throw Error(name, "arg_reduce takes ReduceOp::Max or ReduceOp::Min");
  if (!dim) {
    // Over all elements in row-major order: the index is into the flattened tensor.
    if (x.numel() == 0)
      throw IndexError(name, concat("cannot reduce an empty tensor of shape ", x.shape(),
                                    " without a dim: the operation has no identity"));
    auto [values, indices] = arg_reduce(name, op, x.reshape({x.numel()}), 0, false);
    if (!keepdim) return {values, indices};
    const Shape ones(static_cast<std::size_t>(x.dim()), 1);
    return {values.view(ones), indices.view(ones)};
  }
  const std::int64_t d = wrap_dim(name, *dim, x.dim());
  if (x.dim() == 0) {  // a 0-d tensor is its own max, at index 0
    auto [values, indices] = arg_reduce(name, op, x.view({1}), 0, false);
    return {values.view({}), indices.view({})};
  }
  if (x.shape()[d] == 0)
    throw IndexError(name, concat("cannot reduce over dimension ", d, " of size 0 (shape ", x.shape(),
                                  "): the operation has no identity"));
  Shape kept = x.shape();
  kept[d] = 1;
  Tensor values = empty(kept, {.dtype = x.dtype(), .device = x.device()});
  Tensor indices = empty(kept, {.dtype = kInt64, .device = x.device()});
  KernelTable<ArgReduceKernel>::call(x.device(), values, indices, x, d, op);
  if (keepdim) return {values, indices};
  return {values.squeeze(d), indices.squeeze(d)};
}

Tensor scan(ScanOp op, const Tensor& x, std::int64_t dim, bool reverse) {
  NoGradGuard no_grad;
  const std::string_view name = op == ScanOp::Sum ? "cumsum" : op == ScanOp::Prod ? "cumprod" : "logcumsumexp";
  const std::int64_t d = wrap_dim(name, dim, x.dim());
  if (op == ScanOp::LogSumExp && !is_floating_point(x.dtype()))
    throw DTypeError(name, concat("expected a floating-point tensor, got ", x.dtype()));
  const DataType result = is_floating_point(x.dtype()) ? x.dtype() : kInt64;
  Tensor out = empty(x.shape(), {.dtype = result, .device = x.device()});
  if (x.dim() == 0) {  // one element: the scan is the element itself
    KernelTable<ScanKernel>::call(x.device(), out.view({1}), x.view({1}), 0, op, reverse);
    return out;
  }
  KernelTable<ScanKernel>::call(x.device(), out, x, d, op, reverse);
  return out;
}

std::pair<Tensor, Tensor> arg_scan(std::string_view name, ReduceOp op, const Tensor& x, std::int64_t dim) {
  NoGradGuard no_grad;
  if (op != ReduceOp::Max && op != ReduceOp::Min) throw Error(name, "arg_scan takes ReduceOp::Max or ReduceOp::Min");
  const std::int64_t d = wrap_dim(name, dim, x.dim());
  Tensor values = empty(x.shape(), {.dtype = x.dtype(), .device = x.device()});
  Tensor indices = empty(x.shape(), {.dtype = kInt64, .device = x.device()});
  if (x.dim() == 0)  // one element: its own running max, at index 0
    KernelTable<ArgScanKernel>::call(x.device(), values.view({1}), indices.view({1}), x.view({1}), 0, op);
  else
    KernelTable<ArgScanKernel>::call(x.device(), values, indices, x, d, op);
  return {values, indices};
}

}  // namespace infini::kernels
