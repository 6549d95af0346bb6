// CPU fused layer norm (see layer_norm.cppm): rows in parallel; each row's mean and variance
// in two passes with float64 sums; float32 rows may write y, and read dy, as float16 or
// bfloat16 (Y, G); the per-element math of the backward in the element type
// like the CUDA kernel's, its row sums in float64. The affine gradients are column sums over fixed chunks of
// 64 rows, each chunk's partial sums added in chunk order, so results do not depend on the
// thread count.
module;
#include <cmath>
#include <cstdint>

#include "infini/math/rounded.h"
#include "partial_sums.h"
module infini.kernels;
import infini.std;

namespace infini::kernels {
namespace {

constexpr std::int64_t kChunkRows = 64;

using cpu::add_terms;
using cpu::kPartials;
using cpu::total;

template <class T, class Y>
void forward_rows(Y* y, T* mean, T* rstd, const T* x, const T* weight, const T* bias, std::int64_t n, std::int64_t c,
                  double eps) {
#pragma omp parallel for schedule(static) if (n * c > 32768)
  for (std::int64_t i = 0; i < n; ++i) {
    const T* row = x + i * c;
    double sums[kPartials] = {};
    add_terms(sums, c, [&](std::int64_t j) { return static_cast<double>(row[j]); });
    const T m = static_cast<T>(total(sums) / static_cast<double>(c));
    double squares[kPartials] = {};
    add_terms(squares, c, [&](std::int64_t j) {
      const double d = static_cast<double>(row[j]) - static_cast<double>(m);
      return d * d;
    });
    const T r = static_cast<T>(1 / std::sqrt(total(squares) / static_cast<double>(c) + eps));
    mean[i] = m;
    rstd[i] = r;
    Y* out = y + i * c;
    for (std::int64_t j = 0; j < c; ++j) {
      T v = (row[j] - m) * r;
      if (weight != nullptr) v *= weight[j];
      if (bias != nullptr) v += bias[j];
      out[j] = static_cast<Y>(v);
    }
  }
}

template <class T, class G>
void backward_rows(T* dx, T* dweight, T* dbias, const G* dy, const T* dx_add, const T* x, const T* mean, const T* rstd,
                   const T* weight, std::int64_t n, std::int64_t c) {
  const std::int64_t chunks = (n + kChunkRows - 1) / kChunkRows;
  const bool sums = dweight != nullptr || dbias != nullptr;
  // Per chunk: c partial sums of dy * x_hat, then c of dy.
  std::vector<double> partial(sums ? static_cast<std::size_t>(chunks * 2 * c) : 0, 0.0);
#pragma omp parallel for schedule(static) if (n * c > 32768)
  for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
    double* wsum = sums ? partial.data() + chunk * 2 * c : nullptr;
    double* bsum = sums ? wsum + c : nullptr;
    for (std::int64_t i = chunk * kChunkRows; i < std::min(n, (chunk + 1) * kChunkRows); ++i) {
      const G* g_row = dy + i * c;
      const T* x_row = x + i * c;
      const T m = mean[i], r = rstd[i];
      const auto d_of = [&](std::int64_t j) { return static_cast<T>(g_row[j]); };  // exact
      const auto g_of = [&](std::int64_t j) { return weight != nullptr ? d_of(j) * weight[j] : d_of(j); };
      double g_sum[kPartials] = {}, gx_sum[kPartials] = {};  // sums over the row of g and g * x_hat
      add_terms(g_sum, c, [&](std::int64_t j) { return static_cast<double>(g_of(j)); });
      add_terms(gx_sum, c, [&](std::int64_t j) { return static_cast<double>(g_of(j)) * ((x_row[j] - m) * r); });
      if (sums)
        for (std::int64_t j = 0; j < c; ++j) {
          const T xh = (x_row[j] - m) * r;
          wsum[j] += static_cast<double>(d_of(j)) * xh;
          bsum[j] += d_of(j);
        }
      const T g_mean = static_cast<T>(total(g_sum) / static_cast<double>(c));
      const T gx_mean = static_cast<T>(total(gx_sum) / static_cast<double>(c));
      T* out = dx + i * c;
      const T* add_row = dx_add != nullptr ? dx_add + i * c : nullptr;
      for (std::int64_t j = 0; j < c; ++j) {
        const T value = r * (g_of(j) - g_mean - (x_row[j] - m) * r * gx_mean);
        out[j] = add_row != nullptr ? math::add_rn(add_row[j], value) : value;  // a separate add's bits
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

// Calls f(T{}, S{}): T the rows' type, S y's or dy's (T's, or float16/bfloat16 for float rows).
template <class F>
void visit_types(DataType rows, DataType other, F&& f) {
  if (rows == kFloat64) return f(double{}, double{});
  if (other == kBFloat16) return f(float{}, BFloat16{});
  if (other == kFloat16) return f(float{}, Half{});
  f(float{}, float{});
}

void forward_cpu(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& weight,
                 const Tensor& bias, double eps) {
  const std::int64_t n = x.shape()[0], c = x.shape()[1];
  visit_types(x.dtype(), y.dtype(), [&]<class T, class Y>(T, Y) {
    forward_rows<T, Y>(data_or_null<Y>(y), data_or_null<T>(mean), data_or_null<T>(rstd), data_or_null<T>(x),
                       data_or_null<T>(weight), data_or_null<T>(bias), n, c, eps);
  });
}

void backward_cpu(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dy, const Tensor& dx_add,
                  const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& weight) {
  const std::int64_t n = x.shape()[0], c = x.shape()[1];
  visit_types(x.dtype(), dy.dtype(), [&]<class T, class G>(T, G) {
    backward_rows<T, G>(data_or_null<T>(dx), data_or_null<T>(dweight), data_or_null<T>(dbias), data_or_null<G>(dy),
                        data_or_null<T>(dx_add), data_or_null<T>(x), data_or_null<T>(mean), data_or_null<T>(rstd),
                        data_or_null<T>(weight), n, c);
  });
}

const bool registered = [] {
  KernelTable<LayerNormForwardKernel>::set(DeviceType::CPU, &forward_cpu);
  KernelTable<LayerNormBackwardKernel>::set(DeviceType::CPU, &backward_cpu);
  return true;
}();

}  // namespace
}  // namespace infini::kernels
