// Pooling layers (torch.nn.MaxPool1d/2d, AvgPool1d/2d/3d, AdaptiveAvgPool1d/2d,
// AdaptiveMaxPool2d) over infini.autograd's pooling ops. They hold no parameters; options
// are checked when the layer is built, inputs when it runs, and errors name the layer.
// Inputs are batched (N, C, *spatial) or unbatched (C, *spatial). Output size per spatial
// dim of the windowed (non-adaptive) ones:
//   (in + 2 padding - dilation (kernel_size - 1) - 1) / stride + 1
// rounded down, or up with ceil_mode (a last window must start inside the input or the
// left padding).
export module infini.nn:pooling;
import infini.std;
import :module_base;

export namespace infini::nn {

template <std::size_t D>
struct MaxPoolOptions {
  ExpandingArray<D> stride{};  // unset: kernel_size
  ExpandingArray<D> padding = 0;  // implicit -inf padding, at most kernel_size / 2
  ExpandingArray<D> dilation = 1;
  bool ceil_mode = false;
};
using MaxPool1dOptions = MaxPoolOptions<1>;
using MaxPool2dOptions = MaxPoolOptions<2>;

// The max of each window, D = 1 (N, C, L) or 2 (N, C, H, W); the gradient goes to the first
// maximal element of the window. `MaxPool2d pool(2);` halves H and W.
template <std::size_t D>
class MaxPoolImpl : public Cloneable<MaxPoolImpl<D>> {
 public:
  explicit MaxPoolImpl(ExpandingArray<D> kernel_size, MaxPoolOptions<D> options = {});
  void reset() override {}
  Tensor forward(const Tensor& x) override;
  // PyTorch's return_indices = true: the maxima and, as int64, the position of each in its
  // input plane, il or ih * W + iw (what MaxUnpool takes). Runs without the module's hooks.
  MaxPoolResult forward_with_indices(const Tensor& x);

  std::vector<std::int64_t> kernel_size, stride, padding, dilation;  // D values each
  bool ceil_mode;

 protected:
  std::string extra_repr() const override;
};
using MaxPool1dImpl = MaxPoolImpl<1>;
using MaxPool2dImpl = MaxPoolImpl<2>;
// The handles, with their constructor spelled out (ModuleHolder's forwarding one cannot take
// braced arguments) so that `MaxPool2d({3, 2}, {.stride = 1})` works; likewise below.
template <std::size_t D>
class MaxPoolHolder : public ModuleHolder<MaxPoolImpl<D>> {
 public:
  using ModuleHolder<MaxPoolImpl<D>>::ModuleHolder;
  explicit MaxPoolHolder(ExpandingArray<D> kernel_size, MaxPoolOptions<D> options = {})
      : ModuleHolder<MaxPoolImpl<D>>(kernel_size, options) {}
};
using MaxPool1d = MaxPoolHolder<1>;
using MaxPool2d = MaxPoolHolder<2>;

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
// PyTorch's AvgPool1d has no divisor_override.
template <>
struct AvgPoolOptions<1> {
  ExpandingArray<1> stride{};
  ExpandingArray<1> padding = 0;
  bool ceil_mode = false;
  bool count_include_pad = true;
};
using AvgPool1dOptions = AvgPoolOptions<1>;
using AvgPool2dOptions = AvgPoolOptions<2>;
using AvgPool3dOptions = AvgPoolOptions<3>;

// The mean of each window, D = 1 (N, C, L), 2 (N, C, H, W) or 3 (N, C, D, H, W).
template <std::size_t D>
class AvgPoolImpl : public Cloneable<AvgPoolImpl<D>> {
 public:
  explicit AvgPoolImpl(ExpandingArray<D> kernel_size, AvgPoolOptions<D> options = {});
  void reset() override {}
  Tensor forward(const Tensor& x) override;

  std::vector<std::int64_t> kernel_size, stride, padding;  // D values each
  bool ceil_mode, count_include_pad;
  std::optional<std::int64_t> divisor_override;  // always unset for D = 1

 protected:
  std::string extra_repr() const override;
};
using AvgPool1dImpl = AvgPoolImpl<1>;
using AvgPool2dImpl = AvgPoolImpl<2>;
using AvgPool3dImpl = AvgPoolImpl<3>;
template <std::size_t D>
class AvgPoolHolder : public ModuleHolder<AvgPoolImpl<D>> {
 public:
  using ModuleHolder<AvgPoolImpl<D>>::ModuleHolder;
  explicit AvgPoolHolder(ExpandingArray<D> kernel_size, AvgPoolOptions<D> options = {})
      : ModuleHolder<AvgPoolImpl<D>>(kernel_size, options) {}
};
using AvgPool1d = AvgPoolHolder<1>;
using AvgPool2d = AvgPoolHolder<2>;
using AvgPool3d = AvgPoolHolder<3>;

// D = 1: x (N, C, L) or (C, L) -> (..., oL), output i averages input [floor(i L / oL),
// ceil((i + 1) L / oL)); D = 2: x (N, C, H, W) or (C, H, W) -> (..., oH, oW), the rows and
// columns likewise; for any input size.
template <std::size_t D>
class AdaptiveAvgPoolImpl : public Cloneable<AdaptiveAvgPoolImpl<D>> {
 public:
  explicit AdaptiveAvgPoolImpl(ExpandingArray<D> output_size);
  void reset() override {}
  Tensor forward(const Tensor& x) override;

  std::vector<std::int64_t> output_size;  // D values

 protected:
  std::string extra_repr() const override;
};
using AdaptiveAvgPool1dImpl = AdaptiveAvgPoolImpl<1>;
using AdaptiveAvgPool2dImpl = AdaptiveAvgPoolImpl<2>;
template <std::size_t D>
class AdaptiveAvgPoolHolder : public ModuleHolder<AdaptiveAvgPoolImpl<D>> {
 public:
  using ModuleHolder<AdaptiveAvgPoolImpl<D>>::ModuleHolder;
  explicit AdaptiveAvgPoolHolder(ExpandingArray<D> output_size) : ModuleHolder<AdaptiveAvgPoolImpl<D>>(output_size) {}
};
using AdaptiveAvgPool1d = AdaptiveAvgPoolHolder<1>;
using AdaptiveAvgPool2d = AdaptiveAvgPoolHolder<2>;

// The max of the windows of AdaptiveAvgPool2d; the gradient goes to the first maximal
// element of each window.
class AdaptiveMaxPool2dImpl : public Cloneable<AdaptiveMaxPool2dImpl> {
 public:
  explicit AdaptiveMaxPool2dImpl(ExpandingArray<2> output_size);
  void reset() override {}
  Tensor forward(const Tensor& x) override;
  // PyTorch's return_indices = true: the maxima and, as int64, the position ih * W + iw of
  // each in its input (H, W) plane. Runs without the module's hooks.
  MaxPoolResult forward_with_indices(const Tensor& x);

  std::vector<std::int64_t> output_size;  // (oH, oW)

 protected:
  std::string extra_repr() const override;
};
class AdaptiveMaxPool2d : public ModuleHolder<AdaptiveMaxPool2dImpl> {
 public:
  using ModuleHolder::ModuleHolder;
  explicit AdaptiveMaxPool2d(ExpandingArray<2> output_size) : ModuleHolder(output_size) {}
};

}  // namespace infini::nn
