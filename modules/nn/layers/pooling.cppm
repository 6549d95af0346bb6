// Pooling layers (torch.nn.MaxPool2d, AvgPool2d, AvgPool3d, AdaptiveAvgPool2d) over
// infini.autograd's pooling ops. They hold no parameters; options are checked when the
// layer is built, inputs when it runs, and errors name the layer. Inputs are batched
// (N, C, *spatial) or unbatched (C, *spatial). Output size per spatial dim:
//   (in + 2 padding - dilation (kernel_size - 1) - 1) / stride + 1
// rounded down, or up with ceil_mode (a last window must start inside the input or the
// left padding).
module;
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>
export module infini.nn:pooling;
import :module_base;

export namespace infini::nn {

struct MaxPool2dOptions {
  ExpandingArray<2> stride{};  // unset: kernel_size
  ExpandingArray<2> padding = 0;  // implicit -inf padding, at most kernel_size / 2
  ExpandingArray<2> dilation = 1;
  bool ceil_mode = false;
};

// The max of each window; the gradient goes to the first maximal element of the window.
// `MaxPool2d pool(2);` halves H and W.
class MaxPool2dImpl : public Cloneable<MaxPool2dImpl> {
 public:
  explicit MaxPool2dImpl(ExpandingArray<2> kernel_size, MaxPool2dOptions options = {});
  void reset() override {}
  Tensor forward(const Tensor& x) override;
  // PyTorch's return_indices = true: the maxima and, as int64, the position ih * W + iw of
  // each in its input (H, W) plane (what MaxUnpool2d takes). Runs without the module's hooks.
  MaxPoolResult forward_with_indices(const Tensor& x);

  std::vector<std::int64_t> kernel_size, stride, padding, dilation;  // 2 values each
  bool ceil_mode;

 protected:
  std::string extra_repr() const override;
};
// The handle, with its constructor spelled out (ModuleHolder's forwarding one cannot take
// braced arguments) so that `MaxPool2d({3, 2}, {.stride = 1})` works; likewise below.
class MaxPool2d : public ModuleHolder<MaxPool2dImpl> {
 public:
  using ModuleHolder::ModuleHolder;
  explicit MaxPool2d(ExpandingArray<2> kernel_size, MaxPool2dOptions options = {})
      : ModuleHolder(kernel_size, options) {}
};

template <std::size_t D>
struct AvgPoolOptions {
  ExpandingArray<D> stride{};  // unset: kernel_size
  ExpandingArray<D> padding = 0;  // implicit zero padding, at most kernel_size / 2
  bool ceil_mode = false;
  // Whether the zero padding counts in the divisor (windows clipped by ceil_mode never count
  // the part past the padding).
  bool count_include_pad = true;
  std::optional<std::int64_t> divisor_override{};  // the divisor of every window when set (>= 1)
};
using AvgPool2dOptions = AvgPoolOptions<2>;
using AvgPool3dOptions = AvgPoolOptions<3>;

// The mean of each window, D = 2 (N, C, H, W) or 3 (N, C, D, H, W).
template <std::size_t D>
class AvgPoolImpl : public Cloneable<AvgPoolImpl<D>> {
 public:
  explicit AvgPoolImpl(ExpandingArray<D> kernel_size, AvgPoolOptions<D> options = {});
  void reset() override {}
  Tensor forward(const Tensor& x) override;

  std::vector<std::int64_t> kernel_size, stride, padding;  // D values each
  bool ceil_mode, count_include_pad;
  std::optional<std::int64_t> divisor_override;

 protected:
  std::string extra_repr() const override;
};
using AvgPool2dImpl = AvgPoolImpl<2>;
using AvgPool3dImpl = AvgPoolImpl<3>;
template <std::size_t D>
class AvgPoolHolder : public ModuleHolder<AvgPoolImpl<D>> {
 public:
  using ModuleHolder<AvgPoolImpl<D>>::ModuleHolder;
  explicit AvgPoolHolder(ExpandingArray<D> kernel_size, AvgPoolOptions<D> options = {})
      : ModuleHolder<AvgPoolImpl<D>>(kernel_size, options) {}
};
using AvgPool2d = AvgPoolHolder<2>;
using AvgPool3d = AvgPoolHolder<3>;

// x (N, C, H, W) or (C, H, W) -> (..., oH, oW): output (i, j) averages input rows
// [floor(i H / oH), ceil((i + 1) H / oH)) and the columns likewise, for any input size.
class AdaptiveAvgPool2dImpl : public Cloneable<AdaptiveAvgPool2dImpl> {
 public:
  explicit AdaptiveAvgPool2dImpl(ExpandingArray<2> output_size);
  void reset() override {}
  Tensor forward(const Tensor& x) override;

  std::vector<std::int64_t> output_size;  // (oH, oW)

 protected:
  std::string extra_repr() const override;
};
class AdaptiveAvgPool2d : public ModuleHolder<AdaptiveAvgPool2dImpl> {
 public:
  using ModuleHolder::ModuleHolder;
  explicit AdaptiveAvgPool2d(ExpandingArray<2> output_size) : ModuleHolder(output_size) {}
};

}  // namespace infini::nn
