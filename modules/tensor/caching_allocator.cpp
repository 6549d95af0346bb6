// The per-device caching allocators behind Storage::allocate. On the CPU, blocks are
// rounded to size classes (64-byte multiples up to 512 bytes, then four classes per power
// of two) and freed blocks are kept per class for reuse. On CUDA devices the stream-aware
// BlockAllocator (block_allocator.h: PyTorch's design) manages segments of device memory.
// A failed allocation empties the cache and tries once more before raising
// OutOfMemoryError with the numbers.
module;
#include <cstdint>
#include <cstdlib>

#include "infini/cuda/block_allocator.h"
#if INFINI_HAS_CUDA
#include "infini/cuda/cuda.h"
#include "infini/cuda/graph.h"
#endif
module infini.tensor;
import infini.std;
import :cuda_graph;

namespace infini {
namespace {

constexpr std::size_t kAlignment = 64;

std::size_t size_class(std::size_t nbytes) {
  if (nbytes <= 512) return (nbytes + kAlignment - 1) / kAlignment * kAlignment;
  const std::size_t step = std::bit_floor(nbytes) / 4;
  return (nbytes + step - 1) / step * step;
}

// One device's allocator, as Storage sees it.
class DeviceAllocator {
 public:
  virtual ~DeviceAllocator() = default;
  virtual void* allocate(std::size_t nbytes) = 0;
  virtual void deallocate(void* ptr) = 0;
  virtual MemoryStats stats() = 0;
  virtual void reset_peak() = 0;
  virtual void empty_cache() = 0;
  virtual void retain_pool(std::uintptr_t pool) = 0;
  virtual void release_pool(std::uintptr_t pool) = 0;
};

OutOfMemoryError out_of_memory(Device device, std::size_t nbytes, std::int64_t allocated, std::int64_t reserved) {
  return OutOfMemoryError("allocate", concat("cannot allocate ", nbytes, " bytes on ", device, " (", allocated,
                                             " bytes allocated, ", reserved, " reserved)"));
}

class CpuCachingAllocator final : public DeviceAllocator {
 public:
  explicit CpuCachingAllocator(Device device) : device_(device) {}

  void* allocate(std::size_t nbytes) override {
    const std::size_t size = size_class(nbytes);
    std::lock_guard lock(mutex_);
    void* ptr = nullptr;
    if (auto it = cached_.find(size); it != cached_.end() && !it->second.empty()) {
      ptr = it->second.back();
      it->second.pop_back();
    } else {
      ptr = raw_allocate(size);
      if (!ptr) {
        release_cached();
        ptr = raw_allocate(size);
      }
      if (!ptr) throw out_of_memory(device_, nbytes, stats_.allocated_bytes, stats_.reserved_bytes);
      stats_.reserved_bytes += static_cast<std::int64_t>(size);
    }
    live_.emplace(ptr, size);
    stats_.allocated_bytes += static_cast<std::int64_t>(size);
    stats_.live_allocations += 1;
    stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
    return ptr;
  }

  void deallocate(void* ptr) override {
    std::lock_guard lock(mutex_);
    auto it = live_.find(ptr);
    const std::size_t size = it->second;
    live_.erase(it);
    cached_[size].push_back(ptr);
    stats_.allocated_bytes -= static_cast<std::int64_t>(size);
    stats_.live_allocations -= 1;
  }

  MemoryStats stats() override {
    std::lock_guard lock(mutex_);
    return stats_;
  }
  void reset_peak() override {
    std::lock_guard lock(mutex_);
    stats_.peak_allocated_bytes = stats_.allocated_bytes;
  }
  void empty_cache() override {
    std::lock_guard lock(mutex_);
    release_cached();
  }
  void retain_pool(std::uintptr_t) override {}  // no CUDA graphs on the CPU
  void release_pool(std::uintptr_t) override {}

 private:
  static void* raw_allocate(std::size_t size) { return std::aligned_alloc(kAlignment, size); }
  static void raw_free(void* ptr) { std::free(ptr); }
  void release_cached() {
    for (auto& [size, blocks] : cached_) {
      for (void* ptr : blocks) raw_free(ptr);
      stats_.reserved_bytes -= static_cast<std::int64_t>(size * blocks.size());
      blocks.clear();
    }
  }

