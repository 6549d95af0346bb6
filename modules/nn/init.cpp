// nn::init (see init.cppm). Values are drawn and computed on the host (random tensors for
// other devices are made there anyway), then copied into the tensor on its device.
// trunc_normal_ and orthogonal_ compute in float64.
module;
#include <cmath>
#include <cstddef>
#include <cstdint>
module infini.nn;
import infini.std;

namespace infini::nn::init {
namespace {

std::string op_name(const char* function) { return std::string("nn.init.") + function; }

void check_defined(const std::string& op, const Tensor& tensor) {
  if (!tensor.defined()) throw Error(op, "the tensor is undefined");
}

void check_floating(const std::string& op, const Tensor& tensor) {
  check_defined(op, tensor);
  if (!is_floating_point(tensor.dtype()))
    throw DTypeError(op, concat("initialises floating-point tensors, got ", tensor.dtype()));
}

void check_finite(const std::string& op, const char* what, double value) {
  if (!std::isfinite(value)) throw Error(op, concat(what, " must be finite, got ", value));
}

// Random values are drawn in float32, or float64 for a float64 tensor.
DataType draw_dtype(const Tensor& tensor) { return tensor.dtype() == kFloat64 ? kFloat64 : kFloat32; }

// Overwrites tensor's values (any strides) with host `values`, converted to its dtype and device.
Tensor write(const Tensor& tensor, const Tensor& values) {
  NoGradGuard no_grad;
  tensor.detach().copy_(values);
  return tensor;
}

Fans fans(const std::string& op, const Tensor& tensor) {
  check_defined(op, tensor);
  if (tensor.dim() < 2)
    throw ShapeError(op, concat("fan in and fan out need a tensor of at least 2 dims, got shape ", tensor.shape()));
  std::int64_t receptive_field = 1;
  for (std::int64_t d = 2; d < tensor.dim(); ++d) receptive_field *= tensor.shape()[d];
  return {tensor.shape()[1] * receptive_field, tensor.shape()[0] * receptive_field};
}

double gain_of(const std::string& op, Nonlinearity nonlinearity, std::optional<double> param) {
  switch (nonlinearity) {
    case Nonlinearity::Tanh: return 5.0 / 3.0;
    case Nonlinearity::ReLU: return std::numbers::sqrt2;
    case Nonlinearity::LeakyReLU: {
      const double slope = param.value_or(0.01);
      check_finite(op, "the negative slope", slope);
      return std::sqrt(2.0 / (1.0 + slope * slope));
    }
    case Nonlinearity::SELU: return 0.75;
    default: return 1.0;  // linear, convolutions, sigmoid
  }
}

Tensor uniform_impl(const std::string& op, const Tensor& tensor, double a, double b, Generator* generator) {
  check_floating(op, tensor);
  check_finite(op, "a", a);
  check_finite(op, "b", b);
  if (a > b) throw Error(op, concat("expects a <= b, got a=", a, " > b=", b));
  if (!std::isfinite(b - a)) throw Error(op, concat("the range b - a overflows, got a=", a, ", b=", b));
  if (tensor.numel() == 0) return tensor;
  NoGradGuard no_grad;
  Tensor u = rand(tensor.shape(), {.dtype = draw_dtype(tensor)}, generator);  // scaled in place: one temporary
  add_(mul_(u, b - a), a);
  return write(tensor, u);
}

Tensor normal_impl(const std::string& op, const Tensor& tensor, double mean, double sd, Generator* generator) {
  check_floating(op, tensor);
  check_finite(op, "mean", mean);
  check_finite(op, "std", sd);
  if (sd < 0) throw Error(op, concat("expects std >= 0, got ", sd));
  if (tensor.numel() == 0) return tensor;
  NoGradGuard no_grad;
  Tensor z = randn(tensor.shape(), {.dtype = draw_dtype(tensor)}, generator);  // scaled in place: one temporary
  add_(mul_(z, sd), mean);
  return write(tensor, z);
}

double kaiming_std(const std::string& op, const Tensor& tensor, double a, FanMode mode, Nonlinearity nonlinearity) {
  check_floating(op, tensor);
  const Fans f = fans(op, tensor);
  const std::int64_t fan = mode == FanMode::FanIn ? f.fan_in : f.fan_out;
  return gain_of(op, nonlinearity, a) / std::sqrt(static_cast<double>(fan));
}

double xavier_std(const std::string& op, const Tensor& tensor, double gain) {
  check_floating(op, tensor);
  check_finite(op, "gain", gain);
  const Fans f = fans(op, tensor);
  return gain * std::sqrt(2.0 / static_cast<double>(f.fan_in + f.fan_out));
}

// ---- trunc_normal_ ----

// Standard normal CDF, accurate in the lower tail.
double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::numbers::sqrt2); }

