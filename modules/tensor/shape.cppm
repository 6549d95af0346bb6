// Shape arithmetic shared by tensors and kernels: checked element counts,
// contiguous strides, dim wrapping, -1 inference and broadcasting.
export module infini.tensor:shape;
import infini.std;
import :error;

export namespace infini {

using Shape = std::vector<std::int64_t>;    // sizes, outermost first
using Strides = std::vector<std::int64_t>;  // in elements

// Product of `shape`; ShapeError on a negative size or when the product overflows int64.
std::int64_t checked_numel(std::string_view op, const Shape& shape);

// numel * itemsize in bytes; ShapeError when it does not fit in a signed 64-bit byte count.
std::int64_t checked_nbytes(std::string_view op, const Shape& shape, std::size_t itemsize);

// Row-major strides of a contiguous tensor of `shape`.
Strides contiguous_strides(const Shape& shape);

// Maps dim in [-ndim, ndim) to [0, ndim); IndexError otherwise. A 0-dim tensor accepts 0 and -1.
std::int64_t wrap_dim(std::string_view op, std::int64_t dim, std::int64_t ndim);

// Replaces a single -1 in `shape` so that it holds `numel` elements; ShapeError when impossible.
Shape infer_size(std::string_view op, const Shape& shape, std::int64_t numel);

// NumPy broadcasting of two shapes; ShapeError when a pair of sizes differs and neither is 1.
Shape broadcast_shapes(std::string_view op, const Shape& a, const Shape& b);

// True when a tensor of shape `from` expands to `to` (sizes equal or 1; new dims in front).
bool broadcasts_to(const Shape& from, const Shape& to);

}  // namespace infini
