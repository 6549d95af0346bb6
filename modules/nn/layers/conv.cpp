// Conv1d/2d/3d and ConvTranspose1d/2d/3d: option checks, PyTorch's initialisation, forward
// through the functional conv ops (see conv.cppm).
module;
#include <cmath>
#include <cstddef>
#include <cstdint>
module infini.nn;
import infini.std;

namespace infini::nn {
using namespace spatial_options;
namespace {

using Ints = std::vector<std::int64_t>;

bool all_equal(const Ints& values, std::int64_t v) {
  return std::all_of(values.begin(), values.end(), [v](std::int64_t x) { return x == v; });
}

// ShapeError naming `layer` unless the channel counts are positive and divisible by groups.
void check_channels(const std::string& layer, std::int64_t in_channels, std::int64_t out_channels,
                    std::int64_t groups) {
  if (in_channels < 1 || out_channels < 1)
    throw ShapeError(layer, concat("in_channels and out_channels must be >= 1, got ", in_channels, " and ",
                                   out_channels));
  if (groups < 1) throw ShapeError(layer, concat("groups must be >= 1, got ", groups));
  if (in_channels % groups != 0 || out_channels % groups != 0)
    throw ShapeError(layer, concat("groups=", groups, " must divide in_channels=", in_channels,
                                   " and out_channels=", out_channels));
}

void check_geometry(const std::string& layer, const Ints& kernel_size, const Ints& stride, const Ints& padding,
                    const Ints& dilation) {
  check_option_at_least(layer, "kernel_size", kernel_size, 1);
  check_option_at_least(layer, "stride", stride, 1);
  check_option_at_least(layer, "padding", padding, 0);
  check_option_at_least(layer, "dilation", dilation, 1);
}

// PyTorch's conv initialisation of weight (and bias): kaiming_uniform_(a = sqrt(5)) is
// U(-b, b) with b = 1 / sqrt(fan_in), fan_in = weight.size(1) * kernel elements.
void init_conv_parameters(const Tensor& weight, const Tensor& bias, Generator* generator) {
  const std::int64_t fan_in = weight.numel() / weight.size(0);
  init::kaiming_uniform_(weight, std::sqrt(5.0), init::FanMode::FanIn, init::Nonlinearity::LeakyReLU, generator);
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    init::uniform_(bias, -bound, bound, generator);
  }
}

// "3, 16, kernel_size=(3, 3), stride=(1, 1)" and the options that differ from their defaults.
std::string conv_repr(std::int64_t in_channels, std::int64_t out_channels, const Ints& kernel_size,
                      const Ints& stride, const Ints& padding, const Ints& output_padding, const Ints& dilation,
                      std::int64_t groups, bool with_bias) {
  std::string out = concat(in_channels, ", ", out_channels, ", kernel_size=", tuple_str(kernel_size),
                           ", stride=", tuple_str(stride));
  if (!all_equal(padding, 0)) out += ", padding=" + tuple_str(padding);
  if (!all_equal(dilation, 1)) out += ", dilation=" + tuple_str(dilation);
  if (!output_padding.empty() && !all_equal(output_padding, 0))
    out += ", output_padding=" + tuple_str(output_padding);
  if (groups != 1) out += concat(", groups=", groups);
  if (!with_bias) out += ", bias=false";
  return out;
}

template <std::size_t D>
Tensor convolve(const Tensor& x, const Tensor& weight, const Tensor& bias, const Ints& stride, const Ints& padding,
                const Ints& dilation, std::int64_t groups) {
  if constexpr (D == 1)
    return conv1d(x, weight, bias, expanding<1>(stride), expanding<1>(padding), expanding<1>(dilation), groups);
  else if constexpr (D == 2)
    return conv2d(x, weight, bias, expanding<2>(stride), expanding<2>(padding), expanding<2>(dilation), groups);
  else
    return conv3d(x, weight, bias, expanding<3>(stride), expanding<3>(padding), expanding<3>(dilation), groups);
}

template <std::size_t D>
Tensor convolve_transposed(const Tensor& x, const Tensor& weight, const Tensor& bias, const Ints& stride,
                           const Ints& padding, const Ints& output_padding, std::int64_t groups, const Ints& dilation) {
  if constexpr (D == 1)
    return conv_transpose1d(x, weight, bias, expanding<1>(stride), expanding<1>(padding),
                            expanding<1>(output_padding), groups, expanding<1>(dilation));
  else if constexpr (D == 2)
    return conv_transpose2d(x, weight, bias, expanding<2>(stride), expanding<2>(padding),
                            expanding<2>(output_padding), groups, expanding<2>(dilation));
  else
    return conv_transpose3d(x, weight, bias, expanding<3>(stride), expanding<3>(padding),
                            expanding<3>(output_padding), groups, expanding<3>(dilation));
}

// "Conv2d", "ConvTranspose3d", ...
template <std::size_t D>
std::string layer_name(const char* family) {
  return concat(family, D, "d");
}

}  // namespace

// ---- Conv1d, Conv2d, Conv3d ----

