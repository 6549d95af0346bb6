// The op enums that infini.kernels (UnaryOp, BinaryOp, ReduceOp, ScanOp, ScatterMode) and the
// CUDA backend (cuda::UnaryOp, ... ReductionOp, CumulativeOp, ScatterMode) both define, as one
// list each (X-macros), so the two sides cannot drift: each side expands the list into its
// enum, the CUDA glue checks every value pair at compile time (INFINI_SAME_OP), and the counts
// come from the lists (ggml's op-count discipline). A plain header: no modules, no CUDA.
//
//   enum class UnaryOp : std::uint8_t { INFINI_UNARY_OPS(INFINI_ENUM_ENTRY) };
//   inline constexpr int kUnaryOpCount = INFINI_COUNT(INFINI_UNARY_OPS);
#pragma once

// Unary maps: Neg..Floor keep the input's dtype; Exp..PowScalar give a floating-point result
// (integer inputs computed in float32); IsNan, IsInf, LogicalNot give bool.
#define INFINI_UNARY_OPS(X)                                                                              \
  X(Neg) X(Abs) X(Sign) X(Relu) X(Clamp) X(Floor)                                                        \
  X(Exp) X(Expm1) X(Log) X(Log1p) X(Log2) X(Sqrt) X(Rsqrt) X(Reciprocal) X(Sin) X(Cos) X(Tanh) X(Sigmoid) \
  X(Erf) X(LeakyRelu) X(Elu) X(GeluErf) X(GeluTanh) X(Silu) X(Softplus) X(PowScalar)                   \
  X(IsNan) X(IsInf) X(LogicalNot)

// Binary maps: arithmetic; a * gelu'(b) (GELU's gradient, a = grad, b = x); comparisons and
// logical ops (bool results).
#define INFINI_BINARY_OPS(X)                                                        \
  X(Add) X(Sub) X(Mul) X(Div) X(FloorDiv) X(Pow) X(Maximum) X(Minimum)              \
  X(GeluBackward) X(GeluTanhBackward)                                               \
  X(Eq) X(Ne) X(Lt) X(Le) X(Gt) X(Ge)                                               \
  X(LogicalAnd) X(LogicalOr) X(LogicalXor)

// Reductions (LogSumExp is max + log(sum(exp(x - max)))), scans and scatter modes.
#define INFINI_REDUCE_OPS(X) X(Sum) X(Prod) X(Max) X(Min) X(Any) X(All) X(LogSumExp)
#define INFINI_SCAN_OPS(X) X(Sum) X(Prod) X(LogSumExp)
#define INFINI_SCATTER_MODES(X) X(Copy) X(Add) X(Multiply) X(Amax) X(Amin)

#define INFINI_ENUM_ENTRY(name) name,
#define INFINI_COUNT_ONE(name) +1
// The number of entries of a list: INFINI_COUNT(INFINI_UNARY_OPS).
#define INFINI_COUNT(LIST) (0 LIST(INFINI_COUNT_ONE))
