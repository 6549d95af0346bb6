// The CUDA indexing kernels (index range check, gather, scatter, sort, top-k, unique,
// nonzero) as entries of infini.kernels' tables.
module;
#include <cstddef>
#include <cstdint>

#include "infini/cuda/cuda.h"
#include "infini/cuda/index.h"
module infini.kernels;
import infini.std;
import :cuda_arrays;

namespace infini::kernels {
namespace {

using cuda_glue::array_of;
using cuda_glue::element_type;
using cuda_glue::run;

// Every value of the two sides' enums (one list, op_lists.h) agrees.
#define INFINI_SAME_SCATTER(name) static_assert(static_cast<int>(cuda::ScatterMode::name) == static_cast<int>(ScatterMode::name));
INFINI_SCATTER_MODES(INFINI_SAME_SCATTER)

// Temporary device memory for one kernel call: byte tensors from the caching allocator,
// kept until the Scratch dies (after the call; later kernels run after it on the stream).
class Scratch {
 public:
  explicit Scratch(Device device) : device_(device) {}
  cuda::DeviceAlloc alloc() {
    return [this](std::size_t bytes) {
      buffers_.push_back(empty({static_cast<std::int64_t>(bytes)}, {.dtype = kUInt8, .device = device_}));
      return buffers_.back().data_ptr();
    };
  }

 private:
  Device device_;
  std::vector<Tensor> buffers_;
};

std::optional<std::int64_t> index_range_cuda(const Tensor& index, std::int64_t lo, std::int64_t hi) {
  const cuda::StridedArray ix = array_of("index_range", index);
  Scratch scratch(index.device());
  std::int64_t bad = 0;
  const bool found =
      run("index_range", index.device(), [&] { return cuda::index_outside(ix, lo, hi, &bad, scratch.alloc(), index.device().index); });
  return found ? std::optional<std::int64_t>(bad) : std::nullopt;
}

void gather_cuda(const Tensor& out, const Tensor& self, std::int64_t dim, const Tensor& index) {
  const cuda::StridedArray o = array_of("gather", out), x = array_of("gather", self), ix = array_of("gather", index);
  run("gather", out.device(), [&] { cuda::gather(o, x, static_cast<int>(dim), ix, out.device().index); });
}

void scatter_cuda(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& src, ScatterMode mode) {
  const cuda::StridedArray y = array_of("scatter", self), ix = array_of("scatter", index), s = array_of("scatter", src);
  Scratch scratch(self.device());
  run("scatter", self.device(), [&] {
    cuda::scatter(y, static_cast<int>(dim), ix, s, static_cast<cuda::ScatterMode>(mode), scratch.alloc(),
                  self.device().index);
  });
}

void sort_cuda(const Tensor& indices, const Tensor& self, std::int64_t dim, bool descending) {
  const cuda::StridedArray out = array_of("sort", indices), x = array_of("sort", self);
  Scratch scratch(self.device());
  run("sort", self.device(),
      [&] { cuda::sort(out, x, static_cast<int>(dim), descending, scratch.alloc(), self.device().index); });
}

void topk_cuda(const Tensor& indices, const Tensor& self, std::int64_t dim, std::int64_t k, bool largest, bool sorted) {
  const cuda::StridedArray out = array_of("topk", indices), x = array_of("topk", self);
  Scratch scratch(self.device());
  run("topk", self.device(),
      [&] { cuda::topk(out, x, static_cast<int>(dim), k, largest, sorted, scratch.alloc(), self.device().index); });
}

UniqueOutputs unique_cuda(const Tensor& self, bool sorted) {
  const Device device = self.device();
  UniqueOutputs result;
  result.inverse = empty(self.shape(), {.dtype = kInt64, .device = device});
  Scratch scratch(device);
  run("unique", device, [&] {
    cuda::unique(
        self.data_ptr(), element_type(self.dtype()), self.numel(), sorted, result.inverse.data_ptr<std::int64_t>(),
        [&](std::int64_t groups) {
          result.values = empty({groups}, {.dtype = self.dtype(), .device = device});
          result.counts = empty({groups}, {.dtype = kInt64, .device = device});
          return cuda::UniqueBuffers{result.values.data_ptr(), result.counts.data_ptr<std::int64_t>()};
        },
        scratch.alloc(), device.index);
  });
  return result;
}

Tensor nonzero_cuda(const Tensor& self) {
  const Device device = self.device();
  const cuda::StridedArray x = array_of("nonzero", self);
  Tensor out;
  Scratch scratch(device);
  run("nonzero", device, [&] {
    cuda::nonzero(
        x,
        [&](std::int64_t count) {
          out = empty({count, self.dim()}, {.dtype = kInt64, .device = device});
          return out.data_ptr<std::int64_t>();
        },
        scratch.alloc(), device.index);
  });
  return out;
}

const bool registered = [] {
  KernelTable<IndexRangeKernel>::set(DeviceType::CUDA, &index_range_cuda);
  KernelTable<GatherKernel>::set(DeviceType::CUDA, &gather_cuda);
  KernelTable<ScatterKernel>::set(DeviceType::CUDA, &scatter_cuda);
  KernelTable<SortKernel>::set(DeviceType::CUDA, &sort_cuda);
  KernelTable<TopkKernel>::set(DeviceType::CUDA, &topk_cuda);
  KernelTable<UniqueKernel>::set(DeviceType::CUDA, &unique_cuda);
  KernelTable<NonzeroKernel>::set(DeviceType::CUDA, &nonzero_cuda);
  return true;
}();

}  // namespace
}  // namespace infini::kernels