template <std::size_t D>
ConvImpl<D>::ConvImpl(std::int64_t in_channels, std::int64_t out_channels, ExpandingArray<D> kernel_size,
                      ConvOptions<D> options)
    : Cloneable<ConvImpl<D>>(layer_name<D>("Conv")),
      in_channels(in_channels),
      out_channels(out_channels),
      kernel_size(kernel_size.value_or(0)),
      stride(options.stride.value_or(1)),
      padding(options.padding.value_or(0)),
      dilation(options.dilation.value_or(1)),
      groups(options.groups),
      padding_mode(options.padding_mode),
      with_bias_(options.bias) {
  check_channels(this->type_name(), in_channels, out_channels, groups);
  check_geometry(this->type_name(), this->kernel_size, stride, padding, dilation);
  reset();
}

template <std::size_t D>
void ConvImpl<D>::reset() {
  Shape shape{out_channels, in_channels / groups};
  shape.insert(shape.end(), kernel_size.begin(), kernel_size.end());
  weight = this->register_parameter("weight", empty(shape));
  bias = with_bias_ ? this->register_parameter("bias", empty({out_channels})) : Tensor();
  reset_parameters();
}

template <std::size_t D>
void ConvImpl<D>::reset_parameters(Generator* generator) {
  init_conv_parameters(weight, bias, generator);
}

template <std::size_t D>
Tensor ConvImpl<D>::forward(const Tensor& x) {
  return with_layer_name(this->type_name(), [&] {
    if (padding_mode == PaddingMode::Zeros) return convolve<D>(x, weight, bias, stride, padding, dilation, groups);
    Ints pads;  // last spatial dim first: {left, right, top, bottom}
    for (std::size_t d = D; d-- > 0;) pads.insert(pads.end(), {padding[d], padding[d]});
    const Tensor padded = pad(x, pads, padding_mode == PaddingMode::Reflect ? PadMode::Reflect : PadMode::Replicate);
    return convolve<D>(padded, weight, bias, stride, Ints(D, 0), dilation, groups);
  });
}

template <std::size_t D>
std::string ConvImpl<D>::extra_repr() const {
  std::string out =
      conv_repr(in_channels, out_channels, kernel_size, stride, padding, {}, dilation, groups, with_bias_);
  if (padding_mode == PaddingMode::Reflect) out += ", padding_mode=reflect";
  if (padding_mode == PaddingMode::Replicate) out += ", padding_mode=replicate";
  return out;
}

template class ConvImpl<1>;
template class ConvImpl<2>;
template class ConvImpl<3>;

// ---- ConvTranspose1d, ConvTranspose2d, ConvTranspose3d ----

template <std::size_t D>
ConvTransposeImpl<D>::ConvTransposeImpl(std::int64_t in_channels, std::int64_t out_channels,
                                        ExpandingArray<D> kernel_size, ConvTransposeOptions<D> options)
    : Cloneable<ConvTransposeImpl<D>>(layer_name<D>("ConvTranspose")),
      in_channels(in_channels),
      out_channels(out_channels),
      kernel_size(kernel_size.value_or(0)),
      stride(options.stride.value_or(1)),
      padding(options.padding.value_or(0)),
      output_padding(options.output_padding.value_or(0)),
      dilation(options.dilation.value_or(1)),
      groups(options.groups),
      with_bias_(options.bias) {
  const std::string& layer = this->type_name();
  check_channels(layer, in_channels, out_channels, groups);
  check_geometry(layer, this->kernel_size, stride, padding, dilation);
  check_option_at_least(layer, "output_padding", output_padding, 0);
  for (std::size_t d = 0; d < D; ++d)
    if (output_padding[d] >= std::max(stride[d], dilation[d]))
      throw ShapeError(layer, concat("output_padding ", output_padding, " must be smaller than stride ", stride,
                                     " or dilation ", dilation, " in each dim"));
  reset();
}

template <std::size_t D>
void ConvTransposeImpl<D>::reset() {
  Shape shape{in_channels, out_channels / groups};
  shape.insert(shape.end(), kernel_size.begin(), kernel_size.end());
  weight = this->register_parameter("weight", empty(shape));
  bias = with_bias_ ? this->register_parameter("bias", empty({out_channels})) : Tensor();
  reset_parameters();
}

template <std::size_t D>
void ConvTransposeImpl<D>::reset_parameters(Generator* generator) {
  init_conv_parameters(weight, bias, generator);
}

template <std::size_t D>
Tensor ConvTransposeImpl<D>::forward(const Tensor& x) {
  return with_layer_name(this->type_name(), [&] {
    return convolve_transposed<D>(x, weight, bias, stride, padding, output_padding, groups, dilation);
  });
}

template <std::size_t D>
std::string ConvTransposeImpl<D>::extra_repr() const {
  return conv_repr(in_channels, out_channels, kernel_size, stride, padding, output_padding, dilation, groups,
                   with_bias_);
}

template class ConvTransposeImpl<1>;
template class ConvTransposeImpl<2>;
template class ConvTransposeImpl<3>;

}  // namespace infini::nn
