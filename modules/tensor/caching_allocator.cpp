// The per-device caching allocator behind Storage::allocate. Blocks are rounded to size
// classes (64-byte multiples up to 512 bytes, then four classes per power of two) and
// freed blocks are kept per class for reuse; a failed allocation empties the cache and
// tries once more before raising OutOfMemoryError.
module;
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>
#if INFINI_HAS_CUDA
#include "infini/cuda/cuda.h"
#endif
module infini.tensor;

namespace infini {
namespace {

constexpr std::size_t kAlignment = 64;

std::size_t size_class(std::size_t nbytes) {
  if (nbytes <= 512) return (nbytes + kAlignment - 1) / kAlignment * kAlignment;
  const std::size_t step = std::bit_floor(nbytes) / 4;
  return (nbytes + step - 1) / step * step;
}

class CachingAllocator {
 public:
  explicit CachingAllocator(Device device) : device_(device) {}

  void* allocate(std::size_t nbytes) {
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
      if (!ptr)
        throw OutOfMemoryError("allocate", concat("cannot allocate ", nbytes, " bytes on ", device_, " (",
                                                  stats_.allocated_bytes, " bytes allocated, ",
                                                  stats_.reserved_bytes, " reserved)"));
      stats_.reserved_bytes += static_cast<std::int64_t>(size);
    }
    live_.emplace(ptr, size);
    stats_.allocated_bytes += static_cast<std::int64_t>(size);
    stats_.live_allocations += 1;
    stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
    return ptr;
  }

  void deallocate(void* ptr) {
    std::lock_guard lock(mutex_);
    auto it = live_.find(ptr);
    const std::size_t size = it->second;
    live_.erase(it);
    cached_[size].push_back(ptr);
    stats_.allocated_bytes -= static_cast<std::int64_t>(size);
    stats_.live_allocations -= 1;
  }

  MemoryStats stats() {
    std::lock_guard lock(mutex_);
    return stats_;
  }
  void reset_peak() {
    std::lock_guard lock(mutex_);
    stats_.peak_allocated_bytes = stats_.allocated_bytes;
  }
  void empty_cache() {
    std::lock_guard lock(mutex_);
    release_cached();
  }

 private:
  void* raw_allocate(std::size_t size) {
    if (device_.is_cpu()) return std::aligned_alloc(kAlignment, size);
#if INFINI_HAS_CUDA
    try {
      return cuda::malloc(size, device_.index);
    } catch (const cuda::CudaError&) {
      return nullptr;
    }
#else
    return nullptr;
#endif
  }
  void raw_free(void* ptr) {
    if (device_.is_cpu()) return std::free(ptr);
#if INFINI_HAS_CUDA
    cuda::free(ptr, device_.index);
#endif
  }
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

// One allocator per device, created on first use and never destroyed (storages may
// outlive static destruction order).
CachingAllocator& allocator_for(Device device) {
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
  static auto* allocators = new std::map<std::pair<int, int>, std::unique_ptr<CachingAllocator>>();
  std::lock_guard lock(mutex);
  auto& slot = (*allocators)[{static_cast<int>(device.type), device.index}];
  if (!slot) slot = std::make_unique<CachingAllocator>(device);
  return *slot;
}

}  // namespace

Storage Storage::allocate(std::int64_t nbytes, Device device) {
  if (nbytes < 0) throw ShapeError("allocate", concat("negative byte count ", nbytes));
  CachingAllocator& allocator = allocator_for(device);
  Storage storage;
  storage.impl_ = std::make_shared<Impl>();
  storage.impl_->nbytes = nbytes;
  storage.impl_->device = device;
  if (nbytes > 0) {
    storage.impl_->data = allocator.allocate(static_cast<std::size_t>(nbytes));
    storage.impl_->release = [&allocator](void* ptr) { allocator.deallocate(ptr); };
  }
  return storage;
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
void reset_peak_memory_stats(Device device) { allocator_for(device).reset_peak(); }
void empty_cache(Device device) { allocator_for(device).empty_cache(); }

int cuda_device_count() noexcept {
#if INFINI_HAS_CUDA
  return cuda::device_count();
#else
  return 0;
#endif
}

bool cuda_is_available() noexcept { return cuda_device_count() > 0; }

}  // namespace infini
