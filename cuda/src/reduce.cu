// reduce: sum, product, max, min, any, all and log-sum-exp over any dims (the folds of the
// CPU kernel, modules/kernels/cpu/reduce.cpp, run by reduce_engine.cuh).
#include <cuda/std/limits>

#include <cstdint>
#include <type_traits>

#include "element_types.cuh"
#include "reduce_engine.cuh"

namespace infini::cuda {
namespace {

using detail::compute_t;
using detail::convert;
using detail::is_float_compute;
using detail::ReducePlan;
using detail::widen;

// Sums and products: float64 for floating types; uint64 (wrapping, stored as int64) for
// bool and integers.
template <class T>
using wide_acc_t = std::conditional_t<is_float_compute<T>, double, std::uint64_t>;
template <class T>
using wide_out_t = std::conditional_t<is_float_compute<T>, T, std::int64_t>;

template <class T>
__device__ wide_acc_t<T> to_wide(T x) {
  return static_cast<wide_acc_t<T>>(static_cast<compute_t<T>>(widen(x)));
}

template <class T_>
struct SumFold {
  using T = T_;
  using Acc = wide_acc_t<T>;
  __device__ Acc identity() const { return 0; }
  __device__ Acc add(Acc a, T x, std::int64_t) const { return a + to_wide(x); }
  __device__ Acc combine(Acc a, Acc b) const { return a + b; }
  __device__ void store(const ReducePlan& p, std::int64_t k, Acc a) const {
    detail::output_at<wide_out_t<T>>(p, k) = convert<wide_out_t<T>>(a);
  }
};

template <class T_>
struct ProdFold {
  using T = T_;
  using Acc = wide_acc_t<T>;
  __device__ Acc identity() const { return 1; }
  __device__ Acc add(Acc a, T x, std::int64_t) const { return a * to_wide(x); }
  __device__ Acc combine(Acc a, Acc b) const { return a * b; }
  __device__ void store(const ReducePlan& p, std::int64_t k, Acc a) const {
    detail::output_at<wide_out_t<T>>(p, k) = convert<wide_out_t<T>>(a);
  }
};

// Max (kMax) or min in the compute type; a NaN wins over everything (it propagates).
template <class T_, bool kMax>
struct ExtremeFold {
  using T = T_;
  using Acc = compute_t<T>;
  __device__ static Acc pick(Acc a, Acc b) { return (kMax ? b > a : b < a) || detail::is_nan(b) ? b : a; }
  __device__ Acc identity() const { return detail::extreme_identity<Acc, kMax>(); }
  __device__ Acc add(Acc a, T x, std::int64_t) const { return pick(a, static_cast<Acc>(widen(x))); }
  __device__ Acc combine(Acc a, Acc b) const { return pick(a, b); }
  __device__ void store(const ReducePlan& p, std::int64_t k, Acc a) const { detail::output_at<T>(p, k) = convert<T>(a); }
};

// Any (kAny) or all of x != 0 (NaN counts as true).
template <class T_, bool kAny>
struct AnyAllFold {
  using T = T_;
  using Acc = bool;
  __device__ Acc identity() const { return !kAny; }
  __device__ Acc add(Acc a, T x, std::int64_t) const { return combine(a, convert<bool>(x)); }
  __device__ Acc combine(Acc a, Acc b) const { return kAny ? a || b : a && b; }
  __device__ void store(const ReducePlan& p, std::int64_t k, Acc a) const { detail::output_at<bool>(p, k) = a; }
};

// log(sum(exp(x))) as a running (max, sum of exp(x - max)) in the compute type C (float for
// float32/16-bit types) with the sum in float64, rescaled when the max grows. States that are
// not finite: NaN (a NaN was seen: max and sum NaN), +inf (max and sum +inf), and the
// identity -inf (no element above -inf: sum 0).
template <class C>
struct MaxSum {
  C max;
  double sum;  // of exp(x - max)
  template <class Shfl>
  __device__ MaxSum shuffled(Shfl shfl) const {
    return {detail::shuffle_with(max, shfl), detail::shuffle_with(sum, shfl)};
  }
};

template <class T_>
struct LogSumExpFold {
  using T = T_;
  using C = compute_t<T>;
  using Acc = MaxSum<C>;
  static constexpr C kInf = ::cuda::std::numeric_limits<C>::infinity();
  static constexpr double kNan = ::cuda::std::numeric_limits<double>::quiet_NaN();

