// arg_reduce: the max or min along one dim and the index of its first occurrence (the CPU's
// ArgFold, modules/kernels/cpu/reduce.cpp, run by reduce_engine.cuh).
#include <algorithm>
#include <cstdint>

#include "element_types.cuh"
#include "reduce_engine.cuh"

namespace infini::cuda {
namespace {

using detail::compute_t;
using detail::ReducePlan;
using detail::ValueIndex;

// (value, index) in the compute type. Threads fold interleaved indices, so combine() is
// order-free: NaN beats every number, a better value wins, and between equals (or two NaNs)
// the smaller index wins; the identity's index kNone loses every tie.
template <class T_, bool kMax>
struct ArgFold {
  using T = T_;
  using C = compute_t<T>;
  using Acc = ValueIndex<C>;
  static constexpr std::int64_t kNone = INT64_MAX;
  std::int64_t* indices;  // values are the plan's out; indices share their strides

  __device__ Acc identity() const { return {detail::extreme_identity<C, kMax>(), kNone}; }
  __device__ Acc add(Acc a, T x, std::int64_t i) const { return combine(a, {static_cast<C>(detail::widen(x)), i}); }
  __device__ Acc combine(Acc a, Acc b) const {
    const bool a_nan = detail::is_nan(a.value), b_nan = detail::is_nan(b.value);
    if (a_nan != b_nan) return a_nan ? a : b;
    if (!a_nan && (kMax ? b.value > a.value : b.value < a.value)) return b;
    if (!a_nan && (kMax ? a.value > b.value : a.value < b.value)) return a;
    return b.index < a.index ? b : a;
  }
  __device__ void store(const ReducePlan& p, std::int64_t k, Acc a) const {
    const std::int64_t o = detail::offset_in(p.outer_out, k);
    static_cast<T*>(p.outer_out.data)[o] = detail::convert<T>(a.value);
    indices[o] = a.index;
  }
};

}  // namespace

void arg_reduce(const StridedArray& values, const StridedArray& indices, const StridedArray& in, bool max,
                const ReduceWorkspace& workspace, int device) {
  if (values.type != in.type || indices.type != ElementType::I64)
    throw CudaError("arg_reduce: values must have in's element type and indices I64");
  if (indices.ndim != values.ndim || !std::equal(values.sizes, values.sizes + values.ndim, indices.sizes) ||
      !std::equal(values.strides, values.strides + values.ndim, indices.strides))
    throw CudaError("arg_reduce: values and indices must share sizes and strides");
  const ReducePlan plan = detail::plan_reduction(values, in, "arg_reduce");
  if (plan.outputs == 0) return;
  if (plan.length == 0) throw CudaError("arg_reduce: the reduced dim is empty");
  detail::use_device(device);
  auto* index = static_cast<std::int64_t*>(indices.data);
  detail::visit(in.type, "arg_reduce", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (max) detail::run_reduction(plan, ArgFold<T, true>{index}, workspace);
    else detail::run_reduction(plan, ArgFold<T, false>{index}, workspace);
  });
  detail::after_launch("arg_reduce");
}

}  // namespace infini::cuda
