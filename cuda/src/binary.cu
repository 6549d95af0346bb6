// binary: out[i] = op(a[i], b[i]) and where: out[i] = cond[i] ? a[i] : b[i], over strided
// (possibly expanded) arrays of one shape, computing f16/bf16 in float (the CPU kernels'
// rules: modules/kernels/cpu/binary.cpp). One kernel per (storage type, op); float
// operands that are all contiguous take a vectorized path.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "elementwise.cuh"
#include "infini/cuda/elementwise.h"
#include "infini/math/gelu.h"
#include "launch.cuh"

namespace infini::cuda {
namespace {

using namespace detail;

constexpr bool returns_bool(BinaryOp op) { return op >= BinaryOp::Eq; }

bool is_floating(ElementType t) {
  return t == ElementType::F16 || t == ElementType::BF16 || t == ElementType::F32 || t == ElementType::F64;
}

template <class T>
constexpr bool supported(BinaryOp op) {
  if constexpr (std::is_same_v<T, bool>)
    return op == BinaryOp::Add || op == BinaryOp::Maximum || op == BinaryOp::Mul || op == BinaryOp::Minimum ||
           returns_bool(op);
  else if constexpr (!detail::is_float_compute<T>)
    return op != BinaryOp::Div && op != BinaryOp::GeluBackward && op != BinaryOp::GeluTanhBackward;
  else
    return true;
}

// floor(x / y); integers round toward -inf, wrap for y == -1, and give 0 with *flag = 1
// for y == 0.
template <class C>
__device__ C floor_divide(C x, C y, std::int32_t* flag) {
  if constexpr (std::is_floating_point_v<C>) {
    return std::floor(x / y);
  } else {
    if (y == 0) {
      *flag = 1;
      return 0;
    }
    if constexpr (std::is_signed_v<C>)
      if (y == -1) return detail::negate(x);
    const C q = x / y;
    if constexpr (std::is_signed_v<C>) return (x % y != 0 && ((x < 0) != (y < 0))) ? C(q - 1) : q;
    else return q;
  }
}

// x^y; integers square in uint64 (wrapping) and give 0 with *flag = 1 for y < 0.
template <class C>
__device__ C power(C x, C y, std::int32_t* flag) {
  if constexpr (std::is_floating_point_v<C>) {
    return std::pow(x, y);
  } else {
    if constexpr (std::is_signed_v<C>)
      if (y < 0) {
        *flag = 1;
        return 0;
      }
    return detail::integer_power(x, static_cast<std::uint64_t>(y));
  }
}

// op(x, y) for compute type C; Op is supported for C's storage types.
template <BinaryOp Op, class C>
struct BinaryFn {
  std::int32_t* flag;  // integer FloorDiv and Pow: set to 1 when an element fails

