// CPU fused cross-entropy (see cross_entropy.cppm): parallel over rows; float32 rows use
// the vectorized exp of vector_rows.h, float64 rows a scalar loop. The log-sum-exp is kept in
// float64 for both: rounded to float32 it would carry an absolute error of half an ulp of
// |lse| (1e-3 at 2e4) into every exp(x - lse) of the backward. bfloat16/float16 rows are
// widened into a float32 row buffer and take the float32 path, their loss float32 and their
// gradient rounded once: the bits of casting the logits to float32 first.
module;
#include <cmath>
#include <cstdint>

#include "vector_rows.h"
module infini.kernels;
import infini.std;

namespace infini::kernels {
namespace {

constexpr std::int64_t kParallelElements = 32768;  // below this, one thread

// log(sum_j exp(x[j])) in float64: max + log(sum exp(x - max)), the sum in float64.
template <class T>
double log_sum_exp(const T* x, std::int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    const auto [shift, sum] = cpu::shifted_exp_sum_row(x, n);
    return static_cast<double>(shift) + std::log(sum);
  } else {
    T max = -std::numeric_limits<T>::infinity();
    for (std::int64_t j = 0; j < n; ++j) max = std::max(max, x[j]);
    const T shift = std::isinf(max) ? T(0) : max;
    T sum = 0;
    for (std::int64_t j = 0; j < n; ++j) sum += std::exp(x[j] - shift);
    return shift + std::log(sum);
  }
}

// out[j] = scale * exp(x[j] - lse). float32: exp(x - s) * exp(s - lse) with s = lse rounded
// to float32, so x - s is exact for the x near lse that dominate, and s - lse is taken in
// float64.
template <class T>
void scaled_softmax(T* out, const T* x, double lse, T scale, std::int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    const float shift = static_cast<float>(lse);
    const float correction = std::isfinite(lse) ? static_cast<float>(std::exp(static_cast<double>(shift) - lse)) : 1;
    cpu::scaled_exp_row(out, x, shift, scale * correction, n);
  } else {
    for (std::int64_t j = 0; j < n; ++j) out[j] = scale * std::exp(x[j] - lse);
  }
}

// The float type a row of T is computed in: float32 for 16-bit rows.
template <class T>
using Compute = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Row i of x (row stride `row`) as Compute<T>: in place for float32/64, else widened into buffer.
template <class T>
const Compute<T>* compute_row(const T* x, std::int64_t n, std::vector<float>& buffer) {
  if constexpr (std::is_same_v<T, Compute<T>>) {
    return x;
  } else {
    buffer.resize(static_cast<std::size_t>(n));
    std::copy(x, x + n, buffer.begin());
    return buffer.data();
  }
}

template <class T>
void forward(const Tensor& loss, const Tensor& lse, const Tensor& logits, const Tensor& target,
             std::int64_t ignore_index) {
  using C_t = Compute<T>;
  const std::int64_t N = logits.shape()[0], C = logits.shape()[1], row = logits.strides()[0];
  const T* x = static_cast<const T*>(logits.data_ptr());
  const auto* t = static_cast<const std::int64_t*>(target.data_ptr());
  C_t* out_loss = static_cast<C_t*>(loss.data_ptr());
  auto* out_lse = static_cast<double*>(lse.data_ptr());
  std::atomic<std::int64_t> bad_row{-1};
#pragma omp parallel if (N * C >= kParallelElements)
  {
    std::vector<float> buffer;
#pragma omp for schedule(static)
    for (std::int64_t i = 0; i < N; ++i) {
      const C_t* xi = compute_row(x + i * row, C, buffer);
      const std::int64_t c = t[i];
      out_lse[i] = C > 0 ? log_sum_exp(xi, C) : -std::numeric_limits<double>::infinity();
      if (c == ignore_index) {
        out_loss[i] = 0;
      } else if (c < 0 || c >= C) {
        std::int64_t none = -1;
        bad_row.compare_exchange_strong(none, i);
        out_loss[i] = 0;
      } else {
        out_loss[i] = static_cast<C_t>(out_lse[i] - static_cast<double>(xi[c]));
      }
    }
  }
  if (const std::int64_t i = bad_row.load(); i >= 0)
    throw IndexError("cross_entropy", concat("target ", t[i], " at row ", i, " is out of bounds for ", C,
                                             " classes (ignore_index ", ignore_index, ")"));
}

template <class T>
void backward(const Tensor& grad_logits, const Tensor& grad_loss, const Tensor& logits, const Tensor& lse,
              const Tensor& target, std::int64_t ignore_index) {
  using C_t = Compute<T>;
  const std::int64_t N = logits.shape()[0], C = logits.shape()[1], row = logits.strides()[0];
  const T* x = static_cast<const T*>(logits.data_ptr());
  const C_t* g = static_cast<const C_t*>(grad_loss.data_ptr());
  const auto* l = static_cast<const double*>(lse.data_ptr());
  const auto* t = static_cast<const std::int64_t*>(target.data_ptr());
  const std::int64_t W = grad_logits.shape()[1];  // C classes, then padding
  T* out = static_cast<T*>(grad_logits.data_ptr());
#pragma omp parallel if (N * C >= kParallelElements)
  {
    std::vector<float> in_buffer, out_buffer;
#pragma omp for schedule(static)
    for (std::int64_t i = 0; i < N; ++i) {
      T* oi = out + i * W;
      std::fill(oi + C, oi + W, T(0));
      const std::int64_t c = t[i];
      if (c == ignore_index || c < 0 || c >= C) {
        std::fill(oi, oi + C, T(0));
        continue;
      }
      C_t* row_out = nullptr;  // float32/64 rows are written in place
      if constexpr (std::is_same_v<T, C_t>) {
        row_out = oi;
      } else {
        out_buffer.resize(static_cast<std::size_t>(C));
        row_out = out_buffer.data();
      }
      scaled_softmax(row_out, compute_row(x + i * row, C, in_buffer), l[i], g[i], C);  // g * softmax
      row_out[c] -= g[i];
      if constexpr (!std::is_same_v<T, C_t>) std::copy(row_out, row_out + C, oi);  // rounded once
    }
  }
}

template <class F>
void visit_logits(DataType dtype, F&& f) {
  if (dtype == kFloat64) f(double{});
  else if (dtype == kFloat32) f(float{});
  else if (dtype == kBFloat16) f(BFloat16{});
  else f(Half{});
}

void forward_cpu(const Tensor& loss, const Tensor& lse, const Tensor& logits, const Tensor& target,
                 std::int64_t ignore_index) {
  visit_logits(logits.dtype(), [&](auto tag) { forward<decltype(tag)>(loss, lse, logits, target, ignore_index); });
}

void backward_cpu(const Tensor& grad_logits, const Tensor& grad_loss, const Tensor& logits, const Tensor& lse,
                  const Tensor& target, std::int64_t ignore_index) {
  visit_logits(logits.dtype(), [&](auto tag) {
    backward<decltype(tag)>(grad_logits, grad_loss, logits, lse, target, ignore_index);
  });
}

const bool registered = [] {
  KernelTable<CrossEntropyForwardKernel>::set(DeviceType::CPU, &forward_cpu);
  KernelTable<CrossEntropyBackwardKernel>::set(DeviceType::CPU, &backward_cpu);
  return true;
}();

}  // namespace
}  // namespace infini::kernels
