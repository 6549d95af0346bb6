// Makes infini.tensor's own methods differentiable: views (through the replay of the view
// op on a zero gradient buffer), copy_/fill_ (new history for the overwritten tensor), and
// backward (the engine). Installed into autograd_hooks() when the library loads.
module;
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>
module infini.autograd;

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

void record_view(const Tensor& base, const Tensor& view, Replay replay) {
  const Tensor layout = base.detach();  // geometry only; keeps no history alive
  // A view that reads every element of a contiguous base in order (view, reshape, flatten,
  // (un)squeeze) maps a contiguous gradient back by a reshape, without a copy.
  const bool reshape = base.is_contiguous() && view.is_contiguous() && view.numel() == base.numel() &&
                       view.storage_offset() == base.storage_offset() && view.dtype() == base.dtype();
  record("view", {base}, {view}, {}, [layout, reshape, replay = std::move(replay)](const TensorList& g, const TensorList&) {
    if (!g[0].defined()) return TensorList{Tensor()};
    if (reshape && g[0].is_contiguous()) return TensorList{g[0].view(layout.shape())};
    return TensorList{view_scatter(g[0], layout, replay)};
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
