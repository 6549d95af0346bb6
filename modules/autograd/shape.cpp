// Shape and copy ops. Joins copy each input into a slice of the result; repeats copy an
// expanded view; flip, roll, reflect/replicate pad and repeat_interleave with counts gather
// through index tables (kernels::gather_dims). Backward formulas use differentiable ops:
// slices of the gradient, sums over the repeated dims, the inverse flip/roll/crop, or the
// scatter-add adjoint of a gather (which sums where an entry was picked more than once).
module;
#include <cstdint>
module infini.autograd;
import infini.std;

namespace infini {
namespace {

using kernels::DimIndex;

Tensor gather_along(std::string_view op, const Tensor& x, std::vector<DimIndex> index);

// The adjoint of a one-dim gather (kernels::scatter_add_dim); differentiable: its gradient
// gathers again.
Tensor scatter_add_along(const Tensor& x, std::int64_t dim, const std::vector<std::int64_t>& index, std::int64_t size) {
  Tensor y = kernels::scatter_add_dim("scatter_add_dim", x, dim, index, size);
  if (!any_needs_grad({x})) return y;
  record("scatter_add_dim", {x}, {y}, {}, [dim, index](const TensorList& g, const TensorList&) {
    return TensorList{g[0].defined() ? gather_along("gather_dims", g[0], {{dim, index}}) : Tensor()};
  });
  return y;
}

// x gathered through index tables over wrapped dims, recorded as `op`; the gradient
// scatter-adds back along each indexed dim in turn (the tables act on separate dims).
Tensor gather_along(std::string_view op, const Tensor& x, std::vector<DimIndex> index) {
  Tensor y = kernels::gather_dims(op, x, index);
  if (!any_needs_grad({x})) return y;
  record(op, {x}, {y}, {}, [index = std::move(index), shape = x.shape()](const TensorList& g, const TensorList&) {
    if (!g[0].defined()) return TensorList{Tensor()};
    Tensor gx = g[0];
    for (const DimIndex& t : index) gx = scatter_add_along(gx, t.dim, t.index, shape[t.dim]);
    return TensorList{gx};
  });
  return y;
}

// Error unless every tensor is defined and shares the first one's dtype and device.
void check_same_kind(std::string_view op, const TensorList& tensors) {
  if (tensors.empty()) throw ShapeError(op, "expected a non-empty list of tensors");
  for (std::size_t i = 0; i < tensors.size(); ++i)
    if (!tensors[i].defined()) throw Error(op, concat("tensor at position ", i, " is undefined"));
  const Tensor& first = tensors[0];
  for (std::size_t i = 1; i < tensors.size(); ++i) {
    if (tensors[i].dtype() != first.dtype())
      throw DTypeError(op, concat("expected all tensors of dtype ", first.dtype(), ", got ", tensors[i].dtype(),
                                  " at position ", i));
    if (tensors[i].device() != first.device())
      throw DeviceError(op, concat("expected all tensors on ", first.device(), ", got ", tensors[i].device(),
                                   " at position ", i));
  }
}

// a * b; ShapeError (from op) when it overflows int64.
std::int64_t checked_mul(std::string_view op, std::int64_t a, std::int64_t b) {
  std::int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) throw ShapeError(op, concat("size ", a, " x ", b, " overflows int64"));
  return product;
}

Tensor triangle(std::string_view op, const Tensor& x, std::int64_t diagonal, bool lower) {
  if (x.dim() < 2) throw ShapeError(op, concat("expects a tensor with >= 2 dims, got shape ", x.shape()));
  const std::int64_t rows = x.size(-2), cols = x.size(-1);
  Tensor y;
  {
    NoGradGuard no_grad;
    const TensorOptions index_options{.dtype = kInt64, .device = x.device()};
    // keep (rows, cols): entry (i, j) stays where j <= i + diagonal (lower) or j >= i + diagonal
    const Tensor j = arange(cols, index_options);
    const Tensor i_plus = kernels::binary(BinaryOp::Add, arange(rows, index_options), Scalar(diagonal)).view({rows, 1});
    const Tensor keep = kernels::binary(lower ? BinaryOp::Le : BinaryOp::Ge, j, i_plus);
    y = kernels::where(keep, x, scalar_tensor(0, {.dtype = x.dtype(), .device = x.device()}));
  }
  record(op, {x}, {y}, {}, [op, diagonal, lower](const TensorList& g, const TensorList&) {
    return TensorList{g[0].defined() ? triangle(op, g[0], diagonal, lower) : Tensor()};
  });
  return y;
}

// x's shape with pads (last dim first) added; ShapeError when a size overflows or goes negative.
Shape padded_shape(const Tensor& x, const std::vector<std::int64_t>& pads) {
  Shape shape = x.shape();
  for (std::size_t i = 0; i < pads.size() / 2; ++i) {
    const std::int64_t d = x.dim() - 1 - static_cast<std::int64_t>(i);
    std::int64_t size = 0;
    if (__builtin_add_overflow(shape[d], pads[2 * i], &size) || __builtin_add_overflow(size, pads[2 * i + 1], &size))
      throw ShapeError("pad", concat("padding ", pads, " overflows dimension ", d, " of size ", shape[d]));
    if (size < 0)
      throw ShapeError("pad", concat("padding ", pads, " makes dimension ", d, " of the input of shape ", x.shape(),
                                     " negative (", size, ")"));
    shape[d] = size;
  }
  checked_numel("pad", shape);
  return shape;
}

// Constant padding; negative pads crop. The gradient is the opposite padding with zeros.
Tensor pad_constant(const Tensor& x, const std::vector<std::int64_t>& pads, const Scalar& value) {
  Tensor y = full(padded_shape(x, pads), value, {.dtype = x.dtype(), .device = x.device()});
  {
    NoGradGuard no_grad;
    // The entries of x that survive cropping (src) and where they land in y (dst):
    // along dim d, x's entry i is y's entry i + left.
    Tensor src = x, dst = y;
    bool overlap = true;
    for (std::size_t i = 0; i < pads.size() / 2 && overlap; ++i) {
      const std::int64_t d = x.dim() - 1 - static_cast<std::int64_t>(i);
      const std::int64_t n = x.size(d), left = pads[2 * i], right = pads[2 * i + 1];
      const std::int64_t lo = std::max<std::int64_t>(0, -left), hi = std::min(n, n + right);
      overlap = hi > lo;
      if (!overlap) break;
      src = src.narrow(d, lo, hi - lo);
      dst = dst.narrow(d, lo + left, hi - lo);
    }
    if (overlap) dst.copy_(src);
  }
  std::vector<std::int64_t> inverse(pads.size());
  std::ranges::transform(pads, inverse.begin(), [](std::int64_t p) { return -p; });
  record("pad", {x}, {y}, {}, [inverse](const TensorList& g, const TensorList&) {
    return TensorList{g[0].defined() ? pad_constant(g[0], inverse, 0) : Tensor()};
  });
  return y;
}

// Index table of a reflect or replicate pad of a dim of size n: entry j of the result
// reads entry i = j - left, mirrored (reflect) or clamped (replicate) into [0, n).
std::vector<std::int64_t> pad_index(PadMode mode, std::int64_t n, std::int64_t left, std::int64_t right) {
  std::vector<std::int64_t> index(static_cast<std::size_t>(n + left + right));
  for (std::size_t j = 0; j < index.size(); ++j) {
    const std::int64_t i = static_cast<std::int64_t>(j) - left;
    if (mode == PadMode::Reflect) index[j] = i < 0 ? -i : i >= n ? 2 * (n - 1) - i : i;
    else index[j] = std::clamp<std::int64_t>(i, 0, n - 1);
  }
  return index;
}

// Rolls x by shifts[d] along each dim d (already reduced into [0, size(d))).
Tensor roll_dims(const Tensor& x, const std::vector<std::int64_t>& shifts) {
  std::vector<DimIndex> tables;
  for (std::int64_t d = 0; d < x.dim(); ++d) {
    const std::int64_t n = x.size(d), s = shifts[d];
    if (s == 0) continue;
    DimIndex t{d, std::vector<std::int64_t>(static_cast<std::size_t>(n))};
    for (std::int64_t j = 0; j < n; ++j) t.index[j] = (j + n - s) % n;  // y[j] = x[j - s]
    tables.push_back(std::move(t));
  }
  Tensor y = kernels::gather_dims("roll", x, std::move(tables));
  if (!any_needs_grad({x})) return y;
  std::vector<std::int64_t> inverse(shifts.size());
  for (std::size_t d = 0; d < shifts.size(); ++d) inverse[d] = shifts[d] == 0 ? 0 : x.shape()[d] - shifts[d];
  record("roll", {x}, {y}, {}, [inverse](const TensorList& g, const TensorList&) {
    return TensorList{g[0].defined() ? roll_dims(g[0], inverse) : Tensor()};
  });
  return y;
}

// Flips x along the dims where `flipped` is set.
Tensor flip_dims(const Tensor& x, const std::vector<bool>& flipped) {
  std::vector<DimIndex> tables;
  for (std::int64_t d = 0; d < x.dim(); ++d) {
    if (!flipped[d]) continue;
    const std::int64_t n = x.size(d);
    DimIndex t{d, std::vector<std::int64_t>(static_cast<std::size_t>(n))};
    for (std::int64_t j = 0; j < n; ++j) t.index[j] = n - 1 - j;
    tables.push_back(std::move(t));
  }
  Tensor y = kernels::gather_dims("flip", x, std::move(tables));
  record("flip", {x}, {y}, {}, [flipped](const TensorList& g, const TensorList&) {
    return TensorList{g[0].defined() ? flip_dims(g[0], flipped) : Tensor()};
  });
  return y;
}

}  // namespace

