// Linear and Bilinear (see linear.cppm).
module;
#include <cmath>
#include <cstdint>
module infini.nn;
import infini.std;

namespace infini::nn {
namespace {

void check_size(const std::string& layer, const char* what, std::int64_t size) {
  if (size < 0) throw ShapeError(layer, concat(what, " must be >= 0, got ", size));
}

// x (..., features) for a layer that expects `features` in its last dim.
void check_features(const std::string& layer, const char* what, const Tensor& x, std::int64_t features) {
  if (x.dim() == 0 || x.shape().back() != features)
    throw ShapeError(layer, concat("expected ", what, " of shape (*, ", features, "), got ", x.shape()));
}

// U(-k, k) with k = 1/sqrt(fan_in), or 0 when fan_in is 0.
double uniform_bound(std::int64_t fan_in) { return fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0; }

}  // namespace

// ---- Linear ----

LinearImpl::LinearImpl(std::int64_t in_features, std::int64_t out_features, bool bias)
    : Cloneable("Linear"), in_features(in_features), out_features(out_features), with_bias_(bias) {
  reset();
}

void LinearImpl::reset() {
  check_size(type_name(), "in_features", in_features);
  check_size(type_name(), "out_features", out_features);
  weight = register_parameter("weight", empty({out_features, in_features}));
  bias = with_bias_ ? register_parameter("bias", empty({out_features})) : Tensor();
  reset_parameters();
}

void LinearImpl::reset_parameters(Generator* generator) {
  // PyTorch's kaiming_uniform_(weight, a=sqrt(5)): bound = sqrt(1/3) * sqrt(3 / in) = 1/sqrt(in).
  init::kaiming_uniform_(weight, std::sqrt(5.0), init::FanMode::FanIn, init::Nonlinearity::LeakyReLU, generator);
  if (bias.defined()) {
    const double bound = uniform_bound(in_features);
    init::uniform_(bias, -bound, bound, generator);
  }
}

Tensor LinearImpl::forward(const Tensor& x) {
  check_features(type_name(), "input", x, in_features);
  return with_layer_name(type_name(), [&] { return linear(x, weight, bias); });
}

std::string LinearImpl::extra_repr() const {
  return concat("in_features=", in_features, ", out_features=", out_features, ", bias=", with_bias_ ? "true" : "false");
}

// ---- Bilinear ----

BilinearImpl::BilinearImpl(std::int64_t in1_features, std::int64_t in2_features, std::int64_t out_features, bool bias)
    : Cloneable("Bilinear"),
      in1_features(in1_features),
      in2_features(in2_features),
      out_features(out_features),
      with_bias_(bias) {
  reset();
}

void BilinearImpl::reset() {
  check_size(type_name(), "in1_features", in1_features);
  check_size(type_name(), "in2_features", in2_features);
  check_size(type_name(), "out_features", out_features);
  weight = register_parameter("weight", empty({out_features, in1_features, in2_features}));
  bias = with_bias_ ? register_parameter("bias", empty({out_features})) : Tensor();
  reset_parameters();
}

void BilinearImpl::reset_parameters(Generator* generator) {
  const double bound = uniform_bound(in1_features);
  init::uniform_(weight, -bound, bound, generator);
  if (bias.defined()) init::uniform_(bias, -bound, bound, generator);
}

Tensor BilinearImpl::forward(const Tensor& x1, const Tensor& x2) {
  const std::string& layer = type_name();
  check_features(layer, "input1", x1, in1_features);
  check_features(layer, "input2", x2, in2_features);
  const Shape batch(x1.shape().begin(), x1.shape().end() - 1);
  if (Shape(x2.shape().begin(), x2.shape().end() - 1) != batch)
    throw ShapeError(layer, concat("input1 of shape ", x1.shape(), " and input2 of shape ", x2.shape(),
                                   " must have the same leading dims"));
  return with_layer_name(layer, [&] {
    std::int64_t n = 1;
    for (std::int64_t s : batch) n *= s;
    // t[n, o, j] = sum_i x1[n, i] W[o, i, j]: (N, in1) @ (in1, out * in2)
    const Tensor w = weight.permute({1, 0, 2}).reshape({in1_features, out_features * in2_features});
    const Tensor t = matmul(x1.reshape({n, in1_features}), w).view({n, out_features, in2_features});
    Tensor y = sum(mul(t, x2.reshape({n, 1, in2_features})), {2});  // (N, out)
    if (bias.defined()) y = add(y, bias);
    Shape out_shape = batch;
    out_shape.push_back(out_features);
    return y.reshape(out_shape);
  });
}

Tensor BilinearImpl::operator()(const Tensor& x1, const Tensor& x2) {
  return call({x1, x2}, [&] { return forward(x1, x2); });
}

std::string BilinearImpl::extra_repr() const {
  return concat("in1_features=", in1_features, ", in2_features=", in2_features, ", out_features=", out_features,
                ", bias=", with_bias_ ? "true" : "false");
}

}  // namespace infini::nn
