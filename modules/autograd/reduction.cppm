// Differentiable reductions (PyTorch semantics). Those taking `dims` reduce over any set of
// dims (all dims when the list is empty; negative dims wrap, repeats are an IndexError) and
// drop the reduced dims unless keepdim. Index outputs are int64 and carry no gradient;
// bool outputs (all, any) neither.
export module infini.autograd:reduction;
import infini.std;
import infini.kernels;

export namespace infini {

// Every op of this family by name, for the op table test.
inline constexpr std::array<std::string_view, 33> kReductionOps = {
    "sum",      "mean",      "sum_to",   "var",        "std",         "max",         "min",
    "amax",     "amin",      "argmax",   "argmin",     "prod",        "logsumexp",   "norm",
    "all",      "any",       "cumsum",   "cumprod",    "nansum",      "nanmean",     "var_mean",
    "std_mean", "median",    "nanmedian", "kthvalue",  "quantile",    "mode",        "vector_norm",
    "matrix_norm", "cummax", "cummin",   "logcumsumexp", "nanquantile"};

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

// Vector p-norm over dims (floating point only): (sum |x|^p)^(1/p) for any p; p = 0 counts
// the nonzero elements (no gradient), p = inf / -inf is max / min |x|. Where the norm is 0
// the gradient is 0 (like PyTorch); p = +-inf splits it among ties.
Tensor norm(const Tensor& x, double p = 2, const std::vector<std::int64_t>& dims = {}, bool keepdim = false);
// torch.linalg.vector_norm: norm with ord = p.
Tensor vector_norm(const Tensor& x, double ord = 2, const std::vector<std::int64_t>& dims = {}, bool keepdim = false);
// torch.linalg.matrix_norm over the two dims (default the last two) of x (*, m, n): "fro"
// (Frobenius), "nuc" (the sum of the singular values), or ord = 1 / -1 (max / min absolute
// column sum), inf / -inf (max / min absolute row sum) and 2 / -2 (largest / smallest
// singular value, an IndexError for an empty matrix). "nuc" and +-2 go through svdvals
// (float32 and float64 only, as PyTorch: float16/bfloat16 are a DTypeError there).
Tensor matrix_norm(const Tensor& x, std::string_view ord = "fro", const std::vector<std::int64_t>& dims = {-2, -1},
                   bool keepdim = false);
Tensor matrix_norm(const Tensor& x, double ord, const std::vector<std::int64_t>& dims = {-2, -1},
                   bool keepdim = false);

// sum / mean treating NaN as zero / as absent (nanmean of only NaNs is NaN).
Tensor nansum(const Tensor& x, const std::vector<std::int64_t>& dims = {}, bool keepdim = false);
Tensor nanmean(const Tensor& x, const std::vector<std::int64_t>& dims = {}, bool keepdim = false);
// (var, mean) and (std, mean) in one call, as var/std and mean above.
std::pair<Tensor, Tensor> var_mean(const Tensor& x, const std::vector<std::int64_t>& dims = {}, double correction = 1,
                                   bool keepdim = false);
std::pair<Tensor, Tensor> std_mean(const Tensor& x, const std::vector<std::int64_t>& dims = {}, double correction = 1,
                                   bool keepdim = false);

// ---- order statistics (PyTorch semantics; the gradient goes to the returned index) ----
// The median of all elements: the lower of the two middle values for an even count; NaN
// when any element is NaN. This form splits the gradient evenly among the elements equal
// to the result (so does nanmedian's).
Tensor median(const Tensor& x);
// Along dim, with the index (int64, along dim) of the returned element in x.
ValuesIndices median(const Tensor& x, std::int64_t dim, bool keepdim = false);
// median ignoring NaN (NaN only where a whole slice is NaN).
Tensor nanmedian(const Tensor& x);
ValuesIndices nanmedian(const Tensor& x, std::int64_t dim, bool keepdim = false);
// The k-th smallest element along dim (k from 1; NaN is the largest) and its index.
ValuesIndices kthvalue(const Tensor& x, std::int64_t k, std::int64_t dim = -1, bool keepdim = false);
// The most frequent value along dim (the smallest of equally frequent ones) and the index
// of its last occurrence.
ValuesIndices mode(const Tensor& x, std::int64_t dim = -1, bool keepdim = false);

enum class QuantileInterpolation : std::uint8_t { Linear, Lower, Higher, Midpoint, Nearest };
// The q-quantiles of x along dim (of the flattened x without dim): for a sorted slice of n
// values, position q (n - 1) interpolated between its neighbours. q: a double or a 0-d /
// 1-d tensor of x's dtype in [0, 1]; a 1-d q adds a leading dim of its size. Nearest
// rounds half to even, like PyTorch. quantile is NaN for slices with a NaN; nanquantile
// ignores NaNs. float32 / float64 only.
Tensor quantile(const Tensor& x, const Tensor& q, std::optional<std::int64_t> dim = {}, bool keepdim = false,
                QuantileInterpolation interpolation = QuantileInterpolation::Linear);
Tensor quantile(const Tensor& x, double q, std::optional<std::int64_t> dim = {}, bool keepdim = false,
                QuantileInterpolation interpolation = QuantileInterpolation::Linear);
Tensor nanquantile(const Tensor& x, const Tensor& q, std::optional<std::int64_t> dim = {}, bool keepdim = false,
                   QuantileInterpolation interpolation = QuantileInterpolation::Linear);
Tensor nanquantile(const Tensor& x, double q, std::optional<std::int64_t> dim = {}, bool keepdim = false,
                   QuantileInterpolation interpolation = QuantileInterpolation::Linear);

// Whether all (any) elements are nonzero (NaN counts as nonzero); bool result.
Tensor all(const Tensor& x, const std::vector<std::int64_t>& dims = {}, bool keepdim = false);
Tensor any(const Tensor& x, const std::vector<std::int64_t>& dims = {}, bool keepdim = false);

// Cumulative sum / product along dim; bool and integers give int64. cumprod's first and
// second derivatives are exact with any zeros.
Tensor cumsum(const Tensor& x, std::int64_t dim);
Tensor cumprod(const Tensor& x, std::int64_t dim);
// Running max (min) along dim and the index where it was reached (the last index among
// equal values, NaN sticking once seen, like PyTorch); the gradient goes to that index.
ValuesIndices cummax(const Tensor& x, std::int64_t dim);
ValuesIndices cummin(const Tensor& x, std::int64_t dim);
// log(cumsum(exp(x))) along dim, without overflow or underflow of the partial sums
// (floating point only).
Tensor logcumsumexp(const Tensor& x, std::int64_t dim);

}  // namespace infini

// Shared by the family's implementation units (not exported).
namespace infini::reductions {
using Mask = std::vector<bool>;  // per input dim: reduced or not
// t (the result or gradient of a reduction) with the reduced dims back as size 1.
Tensor unsqueeze_reduced(const Tensor& t, const Mask& mask, bool keepdim);
// DTypeError naming op unless x is floating point.
void require_floating(std::string_view op, const Tensor& x);
// IndexError when a reduction without identity (max, min, negative p) would cover an empty dim.
void require_nonempty(std::string_view op, const Tensor& x, const Mask& mask);
// Composite ops compute float16/bfloat16 in float32 and round the result back.
Tensor upcast(const Tensor& x);
Tensor downcast(const Tensor& y, DataType dtype);
}  // namespace infini::reductions