// Standard normal quantile: Acklam's rational approximation (relative error 1.2e-9),
// then two Halley steps on normal_cdf(x) = p.
double normal_quantile(double p) {
  if (p <= 0) return -std::numeric_limits<double>::infinity();
  if (p >= 1) return std::numeric_limits<double>::infinity();
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                                 1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                                 6.680131188771972e+01,  -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                                 -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                                 3.754408661907416e+00};
  constexpr double p_low = 0.02425;
  const auto tail = [&](double q) {
    return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
           ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  };
  double x;
  if (p < p_low) {
    x = tail(std::sqrt(-2 * std::log(p)));
  } else if (p <= 1 - p_low) {
    const double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  } else {
    x = -tail(std::sqrt(-2 * std::log1p(-p)));
  }
  const double sqrt_2pi = std::sqrt(2 * std::numbers::pi);
  for (int step = 0; step < 2; ++step) {
    const double e = normal_cdf(x) - p;
    const double u = e * sqrt_2pi * std::exp(x * x / 2);
    const double next = x - u / (1 + x * u / 2);
    if (!std::isfinite(next)) break;
    x = next;
  }
  return x;
}

// ---- orthogonal_ ----

// The m x n (m >= n) factor Q of A = QR with R's diagonal positive, by Householder
// reflections in float64. a: A column-major (column j at a[j*m]); returns Q column-major.
std::vector<double> orthonormal_columns(std::vector<double> a, std::int64_t m, std::int64_t n) {
  std::vector<std::vector<double>> reflectors(static_cast<std::size_t>(n));  // v_k (m - k), or empty
  std::vector<double> v_norm2(static_cast<std::size_t>(n), 0.0), r_sign(static_cast<std::size_t>(n), 1.0);
  const bool parallel = m * n >= 65536;
  for (std::int64_t k = 0; k < n; ++k) {
    double* col = a.data() + k * m;
    double norm2 = 0;
    for (std::int64_t i = k; i < m; ++i) norm2 += col[i] * col[i];
    const double norm = std::sqrt(norm2);
    const double alpha = col[k] >= 0 ? -norm : norm;  // R[k, k] after the reflection
    std::vector<double> v(col + k, col + m);
    v[0] -= alpha;
    double vv = 0;
    for (double x : v) vv += x * x;
    if (vv == 0) continue;  // the column is already zero below the diagonal
    r_sign[k] = alpha < 0 ? -1.0 : 1.0;
    // A[k:, k:] -= 2 v (v^T A[k:, k:]) / (v^T v)
#pragma omp parallel for if (parallel)
    for (std::int64_t j = k; j < n; ++j) {
      double* cj = a.data() + j * m + k;
      double s = 0;
      for (std::int64_t i = 0; i < m - k; ++i) s += v[i] * cj[i];
      const double f = 2 * s / vv;
      for (std::int64_t i = 0; i < m - k; ++i) cj[i] -= f * v[i];
    }
    reflectors[k] = std::move(v);
    v_norm2[k] = vv;
  }
  // Q = H_0 H_1 ... H_{n-1} applied to the first n columns of the identity.
  std::vector<double> q(static_cast<std::size_t>(m * n), 0.0);
  for (std::int64_t j = 0; j < n; ++j) q[j * m + j] = 1;
  for (std::int64_t k = n - 1; k >= 0; --k) {
    const std::vector<double>& v = reflectors[k];
    if (v.empty()) continue;
#pragma omp parallel for if (parallel)
    for (std::int64_t j = 0; j < n; ++j) {
      double* qj = q.data() + j * m + k;
      double s = 0;
      for (std::int64_t i = 0; i < m - k; ++i) s += v[i] * qj[i];
      const double f = 2 * s / v_norm2[k];
      for (std::int64_t i = 0; i < m - k; ++i) qj[i] -= f * v[i];
    }
  }
  // Q diag(sign(R)) pairs with diag(sign(R)) R, whose diagonal is positive.
  for (std::int64_t j = 0; j < n; ++j)
    for (std::int64_t i = 0; i < m; ++i) q[j * m + i] *= r_sign[j];
  return q;
}

}  // namespace

Fans calculate_fan_in_and_fan_out(const Tensor& tensor) { return fans("nn.init.calculate_fan_in_and_fan_out", tensor); }

double calculate_gain(Nonlinearity nonlinearity, std::optional<double> param) {
  return gain_of("nn.init.calculate_gain", nonlinearity, param);
}

Tensor uniform_(const Tensor& tensor, double a, double b, Generator* generator) {
  return uniform_impl(op_name("uniform_"), tensor, a, b, generator);
}

Tensor normal_(const Tensor& tensor, double mean, double sd, Generator* generator) {
  return normal_impl(op_name("normal_"), tensor, mean, sd, generator);
}

// randn and rand reserve one counter per element (see PhiloxState).
void skip_draws(std::int64_t numel, Generator* generator) {
  if (numel < 0) throw Error(op_name("skip_draws"), concat("expects numel >= 0, got ", numel));
  (generator ? *generator : default_generator()).reserve(static_cast<std::uint64_t>(numel));
}

