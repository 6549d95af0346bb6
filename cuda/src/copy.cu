// copy: dst[i] = convert<dst.type>(src[i]) between strided arrays of the same sizes.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

#include "element_types.cuh"
#include "launch.cuh"
#include "strided.cuh"

namespace infini::cuda {
namespace {

using detail::convert;
using detail::offset_of;

// dst and src share sizes (taken from dst); each of the numel elements is located by
// unravelling its row-major linear index i once and applying both arrays' strides.
template <class D, class S>
__global__ void copy_kernel(StridedArray dst, StridedArray src, std::int64_t numel) {
  D* out = static_cast<D*>(dst.data);
  const S* in = static_cast<const S*>(src.data);
  for (std::int64_t i = detail::first_index(); i < numel; i += detail::grid_step())
    out[offset_of(dst, i)] = convert<D>(in[offset_of(src, i)]);
}

}  // namespace

void copy(const StridedArray& dst, const StridedArray& src, int device) {
  const std::int64_t numel = detail::numel(dst);
  if (src.ndim != dst.ndim || !std::equal(dst.sizes, dst.sizes + dst.ndim, src.sizes))
    throw CudaError("copy: dst and src sizes differ");
  if (numel == 0) return;
  detail::use_device(device);
  StridedArray out = dst, in = src;
  detail::coalesce({&out, &in});
  detail::visit(dst.type, "copy", [&](auto d) {
    detail::visit(src.type, "copy", [&](auto s) {
      using D = typename decltype(d)::type;
      using S = typename decltype(s)::type;
      copy_kernel<D, S><<<detail::blocks_for(numel), detail::kThreads, 0, detail::stream()>>>(out, in, numel);
    });
  });
  detail::after_launch("copy", {static_cast<int>(dst.type), static_cast<int>(src.type)});
}

}  // namespace infini::cuda
