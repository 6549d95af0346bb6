// Order statistics along a dim (median, nanmedian, kthvalue, mode) and of all elements
// (median, nanmedian). Each slice is put in order by the stable sort (NaN last), a position
// in the sorted slice is picked per slice, and the input element there is gathered: its
// index is the one reported and the gradient flows to it through gather. Among equal values
// the stable order decides which index is reported (PyTorch leaves that unspecified, except
// mode's: the last occurrence). Of all elements, the gradient is split evenly among the
// elements equal to the result, like PyTorch's evenly_distribute_backward.
module;
#include <cstdint>
module infini.autograd;
import infini.std;

namespace infini {
namespace {

// The slices of x along dim in ascending order: x's sorted values (no history) and the
// positions in x they came from.
struct Sorted {
  Tensor values;
  Tensor order;  // int64
};

// Per slice of a sorted tensor (dim d kept, size 1): the position (int64) to pick.
using PickFn = std::function<Tensor(const Sorted& s, std::int64_t d)>;

// values and indices of the element at pick's sorted position in every slice along dim.
ValuesIndices select_sorted(std::string_view name, const Tensor& x, std::int64_t dim, bool keepdim,
                            const PickFn& pick) {
  const std::int64_t d = wrap_dim(name, dim, x.dim());
  if (x.dim() == 0) return select_sorted(name, x.reshape({1}), 0, false, pick);  // its own one-element slice
  if (x.shape()[d] == 0)
    throw IndexError(name, concat("cannot reduce over dimension ", d, " of size 0 (shape ", x.shape(), ")"));
  Tensor index;
  {
    NoGradGuard no_grad;
    Sorted s;
    s.order = kernels::argsort(name, x, d, false);
    s.values = gather(x, d, s.order);
    index = gather(s.order, d, pick(s, d));
  }
  Tensor values = gather(x, d, index);
  if (keepdim) return {values, index};
  return {values.squeeze(d), index.squeeze(d)};
}

// Per slice (dim d kept): the number of NaN elements, int64.
Tensor nan_count(const Tensor& sorted, std::int64_t d) {
  if (!is_floating_point(sorted.dtype())) {
    Shape kept = sorted.shape();
    kept[d] = 1;
    return zeros(kept, {.dtype = kInt64, .device = sorted.device()});
  }
  return sum(isnan(sorted), {d}, true);
}

// The lower middle of the slice, or its first NaN (NaN sorts last, so at n - nans).
Tensor median_position(const Sorted& s, std::int64_t d) {
  const std::int64_t n = s.values.shape()[d];
  const Tensor nans = nan_count(s.values, d);
  return where(gt(nans, 0), rsub(nans, n), full_like(nans, (n - 1) / 2));
}

// The lower middle of the non-NaN values; 0 (a NaN) when there are none.
Tensor nanmedian_position(const Sorted& s, std::int64_t d) {
  const Tensor present = rsub(nan_count(s.values, d), s.values.shape()[d]);
  return where(gt(present, 0), floor_divide(sub(present, 1), 2), 0);
}

// The end of the first longest run of equal values (NaNs are all distinct): the smallest
// mode, at its last occurrence in stable order.
Tensor mode_position(const Sorted& s, std::int64_t d) {
  const std::int64_t n = s.values.shape()[d];
  Shape line(static_cast<std::size_t>(s.values.dim()), 1);
  line[d] = n;
  const Tensor k = arange(n, {.dtype = kInt64, .device = s.values.device()}).view(line).expand(s.values.shape());
  const Tensor change = ne(s.values.narrow(d, 1, n - 1), s.values.narrow(d, 0, n - 1));  // between k and k + 1
  const Tensor edge = ones_like(s.values.narrow(d, 0, 1), TensorOptions{.dtype = kBool, .device = s.values.device()});
  const Tensor starts = cat({edge, change}, d), ends = cat({change, edge}, d);
  const Tensor run_start = cummax(where(starts, k, 0), d).values;
  const Tensor length = add(sub(k, run_start), 1);
  return argmax(where(ends, length, 0), d, true);
}

// Of all elements, through the along-dim form on the flattened x (NaN when x is empty);
// the gradient is shared evenly by the elements equal to the result (NaNs when it is NaN).
Tensor select_all(std::string_view name, const Tensor& x, const PickFn& pick) {
  Tensor y;
  if (x.numel() == 0) {
    if (!is_floating_point(x.dtype()))
      throw IndexError(name, concat("cannot take the ", name, " of an empty ", x.dtype(),
                                    " tensor: the result would be NaN"));
    y = full({}, std::numeric_limits<double>::quiet_NaN(), {.dtype = x.dtype(), .device = x.device()});
  } else {
    NoGradGuard no_grad;
    y = select_sorted(name, x.reshape({x.numel()}), 0, false, pick).values;
  }
  record(name, {x}, {y}, {x, y}, [](const TensorList& g, const TensorList& s) {
    if (!g[0].defined()) return TensorList{Tensor()};
    const Tensor ties = logical_or(eq(s[0], s[1]), logical_and(isnan(s[0]), isnan(s[1])));
    return TensorList{where(ties, div(g[0], sum(ties)), 0.0)};
  });
  return y;
}

}  // namespace

Tensor median(const Tensor& x) { return select_all("median", x, median_position); }
ValuesIndices median(const Tensor& x, std::int64_t dim, bool keepdim) {
  return select_sorted("median", x, dim, keepdim, median_position);
}

Tensor nanmedian(const Tensor& x) { return select_all("nanmedian", x, nanmedian_position); }
ValuesIndices nanmedian(const Tensor& x, std::int64_t dim, bool keepdim) {
  return select_sorted("nanmedian", x, dim, keepdim, nanmedian_position);
}

ValuesIndices kthvalue(const Tensor& x, std::int64_t k, std::int64_t dim, bool keepdim) {
  const std::int64_t d = wrap_dim("kthvalue", dim, x.dim());
  const std::int64_t n = x.dim() == 0 ? 1 : x.shape()[d];
  if (k < 1 || k > n)
    throw IndexError("kthvalue", concat("k = ", k, " is out of range for dimension ", d, " of size ", n, " (shape ",
                                        x.shape(), "); expected 1 <= k <= ", n));
  return select_sorted("kthvalue", x, dim, keepdim, [k](const Sorted& s, std::int64_t d) {
    Shape kept = s.order.shape();
    kept[d] = 1;
    return full(kept, k - 1, {.dtype = kInt64, .device = s.order.device()});
  });
}

ValuesIndices mode(const Tensor& x, std::int64_t dim, bool keepdim) {
  return select_sorted("mode", x, dim, keepdim, mode_position);
}

}  // namespace infini
