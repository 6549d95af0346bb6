// Convolution layers (torch.nn.Conv1d, Conv2d, ConvTranspose2d) over infini.autograd's
// conv1d / conv2d / conv_transpose2d. Parameters, with PyTorch's names and layouts:
//   Conv1d, Conv2d    weight (out_channels, in_channels / groups, *kernel_size), bias (out_channels)
//   ConvTranspose2d   weight (in_channels, out_channels / groups, kH, kW),       bias (out_channels)
// initialised as PyTorch does: weight kaiming_uniform_(a = sqrt(5)), which is U(-b, b) with
// b = 1 / sqrt(fan_in), fan_in = weight.size(1) * kernel elements; bias U(-b, b) too.
// Options are checked when the layer is built, inputs when it runs; errors name the layer.
module;
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>
export module infini.nn:conv;
import :module_base;

export namespace infini::nn {

// How Conv1d / Conv2d pad their input: with zeros, by mirroring the input about its edge
// element (reflect: each padding must be smaller than the input size) or by repeating the
// edge element (replicate).
enum class PaddingMode { Zeros, Reflect, Replicate };

template <std::size_t D>
struct ConvOptions {
  ExpandingArray<D> stride = 1;
  ExpandingArray<D> padding = 0;  // on both sides of each spatial dim
  ExpandingArray<D> dilation = 1;
  std::int64_t groups = 1;  // must divide in_channels and out_channels
  bool bias = true;
  PaddingMode padding_mode = PaddingMode::Zeros;
};
using Conv1dOptions = ConvOptions<1>;
using Conv2dOptions = ConvOptions<2>;

// x (N, in_channels, *in) or unbatched (in_channels, *in) -> (N, out_channels, *out), per
// spatial dim out = (in + 2 padding - dilation (kernel_size - 1) - 1) / stride + 1.
// `Conv2d conv(3, 16, 3, {.stride = 2, .padding = 1});`
template <std::size_t D>
class ConvImpl : public Cloneable<ConvImpl<D>> {
 public:
  ConvImpl(std::int64_t in_channels, std::int64_t out_channels, ExpandingArray<D> kernel_size,
           ConvOptions<D> options = {});
  // weight and bias (when enabled), freshly initialised.
  void reset() override;
  // Draws weight and bias again (from `generator`, or the default generator).
  void reset_parameters(Generator* generator = nullptr);
  Tensor forward(const Tensor& x) override;

  std::int64_t in_channels, out_channels;
  std::vector<std::int64_t> kernel_size, stride, padding, dilation;  // D values each
  std::int64_t groups;
  PaddingMode padding_mode;
  Tensor weight;
  Tensor bias;  // undefined when built with bias = false

 protected:
  // "3, 16, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1)": non-default options only, as PyTorch.
  std::string extra_repr() const override;

 private:
  bool with_bias_;
};
using Conv1dImpl = ConvImpl<1>;
using Conv2dImpl = ConvImpl<2>;

// The handles. Their constructor is spelled out (ModuleHolder's forwarding one cannot take
// braced arguments) so that `Conv2d(3, 16, {3, 1}, {.stride = 2})` works.
template <std::size_t D>
class ConvHolder : public ModuleHolder<ConvImpl<D>> {
 public:
  using ModuleHolder<ConvImpl<D>>::ModuleHolder;
  ConvHolder(std::int64_t in_channels, std::int64_t out_channels, ExpandingArray<D> kernel_size,
             ConvOptions<D> options = {})
      : ModuleHolder<ConvImpl<D>>(in_channels, out_channels, kernel_size, options) {}
};
using Conv1d = ConvHolder<1>;
using Conv2d = ConvHolder<2>;

struct ConvTranspose2dOptions {
  ExpandingArray<2> stride = 1;
  ExpandingArray<2> padding = 0;         // removed from both sides of the output
  ExpandingArray<2> output_padding = 0;  // added to one side; < max(stride, dilation) per dim
  std::int64_t groups = 1;
  bool bias = true;
  ExpandingArray<2> dilation = 1;
};

// The adjoint of Conv2d with respect to its input ("deconvolution"): x (N, in_channels, H, W)
// or (in_channels, H, W) -> (N, out_channels, H_out, W_out) with H_out = (H - 1) stride
// - 2 padding + dilation (kH - 1) + output_padding + 1, and W_out likewise.
class ConvTranspose2dImpl : public Cloneable<ConvTranspose2dImpl> {
 public:
  ConvTranspose2dImpl(std::int64_t in_channels, std::int64_t out_channels, ExpandingArray<2> kernel_size,
                      ConvTranspose2dOptions options = {});
  void reset() override;
  void reset_parameters(Generator* generator = nullptr);
  Tensor forward(const Tensor& x) override;

  std::int64_t in_channels, out_channels;
  std::vector<std::int64_t> kernel_size, stride, padding, output_padding, dilation;  // 2 values each
  std::int64_t groups;
  Tensor weight;
  Tensor bias;  // undefined when built with bias = false

 protected:
  std::string extra_repr() const override;

 private:
  bool with_bias_;
};
class ConvTranspose2d : public ModuleHolder<ConvTranspose2dImpl> {
 public:
  using ModuleHolder::ModuleHolder;
  ConvTranspose2d(std::int64_t in_channels, std::int64_t out_channels, ExpandingArray<2> kernel_size,
                  ConvTranspose2dOptions options = {})
      : ModuleHolder(in_channels, out_channels, kernel_size, options) {}
};

}  // namespace infini::nn
