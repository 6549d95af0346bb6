// Differentiable reductions over any set of dims (all dims when none are given).
module;
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>
export module infini.autograd:reduction;
import infini.kernels;

export namespace infini {

// Every op of this family by name, for the op table test.
inline constexpr std::array<std::string_view, 3> kReductionOps = {"sum", "mean", "sum_to"};

// Bool and integer sums are int64; floating-point sums keep the dtype.
Tensor sum(const Tensor& x);
Tensor sum(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& x);  // floating-point only
Tensor mean(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim = false);
// Sums x down to `shape`, which x's shape is a broadcast of (differentiable).
Tensor sum_to(const Tensor& x, const Shape& shape);

}  // namespace infini