  Device device_;
  std::mutex mutex_;
  std::unordered_map<void*, std::size_t> live_;
  std::map<std::size_t, std::vector<void*>> cached_;
  MemoryStats stats_;
};

#if INFINI_HAS_CUDA
// A CUDA device's memory and events, as the BlockAllocator uses them.
class CudaMemory final : public memory::DeviceMemory {
 public:
  explicit CudaMemory(int device) : device_(device) {}
  void* allocate(std::size_t bytes) override {
    try {
      return cuda::malloc(bytes, device_);
    } catch (const cuda::CudaError&) {
      return nullptr;
    }
  }
  void free(void* ptr) override { cuda::free(ptr, device_); }
  memory::EventId record_event(memory::StreamId stream) override {
    return reinterpret_cast<memory::EventId>(cuda::event_record(reinterpret_cast<void*>(stream), device_));
  }
  bool event_done(memory::EventId event) override { return cuda::event_query(reinterpret_cast<void*>(event)); }
  void destroy_event(memory::EventId event) override { cuda::event_destroy(reinterpret_cast<void*>(event)); }

 private:
  int device_;
};

// Every block is allocated for the default stream, the one Infini's kernels run on, or, while
// the calling thread captures a CUDA graph, from that graph's private pool.
class CudaCachingAllocator final : public DeviceAllocator {
 public:
  explicit CudaCachingAllocator(Device device) : device_(device), memory_(device.index), blocks_(memory_) {}

  void* allocate(std::size_t nbytes) override {
    std::lock_guard lock(mutex_);
    void* ptr = nullptr;
    try {
      ptr = blocks_.allocate(nbytes, cuda::capture_pool());
    } catch (const cuda::CudaError& e) {
      throw DeviceError("allocate", concat("on ", device_, ": ", e.what()));
    }
    const memory::BlockStats& s = blocks_.stats();
    if (!ptr) throw out_of_memory(device_, nbytes, s.allocated_bytes, s.reserved_bytes);
    return ptr;
  }
  void deallocate(void* ptr) override {
    std::lock_guard lock(mutex_);
    blocks_.free(ptr, cuda::capture_pool());
  }
  MemoryStats stats() override {
    std::lock_guard lock(mutex_);
    const memory::BlockStats& s = blocks_.stats();
    return {.allocated_bytes = s.allocated_bytes,
            .reserved_bytes = s.reserved_bytes,
            .peak_allocated_bytes = s.peak_allocated_bytes,
            .live_allocations = s.live_allocations};
  }
  void reset_peak() override {
    std::lock_guard lock(mutex_);
    blocks_.reset_peak();
  }
  void empty_cache() override {
    std::lock_guard lock(mutex_);
    blocks_.empty_cache();
  }
  void retain_pool(std::uintptr_t pool) override {
    std::lock_guard lock(mutex_);
    blocks_.retain_pool(pool);
  }
  void release_pool(std::uintptr_t pool) override {
    std::lock_guard lock(mutex_);
    blocks_.release_pool(pool);
  }

