// Differentiable matrix products (PyTorch semantics): matmul with its rules for 1-D
// operands and broadcast batch dims, the strict forms mm, bmm, mv, dot and outer, and
// baddbmm and linear. Operands share one floating-point dtype (float16/bfloat16 are
// computed in float32); integer operands are a DTypeError, mismatched shapes a
// ShapeError naming both shapes.
module;
#include <array>
#include <string_view>
export module infini.autograd:linalg;
import infini.kernels;

export namespace infini {

// Every op of this family by name, for the op table test.
inline constexpr std::array<std::string_view, 8> kLinalgOps = {"matmul", "mm",      "bmm",   "mv",
                                                               "dot",    "outer",   "baddbmm", "linear"};

// a (*A, m, k) @ b (*B, k, n) -> (broadcast(*A, *B), m, n). A 1-D a is a row (1, k) and a
// 1-D b a column (k, 1); the dim so added is dropped from the result, so (k) @ (k) is a
// 0-d dot product, (m, k) @ (k) -> (m) and (k) @ (k, n) -> (n).
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor mm(const Tensor& a, const Tensor& b);   // (m, k) @ (k, n) -> (m, n)
Tensor bmm(const Tensor& a, const Tensor& b);  // (B, m, k) @ (B, k, n) -> (B, m, n), no broadcasting
Tensor mv(const Tensor& a, const Tensor& x);   // (m, k) @ (k) -> (m)
Tensor dot(const Tensor& a, const Tensor& b);  // (k) . (k) -> 0-d
Tensor outer(const Tensor& a, const Tensor& b);  // (m), (n) -> (m, n) with out[i, j] = a[i] * b[j]
// beta * input + alpha * batch1 (B, m, k) @ batch2 (B, k, n) -> (B, m, n); input
// broadcasts to the result; beta == 0 ignores input's values (NaN included).
Tensor baddbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2, const Scalar& beta = 1,
               const Scalar& alpha = 1);
// x (*, in) @ weight (out, in)^T + bias (out) -> (*, out); an undefined bias adds nothing.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});

}  // namespace infini
