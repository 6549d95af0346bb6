// Convolution layers (torch.nn.Conv1d/2d/3d, ConvTranspose1d/2d/3d) over infini.autograd's
// conv1d/2d/3d and conv_transpose1d/2d/3d. Parameters, with PyTorch's names and layouts:
//   Conv1d/2d/3d           weight (out_channels, in_channels / groups, *kernel_size), bias (out_channels)
//   ConvTranspose1d/2d/3d  weight (in_channels, out_channels / groups, *kernel_size), bias (out_channels)
// initialised as PyTorch does: weight kaiming_uniform_(a = sqrt(5)), which is U(-b, b) with
// b = 1 / sqrt(fan_in), fan_in = weight.size(1) * kernel elements; bias U(-b, b) too.
// Options are checked when the layer is built, inputs when it runs; errors name the layer.
export module infini.nn:conv;
import infini.std;
import :module_base;

export namespace infini::nn {

// How Conv1d/2d/3d pad their input: with zeros, by mirroring the input about its edge
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
using Conv3dOptions = ConvOptions<3>;

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
using Conv3dImpl = ConvImpl<3>;

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
using Conv3d = ConvHolder<3>;

template <std::size_t D>
struct ConvTransposeOptions {
  ExpandingArray<D> stride = 1;
  ExpandingArray<D> padding = 0;         // removed from both sides of the output
  ExpandingArray<D> output_padding = 0;  // added to one side; < max(stride, dilation) per dim
  std::int64_t groups = 1;
  bool bias = true;
  ExpandingArray<D> dilation = 1;
};
using ConvTranspose1dOptions = ConvTransposeOptions<1>;
using ConvTranspose2dOptions = ConvTransposeOptions<2>;
using ConvTranspose3dOptions = ConvTransposeOptions<3>;

// The adjoint of ConvD with respect to its input ("deconvolution"): x (N, in_channels, *in)
// or (in_channels, *in) -> (N, out_channels, *out) with, per spatial dim, out = (in - 1)
// stride - 2 padding + dilation (kernel_size - 1) + output_padding + 1.
template <std::size_t D>
class ConvTransposeImpl : public Cloneable<ConvTransposeImpl<D>> {
 public:
  ConvTransposeImpl(std::int64_t in_channels, std::int64_t out_channels, ExpandingArray<D> kernel_size,
                    ConvTransposeOptions<D> options = {});
  void reset() override;
  void reset_parameters(Generator* generator = nullptr);
  Tensor forward(const Tensor& x) override;

  std::int64_t in_channels, out_channels;
  std::vector<std::int64_t> kernel_size, stride, padding, output_padding, dilation;  // D values each
  std::int64_t groups;
  Tensor weight;
  Tensor bias;  // undefined when built with bias = false

 protected:
  std::string extra_repr() const override;

 private:
  bool with_bias_;
};
using ConvTranspose1dImpl = ConvTransposeImpl<1>;
using ConvTranspose2dImpl = ConvTransposeImpl<2>;
using ConvTranspose3dImpl = ConvTransposeImpl<3>;
template <std::size_t D>
class ConvTransposeHolder : public ModuleHolder<ConvTransposeImpl<D>> {
 public:
  using ModuleHolder<ConvTransposeImpl<D>>::ModuleHolder;
  ConvTransposeHolder(std::int64_t in_channels, std::int64_t out_channels, ExpandingArray<D> kernel_size,
                      ConvTransposeOptions<D> options = {})
      : ModuleHolder<ConvTransposeImpl<D>>(in_channels, out_channels, kernel_size, options) {}
};
using ConvTranspose1d = ConvTransposeHolder<1>;
using ConvTranspose2d = ConvTransposeHolder<2>;
using ConvTranspose3d = ConvTransposeHolder<3>;

}  // namespace infini::nn
