// Indexing ops: forward through infini.kernels' raw index ops, backward formulas written
// with these same differentiable ops (gather <-> scatter_add, index_select <-> index_add,
// scatter / index_fill of zeros where elements were overwritten), so create_graph works.
// Composite ops (take_along_dim, masks, Python-style indexing, sort, topk) get their
// gradients from the primitives they are built on.
module;
#include <cstdint>
module infini.autograd;
import infini.std;

namespace infini {
namespace {

Tensor zeros_for(const Shape& shape, const Tensor& like) {
  return zeros(shape, {.dtype = like.dtype(), .device = like.device()});
}

// A copy of t without history, for an out-of-place op to write into.
Tensor fresh_copy(const Tensor& t) {
  NoGradGuard no_grad;
  return t.clone();
}

// The leading part of t of `shape` (every dim narrowed from 0): the elements of a src
// that an index smaller than it covers.
Tensor leading(const Tensor& t, const Shape& shape) {
  Tensor out = t;
  for (std::int64_t d = 0; d < t.dim(); ++d)
    if (shape[d] != t.shape()[d]) out = out.narrow(d, 0, shape[d]);
  return out;
}

// t zero-padded at the end of each dim up to `shape` (the inverse of leading()).
Tensor pad_to(const Tensor& t, const Shape& shape) {
  if (t.shape() == shape) return t;
  std::vector<TensorIndex> region;
  for (std::int64_t n : t.shape()) region.emplace_back(indexing::Slice(0, n));
  return index_put(zeros_for(shape, t), region, t);
}

// In place: x = compute(x). Untracked, `raw` writes into x directly. Tracked (as in
// elementwise.cpp), the new value is computed out of place from a copy of x, written into
// x, and x takes over its history.
template <class Raw, class Compute>
Tensor& inplace(std::string_view op, Tensor& x, const TensorList& others, Raw raw, Compute compute) {
  bool tracked = x.requires_grad();
  for (const Tensor& t : others) tracked = tracked || (t.defined() && t.requires_grad());
  if (!GradMode::is_enabled() || !tracked) {
    raw();
    return x;
  }
  if (x.is_leaf() && x.requires_grad())
    throw Error(op, "a leaf tensor that requires grad is used in an in-place operation (wrap it in NoGradGuard)");
  if (x.has_autograd_meta() && x.autograd_meta().is_view_of_graph)
    throw Error(op, "in-place write into a view of a tensor that requires grad is not supported (clone() the view)");
  const Tensor value = compute(x.clone());
  {
    NoGradGuard no_grad;
    x.copy_(value.detach());  // checks writability and bumps the version
  }
  if (value.grad_fn()) {
    AutogradMeta& meta = x.autograd_meta();
    meta.grad_fn = value.grad_fn();
    meta.output_nr = value.output_nr();
  }
  return x;
}

ScatterMode mode_of(std::optional<ScatterReduce> reduce) {
  if (!reduce) return ScatterMode::Copy;
  switch (*reduce) {
    case ScatterReduce::Add: return ScatterMode::Add;
    case ScatterReduce::Multiply: return ScatterMode::Multiply;
    case ScatterReduce::Amax: return ScatterMode::Amax;
    case ScatterReduce::Amin: return ScatterMode::Amin;
  }
  return ScatterMode::Copy;
}

// ---- scatter along a dim ----

// Gradients w.r.t. (self, src) of y = scatter(self, dim, index, src, reduce), src of
// index's shape.
TensorList scatter_reduce_grads(ScatterReduce reduce, const Tensor& g, std::int64_t dim, const Tensor& index,
                                const Tensor& self, const Tensor& src, const Tensor& y) {
  switch (reduce) {
    case ScatterReduce::Add: return {g, gather(g, dim, index)};
    case ScatterReduce::Multiply: {
      // The derivative w.r.t. one factor is the product of the others: y / x when no factor
      // is zero; with exactly one zero, the product of the nonzero ones for it and 0 for the
      // rest; with more zeros, 0.
      const Tensor self_zero = eq(self, 0), src_zero = eq(src, 0);
      const Tensor zero_count = scatter_add(self_zero.to(g.dtype()), dim, index, src_zero.to(g.dtype()));
      const Tensor safe_self = where(self_zero, 1.0, self), safe_src = where(src_zero, 1.0, src);
      const Tensor product = scatter(safe_self, dim, index, safe_src, ScatterReduce::Multiply);  // of nonzeros
      const Tensor no_zero = mul(product, eq(zero_count, 0)), one_zero = mul(product, eq(zero_count, 1));
      const Tensor g_self = mul(g, where(self_zero, one_zero, div(no_zero, safe_self)));
      const Tensor g_src = mul(gather(g, dim, index),
                               where(src_zero, gather(one_zero, dim, index), div(gather(no_zero, dim, index), safe_src)));
      return {g_self, g_src};
    }
    case ScatterReduce::Amax:
    case ScatterReduce::Amin: {
      // Shared evenly by the contributors equal to the result.
      const Tensor self_hit = eq(self, y), src_hit = eq(src, gather(y, dim, index));
      const Tensor count = scatter_add(self_hit.to(g.dtype()), dim, index, src_hit.to(g.dtype()));
      const Tensor share = div(g, count);
      return {mul(share, self_hit), mul(gather(share, dim, index), src_hit)};
    }
  }
  return {};
}

Tensor scatter_impl(std::string_view op, const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& src,
                    std::optional<ScatterReduce> reduce) {
  Tensor y = fresh_copy(self);
  kernels::scatter_(op, y, dim, index, src, mode_of(reduce));
  if (!any_needs_grad({self, src})) return y;
  const Tensor idx = kernels::index_as_int64(op, index);
  const bool reads_values = reduce && *reduce != ScatterReduce::Add;
  const Tensor none;
  record(op, {self, src}, {y}, {idx, reads_values ? self : none, reads_values ? src : none, reads_values ? y : none},
         [dim, reduce, src_shape = src.shape(), need_self = self.requires_grad(),
          need_src = src.requires_grad()](const TensorList& g, const TensorList& s) {
           if (!g[0].defined()) return TensorList{Tensor(), Tensor()};
           const Tensor& idx = s[0];
           TensorList grads(2);
           if (!reduce) {
             if (need_self) grads[0] = scatter(g[0], dim, idx, Scalar(0.0));
             if (need_src) grads[1] = gather(g[0], dim, idx);
           } else {
             const Tensor src_part = s[2].defined() ? leading(s[2], idx.shape()) : s[2];
             grads = scatter_reduce_grads(*reduce, g[0], dim, idx, s[1], src_part, s[3]);
           }
           // Only the leading part of src that index covers was written.
           return TensorList{need_self ? grads[0] : Tensor(), need_src ? pad_to(grads[1], src_shape) : Tensor()};
         });
  return y;
}

Tensor scatter_value_impl(std::string_view op, const Tensor& self, std::int64_t dim, const Tensor& index,
                          const Scalar& value) {
  const Tensor idx = kernels::index_as_int64(op, index);
  Tensor y = fresh_copy(self);
  kernels::scatter_(op, y, dim, idx, scalar_tensor(value, {.dtype = self.dtype(), .device = self.device()}).expand(idx.shape()),
                    ScatterMode::Copy);
  record(op, {self}, {y}, {idx}, [dim](const TensorList& g, const TensorList& s) {
    return TensorList{g[0].defined() ? scatter(g[0], dim, s[0], Scalar(0.0)) : Tensor()};
  });
  return y;
}

// ---- slices along a dim ----

Tensor index_select_impl(std::string_view op, const Tensor& self, std::int64_t dim, const Tensor& index) {
  Tensor y = kernels::index_select(op, self, dim, index);
  if (!any_needs_grad({self})) return y;
  record(op, {self}, {y}, {kernels::index_as_int64(op, index)},
         [dim, shape = self.shape()](const TensorList& g, const TensorList& s) {
           if (!g[0].defined()) return TensorList{Tensor()};
           if (GradMode::is_enabled()) return TensorList{index_add(zeros_for(shape, g[0]), dim, s[0], g[0])};
           // No graph needed: scattered into in place, into the leaf's gradient itself when
           // it may be (an embedding table's, every micro-batch after the first).
           Tensor grad = autograd::accumulation_target(0);
           if (!grad.defined()) grad = zeros_for(shape, g[0]);
           kernels::index_scatter_("index_select", grad, dim, s[0], g[0], ScatterMode::Add);
           return TensorList{grad};
         });
  return y;
}

// index_add (Add) and index_copy (Copy) of source into a copy of self.
Tensor index_scatter_impl(std::string_view op, const Tensor& self, std::int64_t dim, const Tensor& index,
                          const Tensor& source, ScatterMode mode) {
  Tensor y = fresh_copy(self);
  kernels::index_scatter_(op, y, dim, index, source, mode);
  if (!any_needs_grad({self, source})) return y;
  record(op, {self, source}, {y}, {kernels::index_as_int64(op, index)},
         [dim, mode, need_self = self.requires_grad(), need_source = source.requires_grad()](const TensorList& g,
                                                                                            const TensorList& s) {
           if (!g[0].defined()) return TensorList{Tensor(), Tensor()};
           Tensor g_self, g_source;
           if (need_self) g_self = mode == ScatterMode::Add ? g[0] : index_fill(g[0], dim, s[0], 0.0);
           if (need_source) g_source = index_select(g[0], dim, s[0]);
           return TensorList{g_self, g_source};
         });
  return y;
}

// value as a source for index_scatter_: self's shape with index's length along dim.
Tensor fill_source(std::string_view op, const Tensor& self, std::int64_t dim, const Tensor& index,
                   const Scalar& value) {
  Shape shape = self.shape();
  if (self.dim() > 0) shape[wrap_dim(op, dim, self.dim())] = index.numel();
  return scalar_tensor(value, {.dtype = self.dtype(), .device = self.device()}).expand(shape);
}

Tensor index_fill_impl(std::string_view op, const Tensor& self, std::int64_t dim, const Tensor& index,
                       const Scalar& value) {
  const Tensor idx = kernels::index_as_int64(op, index);
  Tensor y = fresh_copy(self);
  kernels::index_scatter_(op, y, dim, idx, fill_source(op, self, dim, idx, value), ScatterMode::Copy);
  record(op, {self}, {y}, {idx}, [dim](const TensorList& g, const TensorList& s) {
    return TensorList{g[0].defined() ? index_fill(g[0], dim, s[0], 0.0) : Tensor()};
  });
  return y;
}

// ---- masks ----

void check_mask(std::string_view op, const Tensor& self, const Tensor& mask) {
  if (mask.dtype() != kBool) throw DTypeError(op, concat("the mask must be bool, got ", mask.dtype()));
  if (mask.device() != self.device())
    throw DeviceError(op, concat("mask on ", mask.device(), " for a tensor on ", self.device()));
}

// Row-major positions (1-d int64) of mask's true elements.
Tensor true_positions(std::string_view op, const Tensor& mask) {
  return kernels::nonzero(op, mask.reshape({-1})).view({-1});
}

Tensor masked_scatter_impl(std::string_view op, const Tensor& self, const Tensor& mask, const Tensor& source) {
  check_mask(op, self, mask);
  if (source.dtype() != self.dtype())
    throw DTypeError(op, concat("expected source of the tensor's dtype ", self.dtype(), ", got ", source.dtype()));
  if (broadcast_shapes(op, mask.shape(), self.shape()) != self.shape())
    throw ShapeError(op, concat("mask of shape ", mask.shape(), " does not broadcast to ", self.shape()));
  const Tensor positions = true_positions(op, mask.expand(self.shape()));
  const std::int64_t n = positions.numel();
  if (source.numel() < n)
    throw ShapeError(op, concat("source of shape ", source.shape(), " has ", source.numel(), " elements but the mask selects ", n));
  return index_scatter_impl(op, self.reshape({-1}), 0, positions, source.reshape({-1}).narrow(0, 0, n), ScatterMode::Copy)
      .view(self.shape());
}

// ---- Python-style indexing ----

std::int64_t product(const Shape& shape) {
  std::int64_t n = 1;
  for (std::int64_t s : shape) n *= s;
  return n;
}

void check_values(std::string_view op, const Tensor& self, const Tensor& values, const Shape& result_shape) {
  if (values.dtype() != self.dtype())
    throw DTypeError(op, concat("expected values of the tensor's dtype ", self.dtype(), ", got ", values.dtype()));
  if (values.device() != self.device())
    throw DeviceError(op, concat("values on ", values.device(), " for a tensor on ", self.device()));
  if (broadcast_shapes(op, values.shape(), result_shape) != result_shape)
    throw ShapeError(op, concat("values of shape ", values.shape(), " do not broadcast to the indexed shape ",
                                result_shape));
}

// Out of place, differentiable: the elements' row-major positions in self, then one
// index_copy / index_add over self flattened (in result order: the last duplicate wins).
Tensor index_put_impl(std::string_view op, const Tensor& self, const std::vector<TensorIndex>& indices,
                      const Tensor& values, bool accumulate) {
  const Tensor geometry = self.is_contiguous() ? self.detach() : empty(self.shape(), {.dtype = kUInt8, .device = self.device()});
  const kernels::IndexPlan plan = kernels::plan_index(op, geometry, indices);
  check_values(op, self, values, plan.result_shape);
  const Tensor positions = kernels::index_offsets(plan, geometry.storage_offset()).reshape({-1});
  return index_scatter_impl(op, self.reshape({-1}), 0, positions, values.expand(plan.result_shape).reshape({-1}),
                            accumulate ? ScatterMode::Add : ScatterMode::Copy)
      .view(self.shape());
}

// In place, untracked: writes into self through the plan's view.
void index_put_raw(std::string_view op, const Tensor& self, const std::vector<TensorIndex>& indices,
                   const Tensor& values_in, bool accumulate) {
  NoGradGuard no_grad;
  if (kernels::may_have_internal_overlap(self))
    throw Error(op, concat("cannot write into a tensor of shape ", self.shape(), " and strides ", self.strides(),
                           ": several elements share one memory location (clone() it first)"));
  const kernels::IndexPlan plan = kernels::plan_index(op, self, indices);
  check_values(op, self, values_in, plan.result_shape);
  const Tensor values = values_in.storage().is_same(self.storage()) ? values_in.clone() : values_in;
  const ScatterMode mode = accumulate ? ScatterMode::Add : ScatterMode::Copy;
  if (plan.dims.empty()) {  // basic indexing only: a view of self
    Tensor view = plan.view;
    if (accumulate) kernels::accumulate_(view, values);
    else view.copy_(values);
    return;
  }
  const Tensor spread = values.expand(plan.result_shape);
  if (plan.dims.size() == 1) {  // slices along one dim of the view, index_shape flattened
    const std::int64_t d = plan.dims[0];
    Shape shape = plan.view.shape();
    shape[d] = product(plan.index_shape);
    kernels::index_scatter_(op, plan.view, d, plan.indices[0].reshape({-1}), spread.reshape(shape), mode);
    return;
  }
  // Several index tensors: storage offsets into a 1-d view spanning self.
  if (self.numel() == 0) return;
  std::int64_t extent = 1;
  for (std::int64_t d = 0; d < self.dim(); ++d) extent += (self.shape()[d] - 1) * self.strides()[d];
  const Tensor span(self.storage(), {extent}, {1}, self.storage_offset(), self.dtype());
  kernels::index_scatter_(op, span, 0, kernels::index_offsets(plan, self.storage_offset()).reshape({-1}),
                          spread.reshape({-1}), mode);
}

Tensor& index_put_inplace(std::string_view op, Tensor& self, const std::vector<TensorIndex>& indices,
                          const Tensor& values, bool accumulate) {
  return inplace(
      op, self, {values}, [&] { index_put_raw(op, self, indices, values, accumulate); },
      [&](const Tensor& old) { return index_put_impl(op, old, indices, values, accumulate); });
}

std::vector<TensorIndex> as_indices(const TensorList& tensors) { return {tensors.begin(), tensors.end()}; }

Tensor scalar_like(const Scalar& value, const Tensor& self) {
  return scalar_tensor(value, {.dtype = self.dtype(), .device = self.device()});
}

}  // namespace

// ---- gathers ----

Tensor index_select(const Tensor& self, std::int64_t dim, const Tensor& index) {
  return index_select_impl("index_select", self, dim, index);
}

Tensor gather(const Tensor& self, std::int64_t dim, const Tensor& index) {
  Tensor y = kernels::gather("gather", self, dim, index);
  if (!any_needs_grad({self})) return y;
  record("gather", {self}, {y}, {kernels::index_as_int64("gather", index)},
         [dim, shape = self.shape()](const TensorList& g, const TensorList& s) {
           return TensorList{g[0].defined() ? scatter_add(zeros_for(shape, g[0]), dim, s[0], g[0]) : Tensor()};
         });
  return y;
}

Tensor take_along_dim(const Tensor& self, const Tensor& indices, std::optional<std::int64_t> dim) {
  constexpr std::string_view op = "take_along_dim";
  const Tensor idx = kernels::index_as_int64(op, indices);
  if (!dim) {
    kernels::check_index_range(op, idx, 0, self.numel());
    return gather(self.reshape({-1}), 0, idx.reshape({-1}));
  }
  if (idx.dim() != self.dim())
    throw ShapeError(op, concat("input of shape ", self.shape(), " and indices of shape ", idx.shape(),
                                " must have the same number of dims"));
  const std::int64_t d = wrap_dim(op, *dim, self.dim());
  kernels::check_index_range(op, idx, d, self.dim() == 0 ? 1 : self.shape()[d]);
  if (self.dim() == 0) return gather(self, 0, idx);
  // Broadcast every dim but d.
  Shape a = self.shape(), b = idx.shape();
  a[d] = b[d] = 1;
  Shape self_shape = broadcast_shapes(op, a, b), index_shape = self_shape;
  self_shape[d] = self.shape()[d];
  index_shape[d] = idx.shape()[d];
  return gather(self.expand(self_shape), d, idx.expand(index_shape));
}

// ---- scatters ----

Tensor scatter(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& src) {
  return scatter_impl("scatter", self, dim, index, src, std::nullopt);
}
Tensor scatter(const Tensor& self, std::int64_t dim, const Tensor& index, const Scalar& value) {
  return scatter_value_impl("scatter", self, dim, index, value);
}
Tensor scatter(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& src, ScatterReduce reduce) {
  return scatter_impl("scatter", self, dim, index, src, reduce);
}
Tensor scatter_add(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& src) {
  return scatter_impl("scatter_add", self, dim, index, src, ScatterReduce::Add);
}

Tensor& scatter_(Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& src) {
  return inplace(
      "scatter_", self, {src}, [&] { kernels::scatter_("scatter_", self, dim, index, src, ScatterMode::Copy); },
      [&](const Tensor& old) { return scatter_impl("scatter_", old, dim, index, src, std::nullopt); });
}
Tensor& scatter_(Tensor& self, std::int64_t dim, const Tensor& index, const Scalar& value) {
  return inplace(
      "scatter_", self, {},
      [&] {
        const Tensor idx = kernels::index_as_int64("scatter_", index);
        kernels::scatter_("scatter_", self, dim, idx, scalar_like(value, self).expand(idx.shape()), ScatterMode::Copy);
      },
      [&](const Tensor& old) { return scatter_value_impl("scatter_", old, dim, index, value); });
}
Tensor& scatter_(Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& src, ScatterReduce reduce) {
  return inplace(
      "scatter_", self, {src}, [&] { kernels::scatter_("scatter_", self, dim, index, src, mode_of(reduce)); },
      [&](const Tensor& old) { return scatter_impl("scatter_", old, dim, index, src, reduce); });
}
Tensor& scatter_add_(Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& src) {
  return inplace(
      "scatter_add_", self, {src}, [&] { kernels::scatter_("scatter_add_", self, dim, index, src, ScatterMode::Add); },
      [&](const Tensor& old) { return scatter_impl("scatter_add_", old, dim, index, src, ScatterReduce::Add); });
}

Tensor index_add(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha) {
  const Tensor scaled = alpha.to<double>() == 1 ? source : mul(source, alpha);
  return index_scatter_impl("index_add", self, dim, index, scaled, ScatterMode::Add);
}
Tensor index_copy(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& source) {
  return index_scatter_impl("index_copy", self, dim, index, source, ScatterMode::Copy);
}
Tensor index_fill(const Tensor& self, std::int64_t dim, const Tensor& index, const Scalar& value) {
  return index_fill_impl("index_fill", self, dim, index, value);
}

Tensor& index_add_(Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha) {
  const Tensor scaled = alpha.to<double>() == 1 ? source : mul(source, alpha);
  return inplace(
      "index_add_", self, {scaled},
      [&] { kernels::index_scatter_("index_add_", self, dim, index, scaled, ScatterMode::Add); },
      [&](const Tensor& old) { return index_scatter_impl("index_add_", old, dim, index, scaled, ScatterMode::Add); });
}
Tensor& index_copy_(Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& source) {
  return inplace(
      "index_copy_", self, {source},
      [&] { kernels::index_scatter_("index_copy_", self, dim, index, source, ScatterMode::Copy); },
      [&](const Tensor& old) { return index_scatter_impl("index_copy_", old, dim, index, source, ScatterMode::Copy); });
}
Tensor& index_fill_(Tensor& self, std::int64_t dim, const Tensor& index, const Scalar& value) {
  return inplace(
      "index_fill_", self, {},
      [&] {
        const Tensor idx = kernels::index_as_int64("index_fill_", index);
        kernels::index_scatter_("index_fill_", self, dim, idx, fill_source("index_fill_", self, dim, idx, value),
                                ScatterMode::Copy);
      },
      [&](const Tensor& old) { return index_fill_impl("index_fill_", old, dim, index, value); });
}

// ---- masks ----

Tensor masked_select(const Tensor& self, const Tensor& mask) {
  constexpr std::string_view op = "masked_select";
  check_mask(op, self, mask);
  const Shape shape = broadcast_shapes(op, self.shape(), mask.shape());
  return index_select_impl(op, self.expand(shape).reshape({-1}), 0, true_positions(op, mask.expand(shape)));
}

Tensor masked_scatter(const Tensor& self, const Tensor& mask, const Tensor& source) {
  return masked_scatter_impl("masked_scatter", self, mask, source);
}

Tensor& masked_scatter_(Tensor& self, const Tensor& mask, const Tensor& source) {
  return inplace(
      "masked_scatter_", self, {source},
      [&] {
        NoGradGuard no_grad;
        const Tensor y = masked_scatter_impl("masked_scatter_", self, mask, source);
        self.copy_(y);
      },
      [&](const Tensor& old) { return masked_scatter_impl("masked_scatter_", old, mask, source); });
}

Tensor nonzero(const Tensor& self) { return kernels::nonzero("nonzero", self); }

// ---- Python-style indexing ----

Tensor index(const Tensor& self, std::initializer_list<TensorIndex> indices) {
  return index(self, std::vector<TensorIndex>(indices));
}

Tensor index(const Tensor& self, const std::vector<TensorIndex>& indices) {
  constexpr std::string_view op = "index";
  const kernels::IndexPlan plan = kernels::plan_index(op, self, indices);
  if (plan.dims.empty()) return plan.view;
  if (plan.dims.size() == 1)  // slices along one dim; index_shape takes its place
    return index_select_impl(op, plan.view, plan.dims[0], plan.indices[0].reshape({-1})).reshape(plan.result_shape);
  // Several index tensors: move their dims to the front, merge them into one, and select
  // rows by the row-major position the indices name in the merged dim.
  std::vector<std::int64_t> order = plan.dims;
  Shape merged{1};
  for (std::int64_t d : plan.dims) merged[0] *= plan.view.shape()[d];
  for (std::int64_t d = 0, j = 0; d < plan.view.dim(); ++d) {
    if (j < static_cast<std::int64_t>(plan.dims.size()) && plan.dims[j] == d) {
      ++j;
      continue;
    }
    order.push_back(d);
    merged.push_back(plan.view.shape()[d]);
  }
  Tensor position = plan.indices[0];
  {
    NoGradGuard no_grad;
    for (std::size_t j = 1; j < plan.dims.size(); ++j)
      position = kernels::binary(BinaryOp::Add, kernels::binary(BinaryOp::Mul, position, plan.view.shape()[plan.dims[j]]),
                                 plan.indices[j]);
  }
  const Tensor rows = plan.view.permute(order).reshape(merged);
  Shape front = plan.index_shape;  // index dims first, then the others
  front.insert(front.end(), merged.begin() + 1, merged.end());
  const Tensor picked = index_select_impl(op, rows, 0, position.reshape({-1})).reshape(front);
  if (plan.position == 0) return picked;
  const std::int64_t index_rank = static_cast<std::int64_t>(plan.index_shape.size());
  std::vector<std::int64_t> back;  // others before `position`, index dims, the remaining others
  for (std::int64_t k = 0; k < plan.position; ++k) back.push_back(index_rank + k);
  for (std::int64_t k = 0; k < index_rank; ++k) back.push_back(k);
  for (std::int64_t k = index_rank + plan.position; k < static_cast<std::int64_t>(front.size()); ++k) back.push_back(k);
  return picked.permute(back);
}

Tensor index_put(const Tensor& self, std::initializer_list<TensorIndex> indices, const Tensor& values, bool accumulate) {
  return index_put_impl("index_put", self, std::vector<TensorIndex>(indices), values, accumulate);
}
Tensor index_put(const Tensor& self, const std::vector<TensorIndex>& indices, const Tensor& values, bool accumulate) {
  return index_put_impl("index_put", self, indices, values, accumulate);
}
Tensor index_put(const Tensor& self, const TensorList& indices, const Tensor& values, bool accumulate) {
  return index_put_impl("index_put", self, as_indices(indices), values, accumulate);
}

Tensor& index_put_(Tensor& self, std::initializer_list<TensorIndex> indices, const Tensor& values, bool accumulate) {
  return index_put_inplace("index_put_", self, std::vector<TensorIndex>(indices), values, accumulate);
}
Tensor& index_put_(Tensor& self, const std::vector<TensorIndex>& indices, const Tensor& values, bool accumulate) {
  return index_put_inplace("index_put_", self, indices, values, accumulate);
}
Tensor& index_put_(Tensor& self, const TensorList& indices, const Tensor& values, bool accumulate) {
  return index_put_inplace("index_put_", self, as_indices(indices), values, accumulate);
}
Tensor& index_put_(Tensor& self, std::initializer_list<TensorIndex> indices, const Scalar& value) {
  return index_put_inplace("index_put_", self, std::vector<TensorIndex>(indices), scalar_like(value, self), false);
}
Tensor& index_put_(Tensor& self, const std::vector<TensorIndex>& indices, const Scalar& value) {
  return index_put_inplace("index_put_", self, indices, scalar_like(value, self), false);
}

// ---- sorting and selection ----

SortResult sort(const Tensor& self, std::int64_t dim, bool descending, bool) {
  const Tensor indices = kernels::argsort("sort", self, dim, descending);
  return {gather(self, dim, indices), indices};
}

Tensor argsort(const Tensor& self, std::int64_t dim, bool descending, bool) {
  return kernels::argsort("argsort", self, dim, descending);
}

SortResult topk(const Tensor& self, std::int64_t k, std::int64_t dim, bool largest, bool sorted) {
  const Tensor indices = kernels::topk_indices("topk", self, k, dim, largest, sorted);
  if (self.dim() == 0)  // k is 0 or 1: the element itself, or nothing
    return {self.reshape({1}).narrow(0, 0, k).reshape(indices.shape()), indices};
  return {gather(self, dim, indices), indices};
}

UniqueResult unique(const Tensor& self, bool sorted, bool return_inverse, bool return_counts) {
  UniqueOutputs r = kernels::unique("unique", self, sorted);
  return {r.values, return_inverse ? r.inverse : Tensor(), return_counts ? r.counts : Tensor()};
}

Tensor one_hot(const Tensor& index, std::int64_t num_classes) {
  constexpr std::string_view op = "one_hot";
  NoGradGuard no_grad;
  const Tensor idx = kernels::index_as_int64(op, index);
  if (num_classes < -1) throw ShapeError(op, concat("num_classes must be -1 or non-negative, got ", num_classes));
  if (num_classes == -1) {
    if (idx.numel() == 0)
      throw ShapeError(op, "cannot infer the number of classes from an empty tensor (pass num_classes)");
    num_classes = std::max<std::int64_t>(kernels::reduce(ReduceOp::Max, idx).item<std::int64_t>() + 1, 0);
  }
  if (const auto bad = kernels::find_index_outside(idx, 0, num_classes))
    throw IndexError(op, concat("index ", *bad, " is out of bounds for dimension ", idx.dim(),
                                " (the class dimension) with size ", num_classes));
  Shape shape = idx.shape();
  shape.push_back(num_classes);
  Tensor out = zeros(shape, {.dtype = kInt64, .device = idx.device()});
  const Tensor column = idx.unsqueeze(-1);
  kernels::scatter_(op, out, -1, column, ones({}, {.dtype = kInt64, .device = idx.device()}).expand(column.shape()),
                    ScatterMode::Copy);
  return out;
}

Tensor multinomial(const Tensor& probs, std::int64_t num_samples, bool replacement, Generator* generator) {
  return kernels::multinomial("multinomial", probs, num_samples, replacement, generator);
}

}  // namespace infini
