// The shape family's index-table gather (flip, roll, pads, repeat_interleave) and its
// adjoint, the scatter-add along one dim. The host-built tables are copied to the device
// on the stream; every output element is written by one thread, the scatter-add summing
// its sources in ascending order: results are deterministic and match the CPU's.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "element_types.cuh"
#include "index_common.cuh"

namespace infini::cuda {
namespace {

// out's sizes and, per dim, where that dim's entries start in the offset table.
struct Tables {
  int ndim = 0;
  std::int64_t sizes[kMaxDims] = {};
  std::int64_t base[kMaxDims] = {};
};

// out[e] = x[sum over d of table[base[d] + coordinate d of e]]. T is an unsigned integer of
// the element's size: a gather only moves bytes.
template <class T>
__global__ void gather_dims_kernel(Tables t, std::int64_t numel, const std::int64_t* table, T* out, const T* x) {
  for (std::int64_t e = detail::first_index(); e < numel; e += detail::grid_step()) {
    std::int64_t rest = e, offset = 0;
    for (int d = t.ndim - 1; d >= 0; --d) {
      const std::int64_t c = rest % t.sizes[d];
      rest /= t.sizes[d];
      offset += table[t.base[d] + c];
    }
    out[e] = x[offset];
  }
}

template <class T>
void launch_gather_dims(const Tables& t, std::int64_t numel, const std::int64_t* table, void* out, const void* x) {
  gather_dims_kernel<T><<<detail::blocks_for(numel), detail::kThreads, 0, detail::stream()>>>(
      t, numel, table, static_cast<T*>(out), static_cast<const T*>(x));
}

// y[(o, i, k)] = sum over p in [starts[i], starts[i + 1]) of x[(o, sources[p], k)], in that
// order, accumulated in double (floating point) or 64-bit integers (wrapping), rounded once.
template <class T>
__global__ void scatter_add_dim_kernel(std::int64_t outer, std::int64_t m, std::int64_t n, std::int64_t inner,
                                       const std::int64_t* starts, const std::int64_t* sources, T* y, const T* x) {
  using C = detail::compute_t<T>;
  constexpr bool floating = std::is_floating_point_v<C>;
  using Acc = std::conditional_t<floating, double, std::uint64_t>;
  const std::int64_t total = outer * n * inner;
  for (std::int64_t e = detail::first_index(); e < total; e += detail::grid_step()) {
    const std::int64_t r = e / inner, k = e - r * inner;
    const std::int64_t o = r / n, i = r - o * n;
    const T* block = x + o * m * inner + k;
    Acc acc = 0;
    for (std::int64_t p = starts[i]; p < starts[i + 1]; ++p) {
      const C v = detail::widen(block[sources[p] * inner]);
      if constexpr (floating) acc += static_cast<double>(v);
      else acc += static_cast<std::uint64_t>(static_cast<std::int64_t>(v));
    }
    if constexpr (floating) y[e] = detail::convert<T>(acc);
    else y[e] = detail::convert<T>(static_cast<std::int64_t>(acc));
  }
}

}  // namespace

void gather_dims(const StridedArray& out, const StridedArray& in, const std::int64_t* offsets, std::int64_t* table,
                 int device) {
  const std::int64_t numel = detail::numel(out);
  if (numel == 0) return;
  detail::use_device(device);
  Tables t;
  t.ndim = out.ndim;
  std::int64_t entries = 0;
  for (int d = 0; d < out.ndim; ++d) {
    t.sizes[d] = out.sizes[d];
    t.base[d] = entries;
    entries += out.sizes[d];
  }
  detail::upload(table, offsets, static_cast<std::size_t>(entries) * sizeof(std::int64_t),
                 "gather_dims: copying the index tables");
  switch (out.type) {
    case ElementType::Bool:
    case ElementType::U8:
    case ElementType::I8: launch_gather_dims<std::uint8_t>(t, numel, table, out.data, in.data); break;
    case ElementType::I16:
    case ElementType::F16:
    case ElementType::BF16: launch_gather_dims<std::uint16_t>(t, numel, table, out.data, in.data); break;
    case ElementType::I32:
    case ElementType::F32: launch_gather_dims<std::uint32_t>(t, numel, table, out.data, in.data); break;
    case ElementType::I64:
    case ElementType::F64: launch_gather_dims<std::uint64_t>(t, numel, table, out.data, in.data); break;
    default: throw CudaError("gather_dims: unknown element type");
  }
  detail::after_launch("gather_dims");
}

void scatter_add_dim(void* out, const void* in, ElementType type, std::int64_t outer, std::int64_t m, std::int64_t n,
                     std::int64_t inner, const std::int64_t* starts, const std::int64_t* sources, std::int64_t* table,
                     int device) {
  const std::int64_t total = outer * n * inner;
  if (total == 0) return;
  detail::use_device(device);
  const cudaStream_t stream = detail::stream();
  detail::upload(table, starts, static_cast<std::size_t>(n + 1) * sizeof(std::int64_t),
                 "scatter_add_dim: copying the index table");
  detail::upload(table + n + 1, sources, static_cast<std::size_t>(m) * sizeof(std::int64_t),
                 "scatter_add_dim: copying the index table");
  detail::visit(type, "scatter_add_dim", [&](auto tag) {
    using T = typename decltype(tag)::type;
    scatter_add_dim_kernel<T><<<detail::blocks_for(total), detail::kThreads, 0, stream>>>(
        outer, m, n, inner, table, table + n + 1, static_cast<T*>(out), static_cast<const T*>(in));
  });
  detail::after_launch("scatter_add_dim");
}

}  // namespace infini::cuda