// ---- joining and splitting ----

Tensor cat(const TensorList& tensors, std::int64_t dim) {
  check_same_kind("cat", tensors);
  // PyTorch's legacy rule: 1-d empty tensors take no part.
  auto skipped = [](const Tensor& t) { return t.dim() == 1 && t.numel() == 0; };
  const auto first = std::ranges::find_if_not(tensors, skipped);
  const std::size_t ref_at = first == tensors.end() ? 0 : static_cast<std::size_t>(first - tensors.begin());
  const Tensor& ref = tensors[ref_at];
  if (ref.dim() == 0)
    throw ShapeError("cat", concat("the 0-d tensor at position ", ref_at, " cannot be concatenated"));
  const std::int64_t d = wrap_dim("cat", dim, ref.dim());
  Shape shape = ref.shape();
  shape[d] = 0;
  std::vector<std::int64_t> starts(tensors.size(), 0);  // where each input begins along d
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (skipped(t)) continue;
    if (t.dim() != ref.dim())
      throw ShapeError("cat", concat("tensor at position ", i, " has shape ", t.shape(), " but tensor at position ",
                                     ref_at, " has shape ", ref.shape(), ": expected the same number of dims"));
    for (std::int64_t k = 0; k < t.dim(); ++k)
      if (k != d && t.shape()[k] != ref.shape()[k])
        throw ShapeError("cat", concat("sizes must match except in dimension ", d, ": tensor at position ", i,
                                       " has shape ", t.shape(), ", tensor at position ", ref_at, " has shape ",
                                       ref.shape()));
    starts[i] = shape[d];
    if (__builtin_add_overflow(shape[d], t.shape()[d], &shape[d]))
      throw ShapeError("cat", concat("the result's size along dimension ", d, " overflows int64"));
  }
  Tensor y = empty(shape, {.dtype = ref.dtype(), .device = ref.device()});
  {
    NoGradGuard no_grad;
    for (std::size_t i = 0; i < tensors.size(); ++i)
      if (!skipped(tensors[i])) y.narrow(d, starts[i], tensors[i].shape()[d]).copy_(tensors[i]);
  }
  if (!any_needs_grad(tensors)) return y;
  std::vector<std::int64_t> sizes;  // along d; -1 for inputs that get no gradient
  for (const Tensor& t : tensors) sizes.push_back(t.requires_grad() && !skipped(t) ? t.shape()[d] : -1);
  record("cat", tensors, {y}, {}, [d, starts, sizes](const TensorList& g, const TensorList&) {
    TensorList grads(sizes.size());
    if (!g[0].defined()) return grads;
    for (std::size_t i = 0; i < sizes.size(); ++i)
      if (sizes[i] >= 0) grads[i] = g[0].narrow(d, starts[i], sizes[i]);
    return grads;
  });
  return y;
}

