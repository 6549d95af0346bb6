// CPU binary and where kernels over three strided operands of one shape.
module;
#include <cmath>
#include <cstdint>

#include "infini/math/gelu.h"
#include "vector_rows.h"
module infini.kernels;
import infini.std;

namespace infini::kernels {
namespace {

// A vectorized routine for contiguous float32 rows (vector_rows.h).
using FloatRow = void (*)(float* out, const float* a, const float* b, std::int64_t n) noexcept;

// out[i] = f(a[i], b[i]) with compute_t<T> arguments (float when a, of T, and b, of U,
// differ: a float32 and a widened 16-bit operand); contiguous float32 rows go to
// `float_row` instead when one is given.
template <class Out, class T, class U = T, class F>
void zip(const Tensor& out, const Tensor& a, const Tensor& b, F f, FloatRow float_row = nullptr) {
  using C = std::conditional_t<std::is_same_v<T, U>, compute_t<T>, float>;
  Out* o = static_cast<Out*>(out.data_ptr());
  const T* x = static_cast<const T*>(a.data_ptr());
  const U* y = static_cast<const U*>(b.data_ptr());
  for_each_row<3>(out.shape(), {out.strides(), a.strides(), b.strides()},
                  [&](const std::array<std::int64_t, 3>& at, std::int64_t n, const std::array<std::int64_t, 3>& step) {
                    Out* po = o + at[0];
                    const T* px = x + at[1];
                    const U* py = y + at[2];
                    if constexpr (std::is_same_v<Out, float> && std::is_same_v<T, float> && std::is_same_v<U, float>) {
                      if (float_row && step[0] == 1 && step[1] == 1 && step[2] == 1) return float_row(po, px, py, n);
                    }
                    if (step[0] == 1 && step[1] == 1 && step[2] == 1) {
                      for (std::int64_t j = 0; j < n; ++j) po[j] = Out(f(static_cast<C>(px[j]), static_cast<C>(py[j])));
                    } else {
                      for (std::int64_t j = 0; j < n; ++j)
                        po[j * step[0]] = Out(f(static_cast<C>(px[j * step[1]]), static_cast<C>(py[j * step[2]])));
                    }
                  });
}

// Floor division and integer powers can fail per element; the first failure is reported
// after the (possibly parallel) loop.
struct ElementError {
  std::atomic<bool> division_by_zero{false};
  std::atomic<bool> negative_power{false};
};

template <class C>
C floor_divide(C x, C y, ElementError& error) {
  if constexpr (std::is_floating_point_v<C>) {
    return std::floor(x / y);
  } else {
    if (y == 0) {
      error.division_by_zero = true;
      return 0;
    }
    if (y == -1) return static_cast<C>(0 - static_cast<std::make_unsigned_t<C>>(x));  // no overflow trap
    const C q = x / y;
    return (x % y != 0 && ((x < 0) != (y < 0))) ? C(q - 1) : q;
  }
}

template <class C>
C power(C x, C y, ElementError& error) {
  if constexpr (std::is_floating_point_v<C>) {
    return std::pow(x, y);
  } else {
    if (y < 0) {
      error.negative_power = true;
      return 0;
    }
    std::uint64_t r = 1, base = static_cast<std::uint64_t>(static_cast<std::int64_t>(x));
    for (auto k = static_cast<std::uint64_t>(y); k > 0; k >>= 1, base *= base)
      if (k & 1) r *= base;
    return static_cast<C>(static_cast<std::int64_t>(r));
  }
}

template <class T>
void binary_typed(const Tensor& out, const Tensor& a, const Tensor& b, BinaryOp op) {
  using C = compute_t<T>;
  ElementError error;
  if constexpr (std::is_same_v<T, bool>) {
    switch (op) {  // bool arithmetic is logical, like PyTorch
      case BinaryOp::Add: case BinaryOp::Maximum: return zip<T, T>(out, a, b, [](C x, C y) { return x || y; });
      case BinaryOp::Mul: case BinaryOp::Minimum: return zip<T, T>(out, a, b, [](C x, C y) { return x && y; });
      default: break;
    }
  } else {
    switch (op) {
      case BinaryOp::Add: return zip<T, T>(out, a, b, [](C x, C y) { return C(x + y); }, cpu::add_row);
      case BinaryOp::Sub: return zip<T, T>(out, a, b, [](C x, C y) { return C(x - y); }, cpu::sub_row);
      case BinaryOp::Mul: return zip<T, T>(out, a, b, [](C x, C y) { return C(x * y); }, cpu::mul_row);
      case BinaryOp::Div:
        if constexpr (std::is_floating_point_v<C>) return zip<T, T>(out, a, b, [](C x, C y) { return x / y; }, cpu::div_row);
        break;
      case BinaryOp::FloorDiv:
        zip<T, T>(out, a, b, [&error](C x, C y) { return floor_divide(x, y, error); });
        if (error.division_by_zero) throw Error("floor_divide", "integer division by zero");
        return;
      case BinaryOp::Pow:
        zip<T, T>(out, a, b, [&error](C x, C y) { return power(x, y, error); });
        if (error.negative_power) throw Error("pow", "integers to negative integer powers are not allowed");
        return;
      case BinaryOp::Maximum:
        return zip<T, T>(out, a, b, [](C x, C y) { return is_nan(x) || is_nan(y) ? C(x + y) : (x > y ? x : y); });
      case BinaryOp::Minimum:
        return zip<T, T>(out, a, b, [](C x, C y) { return is_nan(x) || is_nan(y) ? C(x + y) : (x < y ? x : y); });
      case BinaryOp::GeluBackward:
        if constexpr (std::is_floating_point_v<C>) return zip<T, T>(out, a, b, math::gelu_erf_backward<C>);
        break;
      case BinaryOp::GeluTanhBackward:
        if constexpr (std::is_floating_point_v<C>)
          return zip<T, T>(out, a, b, math::gelu_tanh_backward<C>, cpu::gelu_tanh_backward_row);
        break;
      default: break;
    }
  }
  switch (op) {
    case BinaryOp::Eq: return zip<bool, T>(out, a, b, [](C x, C y) { return x == y; });
    case BinaryOp::Ne: return zip<bool, T>(out, a, b, [](C x, C y) { return x != y; });
    case BinaryOp::Lt: return zip<bool, T>(out, a, b, [](C x, C y) { return x < y; });
    case BinaryOp::Le: return zip<bool, T>(out, a, b, [](C x, C y) { return x <= y; });
    case BinaryOp::Gt: return zip<bool, T>(out, a, b, [](C x, C y) { return x > y; });
    case BinaryOp::Ge: return zip<bool, T>(out, a, b, [](C x, C y) { return x >= y; });
    case BinaryOp::LogicalAnd: return zip<bool, T>(out, a, b, [](C x, C y) { return x != C(0) && y != C(0); });
    case BinaryOp::LogicalOr: return zip<bool, T>(out, a, b, [](C x, C y) { return x != C(0) || y != C(0); });
    case BinaryOp::LogicalXor: return zip<bool, T>(out, a, b, [](C x, C y) { return (x != C(0)) != (y != C(0)); });
    default: break;
  }
  throw DTypeError("binary", concat("op ", static_cast<int>(op), " is not defined for ", a.dtype()));
}

// Add, Sub or Mul of a float32 T and a 16-bit U, or the reverse (BinaryKernel's widened
// operand), into float32.
template <class T, class U>
void widened_typed(const Tensor& out, const Tensor& a, const Tensor& b, BinaryOp op) {
  if (op == BinaryOp::Add) return zip<float, T, U>(out, a, b, [](float x, float y) { return x + y; });
  if (op == BinaryOp::Sub) return zip<float, T, U>(out, a, b, [](float x, float y) { return x - y; });
  zip<float, T, U>(out, a, b, [](float x, float y) { return x * y; });  // Mul: the only other op widened
}

void binary_widened(const Tensor& out, const Tensor& a, const Tensor& b, BinaryOp op) {
  check_binary_operand_dtypes(op, out.dtype(), a.dtype(), b.dtype());
  const DataType x = a.dtype(), y = b.dtype();
  if (x == kFloat32)
    return y == kBFloat16 ? widened_typed<float, BFloat16>(out, a, b, op) : widened_typed<float, Half>(out, a, b, op);
  return x == kBFloat16 ? widened_typed<BFloat16, float>(out, a, b, op) : widened_typed<Half, float>(out, a, b, op);
}

void binary_cpu(const Tensor& out, const Tensor& a, const Tensor& b, BinaryOp op) {
  if (a.dtype() != b.dtype()) return binary_widened(out, a, b, op);
  dispatch(a.dtype(), [&]<class T>() { binary_typed<T>(out, a, b, op); });
}

void where_cpu(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  dispatch(out.dtype(), [&]<class T>() {
    T* o = static_cast<T*>(out.data_ptr());
    const bool* c = static_cast<const bool*>(cond.data_ptr());
    const T* x = static_cast<const T*>(a.data_ptr());
    const T* y = static_cast<const T*>(b.data_ptr());
    for_each_row<4>(out.shape(), {out.strides(), cond.strides(), a.strides(), b.strides()},
                    [&](const std::array<std::int64_t, 4>& at, std::int64_t n, const std::array<std::int64_t, 4>& s) {
                      for (std::int64_t j = 0; j < n; ++j)
                        o[at[0] + j * s[0]] = c[at[1] + j * s[1]] ? x[at[2] + j * s[2]] : y[at[3] + j * s[3]];
                    });
  });
}

const bool registered = [] {
  KernelTable<BinaryKernel>::set(DeviceType::CPU, &binary_cpu);
  KernelTable<WhereKernel>::set(DeviceType::CPU, &where_cpu);
  return true;
}();

}  // namespace
}  // namespace infini::kernels
