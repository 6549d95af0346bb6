// scatter_reduce (torch.scatter_reduce): src combined into self along dim by "sum", "prod",
// "mean", "amax" or "amin", with or without self's own element. The forward runs on
// infini.kernels' scatter (a fresh copy of self, its written elements first reset when
// self is excluded); the backward is PyTorch's, written with differentiable ops
// (gather, scatter_add, scatter's product), so create_graph gives second derivatives.
module;
#include <cstdint>
module infini.autograd;
import infini.std;

namespace infini {
namespace {

constexpr std::string_view kOp = "scatter_reduce";

enum class Reduce : std::uint8_t { Sum, Prod, Mean, Amax, Amin };

Reduce parse_reduce(std::string_view name) {
  if (name == "sum") return Reduce::Sum;
  if (name == "prod") return Reduce::Prod;
  if (name == "mean") return Reduce::Mean;
  if (name == "amax") return Reduce::Amax;
  if (name == "amin") return Reduce::Amin;
  throw Error(kOp,
              concat("unknown reduce \"", name, "\" (expected \"sum\", \"prod\", \"mean\", \"amax\" or \"amin\")"));
}

ScatterMode mode_of(Reduce reduce) {
  switch (reduce) {
    case Reduce::Sum:
    case Reduce::Mean: return ScatterMode::Add;
    case Reduce::Prod: return ScatterMode::Multiply;
    case Reduce::Amax: return ScatterMode::Amax;
    case Reduce::Amin: return ScatterMode::Amin;
  }
  return ScatterMode::Add;
}

// A constant of t's dtype and device spread over `shape` (a view, for a kernel to read).
Tensor constant(double value, const Shape& shape, const Tensor& like) {
  return full({}, value, {.dtype = like.dtype(), .device = like.device()}).expand(shape);
}

// How many src elements land on each element of self (self's shape and dtype `like`).
Tensor write_counts(std::int64_t dim, const Tensor& idx, const Shape& self_shape, const Tensor& like) {
  NoGradGuard no_grad;
  Tensor count = zeros(self_shape, {.dtype = like.dtype(), .device = like.device()});
  kernels::scatter_(kOp, count, dim, idx, constant(1, idx.shape(), like), ScatterMode::Add);
  return count;
}

// The result without history. Excluding self: the written elements first become the
// reduction's identity (0 for sums, 1 for products) or, for amax/amin, one of the values
// written there, so that any dtype works; "mean" then divides by the number of elements
// combined (floor division for integers), elements without any keeping self's value.
Tensor forward(const Tensor& self, std::int64_t dim, const Tensor& idx, const Tensor& src, Reduce reduce,
               bool include_self) {
  NoGradGuard no_grad;
  Tensor y = self.clone();
  if (!include_self) {
    if (reduce == Reduce::Amax || reduce == Reduce::Amin) kernels::scatter_(kOp, y, dim, idx, src, ScatterMode::Copy);
    else
      kernels::scatter_(kOp, y, dim, idx, constant(reduce == Reduce::Prod ? 1 : 0, idx.shape(), self),
                        ScatterMode::Copy);
  }
  kernels::scatter_(kOp, y, dim, idx, src, mode_of(reduce));
  if (reduce != Reduce::Mean) return y;
  Tensor count = write_counts(dim, idx, self.shape(), self);
  if (include_self) count = add(count, 1);
  const Tensor none = eq(count, 0), safe = where(none, constant(1, count.shape(), count), count);
  const Tensor mean = is_floating_point(self.dtype()) ? div(y, safe) : floor_divide(y, safe);
  return include_self ? mean : where(none, self, mean);
}

// t zero-padded at the end of each dim up to `shape` (src is larger than index there).
Tensor pad_to(const Tensor& t, const Shape& shape) {
  if (t.shape() == shape) return t;
  std::vector<std::int64_t> pads;
  for (std::int64_t d = t.dim() - 1; d >= 0; --d) {
    pads.push_back(0);
    pads.push_back(shape[d] - t.shape()[d]);
  }
  return pad(t, pads);
}

// The leading part of src (index's shape) that the scatter reads.
Tensor leading(const Tensor& src, const Shape& shape) {
  Tensor out = src;
  for (std::int64_t d = 0; d < src.dim(); ++d)
    if (shape[d] != src.shape()[d]) out = out.narrow(d, 0, shape[d]);
  return out;
}

struct Grads {
  Tensor self, src;  // src: of index's shape
};

// PyTorch's gradients of y = scatter_reduce(self, dim, idx, src, reduce, include_self)
// w.r.t. self and (the leading part of) src, for the elements combined: self's own element
// only when included (the caller passes g through where nothing is written otherwise).
Grads reduce_grads(Reduce reduce, bool include_self, const Tensor& g, std::int64_t dim, const Tensor& idx,
                   const Tensor& self, const Tensor& src, const Tensor& y, const Tensor& count) {
  switch (reduce) {
    case Reduce::Sum: return {g, gather(g, dim, idx)};
    case Reduce::Mean: {
      const Tensor n = include_self ? add(count, 1) : where(eq(count, 0), 1.0, count);
      const Tensor share = div(g, n);
      return {share, gather(share, dim, idx)};
    }
    case Reduce::Prod: {
      // The derivative w.r.t. one factor is the product of the others: the product of the
      // nonzero factors divided by it when none is zero; with exactly one zero, the product
      // of the nonzero ones for the zero and 0 for the rest; with more zeros, 0.
      const Tensor factor = include_self ? self : ones_like(g);
      const Tensor self_zero = eq(factor, 0), src_zero = eq(src, 0);
      const Tensor zero_count = scatter_add(self_zero.to(g.dtype()), dim, idx, src_zero.to(g.dtype()));
      const Tensor safe_self = where(self_zero, 1.0, factor), safe_src = where(src_zero, 1.0, src);
      const Tensor nonzero_product = scatter(safe_self, dim, idx, safe_src, ScatterReduce::Multiply);
      const Tensor no_zero = mul(nonzero_product, eq(zero_count, 0));
      const Tensor one_zero = mul(nonzero_product, eq(zero_count, 1));
      const Tensor g_self = mul(g, where(self_zero, one_zero, div(no_zero, safe_self)));
      const Tensor g_src = mul(gather(g, dim, idx),
                               where(src_zero, gather(one_zero, dim, idx), div(gather(no_zero, dim, idx), safe_src)));
      return {g_self, g_src};
    }
    case Reduce::Amax:
    case Reduce::Amin: {
      // Shared evenly by the combined elements equal to the result. Excluded, self counts
      // only where nothing lands (its share is then unused), so no 0 / 0 arises there.
      const Tensor self_hit = include_self ? eq(self, y) : eq(count, 0);
      const Tensor src_hit = eq(src, gather(y, dim, idx));
      const Tensor share = div(g, scatter_add(self_hit.to(g.dtype()), dim, idx, src_hit.to(g.dtype())));
      return {mul(share, self_hit), mul(gather(share, dim, idx), src_hit)};
    }
  }
  return {};
}

}  // namespace

Tensor scatter_reduce(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& src,
                      std::string_view reduce_name, bool include_self) {
  const Reduce reduce = parse_reduce(reduce_name);
  if (!self.defined() || !src.defined()) throw Error(kOp, "self and src must be defined tensors");
  if (reduce == Reduce::Mean && self.dtype() == kBool)
    throw DTypeError(kOp, "reduce \"mean\" is not supported for bool tensors");
  const Tensor idx = kernels::index_as_int64(kOp, index);
  Tensor y = forward(self, dim, idx, src, reduce, include_self);
  if (!any_needs_grad({self, src})) return unrecorded(kOp, self, src, y);
  const bool reads_values = reduce == Reduce::Prod || reduce == Reduce::Amax || reduce == Reduce::Amin;
  const Tensor none;
  record(kOp, {self, src}, {y},
         {idx, reads_values ? self : none, reads_values ? leading(src, idx.shape()) : none, reads_values ? y : none},
         [dim, reduce, include_self, self_shape = self.shape(), src_shape = src.shape(),
          need_self = self.requires_grad(), need_src = src.requires_grad()](const TensorList& g, const TensorList& s) {
           if (!g[0].defined()) return TensorList{Tensor(), Tensor()};
           const Tensor& idx = s[0];
           const Tensor count = write_counts(dim, idx, self_shape, g[0]);
           const Grads grads = reduce_grads(reduce, include_self, g[0], dim, idx, s[1], s[2], s[3], count);
           TensorList out(2);
           // Excluded, self's element passes through where nothing is written and is gone elsewhere.
           if (need_self) out[0] = include_self ? grads.self : where(eq(count, 0), g[0], 0.0);
           if (need_src) out[1] = pad_to(grads.src, src_shape);
           return out;
         });
  return y;
}

}  // namespace infini
