// Differentiable reductions over any set of dims (all dims when none are given).
module;
#include <cstdint>
#include <vector>
export module infini.autograd:reduction;
import infini.kernels;

export namespace infini {

// Bool and integer sums are int64; floating-point sums keep the dtype.
Tensor sum(const Tensor& x);
Tensor sum(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& x);  // floating-point only
Tensor mean(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim = false);
// Sums x down to `shape`, which x's shape is a broadcast of (differentiable).
Tensor sum_to(const Tensor& x, const Shape& shape);

}  // namespace infini
