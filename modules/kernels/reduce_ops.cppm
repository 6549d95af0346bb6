// Raw reductions beyond ReduceOp: max/min along one dim with the index where they occur
// (argmax/argmin), and cumulative sums, products, log-sum-exps and max/min (scans) along
// one dim.
module;
#include "infini/op_lists.h"
export module infini.kernels:reduce_ops;
import infini.std;
import infini.tensor;
import :ops;

export namespace infini {

enum class ScanOp : std::uint8_t { INFINI_SCAN_OPS(INFINI_ENUM_ENTRY) };

// values, indices (in's shape with size 1 at `dim`) = the max (op Max) or min (op Min) of
// in along dim and the index of its first occurrence; NaN beats every number, like PyTorch.
// values (in's dtype) and indices (int64) are contiguous; in has at least one element along dim.
struct ArgReduceKernel {
  static constexpr std::string_view name = "arg_reduce";
  using Fn = void (*)(const Tensor& values, const Tensor& indices, const Tensor& in, std::int64_t dim, ReduceOp op);
};

// out[.., k, ..] = op(in[.., 0, ..], ..., in[.., k, ..]) along dim (over k..n-1 when reverse);
// same shape; out's dtype is in's (floating point) or int64. LogSumExp: floating point only.
struct ScanKernel {
  static constexpr std::string_view name = "scan";
  using Fn = void (*)(const Tensor& out, const Tensor& in, std::int64_t dim, ScanOp op, bool reverse);
};

// values[.., k, ..], indices[.., k, ..] = the running max (op Max) or min (op Min) of in along
// dim up to k and the index where it was reached: a later element equal to the running value
// takes over (PyTorch's cummax/cummin), and a NaN, once seen, stays. values has in's dtype,
// indices int64; both have in's shape.
struct ArgScanKernel {
  static constexpr std::string_view name = "arg_scan";
  using Fn = void (*)(const Tensor& values, const Tensor& indices, const Tensor& in, std::int64_t dim, ReduceOp op);
};

namespace kernels {

// (values, indices) of the max (op Max) or min (op Min) along `dim`, or over the flattened
// tensor when no dim is given (keepdim then keeps every dim as size 1). `name` is the op
// reported in errors; IndexError for a bad dim or an empty reduction.
std::pair<Tensor, Tensor> arg_reduce(std::string_view name, ReduceOp op, const Tensor& x, std::optional<std::int64_t> dim,
                                     bool keepdim);

// Cumulative sum or product along dim (from the end when reverse). Bool and integers give
// int64; floating types keep theirs (accumulated in float64).
Tensor scan(ScanOp op, const Tensor& x, std::int64_t dim, bool reverse = false);

// (values, indices) of the running max (op Max) or min (op Min) along dim; `name` is the op
// reported in errors (IndexError for a bad dim).
std::pair<Tensor, Tensor> arg_scan(std::string_view name, ReduceOp op, const Tensor& x, std::int64_t dim);

}  // namespace kernels
}  // namespace infini