  // exp in the compute type, like the CPU's exponentials of x - max.
  __device__ static C exp_c(C v) {
    if constexpr (std::is_same_v<C, float>) return expf(v);
    else return exp(v);
  }
  __device__ static Acc non_finite(double max) { return {static_cast<C>(max), max > 0 ? max : 0.0}; }

  __device__ Acc identity() const { return {-kInf, 0.0}; }
  __device__ Acc add(Acc a, T in, std::int64_t) const {
    const C x = static_cast<C>(widen(in));
    if (isnan(x) || isnan(a.max)) return non_finite(kNan);
    if (x > a.max) {
      if (x == kInf) return non_finite(x);
      // From the identity (max -inf, sum 0) this gives sum 1.
      return {x, a.sum * exp(static_cast<double>(a.max) - static_cast<double>(x)) + 1.0};
    }
    if (x == -kInf || a.max == kInf) return a;
    return {a.max, a.sum + static_cast<double>(exp_c(x - a.max))};
  }
  // The CPU kernel's combination of two chunks' partials.
  __device__ Acc combine(Acc a, Acc b) const {
    if (isnan(static_cast<double>(a.max) + a.sum) || isnan(static_cast<double>(b.max) + b.sum)) return non_finite(kNan);
    const double max = a.max < b.max ? b.max : a.max;
    if (!isfinite(max)) return non_finite(max);
    return {static_cast<C>(max), a.sum * exp(a.max - max) + b.sum * exp(b.max - max)};
  }
  __device__ void store(const ReducePlan& p, std::int64_t k, Acc a) const {
    const double max = a.max;
    detail::output_at<T>(p, k) = convert<T>(isfinite(max) ? max + log(a.sum) : max);
  }
};

// The type reduce writes for `op` on `in`: see reduce.h.
ElementType result_type(ReductionOp op, ElementType in) {
  const bool floating =
      in == ElementType::F16 || in == ElementType::BF16 || in == ElementType::F32 || in == ElementType::F64;
  switch (op) {
    case ReductionOp::Sum:
    case ReductionOp::Prod: return floating ? in : ElementType::I64;
    case ReductionOp::Any:
    case ReductionOp::All: return ElementType::Bool;
    default: return in;
  }
}

}  // namespace

void reduce(const StridedArray& out, const StridedArray& in, ReductionOp op, const ReduceWorkspace& workspace,
            int device) {
  if (out.type != result_type(op, in.type)) throw CudaError("reduce: out has the wrong element type for this op");
  const ReducePlan plan = detail::plan_reduction(out, in, "reduce");
  if (plan.outputs == 0) return;
  detail::use_device(device);
  detail::visit(in.type, "reduce", [&](auto tag) {
    using T = typename decltype(tag)::type;
    switch (op) {
      case ReductionOp::Sum: return detail::run_reduction(plan, SumFold<T>{}, workspace);
      case ReductionOp::Prod: return detail::run_reduction(plan, ProdFold<T>{}, workspace);
      case ReductionOp::Max: return detail::run_reduction(plan, ExtremeFold<T, true>{}, workspace);
      case ReductionOp::Min: return detail::run_reduction(plan, ExtremeFold<T, false>{}, workspace);
      case ReductionOp::Any: return detail::run_reduction(plan, AnyAllFold<T, true>{}, workspace);
      case ReductionOp::All: return detail::run_reduction(plan, AnyAllFold<T, false>{}, workspace);
      case ReductionOp::LogSumExp:
        if constexpr (is_float_compute<T>) return detail::run_reduction(plan, LogSumExpFold<T>{}, workspace);
        break;
    }
    throw CudaError("reduce: op not defined for this element type");
  });
  detail::after_launch("reduce", {static_cast<int>(op), static_cast<int>(in.type)});
}

}  // namespace infini::cuda
