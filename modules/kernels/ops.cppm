// Raw (non-differentiable) tensor ops and the kernel signatures behind them. These
// functions check shapes and dtypes, broadcast and promote, allocate the result and call
// the device's kernel; infini.autograd builds the differentiable ops on top of them.
module;
#include "infini/op_lists.h"
export module infini.kernels:ops;
import infini.std;
import infini.tensor;

export namespace infini {

// The op lists are shared with the CUDA backend (cuda/include/infini/op_lists.h), which says
// what each group of ops returns.
enum class UnaryOp : std::uint8_t { INFINI_UNARY_OPS(INFINI_ENUM_ENTRY) };
inline constexpr int kUnaryOpCount = INFINI_COUNT(INFINI_UNARY_OPS);

// Extra arguments of parametrised unary ops: LeakyRelu(slope), Elu(alpha),
// Softplus(beta, threshold), Clamp(min, max; NaN = unbounded), PowScalar(exponent).
struct UnaryParams {
  double a = 0;
  double b = 0;
};

enum class BinaryOp : std::uint8_t { INFINI_BINARY_OPS(INFINI_ENUM_ENTRY) };
inline constexpr int kBinaryOpCount = INFINI_COUNT(INFINI_BINARY_OPS);

// LogSumExp is log(sum(exp(x))), computed as max + log(sum(exp(x - max))).
enum class ReduceOp : std::uint8_t { INFINI_REDUCE_OPS(INFINI_ENUM_ENTRY) };
inline constexpr int kReduceOpCount = INFINI_COUNT(INFINI_REDUCE_OPS);

// out[i] = op(in[i]); same shape; out's dtype is in's, or bool for IsNan/IsInf/LogicalNot.
struct UnaryKernel {
  static constexpr std::string_view name = "unary";
  using Fn = void (*)(const Tensor& out, const Tensor& in, UnaryOp op, UnaryParams params);
};
// out[i] = op(a[i], b[i]); a, b (possibly expanded) share out's shape and one dtype;
// out's dtype is theirs, or bool for comparisons and logical ops. out may alias a.
// One exception (reads_widened): for Add, Sub and Mul with a float32 out, one of a and b
// may be float16 or bfloat16 while the other is float32; the kernel widens it (exactly)
// as it reads it, which gives the bits of casting it to float32 first.
struct BinaryKernel {
  static constexpr std::string_view name = "binary";
  using Fn = void (*)(const Tensor& out, const Tensor& a, const Tensor& b, BinaryOp op);
};
// out[i] = cond[i] ? a[i] : b[i]; all of out's shape, a and b of out's dtype, cond bool.
struct WhereKernel {
  static constexpr std::string_view name = "where";
  using Fn = void (*)(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b);
};
// out = reduction of `in` over the dims where out has size 1 and in does not (keepdim
// shape); out's dtype is the op's result dtype (see reduce()).
struct ReduceKernel {
  static constexpr std::string_view name = "reduce";
  using Fn = void (*)(const Tensor& out, const Tensor& in, ReduceOp op);
};

// dst[i] += src[i]; same shape and dtype. dst may map several indices to one address
// (an expanded or overlapping view): those additions then happen one after another.
struct AccumulateKernel {
  static constexpr std::string_view name = "accumulate_";
  using Fn = void (*)(const Tensor& dst, const Tensor& src);
};

namespace kernels {

// The dtype a unary op produces for an input of dtype t.
DataType unary_result_type(UnaryOp op, DataType t);
Tensor unary(UnaryOp op, const Tensor& x, UnaryParams params = {});

// The dtype a binary op computes in and the one it produces (PyTorch's promotion).
DataType binary_compute_type(BinaryOp op, DataType a, DataType b);
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);
// A Scalar operand takes part as a "wrapped number": it does not widen the tensor's dtype
// within the same kind (int * 2 stays int; float16 * 2.5 stays float16; int * 2.5 is float32).
Tensor binary(BinaryOp op, const Tensor& a, const Scalar& b);
Tensor binary(BinaryOp op, const Scalar& a, const Tensor& b);
// out = op(out, b) in place; b must broadcast to out and the result dtype must be out's.
void binary_(BinaryOp op, const Tensor& out, const Tensor& b);
// Whether binary() and binary_() pass an operand of dtype t to the kernel as it is, to be
// widened to the compute dtype as it is read (see BinaryKernel), when the other is `other`.
bool reads_widened(BinaryOp op, DataType compute, DataType t, DataType other);
// Throws a DTypeError from "binary" naming the three dtypes unless BinaryKernel takes
// operands of dtypes a and b into out: one dtype, or the widened pair (every device's kernel
// checks with it).
void check_binary_operand_dtypes(BinaryOp op, DataType out, DataType a, DataType b);

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

// dst += src (src broadcast to dst, converted to dst's dtype), correct for overlapping dst.
void accumulate_(const Tensor& dst, const Tensor& src);
// True when two indices of t may address one element (a stride-0 or interleaved layout).
bool may_have_internal_overlap(const Tensor& t);

// Reduction over `dims` (all dims when empty); negative dims wrap; duplicates are an error.
// Sum/Prod of bool and integers give int64, Any/All give bool, Max/Min keep the dtype,
// LogSumExp keeps a floating dtype and computes bool and integers in float32.
Tensor reduce(ReduceOp op, const Tensor& x, const std::vector<std::int64_t>& dims = {}, bool keepdim = false);
// The dims of `from` to sum (keeping them) to get `to`, a shape that broadcasts to `from`.
std::vector<std::int64_t> sum_to_dims(const Shape& from, const Shape& to);

// The dims to reduce as a mask over `ndim` dims (empty `dims`: all).
std::vector<bool> reduction_mask(std::string_view op, const std::vector<std::int64_t>& dims, std::int64_t ndim);

}  // namespace kernels
}  // namespace infini
