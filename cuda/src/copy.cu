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

// Like copy_strided over packs of V elements: every dim's stride and the last dim's size are
// multiples of V, the last dim has unit stride, and both arrays are aligned to their packs
// (shape and strides counted in packs).
template <class D, class S, int V>
__global__ void copy_packs(detail::Vec<D, V>* out, const detail::Vec<S, V>* in, detail::SharedShape<2> shape,
                           std::int64_t packs) {
  for (std::int64_t i = detail::first_index(); i < packs; i += detail::grid_step()) {
    std::int64_t off[2];
    detail::offsets_of(shape, i, off);
    const detail::Vec<S, V> x = in[off[1]];
    detail::Vec<D, V> y;
#pragma unroll
    for (int k = 0; k < V; ++k) y.v[k] = convert<D>(x.v[k]);
    out[off[0]] = y;
  }
}

// The arrays (coalesced, of one shape) as packs of V elements, when they can be read so: the
// last dim has unit stride in both and a size that is a multiple of V, every other stride is a
// multiple of V and both data pointers are aligned to a pack of their type. False otherwise.
template <int V>
bool as_packs(StridedArray& out, StridedArray& in, std::size_t out_bytes, std::size_t in_bytes) {
  const int last = out.ndim - 1;
  if (V < 2 || last < 0 || out.strides[last] != 1 || in.strides[last] != 1 || out.sizes[last] % V != 0) return false;
  if (!detail::aligned(out.data, V * out_bytes) || !detail::aligned(in.data, V * in_bytes)) return false;
  for (int d = 0; d < last; ++d)
    if (out.strides[d] % V != 0 || in.strides[d] % V != 0) return false;
  for (StridedArray* a : {&out, &in}) {
    a->sizes[last] /= V;
    for (int d = 0; d < last; ++d) a->strides[d] /= V;
  }
  return true;
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
      constexpr int V = static_cast<int>(16 / std::max(sizeof(D), sizeof(S)));  // 16-byte packs
      if (StridedArray po = out, pi = in; as_packs<V>(po, pi, sizeof(D), sizeof(S))) {
        const StridedArray* arrays[2] = {&po, &pi};
        const std::int64_t packs = numel / V;
        copy_packs<D, S, V><<<detail::blocks_for(packs), detail::kThreads, 0, detail::stream()>>>(
            static_cast<detail::Vec<D, V>*>(out.data), static_cast<const detail::Vec<S, V>*>(in.data),
            detail::shared_shape(arrays), packs);
      } else if (detail::all_contiguous({&out, &in})) {
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
