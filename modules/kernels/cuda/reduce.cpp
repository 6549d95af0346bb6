// The CUDA reductions and scans as entries of the kernel tables: ReduceKernel,
// ArgReduceKernel, ScanKernel and ArgScanKernel. The dtype checks are the CPU kernels'.
module;
#include <cstddef>
#include <cstdint>

#include "infini/cuda/cuda.h"
#include "infini/cuda/reduce.h"
module infini.kernels;
import :cuda_arrays;

namespace infini::kernels {
namespace {

using cuda_glue::array_of;
using cuda_glue::run;

// Every value of the two sides' enums (one list each, op_lists.h) agrees.
#define INFINI_SAME_REDUCE(name) static_assert(static_cast<int>(cuda::ReductionOp::name) == static_cast<int>(ReduceOp::name));
#define INFINI_SAME_SCAN(name) static_assert(static_cast<int>(cuda::CumulativeOp::name) == static_cast<int>(ScanOp::name));
INFINI_REDUCE_OPS(INFINI_SAME_REDUCE)
INFINI_SCAN_OPS(INFINI_SAME_SCAN)

// Scratch memory for one call on `device`: a byte tensor that the holder keeps alive until
// it is destroyed (after the call has queued its kernels; the caching allocator orders any
// reuse after them on the stream).
struct Workspace {
  Device device;
  Tensor buffer;
  cuda::ReduceWorkspace allocator() {
    return [this](std::size_t bytes) {
      buffer = empty({static_cast<std::int64_t>(bytes)}, {.dtype = kUInt8, .device = device});
      return buffer.data_ptr();
    };
  }
};

// The dtype reduce_cpu writes for op on t (sums and products of bool and integers: int64).
DataType reduce_result_type(ReduceOp op, DataType t) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Prod: return is_floating_point(t) ? t : kInt64;
    case ReduceOp::Any:
    case ReduceOp::All: return kBool;
    default: return t;
  }
}

void reduce_cuda(const Tensor& out, const Tensor& in, ReduceOp op) {
  if (op == ReduceOp::LogSumExp && !is_floating_point(in.dtype()))
    throw DTypeError("reduce", concat("op ", static_cast<int>(op), " is not defined for ", in.dtype()));
  const DataType expected = reduce_result_type(op, in.dtype());
  if (out.dtype() != expected)
    throw DTypeError("reduce",
                     concat("cannot reduce ", in.dtype(), " into ", out.dtype(), " (expected ", expected, ")"));
  const cuda::StridedArray o = array_of("reduce", out), x = array_of("reduce", in);
  Workspace workspace{in.device(), {}};
  run("reduce", in.device(), [&] {
    cuda::reduce(o, x, static_cast<cuda::ReductionOp>(op), workspace.allocator(), in.device().index);
  });
}

void arg_reduce_cuda(const Tensor& values, const Tensor& indices, const Tensor& in, std::int64_t, ReduceOp op) {
  const cuda::StridedArray v = array_of("arg_reduce", values), i = array_of("arg_reduce", indices),
                           x = array_of("arg_reduce", in);
  Workspace workspace{in.device(), {}};
  run("arg_reduce", in.device(), [&] {
    cuda::arg_reduce(v, i, x, op == ReduceOp::Max, workspace.allocator(), in.device().index);
  });
}

void scan_cuda(const Tensor& out, const Tensor& in, std::int64_t dim, ScanOp op, bool reverse) {
  const DataType expected = is_floating_point(in.dtype()) ? in.dtype() : kInt64;
  if (out.dtype() != expected)
    throw DTypeError("scan", concat("cannot scan ", in.dtype(), " into ", out.dtype(), " (expected ", expected, ")"));
  if (op == ScanOp::LogSumExp && !is_floating_point(in.dtype()))
    throw DTypeError("scan", concat("log-sum-exp scans need a floating-point input, got ", in.dtype()));
  const cuda::StridedArray o = array_of("scan", out), x = array_of("scan", in);
  run("scan", in.device(), [&] {
    cuda::scan(o, x, static_cast<int>(dim), static_cast<cuda::CumulativeOp>(op), reverse, in.device().index);
  });
}

void arg_scan_cuda(const Tensor& values, const Tensor& indices, const Tensor& in, std::int64_t dim, ReduceOp op) {
  const cuda::StridedArray v = array_of("arg_scan", values), i = array_of("arg_scan", indices),
                           x = array_of("arg_scan", in);
  run("arg_scan", in.device(), [&] {
    cuda::arg_scan(v, i, x, static_cast<int>(dim), op == ReduceOp::Max, in.device().index);
  });
}

const bool registered = [] {
  KernelTable<ReduceKernel>::set(DeviceType::CUDA, &reduce_cuda);
  KernelTable<ArgReduceKernel>::set(DeviceType::CUDA, &arg_reduce_cuda);
  KernelTable<ScanKernel>::set(DeviceType::CUDA, &scan_cuda);
  KernelTable<ArgScanKernel>::set(DeviceType::CUDA, &arg_scan_cuda);
  return true;
}();

}  // namespace
}  // namespace infini::kernels
