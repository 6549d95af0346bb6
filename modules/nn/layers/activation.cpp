// The activation layers with options (see activation.cppm).
module;
#include <cmath>
#include <cstdint>
#include <string>
module infini.nn;

namespace infini::nn {

LeakyReLUImpl::LeakyReLUImpl(double negative_slope) : Cloneable("LeakyReLU"), negative_slope(negative_slope) {
  reset();
}

void LeakyReLUImpl::reset() {
  if (!std::isfinite(negative_slope))
    throw Error(type_name(), concat("negative_slope must be finite, got ", negative_slope));
}

Tensor LeakyReLUImpl::forward(const Tensor& x) {
  return with_layer_name(type_name(), [&] { return leaky_relu(x, negative_slope); });
}

std::string LeakyReLUImpl::extra_repr() const { return concat("negative_slope=", negative_slope); }

GELUImpl::GELUImpl(GeluApproximation approximate) : Cloneable("GELU"), approximate(approximate) {}

GELUImpl::GELUImpl(const std::string& approximate) : Cloneable("GELU"), approximate(GeluApproximation::None) {
  if (approximate == "tanh") this->approximate = GeluApproximation::Tanh;
  else if (approximate != "none")
    throw Error(type_name(), concat("approximate must be \"none\" or \"tanh\", got \"", approximate, "\""));
}

Tensor GELUImpl::forward(const Tensor& x) {
  return with_layer_name(type_name(), [&] { return gelu(x, approximate); });
}

std::string GELUImpl::extra_repr() const {
  return approximate == GeluApproximation::Tanh ? "approximate='tanh'" : "approximate='none'";
}

Tensor SoftmaxImpl::forward(const Tensor& x) {
  return with_layer_name(type_name(), [&] { return softmax(x, dim); });
}

std::string SoftmaxImpl::extra_repr() const { return concat("dim=", dim); }

Tensor LogSoftmaxImpl::forward(const Tensor& x) {
  return with_layer_name(type_name(), [&] { return log_softmax(x, dim); });
}

std::string LogSoftmaxImpl::extra_repr() const { return concat("dim=", dim); }

}  // namespace infini::nn