Tensor stack(const TensorList& tensors, std::int64_t dim) {
  check_same_kind("stack", tensors);
  const Shape& shape = tensors[0].shape();
  for (std::size_t i = 1; i < tensors.size(); ++i)
    if (tensors[i].shape() != shape)
      throw ShapeError("stack", concat("expected every tensor of shape ", shape, " (that of position 0), got ",
                                       tensors[i].shape(), " at position ", i));
  const std::int64_t d = wrap_dim("stack", dim, static_cast<std::int64_t>(shape.size()) + 1);
  Tensor y;
  {
    NoGradGuard no_grad;
    TensorList parts;
    for (const Tensor& t : tensors) parts.push_back(t.unsqueeze(d));
    y = cat(parts, d);
  }
  if (!any_needs_grad(tensors)) return y;
  std::vector<bool> needed;
  for (const Tensor& t : tensors) needed.push_back(t.requires_grad());
  record("stack", tensors, {y}, {}, [d, needed](const TensorList& g, const TensorList&) {
    TensorList grads(needed.size());
    if (!g[0].defined()) return grads;
    for (std::size_t i = 0; i < needed.size(); ++i)
      if (needed[i]) grads[i] = g[0].select(d, static_cast<std::int64_t>(i));
    return grads;
  });
  return y;
}

