// Raw index-table ops behind the shape family (flip, roll, reflect/replicate pad,
// repeat_interleave): a gather that picks, along some dims, the entries an index table
// names, and its adjoint, a scatter-add along one dim. Neither records autograd history.
export module infini.kernels:shape;
import infini.std;
import infini.tensor;

export namespace infini {

namespace kernels {

// Along `dim`, entry j of a gather's result is entry index[j] of its input.
struct DimIndex {
  std::int64_t dim;
  std::vector<std::int64_t> index;
};

}  // namespace kernels

// out[j_0, ..., j_n] = in[i_0(j_0), ..., i_n(j_n)], where i_d is the index table of dim d
// (the identity for dims without one; at most one table per dim). out is contiguous and
// of in's dtype; in has any strides; every index lies in [0, in.size(d)).
struct GatherDimsKernel {
  static constexpr std::string_view name = "gather_dims";
  using Fn = void (*)(const Tensor& out, const Tensor& in, const std::vector<kernels::DimIndex>& index);
};

// out[..., i, ...] = sum of in[..., j, ...] over the j with index[j] == i, along `dim`
// (zero where no j maps to i). out and in are contiguous, non-empty, of one dtype, and equal
// in every other dim; index has in.size(dim) entries, each in [0, out.size(dim)).
struct ScatterAddDimKernel {
  static constexpr std::string_view name = "scatter_add_dim";
  using Fn = void (*)(const Tensor& out, const Tensor& in, std::int64_t dim, const std::vector<std::int64_t>& index);
};

namespace kernels {

// x gathered through the index tables (see GatherDimsKernel); dims may be negative.
// Errors name `op`: a dim out of range or given twice, an index outside its dim.
Tensor gather_dims(std::string_view op, const Tensor& x, std::vector<DimIndex> index);

// The adjoint of a one-dim gather: x (..., m, ...) summed into (..., size, ...) along dim,
// entry j going to index[j] (index has m entries in [0, size)).
Tensor scatter_add_dim(std::string_view op, const Tensor& x, std::int64_t dim, const std::vector<std::int64_t>& index,
                       std::int64_t size);

}  // namespace kernels
}  // namespace infini
