// Differentiable indexing ops with PyTorch's semantics: gather / scatter along a dim,
// index_* along a dim, masks, Python-style t[...] indexing, sorting, top-k, unique,
// one_hot and multinomial. In-place forms are free functions ending in '_'.
//
// Index tensors are int64 (int32 is converted; anything else is a DTypeError). A negative
// index counts from the end of its dim; one outside [-size, size) is an IndexError naming
// the op, the dim, the index and the size, raised before anything is written.
//
// Duplicate indices: scatter (without reduce), index_copy and index_put(accumulate=false)
// apply their writes in index order (row-major over the index), so the last write to an
// element wins, deterministically. scatter_add, index_add, index_put(accumulate=true) and
// scatter's reductions combine every duplicate. The gradient w.r.t. src/source/values of a
// non-accumulating write is PyTorch's (every duplicate gets the gradient of the element).
//
// Gradients: index_select / gather / take_along_dim / masked_select / index / sort / topk
// values scatter-add the gradient back; scatter / index_copy / index_fill / index_put /
// masked_scatter pass it through except at overwritten elements and gather it for the
// written values. nonzero, argsort, unique, one_hot and multinomial have no gradient.
export module infini.autograd:indexing;
import infini.std;
import infini.kernels;
import :function;

export namespace infini {

// Every op of this family by name, for the op table test.
inline constexpr std::array<std::string_view, 28> kIndexingOps = {
    "index_select", "gather",     "take_along_dim", "scatter",        "scatter_",        "scatter_add",
    "scatter_reduce", "unique_consecutive",
    "scatter_add_", "index_add",  "index_add_",     "index_copy",     "index_copy_",     "index_fill",
    "index_fill_",  "index_put",  "index_put_",     "index",          "masked_select",   "masked_scatter",
    "masked_scatter_", "nonzero", "sort",           "argsort",        "topk",            "unique",
    "one_hot",      "multinomial"};

// ---- gathers ----

// self's slices along dim at index (0-d or 1-d); dim's size becomes index.numel().
Tensor index_select(const Tensor& self, std::int64_t dim, const Tensor& index);
// out[p] = self[p with dim replaced by index[p]]; index has self's number of dims and is no
// larger than self outside dim; out has index's shape.
Tensor gather(const Tensor& self, std::int64_t dim, const Tensor& index);
// gather with self and indices broadcast outside dim; without dim, over the flattened self.
Tensor take_along_dim(const Tensor& self, const Tensor& indices, std::optional<std::int64_t> dim = {});

// ---- scatters (out of place: a copy of self with the writes applied) ----

// Like scatter_reduce(include_self=true): "sum", "prod", "amax", "amin". Amax/amin split the
// gradient evenly among the elements (of self and src) equal to the result.
enum class ScatterReduce : std::uint8_t { Add, Multiply, Amax, Amin };

// self[p with dim replaced by index[p]] = src[p] over index's shape (index.size(d) <=
// src.size(d), and <= self.size(d) for d != dim). Duplicates: the last write wins.
Tensor scatter(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter(const Tensor& self, std::int64_t dim, const Tensor& index, const Scalar& value);
Tensor scatter(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& src, ScatterReduce reduce);
Tensor scatter_add(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& src);
// torch.scatter_reduce: reduce ("sum", "prod", "mean", "amax" or "amin") combines src[p] into
// self[p with dim replaced by index[p]], starting from self's element (include_self) or only
// from the src elements written there (elements nothing is written to keep self's value).
// "mean" divides by the number of elements combined (self counting as one when included),
// rounding down for integers. Gradients as PyTorch's: amax/amin split evenly among the
// combined elements equal to the result; prod is exact with zeros.
Tensor scatter_reduce(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& src,
                      std::string_view reduce, bool include_self = true);
Tensor& scatter_(Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& src);
Tensor& scatter_(Tensor& self, std::int64_t dim, const Tensor& index, const Scalar& value);
Tensor& scatter_(Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& src, ScatterReduce reduce);
Tensor& scatter_add_(Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& src);

// Slice index[i] of self along dim (index 0-d or 1-d) += alpha * slice i of source / = slice i
// of source / = value. source has self's shape except index.numel() along dim.
Tensor index_add(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& source,
                 const Scalar& alpha = 1);
Tensor index_copy(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& source);
Tensor index_fill(const Tensor& self, std::int64_t dim, const Tensor& index, const Scalar& value);
Tensor& index_add_(Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha = 1);
Tensor& index_copy_(Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& source);
Tensor& index_fill_(Tensor& self, std::int64_t dim, const Tensor& index, const Scalar& value);

// ---- masks ----

// The elements of self where mask (bool; both broadcast) is true, row-major, as a 1-d tensor.
Tensor masked_select(const Tensor& self, const Tensor& mask);
// self with the elements where mask (bool, broadcast to self) is true replaced, row-major,
// by the first elements of source (flattened; it needs at least as many as mask selects).
Tensor masked_scatter(const Tensor& self, const Tensor& mask, const Tensor& source);
Tensor& masked_scatter_(Tensor& self, const Tensor& mask, const Tensor& source);
// The coordinates of self's nonzero elements: (n, self.dim()) int64, row-major order.
Tensor nonzero(const Tensor& self);

// ---- Python-style indexing (TensorIndex and indexing::Slice/None/Ellipsis: see
// infini.kernels' index_plan.cppm) ----

// self[indices]: a view when no tensor index is involved, else a new tensor.
Tensor index(const Tensor& self, std::initializer_list<TensorIndex> indices);
Tensor index(const Tensor& self, const std::vector<TensorIndex>& indices);
// self[indices] = values (broadcast to self[indices]'s shape), or += with accumulate (which
// sums duplicates); out of place. PyTorch's list-of-tensors form: an undefined tensor
// stands for a whole dim.
Tensor index_put(const Tensor& self, std::initializer_list<TensorIndex> indices, const Tensor& values,
                 bool accumulate = false);
Tensor index_put(const Tensor& self, const std::vector<TensorIndex>& indices, const Tensor& values,
                 bool accumulate = false);
Tensor index_put(const Tensor& self, const TensorList& indices, const Tensor& values, bool accumulate = false);
Tensor& index_put_(Tensor& self, std::initializer_list<TensorIndex> indices, const Tensor& values,
                   bool accumulate = false);
Tensor& index_put_(Tensor& self, const std::vector<TensorIndex>& indices, const Tensor& values,
                   bool accumulate = false);
Tensor& index_put_(Tensor& self, const TensorList& indices, const Tensor& values, bool accumulate = false);
Tensor& index_put_(Tensor& self, std::initializer_list<TensorIndex> indices, const Scalar& value);
Tensor& index_put_(Tensor& self, const std::vector<TensorIndex>& indices, const Scalar& value);

// ---- sorting and selection ----

struct SortResult {
  Tensor values;
  Tensor indices;  // int64
};

// Sorts along dim (NaN above every number). The sort is always stable: equal elements keep
// their order, ascending or descending (`stable` is accepted for PyTorch compatibility).
SortResult sort(const Tensor& self, std::int64_t dim = -1, bool descending = false, bool stable = false);
Tensor argsort(const Tensor& self, std::int64_t dim = -1, bool descending = false, bool stable = false);
// The k largest (or smallest) elements along dim; equal values by lower index. sorted: best
// first; otherwise in the order they appear in self.
SortResult topk(const Tensor& self, std::int64_t k, std::int64_t dim = -1, bool largest = true, bool sorted = true);

struct UniqueResult {
  Tensor values;   // 1-d
  Tensor inverse;  // self's shape, int64; defined when asked for
  Tensor counts;   // int64, like values; defined when asked for
};
// The distinct values of self (flattened), ascending when sorted, else in order of first
// occurrence; NaNs are all distinct.
UniqueResult unique(const Tensor& self, bool sorted = true, bool return_inverse = false, bool return_counts = false);

// Collapses each run of equal consecutive elements of self (flattened), or of equal
// consecutive slices along dim, to one: values, and when asked the run index of every
// element (inverse, self's shape, or (self.size(dim)) with dim) and each run's length.
UniqueResult unique_consecutive(const Tensor& self, bool return_inverse = false, bool return_counts = false,
                                std::optional<std::int64_t> dim = {});
// index (int64) as one-hot rows: shape index.shape() + [num_classes], int64. num_classes -1
// means index.max() + 1; an index outside [0, num_classes) is an IndexError.
Tensor one_hot(const Tensor& index, std::int64_t num_classes = -1);

// num_samples category indices (int64) per row of probs (1-d or 2-d, non-negative, finite,
// unnormalised). Reproducible for a given generator state (default: default_generator()).
Tensor multinomial(const Tensor& probs, std::int64_t num_samples, bool replacement = false,
                   Generator* generator = nullptr);

}  // namespace infini
