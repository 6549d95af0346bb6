// Elementwise kernels on strided arrays of one shape: unary and binary maps, where, and
// accumulate (dst += src). Plain C++ interface; see infini.kernels' UnaryKernel,
// BinaryKernel, WhereKernel and AccumulateKernel for the full contracts.
#pragma once

#include <cstdint>

#include "infini/cuda/cuda.h"
#include "infini/op_lists.h"

namespace infini::cuda {

// infini::UnaryOp and BinaryOp: one list each (op_lists.h).
enum class UnaryOp : std::uint8_t { INFINI_UNARY_OPS(INFINI_ENUM_ENTRY) };
inline constexpr int kUnaryOpCount = INFINI_COUNT(INFINI_UNARY_OPS);
enum class BinaryOp : std::uint8_t { INFINI_BINARY_OPS(INFINI_ENUM_ENTRY) };
inline constexpr int kBinaryOpCount = INFINI_COUNT(INFINI_BINARY_OPS);

// Whether `op` is defined for inputs of `type` (exactly the CPU kernels' rules): the ops
// from Exp to PowScalar need a floating-point input, except PowScalar, which also takes
// integers and bool (a non-negative integral exponent, computed by squaring with wrap).
bool unary_supported(UnaryOp op, ElementType type);
// Whether `op` is defined for operands of `type`: bool has Add/Maximum (or), Mul/Minimum
// (and) and the comparisons and logical ops; integers all but Div and the GELU gradients.
bool binary_supported(BinaryOp op, ElementType type);

// out[i] = op(in[i]) for unary_supported(op, in.type); out has in's sizes and type, or bool
// for IsNan/IsInf/LogicalNot. a, b: LeakyRelu(slope), Elu(alpha), Softplus(beta, threshold),
// Clamp(min, max; NaN = unbounded), PowScalar(exponent).
void unary(const StridedArray& out, const StridedArray& in, UnaryOp op, double a, double b, int device);

// What binary() found wrong with some element after the whole output was written.
enum class BinaryFailure : std::uint8_t { None, DivisionByZero, NegativePower };

// Whether binary() takes a and b of two types: Add, Sub or Mul of a float32 and a float16
// or bfloat16 operand into float32 (the 16-bit one widened exactly as it is read).
bool binary_widens(BinaryOp op, ElementType out, ElementType a, ElementType b);

// out[i] = op(a[i], b[i]) for binary_supported(op, a.type); a and b share out's sizes and
// one type (or binary_widens); out has that type, or bool from Eq on. out may alias a.
// Integer FloorDiv and Pow report a zero divisor / negative exponent (those elements
// become 0) through `flag`, a device int32 that the call clears, reads back and returns as
// a BinaryFailure (waiting for the stream); other ops ignore it and return None without
// waiting.
BinaryFailure binary(const StridedArray& out, const StridedArray& a, const StridedArray& b, BinaryOp op,
                     std::int32_t* flag, int device);

// Whether binary() needs a `flag` buffer for op on `type` (integer FloorDiv and Pow).
bool binary_needs_flag(BinaryOp op, ElementType type);

// out[i] = cond[i] ? a[i] : b[i]; one shape; cond bool, a and b of out's type.
void where(const StridedArray& out, const StridedArray& cond, const StridedArray& a, const StridedArray& b,
           int device);

// dst[i] += src[i] (same sizes and type; f16/bf16 add in float and round each sum). When
// several indices of dst address one element, its additions happen one after another in
// the row-major order of the index space, so every result is deterministic.
void accumulate(const StridedArray& dst, const StridedArray& src, int device);

}  // namespace infini::cuda