 private:
  Device device_;
  std::mutex mutex_;
  CudaMemory memory_;
  memory::BlockAllocator blocks_;
};
#endif

// One allocator per device, created on first use and never destroyed (storages may
// outlive static destruction order).
DeviceAllocator& allocator_for(Device device) {
  if (device.is_cuda()) {
#if !INFINI_HAS_CUDA
    throw DeviceError("allocate", concat("cannot use ", device, ": this build of Infini has no CUDA backend "
                                         "(configure with INFINI_CUDA=AUTO or ON where nvcc is available)"));
#else
    const int count = cuda_device_count();
    if (device.index < 0 || device.index >= count)
      throw DeviceError("allocate", concat("cannot use ", device, ": ", count, " CUDA device(s) available"));
#endif
  }
  static std::mutex mutex;
  static auto* allocators = new std::map<std::pair<int, int>, std::unique_ptr<DeviceAllocator>>();
  std::lock_guard lock(mutex);
  auto& slot = (*allocators)[{static_cast<int>(device.type), device.index}];
#if INFINI_HAS_CUDA
  if (!slot && device.is_cuda()) slot = std::make_unique<CudaCachingAllocator>(device);
#endif
  if (!slot) slot = std::make_unique<CpuCachingAllocator>(device);
  return *slot;
}

}  // namespace

Storage Storage::allocate(std::int64_t nbytes, Device device) {
  if (nbytes < 0) throw ShapeError("allocate", concat("negative byte count ", nbytes));
  DeviceAllocator& allocator = allocator_for(device);
  Storage storage;
  storage.impl_ = std::make_shared<Impl>();
  storage.impl_->nbytes = nbytes;
  storage.impl_->device = device;
  if (nbytes > 0) {
    storage.impl_->data = allocator.allocate(static_cast<std::size_t>(nbytes));
    storage.impl_->release = [&allocator](void* ptr) { allocator.deallocate(ptr); };
  }
  storage.impl_->from_allocator = true;
  return storage;
}

void Storage::release_memory() const {
  if (!impl_ || !impl_->data) return;
  if (!impl_->from_allocator) throw Error("Storage.release_memory", "the memory of a from_blob storage is its owner's");
  impl_->release(impl_->data);
  impl_->data = nullptr;
  impl_->release = nullptr;
}

void Storage::reallocate() const {
  if (!impl_ || impl_->data || impl_->nbytes == 0) return;
  if (!impl_->from_allocator) throw Error("Storage.reallocate", "the memory of a from_blob storage is its owner's");
  DeviceAllocator& allocator = allocator_for(impl_->device);
  impl_->data = allocator.allocate(static_cast<std::size_t>(impl_->nbytes));
  impl_->release = [&allocator](void* ptr) { allocator.deallocate(ptr); };
}

Storage Storage::from_blob(void* data, std::int64_t nbytes, Device device, std::function<void(void*)> deleter) {
  if (nbytes < 0) throw ShapeError("from_blob", concat("negative byte count ", nbytes));
  if (!data && nbytes > 0) throw Error("from_blob", concat("null pointer for ", nbytes, " bytes"));
  Storage storage;
  storage.impl_ = std::make_shared<Impl>();
  storage.impl_->data = data;
  storage.impl_->nbytes = nbytes;
  storage.impl_->device = device;
  storage.impl_->release = std::move(deleter);
  return storage;
}

MemoryStats memory_stats(Device device) { return allocator_for(device).stats(); }
void retain_graph_pool(Device device, std::uintptr_t pool) { allocator_for(device).retain_pool(pool); }
void release_graph_pool(Device device, std::uintptr_t pool) noexcept {
  try {
    allocator_for(device).release_pool(pool);
  } catch (...) {  // the device was usable when the pool was retained: nothing to release otherwise
  }
}
void reset_peak_memory_stats(Device device) { allocator_for(device).reset_peak(); }
void empty_cache(Device device) { allocator_for(device).empty_cache(); }

int cuda_device_count() noexcept {
#if INFINI_HAS_CUDA
  return cuda::device_count();
#else
  return 0;
#endif
}

bool cuda_is_built() noexcept { return INFINI_HAS_CUDA != 0; }

bool cuda_is_available() noexcept { return cuda_device_count() > 0; }

std::string cuda_pci_bus_id(Device device) {
#if INFINI_HAS_CUDA
  if (!device.is_cuda() || device.index < 0 || device.index >= cuda_device_count())
    throw DeviceError("cuda_pci_bus_id", concat("expected a CUDA device, got ", device, " (", cuda_device_count(),
                                                " CUDA device(s) available)"));
  try {
    return cuda::pci_bus_id(device.index);
  } catch (const cuda::CudaError& e) {
    throw DeviceError("cuda_pci_bus_id", concat("on ", device, ": ", e.what()));
  }
#else
  throw DeviceError("cuda_pci_bus_id", concat("cannot use ", device, ": this build of Infini has no CUDA backend"));
#endif
}

}  // namespace infini