// ---- splitting ----

namespace {

// The gradients of split's pieces joined along d without a copy when they already lie in
// one buffer as the join lays them out: same storage and strides, each piece starting where
// the previous one ends along d (the tensor-core attention writes dq, dk and dv so for the
// heads of a split qkv projection). Undefined otherwise, and for gradients that carry a
// graph (create_graph), which the copying join records. The joined view reads exactly the
// pieces' elements; the engine sums into a buffer in place only when no other tensor sees it.
Tensor joined_in_place(const TensorList& pieces, std::int64_t d) {
  const Tensor& first = pieces[0];
  const auto along = static_cast<std::size_t>(d);
  for (const Tensor& p : pieces)
    if (!p.defined() || p.requires_grad() || p.numel() == 0 || !p.storage().is_same(first.storage()) ||
        p.dtype() != first.dtype())
      return {};
  // The join's stride along d: the step from the first piece's start to the second's.
  const std::int64_t gap = pieces[1].storage_offset() - first.storage_offset();
  if (gap <= 0 || gap % first.shape()[along] != 0) return {};
  const std::int64_t step = gap / first.shape()[along];
  Shape shape = first.shape();
  Strides strides = first.strides();
  strides[along] = step;
  shape[along] = 0;
  for (const Tensor& p : pieces) {
    if (p.storage_offset() != first.storage_offset() + shape[along] * step) return {};
    for (std::size_t k = 0; k < shape.size(); ++k)
      if (p.shape()[k] > 1 && p.strides()[k] != strides[k]) return {};
    shape[along] += p.shape()[along];
  }
  return first.as_strided(shape, strides, first.storage_offset());
}

// The pieces `cut` makes (Tensor::split / Tensor::chunk, which check the arguments), views
// of x along dim made without a node each, recorded as one op: its backward is a single cat
// of the pieces' gradients (zeros for pieces that got none; a view when the gradients
// already tile one buffer, see joined_in_place), where one view node per piece
// would scatter each gradient into its own zero-filled buffer of x's size and sum those.
// The pieces are views of a tensor in the graph, so in-place writes into them are refused
// like those into any such view.
template <class Cut>
TensorList pieces_of(std::string_view op, const Tensor& x, std::int64_t dim, Cut cut) {
  if (!any_needs_grad({x})) return cut();
  TensorList pieces;
  std::vector<Shape> shapes;
  std::int64_t d = 0;
  {
    NoGradGuard no_grad;
    pieces = cut();
    d = wrap_dim(op, dim, x.dim());
    // Each output its own tensor: split of an empty dim hands back x itself, chunk of one
    // hands back one empty view several times.
    std::int64_t start = 0;
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      const auto shares = [&](const Tensor& other) { return other.is_same(pieces[i]); };
      if (pieces[i].is_same(x) || std::any_of(pieces.begin(), pieces.begin() + static_cast<std::ptrdiff_t>(i), shares))
        pieces[i] = x.narrow(d, start, pieces[i].shape()[d]);
      start += pieces[i].shape()[d];
      shapes.push_back(pieces[i].shape());
    }
  }
  const TensorOptions options{.dtype = x.dtype(), .device = x.device()};
  record(op, {x}, pieces, {}, [d, shapes, options](const TensorList& g, const TensorList&) {
    if (std::ranges::none_of(g, [](const Tensor& t) { return t.defined(); })) return TensorList{Tensor()};
    if (g.size() == 1) return TensorList{g[0]};
    if (Tensor joined = joined_in_place(g, d); joined.defined()) return TensorList{joined};
    TensorList parts;
    for (std::size_t i = 0; i < g.size(); ++i) parts.push_back(g[i].defined() ? g[i] : zeros(shapes[i], options));
    return TensorList{cat(parts, d)};
  });
  for (const Tensor& p : pieces) p.autograd_meta().is_view_of_graph = true;
  return pieces;
}

}  // namespace

