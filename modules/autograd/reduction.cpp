// Reductions: forward through infini.kernels, backward formulas written with differentiable
// ops, so create_graph gives higher derivatives. A reduction's node keeps the mask of
// reduced dims and whether they were kept, to bring gradients back to the input's shape.
// Norms are in norms.cpp, order statistics in order_statistics.cpp and quantile.cpp,
// cummax / cummin / logcumsumexp in cumulative.cpp.
module;
#include <cstdint>
module infini.autograd;
import infini.std;

namespace infini {

namespace reductions {

// t (the result or gradient of a reduction) with the reduced dims back as size 1.
Tensor unsqueeze_reduced(const Tensor& t, const Mask& mask, bool keepdim) {
  Tensor out = t;
  if (!keepdim)
    for (std::size_t d = 0; d < mask.size(); ++d)
      if (mask[d]) out = out.unsqueeze(static_cast<std::int64_t>(d));
  return out;
}

void require_floating(std::string_view op, const Tensor& x) {
  if (!is_floating_point(x.dtype()))
    throw DTypeError(op, concat("expected a floating-point tensor, got ", x.dtype()));
}

// IndexError when a reduction without identity (max, min, negative p) would cover an empty dim.
void require_nonempty(std::string_view op, const Tensor& x, const Mask& mask) {
  for (std::int64_t d = 0; d < x.dim(); ++d)
    if (mask[d] && x.shape()[d] == 0)
      throw IndexError(op, concat("cannot reduce over dimension ", d, " of size 0 (shape ", x.shape(),
                                  "): the operation has no identity"));
}

// Composite ops compute float16/bfloat16 in float32 and round the result back.
Tensor upcast(const Tensor& x) { return x.dtype() == kFloat16 || x.dtype() == kBFloat16 ? x.to(kFloat32) : x; }
Tensor downcast(const Tensor& y, DataType dtype) { return y.dtype() == dtype ? y : y.to(dtype); }

}  // namespace reductions

using namespace reductions;

namespace {

// The reduced dims as a list (empty, i.e. all dims, for a 0-d input).
std::vector<std::int64_t> dims_of(const Mask& mask) {
  std::vector<std::int64_t> dims;
  for (std::size_t d = 0; d < mask.size(); ++d)
    if (mask[d]) dims.push_back(static_cast<std::int64_t>(d));
  return dims;
}

std::int64_t reduced_count(const Shape& shape, const Mask& mask) {
  std::int64_t n = 1;
  for (std::size_t d = 0; d < mask.size(); ++d)
    if (mask[d]) n *= shape[d];
  return n;
}

// amax/amin: the gradient is shared evenly by the elements equal to the result (NaN
// results: by the NaN elements).
Tensor extreme(std::string_view name, ReduceOp op, const Tensor& x, const std::vector<std::int64_t>& dims,
               bool keepdim) {
  const Mask mask = kernels::reduction_mask(name, dims, x.dim());
  require_nonempty(name, x, mask);
  Tensor y = kernels::reduce(op, x, dims, keepdim);
  record(name, {x}, {y}, {x, y}, [mask, keepdim](const TensorList& g, const TensorList& s) {
    if (!g[0].defined()) return TensorList{Tensor()};
    const Tensor& x = s[0];
    const Tensor y = unsqueeze_reduced(s[1], mask, keepdim);
    const Tensor ties = logical_or(eq(x, y), logical_and(isnan(x), isnan(y)));
    const Tensor share = div(unsqueeze_reduced(g[0], mask, keepdim), sum(ties, dims_of(mask), true));
    return TensorList{where(ties, share, 0.0)};
  });
  return y;
}

// max/min along one dim: the gradient goes to the recorded index.
ValuesIndices extreme_along(std::string_view name, ReduceOp op, const Tensor& x, std::int64_t dim, bool keepdim) {
  auto [values, indices] = kernels::arg_reduce(name, op, x, dim, keepdim);
  const std::int64_t d = wrap_dim(name, dim, x.dim());
  record(name, {x}, {values}, {indices}, [shape = x.shape(), d, keepdim](const TensorList& g, const TensorList& s) {
    if (!g[0].defined()) return TensorList{Tensor()};
    if (shape.empty()) return TensorList{g[0]};
    const Tensor index = keepdim ? s[0] : s[0].unsqueeze(d);
    Shape line(shape.size(), 1);
    line[d] = shape[d];
    const Tensor position = arange(shape[d], {.dtype = kInt64, .device = index.device()}).view(line);
    return TensorList{where(eq(position, index), keepdim ? g[0] : g[0].unsqueeze(d), 0.0)};
  });
  return {values, indices};
}

// d prod / dx_i: the product of the other elements of x_i's group. y is the product with
// the reduced dims kept.
Tensor prod_grad(const Tensor& x, const Tensor& y, const Mask& mask) {
  const Tensor zero = eq(x, 0);
  // Without zeros it is y / x, whose derivatives (through y's history) are right too.
  if (!kernels::reduce(ReduceOp::Any, zero).item<bool>()) return div(y, x);
  const std::vector<std::int64_t> dims = dims_of(mask);
  const Tensor zeros = kernels::reduce(ReduceOp::Sum, zero, dims, true);  // per group, int64
  const Tensor nonzero_product = prod(where(zero, 1.0, x), dims, true);
  // At a zero the other elements multiply to nonzero_product if it is its group's only
  // zero, to nonzero_product * (the other zero) if there are two (0, with the right
  // derivative w.r.t. that zero), and to 0 (derivatives too) from three zeros on.
  const DataType t = x.dtype();
  const Tensor other_zero = sub(sum(where(zero, x, 0.0), dims, true), x);
  const Tensor at_zero = mul(nonzero_product, add(eq(zeros, 1).to(t), mul(eq(zeros, 2).to(t), other_zero)));
  // Elsewhere y / x, which is 0 in groups with zeros (with y's derivatives).
  return where(zero, at_zero, div(y, where(zero, 1.0, x)));
}

// Cumulative sum along dim, from the end when reverse; each is the other's gradient.
Tensor cumulative_sum(const Tensor& x, std::int64_t dim, bool reverse) {
  Tensor y = kernels::scan(ScanOp::Sum, x, dim, reverse);
  record("cumsum", {x}, {y}, {}, [dim, reverse](const TensorList& g, const TensorList&) {
    if (!g[0].defined()) return TensorList{Tensor()};
    return TensorList{cumulative_sum(g[0], dim, !reverse)};
  });
  return y;
}

// dL/dx_i = sum over k >= i of g_k * prod_{j <= k, j != i} x_j along dim.
Tensor cumprod_grad(const Tensor& g, const Tensor& x, const Tensor& y, std::int64_t dim) {
  const Tensor zero = eq(x, 0);
  // Where x_i != 0 the products are y_k / x_i (0 past a zero of the line, with y's derivatives).
  if (!kernels::reduce(ReduceOp::Any, zero).item<bool>()) return div(cumulative_sum(mul(g, y), dim, true), x);
  const Tensor at_nonzero = div(cumulative_sum(mul(g, y), dim, true), where(zero, 1.0, x));
  const Tensor seen = kernels::scan(ScanOp::Sum, zero, dim);  // zeros up to here, int64
  const Tensor first = logical_and(zero, eq(seen, 1)), second = logical_and(zero, eq(seen, 2));
  // At the first zero z of a line: a cumprod with x_z replaced by 1.
  const Tensor at_first = cumulative_sum(mul(g, cumprod(where(first, 1.0, x), dim)), dim, true);
  // At the second zero s every product holds x_z once: x_z times a cumprod with x_z and x_s
  // replaced by 1 (0, with the right derivative w.r.t. x_z).
  const Tensor first_value = sum(where(first, x, 0.0), {dim}, true);
  const Tensor without_both = cumprod(where(logical_or(first, second), 1.0, x), dim);
  const Tensor at_second = mul(first_value, cumulative_sum(mul(g, without_both), dim, true));
  // From the third zero on every product holds two zeros (derivatives 0 too).
  return where(first, at_first, where(second, at_second, where(zero, 0.0, at_nonzero)));
}

// sum((x - mean)^2) / max(0, N - correction) of a float32/float64 tensor.
Tensor variance(const Tensor& x, const std::vector<std::int64_t>& dims, const Mask& mask, double correction,
                bool keepdim) {
  const double n = static_cast<double>(reduced_count(x.shape(), mask));
  const Tensor centered = sub(x, mean(x, dims, true));
  return div(sum(mul(centered, centered), dims, keepdim), std::max(0.0, n - correction));
}

// sqrt of a variance, for std: its gradient g / (2 std) is taken as 0 where std is 0 (a
// constant group), as PyTorch's std_backward does; the variance's own gradient is 0 there,
// and inf * 0 would be NaN.
Tensor std_of_variance(const Tensor& v) {
  Tensor y = kernels::unary(UnaryOp::Sqrt, v);
  record("std", {v}, {y}, {y}, [](const TensorList& g, const TensorList& s) {
    if (!g[0].defined()) return TensorList{Tensor()};
    const Tensor zero = eq(s[0], 0);
    return TensorList{where(zero, 0.0, div(g[0], mul(where(zero, 1.0, s[0]), 2.0)))};
  });
  return y;
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  Tensor y = kernels::reduce(ReduceOp::Sum, x, dims, keepdim);
  const Mask mask = kernels::reduction_mask("sum", dims, x.dim());
  record("sum", {x}, {y}, {}, [shape = x.shape(), mask, keepdim](const TensorList& g, const TensorList&) {
    return TensorList{unsqueeze_reduced(g[0], mask, keepdim).expand(shape)};
  });
  return y;
}

Tensor sum(const Tensor& x) { return sum(x, {}, false); }

Tensor mean(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  require_floating("mean", x);
  const Mask mask = kernels::reduction_mask("mean", dims, x.dim());
  return div(sum(x, dims, keepdim), static_cast<double>(reduced_count(x.shape(), mask)));
}

Tensor mean(const Tensor& x) { return mean(x, {}, false); }

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  return sum(x, kernels::sum_to_dims(x.shape(), shape), true).reshape(shape);
}

Tensor var(const Tensor& x, const std::vector<std::int64_t>& dims, double correction, bool keepdim) {
  require_floating("var", x);
  const Mask mask = kernels::reduction_mask("var", dims, x.dim());
  return downcast(variance(upcast(x), dims, mask, correction, keepdim), x.dtype());
}

Tensor std(const Tensor& x, const std::vector<std::int64_t>& dims, double correction, bool keepdim) {
  require_floating("std", x);
  const Mask mask = kernels::reduction_mask("std", dims, x.dim());
  return downcast(std_of_variance(variance(upcast(x), dims, mask, correction, keepdim)), x.dtype());
}

std::pair<Tensor, Tensor> var_mean(const Tensor& x, const std::vector<std::int64_t>& dims, double correction,
                                   bool keepdim) {
  require_floating("var_mean", x);
  kernels::reduction_mask("var_mean", dims, x.dim());  // IndexError for bad dims, named var_mean
  return {var(x, dims, correction, keepdim), mean(x, dims, keepdim)};
}

std::pair<Tensor, Tensor> std_mean(const Tensor& x, const std::vector<std::int64_t>& dims, double correction,
                                   bool keepdim) {
  require_floating("std_mean", x);
  kernels::reduction_mask("std_mean", dims, x.dim());  // IndexError for bad dims, named std_mean
  return {std(x, dims, correction, keepdim), mean(x, dims, keepdim)};
}

// NaN elements count as 0 (their gradient is 0); integers have no NaN and sum as sum() does.
Tensor nansum(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  kernels::reduction_mask("nansum", dims, x.dim());  // IndexError for bad dims, named nansum
  if (!is_floating_point(x.dtype())) return sum(x, dims, keepdim);
  return sum(where(isnan(x), 0.0, x), dims, keepdim);
}

// nansum over the number of non-NaN elements: NaN (0 / 0) where a group has none.
Tensor nanmean(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  require_floating("nanmean", x);
  kernels::reduction_mask("nanmean", dims, x.dim());  // IndexError for bad dims, named nanmean
  const Tensor present = kernels::reduce(ReduceOp::Sum, logical_not(isnan(x)), dims, keepdim);
  return div(nansum(x, dims, keepdim), present.to(x.dtype()));
}

Tensor amax(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  return extreme("amax", ReduceOp::Max, x, dims, keepdim);
}
Tensor amin(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  return extreme("amin", ReduceOp::Min, x, dims, keepdim);
}
Tensor max(const Tensor& x) { return extreme("max", ReduceOp::Max, x, {}, false); }
Tensor min(const Tensor& x) { return extreme("min", ReduceOp::Min, x, {}, false); }

ValuesIndices max(const Tensor& x, std::int64_t dim, bool keepdim) {
  return extreme_along("max", ReduceOp::Max, x, dim, keepdim);
}
ValuesIndices min(const Tensor& x, std::int64_t dim, bool keepdim) {
  return extreme_along("min", ReduceOp::Min, x, dim, keepdim);
}

Tensor argmax(const Tensor& x, std::optional<std::int64_t> dim, bool keepdim) {
  return kernels::arg_reduce("argmax", ReduceOp::Max, x, dim, keepdim).second;
}
Tensor argmin(const Tensor& x, std::optional<std::int64_t> dim, bool keepdim) {
  return kernels::arg_reduce("argmin", ReduceOp::Min, x, dim, keepdim).second;
}

Tensor prod(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  const Mask mask = kernels::reduction_mask("prod", dims, x.dim());
  Tensor y = kernels::reduce(ReduceOp::Prod, x, dims, keepdim);
  record("prod", {x}, {y}, {x, y}, [mask, keepdim](const TensorList& g, const TensorList& s) {
    if (!g[0].defined()) return TensorList{Tensor()};
    const Tensor grad = prod_grad(s[0], unsqueeze_reduced(s[1], mask, keepdim), mask);
    return TensorList{mul(unsqueeze_reduced(g[0], mask, keepdim), grad)};
  });
  return y;
}

Tensor logsumexp(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  if (const AutocastRegion cast(CastPolicy::kFloat32, x); cast) return logsumexp(cast(x), dims, keepdim);
  const Mask mask = kernels::reduction_mask("logsumexp", dims, x.dim());
  Tensor y = kernels::reduce(ReduceOp::LogSumExp, x, dims, keepdim);
  // d/dx_i = exp(x_i - y): the softmax of the group.
  record("logsumexp", {x}, {y}, {x, y}, [mask, keepdim](const TensorList& g, const TensorList& s) {
    if (!g[0].defined()) return TensorList{Tensor()};
    const Tensor softmax = exp(sub(s[0], unsqueeze_reduced(s[1], mask, keepdim)));
    return TensorList{mul(unsqueeze_reduced(g[0], mask, keepdim), softmax)};
  });
  return y;
}

Tensor all(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  return kernels::reduce(ReduceOp::All, x, dims, keepdim);
}
Tensor any(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  return kernels::reduce(ReduceOp::Any, x, dims, keepdim);
}

Tensor cumsum(const Tensor& x, std::int64_t dim) { return cumulative_sum(x, dim, false); }

Tensor cumprod(const Tensor& x, std::int64_t dim) {
  Tensor y = kernels::scan(ScanOp::Prod, x, dim);
  record("cumprod", {x}, {y}, {x, y}, [dim](const TensorList& g, const TensorList& s) {
    if (!g[0].defined()) return TensorList{Tensor()};
    return TensorList{cumprod_grad(g[0], s[0], s[1], dim)};
  });
  return y;
}

}  // namespace infini
