// LayerNorm, RMSNorm and GroupNorm (see normalization.cppm).
module;
#include <cmath>
#include <cstdint>
module infini.nn;
import infini.std;

namespace infini::nn {
namespace {

void check_normalized_shape(const std::string& layer, const Shape& shape) {
  bool negative = false;
  for (std::int64_t s : shape) negative = negative || s < 0;
  if (shape.empty() || negative)
    throw ShapeError(layer, concat("normalized_shape must be non-empty with sizes >= 0, got ", shape));
}

void check_eps(const std::string& layer, double eps) {
  if (!(eps >= 0) || !std::isfinite(eps)) throw Error(layer, concat("eps must be finite and >= 0, got ", eps));
}

// torch.finfo(dtype).eps
double machine_epsilon(DataType dtype) {
  if (dtype == kFloat64) return std::numeric_limits<double>::epsilon();
  if (dtype == kFloat16) return 0x1p-10;
  if (dtype == kBFloat16) return 0x1p-7;
  return std::numeric_limits<float>::epsilon();
}

const char* flag(bool on) { return on ? "true" : "false"; }

}  // namespace

// ---- LayerNorm ----

LayerNormImpl::LayerNormImpl(Shape normalized_shape, LayerNormOptions options)
    : Cloneable("LayerNorm"), normalized_shape(std::move(normalized_shape)), options(options) {
  reset();
}

LayerNormImpl::LayerNormImpl(std::int64_t normalized_size, LayerNormOptions options)
    : LayerNormImpl(Shape{normalized_size}, options) {}

void LayerNormImpl::reset() {
  check_normalized_shape(type_name(), normalized_shape);
  check_eps(type_name(), options.eps);
  const bool affine = options.elementwise_affine;
  weight = affine ? register_parameter("weight", empty(normalized_shape)) : Tensor();
  bias = affine && options.bias ? register_parameter("bias", empty(normalized_shape)) : Tensor();
  reset_parameters();
}

void LayerNormImpl::reset_parameters() {
  if (weight.defined()) init::ones_(weight);
  if (bias.defined()) init::zeros_(bias);
}

Tensor LayerNormImpl::forward(const Tensor& x) { return normalize(x, std::nullopt); }

Tensor LayerNormImpl::forward(const Tensor& x, DataType out_dtype) { return normalize(x, out_dtype); }

NormAndResidual LayerNormImpl::forward_with_residual(const Tensor& x, std::optional<DataType> out_dtype) {
  return with_layer_name(type_name(), [&] {
    return layer_norm_with_residual(x, normalized_shape, weight.defined() ? std::optional(weight) : std::nullopt,
                                    bias.defined() ? std::optional(bias) : std::nullopt, options.eps, out_dtype);
  });
}

Tensor LayerNormImpl::normalize(const Tensor& x, std::optional<DataType> out_dtype) {
  return with_layer_name(type_name(), [&] {
    return layer_norm(x, normalized_shape, weight.defined() ? std::optional(weight) : std::nullopt,
                      bias.defined() ? std::optional(bias) : std::nullopt, options.eps, out_dtype);
  });
}

std::string LayerNormImpl::extra_repr() const {
  return concat(normalized_shape, ", eps=", options.eps, ", elementwise_affine=", flag(options.elementwise_affine));
}

// ---- RMSNorm ----

RMSNormImpl::RMSNormImpl(Shape normalized_shape, RMSNormOptions options)
    : Cloneable("RMSNorm"), normalized_shape(std::move(normalized_shape)), options(options) {
  reset();
}

RMSNormImpl::RMSNormImpl(std::int64_t normalized_size, RMSNormOptions options)
    : RMSNormImpl(Shape{normalized_size}, options) {}

void RMSNormImpl::reset() {
  check_normalized_shape(type_name(), normalized_shape);
  if (options.eps) check_eps(type_name(), *options.eps);
  weight = options.elementwise_affine ? register_parameter("weight", empty(normalized_shape)) : Tensor();
  reset_parameters();
}

void RMSNormImpl::reset_parameters() {
  if (weight.defined()) init::ones_(weight);
}

Tensor RMSNormImpl::forward(const Tensor& x) {
  return with_layer_name(type_name(), [&] {
    return rms_norm(x, normalized_shape, weight.defined() ? std::optional(weight) : std::nullopt,
                    options.eps.value_or(machine_epsilon(x.dtype())));
  });
}

std::string RMSNormImpl::extra_repr() const {
  return concat(normalized_shape, ", eps=", options.eps ? concat(*options.eps) : std::string("None"),
                ", elementwise_affine=", flag(options.elementwise_affine));
}

// ---- GroupNorm ----

GroupNormImpl::GroupNormImpl(std::int64_t num_groups, std::int64_t num_channels, GroupNormOptions options)
    : Cloneable("GroupNorm"), num_groups(num_groups), num_channels(num_channels), options(options) {
  reset();
}

void GroupNormImpl::reset() {
  if (num_groups <= 0 || num_channels < 0 || num_channels % num_groups != 0)
    throw ShapeError(type_name(), concat("num_channels (", num_channels, ") must be >= 0 and divisible by num_groups (",
                                         num_groups, " > 0)"));
  check_eps(type_name(), options.eps);
  weight = options.affine ? register_parameter("weight", empty({num_channels})) : Tensor();
  bias = options.affine ? register_parameter("bias", empty({num_channels})) : Tensor();
  reset_parameters();
}

void GroupNormImpl::reset_parameters() {
  if (weight.defined()) init::ones_(weight);
  if (bias.defined()) init::zeros_(bias);
}

Tensor GroupNormImpl::forward(const Tensor& x) {
  if (x.dim() < 2 || x.shape()[1] != num_channels)
    throw ShapeError(type_name(), concat("expected input of shape (N, ", num_channels, ", *), got ", x.shape()));
  return with_layer_name(type_name(), [&] {
    return group_norm(x, num_groups, weight.defined() ? std::optional(weight) : std::nullopt,
                      bias.defined() ? std::optional(bias) : std::nullopt, options.eps);
  });
}

std::string GroupNormImpl::extra_repr() const {
  return concat(num_groups, ", ", num_channels, ", eps=", options.eps, ", affine=", flag(options.affine));
}

}  // namespace infini::nn
