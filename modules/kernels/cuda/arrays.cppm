// Internal to the CUDA registrations: tensors as cuda::StridedArray for the plain kernel
// interface, and CUDA errors turned into infini errors that name the op and device.
module;
#include "infini/cuda/cuda.h"
module infini.kernels:cuda_arrays;
import infini.std;
import infini.tensor;
import :strided_loop;

namespace infini::kernels::cuda_glue {

inline cuda::ElementType element_type(DataType dtype) { return static_cast<cuda::ElementType>(dtype); }

static_assert(static_cast<int>(cuda::ElementType::F64) == static_cast<int>(DataType::Float64) &&
              static_cast<int>(cuda::ElementType::BF16) == static_cast<int>(DataType::BFloat16));

// t's own sizes and strides (not coalesced); at most cuda::kMaxDims dims.
inline cuda::StridedArray array_of(std::string_view op, const Tensor& t) {
  if (t.dim() > cuda::kMaxDims)
    throw ShapeError(op, concat("CUDA kernels take at most ", cuda::kMaxDims, " dims; got shape ", t.shape()));
  cuda::StridedArray a;
  a.data = t.data_ptr();
  a.type = element_type(t.dtype());
  a.ndim = static_cast<int>(t.dim());
  for (int d = 0; d < a.ndim; ++d) {
    a.sizes[d] = t.shape()[d];
    a.strides[d] = t.strides()[d];
  }
  return a;
}

// The coalesced views of `tensors` (one shape) as StridedArrays: same elements in the same
// row-major order, with as few dims as their strides allow.
template <std::size_t N>
std::array<cuda::StridedArray, N> to_arrays(std::string_view op, const std::array<const Tensor*, N>& tensors) {
  std::array<Strides, N> strides;
  for (std::size_t k = 0; k < N; ++k) strides[k] = tensors[k]->strides();
  const StridedLayout<N> layout = coalesce(tensors[0]->shape(), strides);
  if (layout.shape.size() > static_cast<std::size_t>(cuda::kMaxDims))
    throw ShapeError(op, concat("CUDA kernels take at most ", cuda::kMaxDims, " non-mergeable dims; shape ",
                                tensors[0]->shape(), " has ", layout.shape.size()));
  std::array<cuda::StridedArray, N> arrays;
  for (std::size_t k = 0; k < N; ++k) {
    arrays[k].data = tensors[k]->data_ptr();
    arrays[k].type = element_type(tensors[k]->dtype());
    arrays[k].ndim = static_cast<int>(layout.shape.size());
    for (std::size_t d = 0; d < layout.shape.size(); ++d) {
      arrays[k].sizes[d] = layout.shape[d];
      arrays[k].strides[d] = layout.strides[k][d];
    }
  }
  return arrays;
}

// Runs fn(), turning a cuda::CudaError into a DeviceError from `op` on `device`.
template <class Fn>
decltype(auto) run(std::string_view op, Device device, Fn&& fn) {
  try {
    return fn();
  } catch (const cuda::CudaError& e) {
    throw DeviceError(op, concat("on ", device, ": ", e.what()));
  }
}

}  // namespace infini::kernels::cuda_glue