TensorList split(const Tensor& x, std::int64_t split_size, std::int64_t dim) {
  return pieces_of("split", x, dim, [&] { return x.split(split_size, dim); });
}
TensorList split(const Tensor& x, const std::vector<std::int64_t>& split_sizes, std::int64_t dim) {
  return pieces_of("split", x, dim, [&] { return x.split(split_sizes, dim); });
}
TensorList chunk(const Tensor& x, std::int64_t chunks, std::int64_t dim) {
  return pieces_of("chunk", x, dim, [&] { return x.chunk(chunks, dim); });
}

// ---- repeating ----

Tensor repeat(const Tensor& x, const std::vector<std::int64_t>& repeats) {
  if (static_cast<std::int64_t>(repeats.size()) < x.dim())
    throw ShapeError("repeat", concat("got ", repeats.size(), " repeats ", repeats, " for a tensor of shape ",
                                      x.shape(), ": expected at least one per dim"));
  for (std::int64_t r : repeats)
    if (r < 0) throw ShapeError("repeat", concat("repeats must be non-negative, got ", repeats));
  Shape shape(repeats.size() - static_cast<std::size_t>(x.dim()), 1);  // x's shape with leading 1s
  shape.insert(shape.end(), x.shape().begin(), x.shape().end());
  // x viewed as (1, s_0, 1, s_1, ...), expanded to wide (r_0, s_0, r_1, s_1, ...), is y (r_0 s_0, r_1 s_1, ...)
  Shape spread, wide, out_shape;
  std::vector<std::int64_t> repeat_dims;
  for (std::size_t k = 0; k < shape.size(); ++k) {
    spread.insert(spread.end(), {1, shape[k]});
    wide.insert(wide.end(), {repeats[k], shape[k]});
    out_shape.push_back(checked_mul("repeat", repeats[k], shape[k]));
    repeat_dims.push_back(static_cast<std::int64_t>(2 * k));
  }
  checked_numel("repeat", out_shape);
  Tensor y;
  {
    NoGradGuard no_grad;
    y = x.reshape(spread).expand(wide).clone().view(out_shape);
  }
  if (!any_needs_grad({x})) return y;
  record("repeat", {x}, {y}, {}, [wide, repeat_dims, in_shape = x.shape()](const TensorList& g, const TensorList&) {
    if (!g[0].defined()) return TensorList{Tensor()};
    if (repeat_dims.empty()) return TensorList{g[0]};  // 0-d x, no repeats
    return TensorList{sum(g[0].reshape(wide), repeat_dims).reshape(in_shape)};
  });
  return y;
}

Tensor tile(const Tensor& x, const std::vector<std::int64_t>& reps) {
  for (std::int64_t r : reps)
    if (r < 0) throw ShapeError("tile", concat("reps must be non-negative, got ", reps));
  const std::int64_t missing = std::max<std::int64_t>(0, x.dim() - static_cast<std::int64_t>(reps.size()));
  std::vector<std::int64_t> repeats(static_cast<std::size_t>(missing), 1);  // leading 1s, then reps
  repeats.insert(repeats.end(), reps.begin(), reps.end());
  return repeat(x, repeats);
}

