// Python-style indices (PyTorch's t[...]): integers, slices, None, Ellipsis, int64 index
// tensors and bool masks, and their resolution into a view plus "advanced" index tensors.
//
//   index(t, {0, Slice(1, {}, 2), None, idx})  ==  t[0, 1::2, None, idx]
//
// Integers, slices, None and Ellipsis are applied as views, left to right (an integer
// selects, so it removes its dim before the advanced indices are placed, like PyTorch).
// Index tensors (a bool mask stands for the index tensors of its nonzero() coordinates,
// one per dim it covers) broadcast together to one shape B; the result has the view's
// other dims with B in place of the indexed dims when those are adjacent, else in front.
export module infini.kernels:index_plan;
import infini.std;
import infini.tensor;

export namespace infini {
namespace indexing {

// Python's None / numpy.newaxis: inserts a dim of size 1.
struct NoneIndex {};
inline constexpr NoneIndex None{};
// Python's `...`: as many whole dims as the other indices leave.
struct EllipsisIndex {};
inline constexpr EllipsisIndex Ellipsis{};

// Python's start:stop:step. Unset bounds take the whole dim; negative ones count from the
// end; bounds clamp to the dim; step must be positive. Slice() is `:`, Slice({}, 3) is `:3`.
struct Slice {
  std::optional<std::int64_t> start, stop;
  std::int64_t step = 1;
  Slice(std::optional<std::int64_t> start = {}, std::optional<std::int64_t> stop = {}, std::int64_t step = 1)
      : start(start), stop(stop), step(step) {}
};

}  // namespace indexing

// One entry of a Python-style index list. An undefined Tensor stands for a whole dim
// (like `:`), so PyTorch's index_put(indices) lists with gaps work unchanged.
class TensorIndex {
 public:
  enum class Kind : std::uint8_t { Integer, Slice, None, Ellipsis, Tensor };

  template <std::integral I>
    requires(!std::same_as<I, bool>)
  TensorIndex(I i) : kind_(Kind::Integer), integer_(static_cast<std::int64_t>(i)) {}
  TensorIndex(indexing::Slice slice) : kind_(Kind::Slice), slice_(slice) {}
  TensorIndex(indexing::NoneIndex) : kind_(Kind::None) {}
  TensorIndex(indexing::EllipsisIndex) : kind_(Kind::Ellipsis) {}
  TensorIndex(Tensor tensor) : kind_(tensor.defined() ? Kind::Tensor : Kind::Slice), tensor_(std::move(tensor)) {}

  Kind kind() const noexcept { return kind_; }
  std::int64_t integer() const noexcept { return integer_; }
  const indexing::Slice& slice() const noexcept { return slice_; }
  const Tensor& tensor() const noexcept { return tensor_; }

 private:
  Kind kind_;
  std::int64_t integer_ = 0;
  indexing::Slice slice_;
  Tensor tensor_;
};

namespace kernels {

// self[indices], resolved. `view` is a view of self (it records autograd history like any
// view); dims[j] of it is indexed by indices[j] (int64, in [0, size), broadcast to
// index_shape). The result is view's other dims with index_shape inserted at `position`.
struct IndexPlan {
  Tensor view;
  std::vector<std::int64_t> dims;
  std::vector<Tensor> indices;
  Shape index_shape;
  std::int64_t position = 0;
  Shape result_shape;
};

// Applies the basic indices and checks the advanced ones (IndexError naming op: too many
// indices, several Ellipses, an integer or index out of range, a mask of the wrong shape,
// index shapes that do not broadcast; DTypeError: a floating-point index tensor).
IndexPlan plan_index(std::string_view op, const Tensor& self, const std::vector<TensorIndex>& indices);

// For every element of plan's result: its element offset in the view's storage minus
// `base` (int64, result_shape).
Tensor index_offsets(const IndexPlan& plan, std::int64_t base);

}  // namespace kernels
}  // namespace infini
