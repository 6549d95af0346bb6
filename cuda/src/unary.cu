// unary: out[i] = op(in[i]) over strided arrays of one shape, computing f16/bf16 in float
// (the CPU kernels' rules: modules/kernels/cpu/unary.cpp). One kernel per (storage type,
// op); float inputs whose operands are contiguous take a vectorized path.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "elementwise.cuh"
#include "infini/cuda/elementwise.h"
#include "infini/math/gelu.h"
#include "launch.cuh"
#include "trig.cuh"

namespace infini::cuda {
namespace {

using namespace detail;

constexpr bool float_only(UnaryOp op) { return op >= UnaryOp::Exp && op < UnaryOp::PowScalar; }
constexpr bool returns_bool(UnaryOp op) { return op >= UnaryOp::IsNan; }

// The op's scalar arguments for compute type C, prepared on the host.
template <class C>
struct UnaryArgs {
  C a, b;                  // static_cast<C> of the parameters (float ops)
  double lo, hi;           // Clamp's bounds; NaN = unbounded
  C lo_c, hi_c;            // the bounds converted to C (integers saturate)
  std::uint64_t exponent;  // integer PowScalar
};

// double -> C like the CPU's convert(): integers truncate and saturate (NaN -> 0), bool is
// `!= 0`, floating types round.
template <class C>
C convert_bound(double v) {
  if constexpr (std::is_same_v<C, bool>) {
    return v != 0;
  } else if constexpr (std::is_integral_v<C>) {
    if (std::isnan(v)) return 0;
    if (v <= static_cast<double>(std::numeric_limits<C>::min())) return std::numeric_limits<C>::min();
    if (v >= static_cast<double>(std::numeric_limits<C>::max())) return std::numeric_limits<C>::max();
    return static_cast<C>(v);
  } else {
    return static_cast<C>(v);
  }
}

template <class C>
UnaryArgs<C> make_args(UnaryOp op, double a, double b) {
  UnaryArgs<C> args{};
  if constexpr (std::is_floating_point_v<C>) {
    args.a = static_cast<C>(a);
    args.b = static_cast<C>(b);
  }
  if (op == UnaryOp::Clamp) {
    args.lo = a;
    args.hi = b;
    args.lo_c = convert_bound<C>(a);
    args.hi_c = convert_bound<C>(b);
  }
  if constexpr (!std::is_floating_point_v<C>)
    if (op == UnaryOp::PowScalar) args.exponent = static_cast<std::uint64_t>(a);
  return args;
}

// x < 0 (never for unsigned types and bool).
template <class C>
__device__ bool below_zero(C x) {
  if constexpr (std::is_signed_v<C>) return x < C(0);
  else return false;
}

// op(x) for compute type C; Op is unary_supported for C's storage types.
template <UnaryOp Op, class C>
struct UnaryFn {
  UnaryArgs<C> args;

