// The CUDA unary, binary, where and accumulate_ kernels as entries of the kernel tables.
// dtype checks happen here, before any launch, with the CPU kernels' errors.
module;
#include <cstdint>

#include "infini/cuda/cuda.h"
#include "infini/cuda/elementwise.h"
module infini.kernels;
import infini.std;
import :cuda_arrays;

namespace infini::kernels {
namespace {

using cuda_glue::element_type;
using cuda_glue::run;
using cuda_glue::to_arrays;

// Every value of the two sides' enums (one list each, op_lists.h) agrees.
static_assert(cuda::kUnaryOpCount == kUnaryOpCount && cuda::kBinaryOpCount == kBinaryOpCount);
#define INFINI_SAME_UNARY(name) static_assert(static_cast<int>(cuda::UnaryOp::name) == static_cast<int>(UnaryOp::name));
#define INFINI_SAME_BINARY(name) static_assert(static_cast<int>(cuda::BinaryOp::name) == static_cast<int>(BinaryOp::name));
INFINI_UNARY_OPS(INFINI_SAME_UNARY)
INFINI_BINARY_OPS(INFINI_SAME_BINARY)

void unary_cuda(const Tensor& out, const Tensor& in, UnaryOp op, UnaryParams params) {
  const auto code = static_cast<cuda::UnaryOp>(op);
  if (!cuda::unary_supported(code, element_type(in.dtype())))
    throw DTypeError("unary", concat("op ", static_cast<int>(op), " needs a floating-point input, got ", in.dtype()));
  const auto arrays = to_arrays<2>("unary", {&out, &in});
  run("unary", out.device(),
      [&] { cuda::unary(arrays[0], arrays[1], code, params.a, params.b, out.device().index); });
}

void binary_cuda(const Tensor& out, const Tensor& a, const Tensor& b, BinaryOp op) {
  const auto code = static_cast<cuda::BinaryOp>(op);
  const cuda::ElementType type = element_type(a.dtype());
  if (!cuda::binary_supported(code, type))
    throw DTypeError("binary", concat("op ", static_cast<int>(op), " is not defined for ", a.dtype()));
  check_binary_operand_dtypes(op, out.dtype(), a.dtype(), b.dtype());
  // Integer floor_divide and pow report failed elements through one device int32.
  Tensor flag;
  std::int32_t* flag_ptr = nullptr;
  if (cuda::binary_needs_flag(code, type)) {
    flag = empty({1}, {.dtype = kInt32, .device = out.device()});
    flag_ptr = static_cast<std::int32_t*>(flag.data_ptr());
  }
  const auto arrays = to_arrays<3>("binary", {&out, &a, &b});
  const cuda::BinaryFailure failure = run(
      "binary", out.device(), [&] { return cuda::binary(arrays[0], arrays[1], arrays[2], code, flag_ptr, out.device().index); });
  if (failure == cuda::BinaryFailure::DivisionByZero) throw Error("floor_divide", "integer division by zero");
  if (failure == cuda::BinaryFailure::NegativePower)
    throw Error("pow", "integers to negative integer powers are not allowed");
}

void where_cuda(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  const auto arrays = to_arrays<4>("where", {&out, &cond, &a, &b});
  run("where", out.device(),
      [&] { cuda::where(arrays[0], arrays[1], arrays[2], arrays[3], out.device().index); });
}

void accumulate_cuda(const Tensor& dst, const Tensor& src) {
  const auto arrays = to_arrays<2>("accumulate_", {&dst, &src});
  run("accumulate_", dst.device(), [&] { cuda::accumulate(arrays[0], arrays[1], dst.device().index); });
}

const bool registered = [] {
  KernelTable<UnaryKernel>::set(DeviceType::CUDA, &unary_cuda);
  KernelTable<BinaryKernel>::set(DeviceType::CUDA, &binary_cuda);
  KernelTable<WhereKernel>::set(DeviceType::CUDA, &where_cuda);
  KernelTable<AccumulateKernel>::set(DeviceType::CUDA, &accumulate_cuda);
  return true;
}();

}  // namespace
}  // namespace infini::kernels
