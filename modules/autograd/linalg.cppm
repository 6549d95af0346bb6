// Differentiable matrix products (PyTorch semantics): matmul with its rules for 1-D
// operands and broadcast batch dims, the strict forms mm, bmm, mv, dot and outer, the
// fused-add forms baddbmm, addmm, addmv and addbmm, linear, einsum, cdist, and the singular
// value decomposition (linalg_svd, svdvals). Operands
// share one floating-point dtype (float16/bfloat16 are computed in float32); integer
// operands are a DTypeError, mismatched shapes a ShapeError naming both shapes.
export module infini.autograd:linalg;
import infini.std;
import infini.kernels;
import :elementwise;
import :function;

export namespace infini {

// Every op of this family by name, for the op table test.
inline constexpr std::array<std::string_view, 16> kLinalgOps = {
    "matmul", "mm",    "bmm",   "mv",    "dot",    "outer",      "baddbmm", "linear",
    "addmm",  "addmv", "addbmm", "einsum", "cdist", "linalg_svd", "svdvals", "dense_gelu_dense"};

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
// beta * input + alpha * mat1 (m, k) @ mat2 (k, n); input broadcasts to (m, n).
Tensor addmm(const Tensor& input, const Tensor& mat1, const Tensor& mat2, const Scalar& beta = 1,
             const Scalar& alpha = 1);
// beta * input + alpha * mat (m, k) @ vec (k); input broadcasts to (m).
Tensor addmv(const Tensor& input, const Tensor& mat, const Tensor& vec, const Scalar& beta = 1,
             const Scalar& alpha = 1);
// beta * input + alpha * sum over b of batch1[b] (m, k) @ batch2[b] (k, n); input
// broadcasts to (m, n). For all three, beta == 0 ignores input's values (NaN included).
Tensor addbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2, const Scalar& beta = 1,
              const Scalar& alpha = 1);
// Einstein summation, torch.einsum's equation language: "ij,jk->ik", implicit output
// (the labels that appear once, sorted), "..." for broadcast dims, repeated labels within an
// operand (diagonals), any number of operands (contracted left to right through bmm).
Tensor einsum(std::string_view equation, const TensorList& operands);
// p-norm distances between the rows of x1 (*, P, M) and x2 (*, R, M) -> (*, P, R) (batch dims
// broadcast); p >= 0 (p = 0 counts differing coordinates, p = inf is the largest). The
// gradient is 0 where a distance is 0.
Tensor cdist(const Tensor& x1, const Tensor& x2, double p = 2);
// x (*, in) @ weight (out, in)^T + bias (out) -> (*, out); an undefined bias adds nothing.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});
// A transformer's MLP as one node (apex's fused_dense_gelu_dense): linear(gelu(linear(x, w1,
// b1), approximate), w2, b2) for x (*, in), w1 (hidden, in), w2 (out, hidden), biases (hidden)
// and (out) or undefined -> (*, out). The composed ops' kernels, so their bits, except on
// devices that fuse GELU's tanh form into the products (CUDA: cuBLASLt's GELU_AUX_BIAS
// epilogue on the first product when b1 is given, its DGELU epilogue on the backward's
// product g @ w2), which take GELU and its derivative in float32 before rounding.
Tensor dense_gelu_dense(const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2, const Tensor& b2,
                        GeluApproximation approximate = GeluApproximation::None);

// ---- singular value decomposition (svd.cpp) ----
// torch.linalg.svd of x (*, m, n), float32 or float64 (other dtypes: DTypeError; fewer than
// 2 dims: ShapeError), k = min(m, n): x = U diag(S) Vh with S (*, k) descending and >= 0,
// U (*, m, k) and Vh (*, k, n) with orthonormal columns / rows, or with full_matrices
// U (*, m, m) and Vh (*, n, n) completed to orthogonal matrices. Singular vectors are
// unique only up to sign (and, for repeated singular values, up to a rotation): use them
// through sign-invariant functions. Error when x holds Inf or NaN (as PyTorch).
// Gradients as PyTorch's svd_backward (differentiable again); they are large where two
// singular values are close, and not defined where they are equal.
struct SvdResult {
  Tensor U, S, Vh;
};
SvdResult linalg_svd(const Tensor& x, bool full_matrices = true);
// torch.linalg.svdvals: linalg_svd(x, false).S; the gradient U diag(gS) Vh is defined
// everywhere.
Tensor svdvals(const Tensor& x);

}  // namespace infini