Tensor repeat_interleave(const Tensor& x, std::int64_t repeats, std::optional<std::int64_t> dim) {
  if (repeats < 0) throw ShapeError("repeat_interleave", concat("repeats must be non-negative, got ", repeats));
  if (!dim) return repeat_interleave(x.reshape({-1}), repeats, 0);
  const Tensor base = x.dim() == 0 ? x.reshape({1}) : x;
  const std::int64_t d = wrap_dim("repeat_interleave", *dim, base.dim());
  // base (..., n, ...) unsqueezed and expanded to wide (..., n, r, ...) is y (..., n r, ...)
  Shape wide = base.shape();
  wide.insert(wide.begin() + d + 1, repeats);
  Shape out_shape = base.shape();
  out_shape[d] = checked_mul("repeat_interleave", out_shape[d], repeats);
  checked_numel("repeat_interleave", out_shape);
  Tensor y;
  {
    NoGradGuard no_grad;
    y = base.unsqueeze(d + 1).expand(wide).clone().view(out_shape);
  }
  if (!any_needs_grad({base})) return y;
  record("repeat_interleave", {base}, {y}, {}, [wide, d](const TensorList& g, const TensorList&) {
    return TensorList{g[0].defined() ? sum(g[0].reshape(wide), {d + 1}) : Tensor()};
  });
  return y;
}

Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<std::int64_t> dim) {
  constexpr std::string_view op = "repeat_interleave";
  if (!is_integral(repeats.dtype()))
    throw DTypeError(op, concat("repeats must be an integer tensor, got ", repeats.dtype()));
  if (repeats.dim() > 1) throw ShapeError(op, concat("repeats must be 0-d or 1-d, got shape ", repeats.shape()));
  if (repeats.numel() == 1) return repeat_interleave(x, repeats.item<std::int64_t>(), dim);
  if (!dim) return repeat_interleave(x.reshape({-1}), repeats, 0);
  const Tensor base = x.dim() == 0 ? x.reshape({1}) : x;
  const std::int64_t d = wrap_dim(op, *dim, base.dim());
  const std::int64_t n = base.size(d);
  if (repeats.numel() != n)
    throw ShapeError(op, concat("repeats has ", repeats.numel(), " entries but dimension ", d,
                                " of the input of shape ", base.shape(), " has size ", n));
  const Tensor counts = repeats.to(Device::cpu(), kInt64).contiguous();
  const std::int64_t* count = counts.data_ptr<std::int64_t>();
  DimIndex table{d, {}};  // entry i, count[i] times
  for (std::int64_t i = 0; i < n; ++i) {
    if (count[i] < 0)
      throw ShapeError(op, concat("repeats must be non-negative, got ", count[i], " at position ", i));
    table.index.insert(table.index.end(), static_cast<std::size_t>(count[i]), i);
  }
  return gather_along(op, base, {std::move(table)});
}

// ---- masking, padding, reordering ----

Tensor tril(const Tensor& x, std::int64_t diagonal) { return triangle("tril", x, diagonal, true); }
Tensor triu(const Tensor& x, std::int64_t diagonal) { return triangle("triu", x, diagonal, false); }

Tensor pad(const Tensor& x, const std::vector<std::int64_t>& pads, PadMode mode, const Scalar& value) {
  if (pads.size() % 2 != 0)
    throw ShapeError("pad", concat("expects an even number of pads (left, right per dim), got ", pads));
  if (static_cast<std::int64_t>(pads.size() / 2) > x.dim())
    throw ShapeError("pad", concat("pads ", pads, " cover ", pads.size() / 2, " dims but the input of shape ",
                                   x.shape(), " has ", x.dim()));
  if (mode == PadMode::Constant) return pad_constant(x, pads, value);
  const std::string_view mode_name = mode == PadMode::Reflect ? "reflect" : "replicate";
  if (std::ranges::any_of(pads, [](std::int64_t p) { return p < 0; }))
    throw ShapeError("pad", concat(mode_name, " padding must be non-negative, got ", pads));
  padded_shape(x, pads);  // checks the sizes
  std::vector<DimIndex> tables;
  for (std::size_t i = 0; i < pads.size() / 2; ++i) {
    const std::int64_t d = x.dim() - 1 - static_cast<std::int64_t>(i);
    const std::int64_t n = x.size(d), left = pads[2 * i], right = pads[2 * i + 1];
    if (left == 0 && right == 0) continue;
    if (mode == PadMode::Reflect && (left >= n || right >= n))
      throw ShapeError("pad", concat("reflect padding (", left, ", ", right, ") of dimension ", d, " must be smaller ",
                                     "than its size ", n, " (input shape ", x.shape(), ")"));
    if (mode == PadMode::Replicate && n == 0)
      throw ShapeError("pad", concat("cannot replicate-pad dimension ", d, " of size 0 (input shape ", x.shape(), ")"));
    tables.push_back({d, pad_index(mode, n, left, right)});
  }
  return gather_along("pad", x, std::move(tables));
}

