// copy: dst[i] = convert<dst.type>(src[i]) between strided arrays of the same sizes.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

#include "element_types.cuh"
#include "elementwise.cuh"
#include "launch.cuh"
#include "strided.cuh"

namespace infini::cuda {
namespace {

using detail::convert;

// Both sides contiguous: element i at i.
template <class D, class S>
__global__ void copy_contiguous(D* out, const S* in, std::int64_t numel) {
  for (std::int64_t i = detail::first_index(); i < numel; i += detail::grid_step()) out[i] = convert<D>(in[i]);
}

// dst and src share sizes; each element is located by unravelling its row-major linear
// index once and applying both arrays' strides.
template <class D, class S>
__global__ void copy_strided(D* out, const S* in, detail::SharedShape<2> shape, std::int64_t numel) {
  for (std::int64_t i = detail::first_index(); i < numel; i += detail::grid_step()) {
    std::int64_t off[2];
    detail::offsets_of(shape, i, off);
    out[off[0]] = convert<D>(in[off[1]]);
  }
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
      D* const o = static_cast<D*>(out.data);
      const S* const x = static_cast<const S*>(in.data);
      if (detail::all_contiguous({&out, &in})) {
        copy_contiguous<D, S><<<detail::blocks_for(numel), detail::kThreads, 0, detail::stream()>>>(o, x, numel);
      } else {
        const StridedArray* arrays[2] = {&out, &in};
        copy_strided<D, S><<<detail::blocks_for(numel), detail::kThreads, 0, detail::stream()>>>(
            o, x, detail::shared_shape(arrays), numel);
      }
    });
  });
  detail::after_launch("copy", {static_cast<int>(dst.type), static_cast<int>(src.type), numel, out.ndim});
}

}  // namespace infini::cuda