  __device__ auto operator()(C x, C y) const {
    if constexpr (std::is_same_v<C, bool> && (Op == BinaryOp::Add || Op == BinaryOp::Maximum)) return x || y;
    else if constexpr (std::is_same_v<C, bool> && (Op == BinaryOp::Mul || Op == BinaryOp::Minimum)) return x && y;
    else if constexpr (Op == BinaryOp::Add) return detail::add_wrap(x, y);
    else if constexpr (Op == BinaryOp::Sub) return detail::sub_wrap(x, y);
    else if constexpr (Op == BinaryOp::Mul) return detail::mul_wrap(x, y);
    else if constexpr (Op == BinaryOp::Div) return x / y;
    else if constexpr (Op == BinaryOp::FloorDiv) return floor_divide(x, y, flag);
    else if constexpr (Op == BinaryOp::Pow) return power(x, y, flag);
    else if constexpr (Op == BinaryOp::Maximum) return is_nan(x) || is_nan(y) ? C(x + y) : (x > y ? x : y);
    else if constexpr (Op == BinaryOp::Minimum) return is_nan(x) || is_nan(y) ? C(x + y) : (x < y ? x : y);
    else if constexpr (Op == BinaryOp::GeluBackward) return math::gelu_erf_backward(x, y);
    else if constexpr (Op == BinaryOp::GeluTanhBackward) return math::gelu_tanh_backward(x, y);
    else if constexpr (Op == BinaryOp::Eq) return x == y;
    else if constexpr (Op == BinaryOp::Ne) return x != y;
    else if constexpr (Op == BinaryOp::Lt) return x < y;
    else if constexpr (Op == BinaryOp::Le) return x <= y;
    else if constexpr (Op == BinaryOp::Gt) return x > y;
    else if constexpr (Op == BinaryOp::Ge) return x >= y;
    else if constexpr (Op == BinaryOp::LogicalAnd) return x != C(0) && y != C(0);
    else if constexpr (Op == BinaryOp::LogicalOr) return x != C(0) || y != C(0);
    else return (x != C(0)) != (y != C(0));  // LogicalXor
  }
};

// out[o] = f(a[o'], b[o'']) for the n elements of `shape` (strides of out, a, b); a of
// T, b of U (T, or a widened operand's type).
template <class Out, class T, class U, class F>
__global__ void binary_strided(Out* out, const T* a, const U* b, detail::SharedShape<3> shape, std::int64_t n,
                               F f) {
  for (std::int64_t i = detail::first_index(); i < n; i += detail::grid_step()) {
    std::int64_t off[3];
    detail::offsets_of(shape, i, off);
    out[off[0]] = convert<Out>(f(widen(a[off[1]]), widen(b[off[2]])));
  }
}

// Contiguous out, a, b of n elements, aligned to V elements: V at a time, then the tail.
template <class Out, class T, class U, int V, class F>
__global__ void binary_contiguous(Out* out, const T* a, const U* b, std::int64_t n, F f) {
  using AVec = detail::Vec<T, V>;
  using BVec = detail::Vec<U, V>;
  using OutVec = detail::Vec<Out, V>;
  const std::int64_t vectors = n / V;
  for (std::int64_t i = detail::first_index(); i < vectors; i += detail::grid_step()) {
    const AVec x = reinterpret_cast<const AVec*>(a)[i];
    const BVec y = reinterpret_cast<const BVec*>(b)[i];
    OutVec z;
#pragma unroll
    for (int k = 0; k < V; ++k) z.v[k] = convert<Out>(f(widen(x.v[k]), widen(y.v[k])));
    reinterpret_cast<OutVec*>(out)[i] = z;
  }
  for (std::int64_t i = vectors * V + detail::first_index(); i < n; i += detail::grid_step())
    out[i] = convert<Out>(f(widen(a[i]), widen(b[i])));
}

// a of T and b of U: one type, or a float32 and a 16-bit float operand (widened, computed
// and stored in float32).
template <BinaryOp Op, class T, class U = T>
void launch(const StridedArray& out, const StridedArray& a, const StridedArray& b, std::int64_t n,
            std::int32_t* flag) {
  constexpr bool one_type = std::is_same_v<T, U>;
  using C = std::conditional_t<one_type, compute_t<T>, float>;
  using Out = std::conditional_t<returns_bool(Op), bool, std::conditional_t<one_type, T, float>>;
  const BinaryFn<Op, C> f{flag};
  Out* o = static_cast<Out*>(out.data);
  const T* x = static_cast<const T*>(a.data);
  const U* y = static_cast<const U*>(b.data);
  if constexpr (detail::is_float_compute<T>) {
    constexpr int V = std::min(detail::kVecWidth<T>, detail::kVecWidth<U>);
    if (detail::all_contiguous({&out, &a, &b}) && detail::aligned(o, sizeof(Out) * V) &&
        detail::aligned(x, sizeof(T) * V) && detail::aligned(y, sizeof(U) * V)) {
      binary_contiguous<Out, T, U, V><<<detail::blocks_for(std::max<std::int64_t>(n / V, 1)), detail::kThreads, 0,
                                        detail::stream()>>>(o, x, y, n, f);
      return;
    }
  }
  const StridedArray* arrays[3] = {&out, &a, &b};
  binary_strided<Out, T, U><<<detail::blocks_for(n), detail::kThreads, 0, detail::stream()>>>(
      o, x, y, detail::shared_shape(arrays), n, f);
}

// Add, Sub or Mul of a float32 and a float16/bfloat16 operand (either order) into float32.
template <BinaryOp Op>
void launch_widened(const StridedArray& out, const StridedArray& a, const StridedArray& b, std::int64_t n) {
  const auto with_half = [&](ElementType half, auto&& f) {
    if (half == ElementType::BF16) f(__nv_bfloat16{});
    else f(__half{});
  };
  if (a.type == ElementType::F32)
    with_half(b.type, [&](auto zero) { launch<Op, float, decltype(zero)>(out, a, b, n, nullptr); });
  else
    with_half(a.type, [&](auto zero) { launch<Op, decltype(zero), float>(out, a, b, n, nullptr); });
}

// out[o] = cond[c] ? a[x] : b[y]; T is an unsigned integer of the element's size (where
// only moves elements).
template <class T>
__global__ void where_strided(T* out, const bool* cond, const T* a, const T* b, detail::SharedShape<4> shape,
                              std::int64_t n) {
  for (std::int64_t i = detail::first_index(); i < n; i += detail::grid_step()) {
    std::int64_t off[4];
    detail::offsets_of(shape, i, off);
    out[off[0]] = cond[off[1]] ? a[off[2]] : b[off[3]];
  }
}

}  // namespace

bool binary_supported(BinaryOp op, ElementType type) {
  return detail::visit(type, "binary", [&](auto tag) {
    bool ok = false;
    detail::with_op<BinaryOp, kBinaryOpCount>(
        op, [&]<BinaryOp Op>() { ok = supported<typename decltype(tag)::type>(Op); });
    return ok;
  });
}

bool binary_needs_flag(BinaryOp op, ElementType type) {
  return (op == BinaryOp::FloorDiv || op == BinaryOp::Pow) && !is_floating(type) && type != ElementType::Bool;
}

bool binary_widens(BinaryOp op, ElementType out, ElementType a, ElementType b) {
  const auto half = [](ElementType t) { return t == ElementType::F16 || t == ElementType::BF16; };
  return (op == BinaryOp::Add || op == BinaryOp::Sub || op == BinaryOp::Mul) && out == ElementType::F32 &&
         ((a == ElementType::F32 && half(b)) || (half(a) && b == ElementType::F32));
}

BinaryFailure binary(const StridedArray& out, const StridedArray& a, const StridedArray& b, BinaryOp op,
                     std::int32_t* flag, int device) {
  const bool widened = a.type != b.type;
  if (widened && !binary_widens(op, out.type, a.type, b.type))
    throw CudaError("binary: operands of two types that are not a float32 and a widened 16-bit float");
  if (!binary_supported(op, a.type)) throw CudaError("binary: op not defined for the element type");
  const bool checked = binary_needs_flag(op, a.type);
  if (checked && flag == nullptr) throw CudaError("binary: integer floor_divide/pow need a flag buffer");
  const std::int64_t n = detail::numel(out);
  if (n == 0) return BinaryFailure::None;
  detail::use_device(device);
  if (checked) detail::check(cudaMemsetAsync(flag, 0, sizeof(std::int32_t), detail::stream()), "binary flag reset");
  StridedArray o = out, x = a, y = b;
  detail::coalesce({&o, &x, &y});
  if (widened) {
    detail::with_op<BinaryOp, kBinaryOpCount>(op, [&]<BinaryOp Op>() {
      if constexpr (Op == BinaryOp::Add || Op == BinaryOp::Sub || Op == BinaryOp::Mul) launch_widened<Op>(o, x, y, n);
    });
    detail::after_launch("binary", {static_cast<int>(op), static_cast<int>(a.type), static_cast<int>(b.type)});
    return BinaryFailure::None;
  }
  detail::visit(a.type, "binary", [&](auto tag) {
    using T = typename decltype(tag)::type;
    detail::with_op<BinaryOp, kBinaryOpCount>(op, [&]<BinaryOp Op>() {
      if constexpr (supported<T>(Op)) launch<Op, T>(o, x, y, n, flag);
    });
  });
  detail::after_launch("binary", {static_cast<int>(op), static_cast<int>(a.type)});
  if (!checked) return BinaryFailure::None;
  const bool floor_div = op == BinaryOp::FloorDiv;
  if (detail::defer_check(flag, sizeof(std::int32_t), [floor_div](const void* host) {
        if (*static_cast<const std::int32_t*>(host) != 0)
          throw CudaError(floor_div ? "floor_divide: integer division by zero (in a CUDA graph replay)"
                                    : "pow: an integer raised to a negative power (in a CUDA graph replay)");
      }))
    return BinaryFailure::None;
  std::int32_t failed = 0;
  detail::check(cudaMemcpyAsync(&failed, flag, sizeof failed, cudaMemcpyDeviceToHost, detail::stream()),
                "binary flag read");
  detail::check(cudaStreamSynchronize(detail::stream()), "binary flag read");
  if (failed == 0) return BinaryFailure::None;
  return op == BinaryOp::FloorDiv ? BinaryFailure::DivisionByZero : BinaryFailure::NegativePower;
}

void where(const StridedArray& out, const StridedArray& cond, const StridedArray& a, const StridedArray& b,
           int device) {
  const std::int64_t n = detail::numel(out);
  if (n == 0) return;
  detail::use_device(device);
  StridedArray o = out, c = cond, x = a, y = b;
  detail::coalesce({&o, &c, &x, &y});
  const StridedArray* arrays[4] = {&o, &c, &x, &y};
  const detail::SharedShape<4> shape = detail::shared_shape(arrays);
  auto run = [&](auto zero) {
    using T = decltype(zero);
    where_strided<T><<<detail::blocks_for(n), detail::kThreads, 0, detail::stream()>>>(
        static_cast<T*>(o.data), static_cast<const bool*>(c.data), static_cast<const T*>(x.data),
        static_cast<const T*>(y.data), shape, n);
  };
  switch (out.type) {
    case ElementType::Bool:
    case ElementType::U8:
    case ElementType::I8: run(std::uint8_t{}); break;
    case ElementType::I16:
    case ElementType::F16:
    case ElementType::BF16: run(std::uint16_t{}); break;
    case ElementType::I32:
    case ElementType::F32: run(std::uint32_t{}); break;
    case ElementType::I64:
    case ElementType::F64: run(std::uint64_t{}); break;
    default: throw CudaError("where: unknown element type");
  }
  detail::after_launch("where");
}

}  // namespace infini::cuda