Tensor flip(const Tensor& x, const std::vector<std::int64_t>& dims) {
  std::vector<bool> flipped(static_cast<std::size_t>(x.dim()), false);
  for (std::int64_t d : dims) {
    const std::int64_t w = wrap_dim("flip", d, x.dim());
    if (x.dim() == 0) continue;
    if (flipped[w]) throw IndexError("flip", concat("dim ", d, " appears more than once in ", dims));
    flipped[w] = true;
  }
  return flip_dims(x, flipped);
}

Tensor roll(const Tensor& x, const std::vector<std::int64_t>& shifts, const std::vector<std::int64_t>& dims) {
  if (dims.empty()) {
    if (shifts.size() != 1)
      throw ShapeError("roll", concat("without dims, expects exactly one shift, got ", shifts));
    return roll(x.reshape({-1}), shifts, {0}).view(x.shape());
  }
  if (shifts.size() != dims.size())
    throw ShapeError("roll", concat("shifts ", shifts, " and dims ", dims, " differ in length"));
  std::vector<std::int64_t> net(static_cast<std::size_t>(x.dim()), 0);  // per dim, in [0, size)
  for (std::size_t k = 0; k < dims.size(); ++k) {
    const std::int64_t d = wrap_dim("roll", dims[k], x.dim());
    if (x.dim() == 0 || x.size(d) == 0) continue;
    const std::int64_t n = x.size(d);
    net[d] = ((net[d] + shifts[k] % n) % n + n) % n;
  }
  return roll_dims(x, net);
}

Tensor roll(const Tensor& x, std::int64_t shift, std::optional<std::int64_t> dim) {
  return dim ? roll(x, std::vector{shift}, std::vector{*dim}) : roll(x, std::vector{shift}, {});
}

Tensor movedim(const Tensor& x, const std::vector<std::int64_t>& source, const std::vector<std::int64_t>& destination) {
  if (source.size() != destination.size())
    throw ShapeError("movedim", concat("source ", source, " and destination ", destination, " differ in length"));
  const std::int64_t nd = x.dim();
  const std::size_t slots = static_cast<std::size_t>(std::max<std::int64_t>(nd, 1));
  std::vector<std::int64_t> order(static_cast<std::size_t>(nd), -1);  // order[destination] = source
  std::vector<bool> moved(slots, false), taken(slots, false);
  for (std::size_t k = 0; k < source.size(); ++k) {
    const std::int64_t s = wrap_dim("movedim", source[k], nd), t = wrap_dim("movedim", destination[k], nd);
    if (moved[s]) throw IndexError("movedim", concat("repeated dim ", source[k], " in source ", source));
    if (taken[t]) throw IndexError("movedim", concat("repeated dim ", destination[k], " in destination ", destination));
    moved[s] = taken[t] = true;
    if (nd > 0) order[t] = s;
  }
  // The dims not moved keep their order, in the positions left free.
  std::int64_t next = 0;
  for (std::int64_t& o : order) {
    if (o >= 0) continue;
    while (moved[next]) ++next;
    o = next++;
  }
  return x.permute(order);
}

Tensor movedim(const Tensor& x, std::int64_t source, std::int64_t destination) {
  return movedim(x, std::vector{source}, std::vector{destination});
}

}  // namespace infini
