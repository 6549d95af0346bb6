// The CUDA index-table gather and scatter-add along one dim (the shape family's raw ops)
// as entries of infini.kernels' tables. The index tables are built here, as the CPU
// kernels build them, and copied to the device by the kernels.
module;
#include <cstddef>
#include <cstdint>

#include "infini/cuda/cuda.h"
#include "infini/cuda/index.h"
#include "../destination_groups.h"
module infini.kernels;
import infini.std;
import :cuda_arrays;

namespace infini::kernels {
namespace {

using cuda_glue::array_of;
using cuda_glue::element_type;
using cuda_glue::run;

// offsets: for every dim d in turn, out.size(d) entries: the input element offset output
// index j of dim d adds (index[j] * stride through the dim's table, else j * stride).
void gather_dims_cuda(const Tensor& out, const Tensor& in, const std::vector<DimIndex>& index) {
  const Shape& shape = out.shape();
  const std::int64_t nd = out.dim();
  std::vector<std::int64_t> base(static_cast<std::size_t>(nd) + 1, 0);
  for (std::int64_t d = 0; d < nd; ++d) base[d + 1] = base[d] + shape[d];
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(base[nd]));
  for (std::int64_t d = 0; d < nd; ++d)
    for (std::int64_t j = 0; j < shape[d]; ++j) offsets[base[d] + j] = j * in.strides()[d];
  for (const DimIndex& t : index)
    for (std::size_t j = 0; j < t.index.size(); ++j) offsets[base[t.dim] + j] = t.index[j] * in.strides()[t.dim];
  const cuda::StridedArray o = array_of("gather_dims", out), x = array_of("gather_dims", in);
  const Tensor table = empty({base[nd]}, {.dtype = kInt64, .device = out.device()});
  run("gather_dims", out.device(), [&] {
    cuda::gather_dims(o, x, offsets.data(), table.data_ptr<std::int64_t>(), out.device().index);
  });
}

// in (outer, m, inner) -> out (outer, n, inner): sources[starts[i] .. starts[i + 1]) are
// the j with index[j] == i, ascending.
void scatter_add_dim_cuda(const Tensor& out, const Tensor& in, std::int64_t dim, const std::vector<std::int64_t>& index) {
  const Shape& shape = in.shape();
  std::int64_t outer = 1, inner = 1;
  for (std::int64_t d = 0; d < dim; ++d) outer *= shape[d];
  for (std::int64_t d = dim + 1; d < in.dim(); ++d) inner *= shape[d];
  const std::int64_t m = shape[dim], n = out.shape()[dim];
  const DestinationGroups groups = group_by_destination(index, n);
  const Tensor table = empty({n + 1 + m}, {.dtype = kInt64, .device = out.device()});
  run("scatter_add_dim", out.device(), [&] {
    cuda::scatter_add_dim(out.data_ptr(), in.data_ptr(), element_type(out.dtype()), outer, m, n, inner,
                          groups.starts.data(), groups.sources.data(), table.data_ptr<std::int64_t>(),
                          out.device().index);
  });
}

const bool registered = [] {
  KernelTable<GatherDimsKernel>::set(DeviceType::CUDA, &gather_dims_cuda);
  KernelTable<ScatterAddDimKernel>::set(DeviceType::CUDA, &scatter_add_dim_cuda);
  return true;
}();

}  // namespace
}  // namespace infini::kernels
