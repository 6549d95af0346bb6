// Differentiable shape and copy ops (PyTorch semantics): joining (cat, stack), splitting
// (split, chunk), repeating (repeat, tile, repeat_interleave), masking (tril, triu),
// padding, flip, roll and movedim. Every result is a new tensor except those of split,
// chunk and movedim, which are views. Any dtype; strided inputs are fine.
//
// kShapeOps also names Tensor's own view and copy methods ("Tensor::view", ...), whose
// gradients come from the hooks in tensor_methods.cpp, so the op table covers them too.
export module infini.autograd:shape;
import infini.std;
import infini.kernels;
import :function;

export namespace infini {

// Every op of this family by name, for the op table test.
inline constexpr std::array<std::string_view, 41> kShapeOps = {
    "cat", "stack", "split", "chunk", "repeat", "tile", "repeat_interleave", "tril", "triu", "pad", "flip", "roll",
    "movedim",
    "Tensor::view", "Tensor::reshape", "Tensor::permute", "Tensor::transpose", "Tensor::t", "Tensor::narrow",
    "Tensor::slice", "Tensor::select", "Tensor::squeeze", "Tensor::unsqueeze", "Tensor::flatten", "Tensor::unflatten",
    "Tensor::expand", "Tensor::broadcast_to", "Tensor::expand_as", "Tensor::as_strided", "Tensor::diagonal",
    "Tensor::split", "Tensor::chunk", "Tensor::unfold", "Tensor::clone", "Tensor::contiguous", "Tensor::to(dtype)",
    "Tensor::to(device)", "Tensor::detach", "Tensor::copy_", "Tensor::fill_", "Tensor::zero_"};

// Joins tensors of one dtype and device along dim; all other sizes must agree. 1-d empty
// tensors (shape [0]) are skipped, like PyTorch's legacy rule.
Tensor cat(const TensorList& tensors, std::int64_t dim = 0);
// Joins tensors of one shape along a new dim (in [-(ndim + 1), ndim]).
Tensor stack(const TensorList& tensors, std::int64_t dim = 0);

// Views of x (see Tensor::split / Tensor::chunk): pieces of split_size (the last may be
// smaller), of the given sizes, or `chunks` pieces of ceil(size / chunks). Recorded as one
// op: x's gradient is one cat of the pieces' (zeros for pieces that got none).
TensorList split(const Tensor& x, std::int64_t split_size, std::int64_t dim = 0);
TensorList split(const Tensor& x, const std::vector<std::int64_t>& split_sizes, std::int64_t dim = 0);
TensorList chunk(const Tensor& x, std::int64_t chunks, std::int64_t dim = 0);

// x (s_0, ..., s_n) tiled repeats[d] times along each dim: (r_0 s_0, ..., r_n s_n). repeats
// may have more entries than x has dims (new leading dims), not fewer.
Tensor repeat(const Tensor& x, const std::vector<std::int64_t>& repeats);
// numpy.tile: like repeat, but fewer reps than dims are padded with leading 1s.
Tensor tile(const Tensor& x, const std::vector<std::int64_t>& reps);
// Each entry of x along dim repeated `repeats` times in place: [a, b] -> [a, a, b, b].
// Without dim, x is flattened first.
Tensor repeat_interleave(const Tensor& x, std::int64_t repeats, std::optional<std::int64_t> dim = {});
// Entry i repeated repeats[i] times (repeats: an integer tensor of size(dim) entries, or one).
Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<std::int64_t> dim = {});

// The lower (upper) triangle of the last two dims: entries (i, j) with j - i <= diagonal
// (>= diagonal) kept, the rest zero.
Tensor tril(const Tensor& x, std::int64_t diagonal = 0);
Tensor triu(const Tensor& x, std::int64_t diagonal = 0);

enum class PadMode { Constant, Reflect, Replicate };
// Pads the last pads.size() / 2 dims, last dim first: {left, right, top, bottom, front, back}.
// Constant pads may be negative (cropping); Reflect mirrors about the edge element without
// repeating it (each pad must be smaller than its dim); Replicate repeats the edge element.
Tensor pad(const Tensor& x, const std::vector<std::int64_t>& pads, PadMode mode = PadMode::Constant,
           const Scalar& value = 0);

// Reverses the order of entries along each of dims.
Tensor flip(const Tensor& x, const std::vector<std::int64_t>& dims);
// Shifts entries along dims[k] by shifts[k] (wrapping around). Without dims, rolls the
// flattened tensor by shifts[0] and restores the shape.
Tensor roll(const Tensor& x, const std::vector<std::int64_t>& shifts, const std::vector<std::int64_t>& dims = {});
// One shift along one dim, or of the flattened tensor when dim is not given.
Tensor roll(const Tensor& x, std::int64_t shift, std::optional<std::int64_t> dim = {});
// A view with dims source[k] moved to positions destination[k], the others in order.
Tensor movedim(const Tensor& x, const std::vector<std::int64_t>& source, const std::vector<std::int64_t>& destination);
Tensor movedim(const Tensor& x, std::int64_t source, std::int64_t destination);

}  // namespace infini
