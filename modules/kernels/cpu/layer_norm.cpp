// CPU fused layer norm (see layer_norm.cppm): rows in parallel; each row's mean and variance
// in two passes with float64 sums. The affine gradients are column sums over fixed chunks of
// 64 rows, each chunk's partial sums added in chunk order, so results do not depend on the
// thread count.
module;
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>
module infini.kernels;

namespace infini::kernels {
namespace {

constexpr std::int64_t kChunkRows = 64;

template <class T>
void forward_rows(T* y, T* mean, T* rstd, const T* x, const T* weight, const T* bias, std::int64_t n, std::int64_t c,
                  double eps) {
#pragma omp parallel for schedule(static) if (n * c > 32768)
  for (std::int64_t i = 0; i < n; ++i) {
    const T* row = x + i * c;
    double sum = 0;
    for (std::int64_t j = 0; j < c; ++j) sum += row[j];
    const T m = static_cast<T>(sum / static_cast<double>(c));
    double squares = 0;
    for (std::int64_t j = 0; j < c; ++j) {
      const double d = static_cast<double>(row[j]) - static_cast<double>(m);
      squares += d * d;
    }
    const T r = static_cast<T>(1 / std::sqrt(squares / static_cast<double>(c) + eps));
    mean[i] = m;
    rstd[i] = r;
    T* out = y + i * c;
    for (std::int64_t j = 0; j < c; ++j) {
      T v = (row[j] - m) * r;
      if (weight != nullptr) v *= weight[j];
      if (bias != nullptr) v += bias[j];
      out[j] = v;
    }
  }
}

template <class T>
void backward_rows(T* dx, T* dweight, T* dbias, const T* dy, const T* x, const T* mean, const T* rstd, const T* weight,
                   std::int64_t n, std::int64_t c) {
  const std::int64_t chunks = (n + kChunkRows - 1) / kChunkRows;
  const bool sums = dweight != nullptr || dbias != nullptr;
  // Per chunk: c partial sums of dy * x_hat, then c of dy.
  std::vector<double> partial(sums ? static_cast<std::size_t>(chunks * 2 * c) : 0, 0.0);
#pragma omp parallel for schedule(static) if (n * c > 32768)
  for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
    double* wsum = sums ? partial.data() + chunk * 2 * c : nullptr;
    double* bsum = sums ? wsum + c : nullptr;
    for (std::int64_t i = chunk * kChunkRows; i < std::min(n, (chunk + 1) * kChunkRows); ++i) {
      const T* g_row = dy + i * c;
      const T* x_row = x + i * c;
      const double m = mean[i], r = rstd[i];
      double g_sum = 0, gx_sum = 0;  // sums over the row of g and g * x_hat
      for (std::int64_t j = 0; j < c; ++j) {
        const double g = weight != nullptr ? static_cast<double>(g_row[j]) * weight[j] : g_row[j];
        const double xh = (x_row[j] - m) * r;
        g_sum += g;
        gx_sum += g * xh;
        if (sums) {
          wsum[j] += g_row[j] * xh;
          bsum[j] += g_row[j];
        }
      }
      const double g_mean = g_sum / static_cast<double>(c), gx_mean = gx_sum / static_cast<double>(c);
      T* out = dx + i * c;
      for (std::int64_t j = 0; j < c; ++j) {
        const double g = weight != nullptr ? static_cast<double>(g_row[j]) * weight[j] : g_row[j];
        const double xh = (x_row[j] - m) * r;
        out[j] = static_cast<T>(r * (g - g_mean - xh * gx_mean));
      }
    }
  }
  if (!sums) return;
  for (std::int64_t j = 0; j < c; ++j) {
    double w = 0, b = 0;
    for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
      w += partial[static_cast<std::size_t>(chunk * 2 * c + j)];
      b += partial[static_cast<std::size_t>(chunk * 2 * c + c + j)];
    }
    if (dweight != nullptr) dweight[j] = static_cast<T>(w);
    if (dbias != nullptr) dbias[j] = static_cast<T>(b);
  }
}

template <class T>
T* data_or_null(const Tensor& t) {
  return t.defined() ? static_cast<T*>(t.data_ptr()) : nullptr;
}

void forward_cpu(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& weight,
                 const Tensor& bias, double eps) {
  const std::int64_t n = x.shape()[0], c = x.shape()[1];
  auto run = [&]<class T>(T) {
    forward_rows<T>(data_or_null<T>(y), data_or_null<T>(mean), data_or_null<T>(rstd), data_or_null<T>(x),
                    data_or_null<T>(weight), data_or_null<T>(bias), n, c, eps);
  };
  if (x.dtype() == kFloat64) run(double{});
  else run(float{});
}

void backward_cpu(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dy, const Tensor& x,
                  const Tensor& mean, const Tensor& rstd, const Tensor& weight) {
  const std::int64_t n = x.shape()[0], c = x.shape()[1];
  auto run = [&]<class T>(T) {
    backward_rows<T>(data_or_null<T>(dx), data_or_null<T>(dweight), data_or_null<T>(dbias), data_or_null<T>(dy),
                     data_or_null<T>(x), data_or_null<T>(mean), data_or_null<T>(rstd), data_or_null<T>(weight), n, c);
  };
  if (x.dtype() == kFloat64) run(double{});
  else run(float{});
}

const bool registered = [] {
  KernelTable<LayerNormForwardKernel>::set(DeviceType::CPU, &forward_cpu);
  KernelTable<LayerNormBackwardKernel>::set(DeviceType::CPU, &backward_cpu);
  return true;
}();

}  // namespace
}  // namespace infini::kernels