Tensor trunc_normal_(const Tensor& tensor, double mean, double sd, double a, double b, Generator* generator) {
  const std::string op = op_name("trunc_normal_");
  check_floating(op, tensor);
  check_finite(op, "mean", mean);
  check_finite(op, "std", sd);
  check_finite(op, "a", a);
  check_finite(op, "b", b);
  if (!(sd > 0)) throw Error(op, concat("expects std > 0, got ", sd));
  if (!(a < b)) throw Error(op, concat("expects a < b, got a=", a, ", b=", b));
  if (tensor.numel() == 0) return tensor;
  // Work in standard units on the side of the mean where the interval mostly lies below 0,
  // so its CDF values are small numbers with full relative precision (mirror = -1 flips).
  double lo = (a - mean) / sd, hi = (b - mean) / sd;
  const double mirror = lo + hi > 0 ? -1.0 : 1.0;
  if (mirror < 0) {
    const double flipped_lo = -hi;
    hi = -lo;
    lo = flipped_lo;
  }
  const double cdf_lo = normal_cdf(lo), cdf_hi = normal_cdf(hi);
  Tensor values = rand(tensor.shape(), {.dtype = kFloat64}, generator);  // U[0, 1), contiguous, host
  double* v = values.data_ptr<double>();
  const std::int64_t n = values.numel();
#pragma omp parallel for if (n >= 32768)
  for (std::int64_t i = 0; i < n; ++i) {
    const double z = mirror * normal_quantile(cdf_lo + (cdf_hi - cdf_lo) * v[i]);
    v[i] = std::clamp(mean + sd * z, a, b);
  }
  return write(tensor, values);
}

Tensor constant_(const Tensor& tensor, const Scalar& value) {
  check_defined(op_name("constant_"), tensor);
  NoGradGuard no_grad;
  tensor.detach().fill_(value);
  return tensor;
}

Tensor zeros_(const Tensor& tensor) {
  check_defined(op_name("zeros_"), tensor);
  return constant_(tensor, 0);
}

Tensor ones_(const Tensor& tensor) {
  check_defined(op_name("ones_"), tensor);
  return constant_(tensor, 1);
}

Tensor xavier_uniform_(const Tensor& tensor, double gain, Generator* generator) {
  const std::string op = op_name("xavier_uniform_");
  const double bound = std::sqrt(3.0) * xavier_std(op, tensor, gain);
  return tensor.numel() == 0 ? tensor : uniform_impl(op, tensor, -bound, bound, generator);
}

Tensor xavier_normal_(const Tensor& tensor, double gain, Generator* generator) {
  const std::string op = op_name("xavier_normal_");
  const double sd = xavier_std(op, tensor, gain);
  return tensor.numel() == 0 ? tensor : normal_impl(op, tensor, 0, sd, generator);
}

Tensor kaiming_uniform_(const Tensor& tensor, double a, FanMode mode, Nonlinearity nonlinearity, Generator* generator) {
  const std::string op = op_name("kaiming_uniform_");
  const double bound = std::sqrt(3.0) * kaiming_std(op, tensor, a, mode, nonlinearity);
  return tensor.numel() == 0 ? tensor : uniform_impl(op, tensor, -bound, bound, generator);
}

Tensor kaiming_normal_(const Tensor& tensor, double a, FanMode mode, Nonlinearity nonlinearity, Generator* generator) {
  const std::string op = op_name("kaiming_normal_");
  const double sd = kaiming_std(op, tensor, a, mode, nonlinearity);
  return tensor.numel() == 0 ? tensor : normal_impl(op, tensor, 0, sd, generator);
}

Tensor orthogonal_(const Tensor& tensor, double gain, Generator* generator) {
  const std::string op = op_name("orthogonal_");
  check_floating(op, tensor);
  check_finite(op, "gain", gain);
  if (tensor.dim() < 2)
    throw ShapeError(op, concat("needs a tensor of at least 2 dims, got shape ", tensor.shape()));
  if (tensor.numel() == 0) return tensor;
  const std::int64_t rows = tensor.shape()[0], cols = tensor.numel() / rows;
  // A normal (rows, cols) matrix; factor it (or its transpose) so that m >= n.
  const Tensor normal = randn({rows, cols}, {.dtype = kFloat64}, generator);
  const bool wide = rows < cols;
  const std::int64_t m = wide ? cols : rows, n = wide ? rows : cols;
  // Column-major m x n: for a wide matrix that is the row-major (rows, cols) data as is.
  const Tensor column_major = wide ? normal : normal.t().contiguous();
  const double* src = column_major.data_ptr<double>();
  const std::vector<double> q = orthonormal_columns(std::vector<double>(src, src + m * n), m, n);
  // Column-major Q (m x n) read row-major is Q^T (n x m): the (rows, cols) result when wide.
  Tensor result = from_vector(q, {n, m});
  if (!wide) result = result.t();
  NoGradGuard no_grad;
  return write(tensor, mul(result, gain).reshape(tensor.shape()));
}

}  // namespace infini::nn::init
