// Plain C++ interface to the CUDA reductions and scans (no modules, no CUDA headers).
// Accumulation follows the CPU kernels: sums and products in float64 for floating types and
// in 64-bit integers (wrapping like two's complement int64) otherwise; f16/bf16 max, min and
// log-sum-exp are computed in float. Every reduction runs in a fixed order, so two runs give
// the same bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "infini/cuda/cuda.h"
#include "infini/op_lists.h"

namespace infini::cuda {

// infini::ReduceOp and ScanOp: one list each (op_lists.h).
enum class ReductionOp : std::uint8_t { INFINI_REDUCE_OPS(INFINI_ENUM_ENTRY) };
enum class CumulativeOp : std::uint8_t { INFINI_SCAN_OPS(INFINI_ENUM_ENTRY) };

// Scratch device memory for one call: returns `bytes` bytes on the call's device that stay
// valid for the kernels the call queues on Infini's stream (the caller keeps them alive until
// the call returns; later work on the same stream may reuse them).
using ReduceWorkspace = std::function<void*(std::size_t bytes)>;

// out = op over the dims where out has size 1 and in does not (out has in's rank: the
// keepdim shape); in has any strides. out's type: Sum/Prod: in's for floating types, I64
// otherwise; Max/Min: in's; Any/All: Bool; LogSumExp (floating types only): in's.
// Max/Min propagate NaN; Any/All count NaN as true; LogSumExp is NaN if any element is NaN,
// else +inf if any is +inf, else -inf if all are -inf (or none), else
// max + log(sum(exp(x - max))). An empty reduction gives the op's identity.
void reduce(const StridedArray& out, const StridedArray& in, ReductionOp op, const ReduceWorkspace& workspace,
            int device);

// values, indices (in's rank, size 1 on the one reduced dim; same sizes and strides; values of
// in's type, indices I64) = the max (max = true) or min of in along that dim and the index of
// its first occurrence; NaN beats every number and the first NaN wins. The dim has at least
// one element.
void arg_reduce(const StridedArray& values, const StridedArray& indices, const StridedArray& in, bool max,
                const ReduceWorkspace& workspace, int device);

// out[.., k, ..] = op(in[.., 0, ..], ..., in[.., k, ..]) along dim (over k..n-1 when reverse);
// same sizes; out's type is in's for floating types (accumulated in float64) and I64
// otherwise (wrapping); LogSumExp needs a floating type.
void scan(const StridedArray& out, const StridedArray& in, int dim, CumulativeOp op, bool reverse, int device);

// values, indices (in's sizes; in's type and I64) = the running max (max = true) or min of in
// along dim and the index where it was reached: a later element equal to the running value
// takes over, and a NaN, once seen, stays (a later NaN takes over).
void arg_scan(const StridedArray& values, const StridedArray& indices, const StridedArray& in, int dim, bool max,
              int device);

}  // namespace infini::cuda
