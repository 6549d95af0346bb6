// Raw indexing ops and the kernel signatures behind them: gather / scatter along a dim
// (index_select, index_add_, index_copy_ and index_fill_ are these with a 1-d index
// broadcast over the other dims), sorting, top-k, unique, nonzero and multinomial. The
// functions check shapes, dtypes, devices and every index value before a kernel writes
// anything, and name the public op `op` in their errors. None records autograd history.
//
// Index tensors are int64 (int32 is converted); a negative index counts from the end of its
// dim; one outside [-size, size) is an IndexError naming op, dim, index and size.
// Duplicate indices: a scatter without reduction writes each element's updates in index
// order, so the last one wins; reductions combine all of them, in index order.
module;
#include "infini/op_lists.h"
export module infini.kernels:index;
import infini.std;
import infini.tensor;
export import :index_loop;
export import :index_plan;

export namespace infini {

enum class ScatterMode : std::uint8_t { INFINI_SCATTER_MODES(INFINI_ENUM_ENTRY) };

// The first element of `index` (int64, row-major order) outside [lo, hi), if any.
struct IndexRangeKernel {
  static constexpr std::string_view name = "index_range";
  using Fn = std::optional<std::int64_t> (*)(const Tensor& index, std::int64_t lo, std::int64_t hi);
};

// out[p] = self[p with coordinate `dim` replaced by index[p]]. out and index (int64) share
// one shape; self has it too except along dim; every index lies in [-self.size(dim), self.size(dim)).
struct GatherKernel {
  static constexpr std::string_view name = "gather";
  using Fn = void (*)(const Tensor& out, const Tensor& self, std::int64_t dim, const Tensor& index);
};

// self[p with `dim` replaced by index[p]] = mode(that element, src[p]) (Copy: src[p]).
// index (int64) and src (self's dtype) share one shape; self has it too except along dim,
// and no two of its elements share memory. At each position the updates go in index order.
struct ScatterKernel {
  static constexpr std::string_view name = "scatter";
  using Fn = void (*)(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& src, ScatterMode mode);
};

// indices (int64, self's shape): the stable order of every slice of self along dim,
// ascending or descending, NaN above every number.
struct SortKernel {
  static constexpr std::string_view name = "sort";
  using Fn = void (*)(const Tensor& indices, const Tensor& self, std::int64_t dim, bool descending);
};

// indices (int64, self's shape with size k along dim): where the k largest (or smallest)
// elements of each slice are, NaN above every number, equal values by lower index; best
// first when sorted, else in ascending index order.
struct TopkKernel {
  static constexpr std::string_view name = "topk";
  using Fn = void (*)(const Tensor& indices, const Tensor& self, std::int64_t dim, std::int64_t k, bool largest,
                      bool sorted);
};

// The distinct values of a contiguous tensor (1-d; NaNs are all distinct), ascending when
// sorted, else in order of first occurrence; inverse (self's shape) maps each element to
// its value's position, counts how often each value occurs.
struct UniqueOutputs {
  Tensor values, inverse, counts;
};
struct UniqueKernel {
  static constexpr std::string_view name = "unique";
  using Fn = UniqueOutputs (*)(const Tensor& self, bool sorted);
};

// The coordinates (int64, (n, self.dim())) of the nonzero elements of a contiguous tensor,
// in row-major order.
struct NonzeroKernel {
  static constexpr std::string_view name = "nonzero";
  using Fn = Tensor (*)(const Tensor& self);
};

// The first row of probabilities a multinomial draw cannot use, if any.
struct MultinomialCheck {
  enum class Problem : std::uint8_t { None, NotFiniteOrNegative, ZeroSum, TooFewPositive };
  Problem problem = Problem::None;
  std::int64_t row = 0;
  std::int64_t positive = 0;  // the row's count of positive entries (TooFewPositive)
};

// Checks every row of probs (floating point, (rows, categories), contiguous): finite,
// non-negative, a positive sum and, without replacement, at least out.size(1) positive
// entries. When all pass, fills out (int64, (rows, num_samples), contiguous) with category
// draws: with replacement sample s of row r uses Philox counter state.offset + r *
// num_samples + s; without, category c of row r uses counter state.offset + r * categories + c.
struct MultinomialKernel {
  static constexpr std::string_view name = "multinomial";
  using Fn = MultinomialCheck (*)(const Tensor& out, const Tensor& probs, bool replacement, PhiloxState state);
};

namespace kernels {

// index as int64 (int32 converted); DTypeError naming op for other dtypes.
Tensor index_as_int64(std::string_view op, const Tensor& index);
// IndexError naming op, dim, the first bad index and size unless every element of index
// (int64) lies in [-size, size).
void check_index_range(std::string_view op, const Tensor& index, std::int64_t dim, std::int64_t size);
// The first element of index (int64) outside [lo, hi), if any.
std::optional<std::int64_t> find_index_outside(const Tensor& index, std::int64_t lo, std::int64_t hi);

// out[p] = self[p with dim replaced by index[p]] (PyTorch's gather): index has self's number
// of dims and no larger a size than self's outside dim; out has index's shape.
Tensor gather(std::string_view op, const Tensor& self, std::int64_t dim, const Tensor& index);
// In place: self[p with dim replaced by index[p]] = mode(., src[p]) over index's shape
// (index.size(d) <= src.size(d), and <= self.size(d) for d != dim). Returns self.
const Tensor& scatter_(std::string_view op, const Tensor& self, std::int64_t dim, const Tensor& index,
                       const Tensor& src, ScatterMode mode);
// self's slices along dim at index (0-d or 1-d); dim's size becomes index.numel().
Tensor index_select(std::string_view op, const Tensor& self, std::int64_t dim, const Tensor& index);
// In place: slice index[i] of self along dim = mode(., slice i of source), i in order
// (index_copy_, index_add_, index_fill_). source has self's shape except index.numel() along dim.
const Tensor& index_scatter_(std::string_view op, const Tensor& self, std::int64_t dim, const Tensor& index,
                             const Tensor& source, ScatterMode mode);

// The indices that sort self along dim (stable).
Tensor argsort(std::string_view op, const Tensor& self, std::int64_t dim, bool descending);
// The indices of the k largest (or smallest) elements along dim (see TopkKernel).
Tensor topk_indices(std::string_view op, const Tensor& self, std::int64_t k, std::int64_t dim, bool largest,
                    bool sorted);
// The distinct values of self (flattened) with inverse and counts (see UniqueKernel).
UniqueOutputs unique(std::string_view op, const Tensor& self, bool sorted);
// The coordinates of self's nonzero elements, (n, self.dim()) int64.
Tensor nonzero(std::string_view op, const Tensor& self);
// num_samples category indices per row of probs (1-d or 2-d, floating point, unnormalised).
// The generator's counters are reserved before the rows are checked.
Tensor multinomial(std::string_view op, const Tensor& probs, std::int64_t num_samples, bool replacement,
                   Generator* generator);

}  // namespace kernels
}  // namespace infini
