// CPU unary kernels: one strided row loop per op, computing f16/bf16 in float.
module;
#include <cmath>
#include <cstdint>

#include "infini/math/gelu.h"
#include "vector_rows.h"
module infini.kernels;
import infini.std;

namespace infini::kernels {
namespace {

// -x, wrapping for the most negative integer instead of overflowing.
template <class C>
C negate(C x) {
  if constexpr (std::is_integral_v<C> && !std::is_same_v<C, bool>)
    return static_cast<C>(0 - static_cast<std::make_unsigned_t<C>>(x));
  else
    return static_cast<C>(-x);
}

// A vectorized routine for contiguous float32 rows (vector_rows.h).
using FloatRow = void (*)(float* out, const float* in, std::int64_t n) noexcept;

// out[i] = f(in[i]) with In/Out the storage types and f taking compute_t<In>; contiguous
// float32 rows go to `float_row` instead when one is given.
template <class Out, class In, class F>
void map(const Tensor& out, const Tensor& in, F f, FloatRow float_row = nullptr) {
  Out* o = static_cast<Out*>(out.data_ptr());
  const In* x = static_cast<const In*>(in.data_ptr());
  for_each_row<2>(out.shape(), {out.strides(), in.strides()},
                  [&](const std::array<std::int64_t, 2>& at, std::int64_t n, const std::array<std::int64_t, 2>& step) {
                    Out* po = o + at[0];
                    const In* px = x + at[1];
                    if constexpr (std::is_same_v<Out, float> && std::is_same_v<In, float>) {
                      if (float_row && step[0] == 1 && step[1] == 1) return float_row(po, px, n);
                    }
                    if (step[0] == 1 && step[1] == 1) {
                      for (std::int64_t j = 0; j < n; ++j) po[j] = Out(f(static_cast<compute_t<In>>(px[j])));
                    } else {
                      for (std::int64_t j = 0; j < n; ++j)
                        po[j * step[0]] = Out(f(static_cast<compute_t<In>>(px[j * step[1]])));
                    }
                  });
}

template <class T>
void unary_float(const Tensor& out, const Tensor& in, UnaryOp op, UnaryParams p) {
  using C = compute_t<T>;
  const C a = static_cast<C>(p.a), b = static_cast<C>(p.b);
  switch (op) {
    case UnaryOp::Exp: return map<T, T>(out, in, [](C x) { return std::exp(x); }, cpu::exp_row);
    case UnaryOp::Expm1: return map<T, T>(out, in, [](C x) { return std::expm1(x); });
    case UnaryOp::Log: return map<T, T>(out, in, [](C x) { return std::log(x); });
    case UnaryOp::Log1p: return map<T, T>(out, in, [](C x) { return std::log1p(x); });
    case UnaryOp::Log2: return map<T, T>(out, in, [](C x) { return std::log2(x); });
    case UnaryOp::Sqrt: return map<T, T>(out, in, [](C x) { return std::sqrt(x); });
    case UnaryOp::Rsqrt: return map<T, T>(out, in, [](C x) { return C(1) / std::sqrt(x); });
    case UnaryOp::Reciprocal: return map<T, T>(out, in, [](C x) { return C(1) / x; });
    case UnaryOp::Sin: return map<T, T>(out, in, [](C x) { return std::sin(x); });
    case UnaryOp::Cos: return map<T, T>(out, in, [](C x) { return std::cos(x); });
    case UnaryOp::Tanh: return map<T, T>(out, in, [](C x) { return std::tanh(x); }, cpu::tanh_row);
    case UnaryOp::Sigmoid: return map<T, T>(out, in, [](C x) { return C(1) / (C(1) + std::exp(-x)); });
    case UnaryOp::Erf: return map<T, T>(out, in, [](C x) { return std::erf(x); });
    case UnaryOp::LeakyRelu: return map<T, T>(out, in, [a](C x) { return x > 0 ? x : x * a; });
    case UnaryOp::Elu: return map<T, T>(out, in, [a](C x) { return x > 0 ? x : a * std::expm1(x); });
    case UnaryOp::GeluErf: return map<T, T>(out, in, [](C x) { return math::gelu_erf(x); });
    case UnaryOp::GeluTanh: return map<T, T>(out, in, [](C x) { return math::gelu_tanh(x); }, cpu::gelu_tanh_row);
    case UnaryOp::Silu: return map<T, T>(out, in, [](C x) { return x / (C(1) + std::exp(-x)); });
    case UnaryOp::Softplus:  // beta = a, threshold = b: linear above threshold, like PyTorch
      return map<T, T>(out, in, [a, b](C x) { return x * a > b ? x : std::log1p(std::exp(x * a)) / a; });
    case UnaryOp::PowScalar: return map<T, T>(out, in, [a](C x) { return std::pow(x, a); });
    default: break;
  }
  throw Error("unary", concat("op ", static_cast<int>(op), " is not a floating-point op"));
}

// Ops that keep the dtype, for every dtype.
template <class T>
void unary_same(const Tensor& out, const Tensor& in, UnaryOp op, UnaryParams p) {
  using C = compute_t<T>;
  switch (op) {
    case UnaryOp::Neg: return map<T, T>(out, in, [](C x) { return negate(x); });
    case UnaryOp::Abs: return map<T, T>(out, in, [](C x) { return x < C(0) ? negate(x) : x; });
    case UnaryOp::Sign: return map<T, T>(out, in, [](C x) { return C((C(0) < x) - (x < C(0))); });
    case UnaryOp::Relu: return map<T, T>(out, in, [](C x) { return is_nan(x) || x > C(0) ? x : C(0); });
    case UnaryOp::Floor:
      if constexpr (std::is_floating_point_v<C>) return map<T, T>(out, in, [](C x) { return std::floor(x); });
      else return map<T, T>(out, in, [](C x) { return x; });
    case UnaryOp::Clamp: {  // min(max(x, lo), hi) (all hi when lo > hi); NaN bounds mean unbounded; NaN stays NaN
      const double lo = p.a, hi = p.b;
      return map<T, T>(out, in, [lo, hi](C x) {
        if (is_nan(x)) return x;
        const bool below = !std::isnan(lo) && static_cast<double>(x) < lo;
        if (!std::isnan(hi) && (below ? lo : static_cast<double>(x)) > hi) return convert<C>(hi);
        return below ? convert<C>(lo) : x;
      });
    }
    case UnaryOp::PowScalar:  // integral base, non-negative integral exponent (wraps like C++ unsigned)
      if constexpr (!is_float_compute<T>) {
        const auto e = static_cast<std::uint64_t>(p.a);
        return map<T, T>(out, in, [e](C x) {
          std::uint64_t r = 1, base = static_cast<std::uint64_t>(static_cast<std::int64_t>(x));
          for (std::uint64_t k = e; k > 0; k >>= 1, base *= base)
            if (k & 1) r *= base;
          return static_cast<C>(static_cast<std::int64_t>(r));
        });
      }
      break;
    default: break;
  }
  if constexpr (is_float_compute<T>) return unary_float<T>(out, in, op, p);
  throw DTypeError("unary", concat("op ", static_cast<int>(op), " needs a floating-point input, got ", in.dtype()));
}

void unary_cpu(const Tensor& out, const Tensor& in, UnaryOp op, UnaryParams params) {
  dispatch(in.dtype(), [&]<class T>() {
    using C = compute_t<T>;
    switch (op) {
      case UnaryOp::IsNan: return map<bool, T>(out, in, [](C x) { return is_nan(x); });
      case UnaryOp::IsInf:
        return map<bool, T>(out, in, [](C x) {
          if constexpr (std::is_floating_point_v<C>) return std::isinf(x);
          else return false;
        });
      case UnaryOp::LogicalNot: return map<bool, T>(out, in, [](C x) { return x == C(0); });
      default: return unary_same<T>(out, in, op, params);
    }
  });
}

const bool registered = [] {
  KernelTable<UnaryKernel>::set(DeviceType::CPU, &unary_cpu);
  return true;
}();

}  // namespace
}  // namespace infini::kernels