  __device__ auto operator()(C x) const {
    if constexpr (Op == UnaryOp::Neg) return detail::negate(x);
    else if constexpr (Op == UnaryOp::Abs) return below_zero(x) ? detail::negate(x) : x;
    else if constexpr (Op == UnaryOp::Sign) return C((C(0) < x) - below_zero(x));
    else if constexpr (Op == UnaryOp::Relu) return is_nan(x) || x > C(0) ? x : C(0);
    else if constexpr (Op == UnaryOp::Floor) {
      if constexpr (std::is_floating_point_v<C>) return std::floor(x);
      else return x;
    } else if constexpr (Op == UnaryOp::Clamp) {  // all hi when lo > hi; NaN stays NaN
      if (is_nan(x)) return x;
      const double lo = args.lo, hi = args.hi;
      const bool below = lo == lo && static_cast<double>(x) < lo;
      if (hi == hi && (below ? lo : static_cast<double>(x)) > hi) return args.hi_c;
      return below ? args.lo_c : x;
    } else if constexpr (Op == UnaryOp::PowScalar) {
      if constexpr (std::is_floating_point_v<C>) return std::pow(x, args.a);
      else return detail::integer_power(x, args.exponent);
    } else if constexpr (Op == UnaryOp::Exp) return std::exp(x);
    else if constexpr (Op == UnaryOp::Expm1) return std::expm1(x);
    else if constexpr (Op == UnaryOp::Log) return std::log(x);
    else if constexpr (Op == UnaryOp::Log1p) return std::log1p(x);
    else if constexpr (Op == UnaryOp::Log2) return std::log2(x);
    else if constexpr (Op == UnaryOp::Sqrt) return std::sqrt(x);
    else if constexpr (Op == UnaryOp::Rsqrt) return C(1) / std::sqrt(x);
    else if constexpr (Op == UnaryOp::Reciprocal) return C(1) / x;
    else if constexpr (Op == UnaryOp::Sin) return detail::sin_no_lmem(x);
    else if constexpr (Op == UnaryOp::Cos) return detail::cos_no_lmem(x);
    else if constexpr (Op == UnaryOp::Tanh) return std::tanh(x);
    else if constexpr (Op == UnaryOp::Sigmoid) return C(1) / (C(1) + std::exp(-x));
    else if constexpr (Op == UnaryOp::Erf) return std::erf(x);
    else if constexpr (Op == UnaryOp::LeakyRelu) return x > 0 ? x : x * args.a;
    else if constexpr (Op == UnaryOp::Elu) return x > 0 ? x : args.a * std::expm1(x);
    else if constexpr (Op == UnaryOp::GeluErf) return math::gelu_erf(x);
    else if constexpr (Op == UnaryOp::GeluTanh) return math::gelu_tanh(x);
    else if constexpr (Op == UnaryOp::Silu) return x / (C(1) + std::exp(-x));
    else if constexpr (Op == UnaryOp::Softplus)  // beta = a, threshold = b: linear above threshold
      return x * args.a > args.b ? x : std::log1p(std::exp(x * args.a)) / args.a;
    else if constexpr (Op == UnaryOp::IsNan) return is_nan(x);
    else if constexpr (Op == UnaryOp::IsInf) {
      if constexpr (std::is_floating_point_v<C>) return static_cast<bool>(std::isinf(x));
      else return false;
    } else return x == C(0);  // LogicalNot
  }
};

// out[offset] = f(in[offset]) for the n elements of `shape` (out's strides, then in's).
template <class Out, class In, class F>
__global__ void unary_strided(Out* out, const In* in, detail::SharedShape<2> shape, std::int64_t n, F f) {
  for (std::int64_t i = detail::first_index(); i < n; i += detail::grid_step()) {
    std::int64_t off[2];
    detail::offsets_of(shape, i, off);
    out[off[0]] = convert<Out>(f(widen(in[off[1]])));
  }
}

// Contiguous out and in of n elements, both aligned to V elements: V at a time, then the
// tail of n % V one by one.
template <class Out, class In, int V, class F>
__global__ void unary_contiguous(Out* out, const In* in, std::int64_t n, F f) {
  using InVec = detail::Vec<In, V>;
  using OutVec = detail::Vec<Out, V>;
  const std::int64_t vectors = n / V;
  for (std::int64_t i = detail::first_index(); i < vectors; i += detail::grid_step()) {
    const InVec x = reinterpret_cast<const InVec*>(in)[i];
    OutVec y;
#pragma unroll
    for (int k = 0; k < V; ++k) y.v[k] = convert<Out>(f(widen(x.v[k])));
    reinterpret_cast<OutVec*>(out)[i] = y;
  }
  for (std::int64_t i = vectors * V + detail::first_index(); i < n; i += detail::grid_step())
    out[i] = convert<Out>(f(widen(in[i])));
}

template <UnaryOp Op, class T>
void launch(const StridedArray& out, const StridedArray& in, std::int64_t n, double a, double b) {
  using C = compute_t<T>;
  using Out = std::conditional_t<returns_bool(Op), bool, T>;
  const UnaryFn<Op, C> f{make_args<C>(Op, a, b)};
  Out* o = static_cast<Out*>(out.data);
  const T* x = static_cast<const T*>(in.data);
  if constexpr (detail::is_float_compute<T>) {
    constexpr int V = detail::kVecWidth<T>;
    if (detail::all_contiguous({&out, &in}) && detail::aligned(o, sizeof(Out) * V) &&
        detail::aligned(x, sizeof(T) * V)) {
      unary_contiguous<Out, T, V><<<detail::blocks_for(std::max<std::int64_t>(n / V, 1)), detail::kThreads, 0,
                                    detail::stream()>>>(o, x, n, f);
      return;
    }
  }
  const StridedArray* arrays[2] = {&out, &in};
  unary_strided<Out, T><<<detail::blocks_for(n), detail::kThreads, 0, detail::stream()>>>(
      o, x, detail::shared_shape(arrays), n, f);
}

}  // namespace

bool unary_supported(UnaryOp op, ElementType type) {
  const bool floating =
      type == ElementType::F16 || type == ElementType::BF16 || type == ElementType::F32 || type == ElementType::F64;
  return floating || !float_only(op);
}

void unary(const StridedArray& out, const StridedArray& in, UnaryOp op, double a, double b, int device) {
  if (!unary_supported(op, in.type)) throw CudaError("unary: op needs a floating-point input");
  const std::int64_t n = detail::numel(out);
  if (n == 0) return;
  detail::use_device(device);
  StridedArray o = out, x = in;
  detail::coalesce({&o, &x});
  detail::visit(in.type, "unary", [&](auto tag) {
    using T = typename decltype(tag)::type;
    detail::with_op<UnaryOp, kUnaryOpCount>(op, [&]<UnaryOp Op>() {
      if constexpr (detail::is_float_compute<T> || !float_only(Op)) launch<Op, T>(o, x, n, a, b);
    });
  });
  detail::after_launch("unary", {static_cast<int>(op), static_cast<int>(in.type)});
}

}  // namespace infini::cuda
