// fill: dst[i] = value for every element of a strided array.
#include <cstring>

#include "launch.cuh"
#include "strided.cuh"

namespace infini::cuda {
namespace {

// Writes `value` to each of the numel elements of dst (row-major linear index i -> offset).
// T is an unsigned integer of the element's size: fill only copies the value's bytes.
template <class T>
__global__ void fill_kernel(StridedArray dst, std::int64_t numel, T value) {
  T* data = static_cast<T*>(dst.data);
  for (std::int64_t i = detail::first_index(); i < numel; i += detail::grid_step())
    data[detail::offset_of(dst, i)] = value;
}

template <class T>
void launch(const StridedArray& dst, std::int64_t numel, const void* value) {
  T bits;
  std::memcpy(&bits, value, sizeof(T));
  fill_kernel<T><<<detail::blocks_for(numel), detail::kThreads, 0, detail::stream()>>>(dst, numel, bits);
}

}  // namespace

void fill(const StridedArray& dst, const void* value, int device) {
  const std::int64_t numel = detail::numel(dst);
  if (numel == 0) return;
  detail::use_device(device);
  StridedArray shape = dst;
  detail::coalesce({&shape});
  switch (dst.type) {
    case ElementType::Bool:
    case ElementType::U8:
    case ElementType::I8: launch<std::uint8_t>(shape, numel, value); break;
    case ElementType::I16:
    case ElementType::F16:
    case ElementType::BF16: launch<std::uint16_t>(shape, numel, value); break;
    case ElementType::I32:
    case ElementType::F32: launch<std::uint32_t>(shape, numel, value); break;
    case ElementType::I64:
    case ElementType::F64: launch<std::uint64_t>(shape, numel, value); break;
    default: throw CudaError("fill: unknown element type");
  }
  detail::after_launch("fill", {static_cast<int>(dst.type), numel, shape.ndim});
}

}  // namespace infini::cuda
