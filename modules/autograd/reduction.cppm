// Differentiable reductions (PyTorch semantics). Those taking `dims` reduce over any set of
// dims (all dims when the list is empty; negative dims wrap, repeats are an IndexError) and
// drop the reduced dims unless keepdim. Index outputs are int64 and carry no gradient;
// bool outputs (all, any) neither.
module;
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>
export module infini.autograd:reduction;
import infini.kernels;

export namespace infini {

// Every op of this family by name, for the op table test.
inline constexpr std::array<std::string_view, 18> kReductionOps = {
    "sum",    "mean",   "sum_to", "var",       "std",  "max",  "min", "amax",   "amin",
    "argmax", "argmin", "prod",   "logsumexp", "norm", "all",  "any", "cumsum", "cumprod"};

// Bool and integer sums are int64; floating-point sums keep the dtype.
Tensor sum(const Tensor& x);
Tensor sum(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& x);  // floating-point only
Tensor mean(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim = false);
// Sums x down to `shape`, which x's shape is a broadcast of (differentiable).
Tensor sum_to(const Tensor& x, const Shape& shape);

// sum((x - mean)^2) / max(0, N - correction) over the N reduced elements (floating point
// only; float16/bfloat16 are computed in float32). correction 1 is the unbiased estimate.
Tensor var(const Tensor& x, const std::vector<std::int64_t>& dims = {}, double correction = 1, bool keepdim = false);
Tensor std(const Tensor& x, const std::vector<std::int64_t>& dims = {}, double correction = 1, bool keepdim = false);

// Largest (smallest) value over dims; NaN if any element is NaN; IndexError when a reduced
// dim is empty. The gradient is split evenly among the elements equal to the result.
Tensor amax(const Tensor& x, const std::vector<std::int64_t>& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const std::vector<std::int64_t>& dims = {}, bool keepdim = false);
// Of all elements: amax(x) / amin(x).
Tensor max(const Tensor& x);
Tensor min(const Tensor& x);

struct ValuesIndices {
  Tensor values;
  Tensor indices;  // int64
};
// The max (min) along dim and the index of its first occurrence (NaN beats every number);
// the gradient goes to that index only.
ValuesIndices max(const Tensor& x, std::int64_t dim, bool keepdim = false);
ValuesIndices min(const Tensor& x, std::int64_t dim, bool keepdim = false);
// The index (int64) of the first max (min) along dim, or into the flattened tensor.
Tensor argmax(const Tensor& x, std::optional<std::int64_t> dim = {}, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<std::int64_t> dim = {}, bool keepdim = false);

// Product; bool and integers give int64. The gradient is exact when elements are zero
// (first and second derivatives).
Tensor prod(const Tensor& x, const std::vector<std::int64_t>& dims = {}, bool keepdim = false);

// log(sum(exp(x))), computed as max + log(sum(exp(x - max))): no overflow for large x;
// -inf over an empty set. Bool and integers are computed in float32.
Tensor logsumexp(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim = false);

// Vector p-norm over dims for p = 1, 2 or infinity (floating point only). The p = 2
// gradient is 0 where the norm is 0 (like PyTorch); p = inf splits it among ties.
Tensor norm(const Tensor& x, double p = 2, const std::vector<std::int64_t>& dims = {}, bool keepdim = false);

// Whether all (any) elements are nonzero (NaN counts as nonzero); bool result.
Tensor all(const Tensor& x, const std::vector<std::int64_t>& dims = {}, bool keepdim = false);
Tensor any(const Tensor& x, const std::vector<std::int64_t>& dims = {}, bool keepdim = false);

// Cumulative sum / product along dim; bool and integers give int64. cumprod's first and
// second derivatives are exact with any zeros.
Tensor cumsum(const Tensor& x, std::int64_t dim);
Tensor cumprod(const Tensor& x, std::int64_t dim);

}  // namespace infini
