// The activation layers with options or parameters (see activation.cppm).
module;
#include <cmath>
#include <cstdint>
module infini.nn;
import infini.std;

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

HardtanhImpl::HardtanhImpl(double min_val, double max_val) : Cloneable("Hardtanh"), min_val(min_val), max_val(max_val) {
  reset();
}

void HardtanhImpl::reset() {
  if (!(min_val < max_val))
    throw Error(type_name(), concat("min_val (", min_val, ") must be less than max_val (", max_val, ")"));
}

Tensor HardtanhImpl::forward(const Tensor& x) {
  return with_layer_name(type_name(), [&] { return hardtanh(x, min_val, max_val); });
}

std::string HardtanhImpl::extra_repr() const { return concat("min_val=", min_val, ", max_val=", max_val); }

CELUImpl::CELUImpl(double alpha) : Cloneable("CELU"), alpha(alpha) { reset(); }

void CELUImpl::reset() {
  if (alpha == 0 || !std::isfinite(alpha))
    throw Error(type_name(), concat("alpha must be finite and nonzero, got ", alpha));
}

Tensor CELUImpl::forward(const Tensor& x) {
  return with_layer_name(type_name(), [&] { return celu(x, alpha); });
}

std::string CELUImpl::extra_repr() const { return concat("alpha=", alpha); }

Tensor GLUImpl::forward(const Tensor& x) {
  return with_layer_name(type_name(), [&] { return glu(x, dim); });
}

std::string GLUImpl::extra_repr() const { return concat("dim=", dim); }

PReLUImpl::PReLUImpl(std::int64_t num_parameters, double init)
    : Cloneable("PReLU"), num_parameters(num_parameters), init(init) {
  reset();
}

void PReLUImpl::reset() {
  if (num_parameters < 1) throw Error(type_name(), concat("num_parameters must be >= 1, got ", num_parameters));
  weight = register_parameter("weight", empty({num_parameters}));
  reset_parameters();
}

void PReLUImpl::reset_parameters() { init::constant_(weight, init); }

Tensor PReLUImpl::forward(const Tensor& x) {
  return with_layer_name(type_name(), [&] { return prelu(x, weight); });
}

std::string PReLUImpl::extra_repr() const { return concat("num_parameters=", num_parameters); }

Tensor SoftmaxImpl::forward(const Tensor& x) {
  return with_layer_name(type_name(), [&] { return softmax(x, dim); });
}

std::string SoftmaxImpl::extra_repr() const { return concat("dim=", dim); }

Tensor LogSoftmaxImpl::forward(const Tensor& x) {
  return with_layer_name(type_name(), [&] { return log_softmax(x, dim); });
}

std::string LogSoftmaxImpl::extra_repr() const { return concat("dim=", dim); }

}  // namespace infini::nn
