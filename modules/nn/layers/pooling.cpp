// MaxPool2d, AvgPool2d, AvgPool3d and AdaptiveAvgPool2d: option checks and forward through
// the functional pooling ops (see pooling.cppm).
module;
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>
module infini.nn;

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

}  // namespace

// ---- MaxPool2d ----

MaxPool2dImpl::MaxPool2dImpl(ExpandingArray<2> kernel_size, MaxPool2dOptions options)
    : Cloneable("MaxPool2d"),
      kernel_size(kernel_size.value_or(0)),
      stride(options.stride.value_or(this->kernel_size)),
      padding(options.padding.value_or(0)),
      dilation(options.dilation.value_or(1)),
      ceil_mode(options.ceil_mode) {
  check_window(type_name(), this->kernel_size, stride, padding, dilation);
}

MaxPoolResult MaxPool2dImpl::forward_with_indices(const Tensor& x) {
  MaxPoolResult result;
  with_layer_name(type_name(), [&] {
    result = max_pool2d_with_indices(x, expanding<2>(kernel_size), expanding<2>(stride), expanding<2>(padding),
                                     expanding<2>(dilation), ceil_mode);
    return result.values;
  });
  return result;
}

Tensor MaxPool2dImpl::forward(const Tensor& x) {
  return with_layer_name(type_name(), [&] {
    return max_pool2d(x, expanding<2>(kernel_size), expanding<2>(stride), expanding<2>(padding),
                      expanding<2>(dilation), ceil_mode);
  });
}

std::string MaxPool2dImpl::extra_repr() const {
  return concat("kernel_size=", compact_str(kernel_size), ", stride=", compact_str(stride),
                ", padding=", compact_str(padding), ", dilation=", compact_str(dilation),
                ", ceil_mode=", bool_str(ceil_mode));
}

// ---- AvgPool2d, AvgPool3d ----

template <std::size_t D>
AvgPoolImpl<D>::AvgPoolImpl(ExpandingArray<D> kernel_size, AvgPoolOptions<D> options)
    : Cloneable<AvgPoolImpl<D>>(D == 2 ? "AvgPool2d" : "AvgPool3d"),
      kernel_size(kernel_size.value_or(0)),
      stride(options.stride.value_or(this->kernel_size)),
      padding(options.padding.value_or(0)),
      ceil_mode(options.ceil_mode),
      count_include_pad(options.count_include_pad),
      divisor_override(options.divisor_override) {
  check_window(this->type_name(), this->kernel_size, stride, padding, Ints(D, 1));
  if (divisor_override && *divisor_override == 0)
    throw ShapeError(this->type_name(), "divisor_override must be non-zero");
}

template <std::size_t D>
Tensor AvgPoolImpl<D>::forward(const Tensor& x) {
  return with_layer_name(this->type_name(), [&] {
    if constexpr (D == 2)
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

template class AvgPoolImpl<2>;
template class AvgPoolImpl<3>;

// ---- AdaptiveAvgPool2d ----

AdaptiveAvgPool2dImpl::AdaptiveAvgPool2dImpl(ExpandingArray<2> output_size)
    : Cloneable("AdaptiveAvgPool2d"), output_size(output_size.value_or(0)) {
  check_option_at_least(type_name(), "output_size", this->output_size, 1);
}

Tensor AdaptiveAvgPool2dImpl::forward(const Tensor& x) {
  return with_layer_name(type_name(), [&] {
    return adaptive_avg_pool2d(x, expanding<2>(output_size));
  });
}

std::string AdaptiveAvgPool2dImpl::extra_repr() const {
  return "output_size=" + compact_str(output_size);
}

}  // namespace infini::nn
