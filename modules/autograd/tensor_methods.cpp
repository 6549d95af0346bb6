// Makes infini.tensor's own methods differentiable: views (a reshape or permutation of the
// gradient where the view reads each element of its base once, else the replay of the view
// op on a zero gradient buffer), copy_/fill_ (new history for the overwritten tensor), and
// backward (the engine). Installed into autograd_hooks() when the library loads.
module;
#include <cstdint>
module infini.autograd;
import infini.std;

namespace infini {
namespace {

using Replay = std::function<Tensor(const Tensor&)>;

// Zeros laid out like `base` (same shape and strides) in a buffer of base's extent, so a
// view op replayed on it picks the same elements it picked from base.
Tensor zeros_with_layout(const Tensor& base, DataType dtype) {
  // An overlapping base (expanded, unfolded) would make distinct gradient entries share memory.
  if (kernels::may_have_internal_overlap(base)) return zeros(base.shape(), {.dtype = dtype, .device = base.device()});
  std::int64_t extent = base.numel() > 0 ? 1 : 0;
  for (std::int64_t d = 0; d < base.dim() && extent > 0; ++d) extent += (base.shape()[d] - 1) * base.strides()[d];
  return zeros({extent}, {.dtype = dtype, .device = base.device()}).as_strided(base.shape(), base.strides(), 0);
}

// The gradient of base for a view made by `replay`: g scattered (summed where the view
// repeats elements) into zeros laid out like base. Differentiable: its backward replays
// the view on the incoming gradient.
Tensor view_scatter(const Tensor& g, const Tensor& base_layout, const Replay& replay) {
  Tensor result;
  {
    NoGradGuard no_grad;
    result = zeros_with_layout(base_layout, g.dtype());
    kernels::accumulate_(replay(result), g.detach());
  }
  record("view_scatter", {g}, {result}, {}, [base_layout, replay](const TensorList& gg, const TensorList&) {
    if (!gg[0].defined()) return TensorList{Tensor()};
    Tensor laid_out = zeros_with_layout(base_layout, gg[0].dtype());
    laid_out.copy_(gg[0]);
    return TensorList{replay(laid_out)};
  });
  return result;
}

// Dims of t without those of size 1, each run of dims that steps through memory as one
// dim merged into it: (size, stride) pairs from the outermost. Two tensors with equal
// offsets and equal runs read the same memory in the same row-major order.
std::vector<std::array<std::int64_t, 2>> memory_runs(const Tensor& t) {
  std::vector<std::array<std::int64_t, 2>> runs;
  for (std::int64_t d = 0; d < t.dim(); ++d) {
    const std::int64_t size = t.shape()[d], stride = t.strides()[d];
    if (size == 1) continue;
    if (!runs.empty() && runs.back()[1] == stride * size) runs.back() = {runs.back()[0] * size, stride};
    else runs.push_back({size, stride});
  }
  return runs;
}

// The permutation p with view dim i = base dim p[i] (same size and, for sizes above 1,
// same stride), if the view is base's dims reordered at base's offset; empty otherwise.
std::vector<std::int64_t> permutation_of(const Tensor& base, const Tensor& view) {
  const std::int64_t n = base.dim();
  if (view.dim() != n || view.storage_offset() != base.storage_offset()) return {};
  std::vector<std::int64_t> p;
  std::vector<bool> taken(static_cast<std::size_t>(n), false);
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t match = -1;
    for (std::int64_t j = 0; j < n && match < 0; ++j)
      if (!taken[j] && base.shape()[j] == view.shape()[i] &&
          (view.shape()[i] == 1 || base.strides()[j] == view.strides()[i]))
        match = j;
    if (match < 0) return {};
    taken[match] = true;
    p.push_back(match);
  }
  return p;
}

// How the gradient of base follows from the gradient g of a view of it that reads each of
// base's elements exactly once: a reshape (the view reads base's memory in base's own
// order: view, reshape, flatten, (un)squeeze) or a permutation (transpose, permute, t).
// Both are views of g, or one copy where g's strides do not allow the reshape; null for
// any other view, whose gradient is scattered into zeros.
std::function<Tensor(const Tensor&)> inverse_of(const Tensor& base, const Tensor& view) {
  if (view.numel() != base.numel() || view.dtype() != base.dtype() || kernels::may_have_internal_overlap(base))
    return nullptr;
  const Shape shape = base.shape();
  if (base.numel() == 0 ||
      (view.storage_offset() == base.storage_offset() && memory_runs(view) == memory_runs(base)))
    return [shape](const Tensor& g) { return g.reshape(shape); };
  const std::vector<std::int64_t> p = permutation_of(base, view);
  if (p.empty() && base.dim() > 0) return nullptr;
  std::vector<std::int64_t> inverse(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) inverse[static_cast<std::size_t>(p[i])] = static_cast<std::int64_t>(i);
  return [inverse](const Tensor& g) { return g.permute(inverse); };
}

void record_view(const Tensor& base, const Tensor& view, Replay replay) {
  auto inverse = inverse_of(base, view);
  const Tensor layout = inverse ? Tensor() : base.detach();  // geometry only; keeps no history alive
  record("view", {base}, {view}, {},
         [layout, inverse = std::move(inverse), replay = std::move(replay)](const TensorList& g, const TensorList&) {
           if (!g[0].defined()) return TensorList{Tensor()};
           return TensorList{inverse ? inverse(g[0]) : view_scatter(g[0], layout, replay)};
         });
  view.autograd_meta().is_view_of_graph = true;
}

void record_overwrite(std::string_view op, const Tensor& dst, const Tensor& src) {
  if (!is_floating_point(dst.dtype())) return;  // integer and bool results carry no gradient
  std::vector<Edge> edges;
  if (src.defined()) edges.push_back(gradient_edge(src));
  const Shape src_shape = src.defined() ? src.shape() : Shape{};
  const DataType src_dtype = src.defined() ? src.dtype() : dst.dtype();
  const Device src_device = src.defined() ? src.device() : dst.device();
  const bool has_src = src.defined();
  auto node = std::make_shared<FunctionNode>(
      op, std::move(edges), 1, [=](const TensorList& g, const TensorList&) {
        if (!has_src) return TensorList{};
        if (!g[0].defined()) return TensorList{Tensor()};
        return TensorList{sum_to(g[0], src_shape).to(src_device, src_dtype)};
      });
  if (has_src) node->input_shapes.push_back(src_shape);
  AutogradMeta& meta = dst.autograd_meta();
  meta.grad_fn = node;
  meta.output_nr = 0;
}

const bool installed = [] {
  autograd_hooks().record_view = &record_view;
  autograd_hooks().record_overwrite = &record_overwrite;
  return true;
}();

}  // namespace
}  // namespace infini
