// MaxPool1d/2d, AvgPool1d/2d/3d, AdaptiveAvgPool1d/2d and AdaptiveMaxPool2d: option checks
// and forward through the functional pooling ops (see pooling.cppm).
module;
#include <cstddef>
#include <cstdint>
module infini.nn;
import infini.std;

namespace infini::nn {
using namespace spatial_options;
namespace {

using Ints = std::vector<std::int64_t>;

// ShapeError naming `layer` unless kernel >= 1, stride >= 1, 0 <= padding <= kernel / 2 and
// dilation >= 1 in every dim.
void check_window(const std::string& layer, const Ints& kernel_size, const Ints& stride, const Ints& padding,
                  const Ints& dilation) {
  check_option_at_least(layer, "kernel_size", kernel_size, 1);
  check_option_at_least(layer, "stride", stride, 1);
  check_option_at_least(layer, "padding", padding, 0);
  check_option_at_least(layer, "dilation", dilation, 1);
  for (std::size_t d = 0; d < kernel_size.size(); ++d)
    if (padding[d] > kernel_size[d] / 2)
      throw ShapeError(layer, concat("padding ", padding, " must be at most half of kernel_size ", kernel_size));
}

// "MaxPool2d", "AvgPool1d", ...
template <std::size_t D>
std::string layer_name(const char* family) {
  return concat(family, D, "d");
}

}  // namespace

// ---- MaxPool1d, MaxPool2d ----

template <std::size_t D>
MaxPoolImpl<D>::MaxPoolImpl(ExpandingArray<D> kernel_size, MaxPoolOptions<D> options)
    : Cloneable<MaxPoolImpl<D>>(layer_name<D>("MaxPool")),
      kernel_size(kernel_size.value_or(0)),
      stride(options.stride.value_or(this->kernel_size)),
      padding(options.padding.value_or(0)),
      dilation(options.dilation.value_or(1)),
      ceil_mode(options.ceil_mode) {
  check_window(this->type_name(), this->kernel_size, stride, padding, dilation);
}

template <std::size_t D>
MaxPoolResult MaxPoolImpl<D>::forward_with_indices(const Tensor& x) {
  MaxPoolResult result;
  with_layer_name(this->type_name(), [&] {
    if constexpr (D == 1)
      result = max_pool1d_with_indices(x, expanding<1>(kernel_size), expanding<1>(stride), expanding<1>(padding),
                                       expanding<1>(dilation), ceil_mode);
    else
      result = max_pool2d_with_indices(x, expanding<2>(kernel_size), expanding<2>(stride), expanding<2>(padding),
                                       expanding<2>(dilation), ceil_mode);
    return result.values;
  });
  return result;
}

template <std::size_t D>
Tensor MaxPoolImpl<D>::forward(const Tensor& x) {
  return with_layer_name(this->type_name(), [&] {
    if constexpr (D == 1)
      return max_pool1d(x, expanding<1>(kernel_size), expanding<1>(stride), expanding<1>(padding),
                        expanding<1>(dilation), ceil_mode);
    else
      return max_pool2d(x, expanding<2>(kernel_size), expanding<2>(stride), expanding<2>(padding),
                        expanding<2>(dilation), ceil_mode);
  });
}

template <std::size_t D>
std::string MaxPoolImpl<D>::extra_repr() const {
  return concat("kernel_size=", compact_str(kernel_size), ", stride=", compact_str(stride),
                ", padding=", compact_str(padding), ", dilation=", compact_str(dilation),
                ", ceil_mode=", bool_str(ceil_mode));
}

template class MaxPoolImpl<1>;
template class MaxPoolImpl<2>;

// ---- AvgPool1d, AvgPool2d, AvgPool3d ----

template <std::size_t D>
AvgPoolImpl<D>::AvgPoolImpl(ExpandingArray<D> kernel_size, AvgPoolOptions<D> options)
    : Cloneable<AvgPoolImpl<D>>(layer_name<D>("AvgPool")),
      kernel_size(kernel_size.value_or(0)),
      stride(options.stride.value_or(this->kernel_size)),
      padding(options.padding.value_or(0)),
      ceil_mode(options.ceil_mode),
      count_include_pad(options.count_include_pad) {
  if constexpr (D > 1) divisor_override = options.divisor_override;
  check_window(this->type_name(), this->kernel_size, stride, padding, Ints(D, 1));
  if (divisor_override && *divisor_override == 0)
    throw ShapeError(this->type_name(), "divisor_override must be non-zero");
}

template <std::size_t D>
Tensor AvgPoolImpl<D>::forward(const Tensor& x) {
  return with_layer_name(this->type_name(), [&] {
    if constexpr (D == 1)
      return avg_pool1d(x, expanding<1>(kernel_size), expanding<1>(stride), expanding<1>(padding), ceil_mode,
                        count_include_pad);
    else if constexpr (D == 2)
      return avg_pool2d(x, expanding<2>(kernel_size), expanding<2>(stride), expanding<2>(padding), ceil_mode,
                        count_include_pad, divisor_override);
    else
      return avg_pool3d(x, expanding<3>(kernel_size), expanding<3>(stride), expanding<3>(padding), ceil_mode,
                        count_include_pad, divisor_override);
  });
}

template <std::size_t D>
std::string AvgPoolImpl<D>::extra_repr() const {
  std::string out = concat("kernel_size=", compact_str(kernel_size), ", stride=", compact_str(stride),
                           ", padding=", compact_str(padding));
  if (ceil_mode) out += ", ceil_mode=true";
  if (!count_include_pad) out += ", count_include_pad=false";
  if (divisor_override) out += concat(", divisor_override=", *divisor_override);
  return out;
}

template class AvgPoolImpl<1>;
template class AvgPoolImpl<2>;
template class AvgPoolImpl<3>;

// ---- AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveMaxPool2d ----

template <std::size_t D>
AdaptiveAvgPoolImpl<D>::AdaptiveAvgPoolImpl(ExpandingArray<D> output_size)
    : Cloneable<AdaptiveAvgPoolImpl<D>>(layer_name<D>("AdaptiveAvgPool")), output_size(output_size.value_or(0)) {
  check_option_at_least(this->type_name(), "output_size", this->output_size, 1);
}

template <std::size_t D>
Tensor AdaptiveAvgPoolImpl<D>::forward(const Tensor& x) {
  return with_layer_name(this->type_name(), [&] {
    if constexpr (D == 1) return adaptive_avg_pool1d(x, expanding<1>(output_size));
    else return adaptive_avg_pool2d(x, expanding<2>(output_size));
  });
}

template <std::size_t D>
std::string AdaptiveAvgPoolImpl<D>::extra_repr() const {
  return "output_size=" + compact_str(output_size);
}

template class AdaptiveAvgPoolImpl<1>;
template class AdaptiveAvgPoolImpl<2>;

AdaptiveMaxPool2dImpl::AdaptiveMaxPool2dImpl(ExpandingArray<2> output_size)
    : Cloneable("AdaptiveMaxPool2d"), output_size(output_size.value_or(0)) {
  check_option_at_least(type_name(), "output_size", this->output_size, 1);
}

Tensor AdaptiveMaxPool2dImpl::forward(const Tensor& x) {
  return with_layer_name(type_name(), [&] { return adaptive_max_pool2d(x, expanding<2>(output_size)); });
}

MaxPoolResult AdaptiveMaxPool2dImpl::forward_with_indices(const Tensor& x) {
  MaxPoolResult result;
  with_layer_name(type_name(), [&] {
    result = adaptive_max_pool2d_with_indices(x, expanding<2>(output_size));
    return result.values;
  });
  return result;
}

std::string AdaptiveMaxPool2dImpl::extra_repr() const {
  return "output_size=" + compact_str(output_size);
}

}  // namespace infini::nn
