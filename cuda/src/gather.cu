// The index range check and the gather along one dim (gather, index_select).
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "index_common.cuh"

namespace infini::cuda {
namespace {

using detail::SharedShape;
using detail::offsets_of;

// *first = the lowest row-major position of an element of index outside [lo, hi) (stays
// ULLONG_MAX when there is none). An integer minimum does not depend on the order of the
// atomics.
__global__ void find_outside_kernel(StridedArray index, std::int64_t numel, std::int64_t lo, std::int64_t hi,
                                    unsigned long long* first) {
  const auto* ix = static_cast<const std::int64_t*>(index.data);
  for (std::int64_t i = detail::first_index(); i < numel; i += detail::grid_step()) {
    const std::int64_t v = ix[detail::offset_of(index, i)];
    if (v < lo || v >= hi) atomicMin(first, static_cast<unsigned long long>(i));
  }
}

// result[1] = the value at position result[0] when that is a position (one thread).
__global__ void read_outside_kernel(StridedArray index, unsigned long long* result) {
  if (result[0] != ULLONG_MAX)
    result[1] = static_cast<unsigned long long>(
        static_cast<const std::int64_t*>(index.data)[detail::offset_of(index, static_cast<std::int64_t>(result[0]))]);
}

// out[o0] = x[o1 + k * xs] with k = index[o2] wrapped into [0, size): operands 0, 1, 2 of
// `at` are out, self (its stride along dim zeroed) and index. T is an unsigned integer of
// the element's size: a gather only moves bytes.
template <class T>
__global__ void gather_kernel(SharedShape<3> at, std::int64_t numel, std::int64_t size, std::int64_t xs, T* out,
                              const T* x, const std::int64_t* ix) {
  for (std::int64_t i = detail::first_index(); i < numel; i += detail::grid_step()) {
    std::int64_t o[3];
    offsets_of(at, i, o);
    std::int64_t k = ix[o[2]];
    if (k < 0) k += size;
    out[o[0]] = x[o[1] + k * xs];
  }
}

// The same for a 2-d `at` whose index is constant along dim 1 (index_select, embedding
// lookups): one block per row reads its index once, threads copy along the row.
template <class T>
__global__ void gather_rows_kernel(SharedShape<3> at, std::int64_t size, std::int64_t xs, T* out, const T* x,
                                   const std::int64_t* ix) {
  const std::int64_t rows = at.sizes[0], length = at.sizes[1];
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    std::int64_t k = ix[r * at.strides[2][0]];
    if (k < 0) k += size;
    T* dst = out + r * at.strides[0][0];
    const T* src = x + r * at.strides[1][0] + k * xs;
    for (std::int64_t j = threadIdx.x; j < length; j += blockDim.x) dst[j * at.strides[0][1]] = src[j * at.strides[1][1]];
  }
}

template <class T>
void launch_gather(const SharedShape<3>& at, std::int64_t numel, std::int64_t size, std::int64_t xs, void* out,
                   const void* x, const std::int64_t* ix) {
  if (at.ndim == 2 && at.strides[2][1] == 0 && at.sizes[1] >= 64) {
    const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>(at.sizes[0], detail::kMaxBlocks));
    gather_rows_kernel<T><<<blocks, detail::kThreads, 0, detail::stream()>>>(at, size, xs, static_cast<T*>(out),
                                                                             static_cast<const T*>(x), ix);
    return;
  }
  gather_kernel<T><<<detail::blocks_for(numel), detail::kThreads, 0, detail::stream()>>>(
      at, numel, size, xs, static_cast<T*>(out), static_cast<const T*>(x), ix);
}

}  // namespace

bool index_outside(const StridedArray& index, std::int64_t lo, std::int64_t hi, std::int64_t* bad,
                   const DeviceAlloc& alloc, int device) {
  const std::int64_t numel = detail::numel(index);
  if (numel == 0) return false;
  detail::use_device(device);
  StridedArray ix = index;
  detail::coalesce({&ix});
  auto* result = detail::scratch<unsigned long long>(alloc, 2);  // first bad position, its value
  detail::check(cudaMemsetAsync(result, 0xFF, 2 * sizeof(unsigned long long), detail::stream()), "index_range");
  find_outside_kernel<<<detail::blocks_for(numel), detail::kThreads, 0, detail::stream()>>>(ix, numel, lo, hi, result);
  read_outside_kernel<<<1, 1, 0, detail::stream()>>>(ix, result);
  detail::after_launch("index_range");
  if (detail::defer_check(result, 2 * sizeof(unsigned long long), [lo, hi](const void* host) {
        const auto* found = static_cast<const unsigned long long*>(host);
        if (found[0] != ULLONG_MAX)
          throw CudaError("index " + std::to_string(static_cast<long long>(found[1])) + " is out of range [" +
                          std::to_string(lo) + ", " + std::to_string(hi) + ") (in a CUDA graph replay)");
      }))
    return false;
  unsigned long long host[2];
  detail::read_back(host, result, 2, "index_range");
  if (host[0] == ULLONG_MAX) return false;
  *bad = static_cast<std::int64_t>(host[1]);
  return true;
}

void gather(const StridedArray& out, const StridedArray& self, int dim, const StridedArray& index, int device) {
  const std::int64_t numel = detail::numel(out);
  if (numel == 0) return;
  detail::use_device(device);
  // self over out's sizes, without its step along dim (added per element from the index)
  StridedArray x = self;
  x.sizes[dim] = out.sizes[dim];
  x.strides[dim] = 0;
  const SharedShape<3> at = detail::joint_strides<3>({out, x, index});
  const std::int64_t size = self.sizes[dim], xs = self.strides[dim];
  const auto* ix = static_cast<const std::int64_t*>(index.data);
  switch (out.type) {
    case ElementType::Bool:
    case ElementType::U8:
    case ElementType::I8: launch_gather<std::uint8_t>(at, numel, size, xs, out.data, self.data, ix); break;
    case ElementType::I16:
    case ElementType::F16:
    case ElementType::BF16: launch_gather<std::uint16_t>(at, numel, size, xs, out.data, self.data, ix); break;
    case ElementType::I32:
    case ElementType::F32: launch_gather<std::uint32_t>(at, numel, size, xs, out.data, self.data, ix); break;
    case ElementType::I64:
    case ElementType::F64: launch_gather<std::uint64_t>(at, numel, size, xs, out.data, self.data, ix); break;
    default: throw CudaError("gather: unknown element type");
  }
  detail::after_launch("gather");
}

}  // namespace infini::cuda
