// The packing buffers of the GEMMs (sgemm_packed.cpp, sgemm_amx.cpp): 64-byte aligned,
// grown on demand and kept (thread_local) for the next product. A plain C++ header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

namespace infini::cpu {

template <class T>
class PackBuffer {
 public:
  // The first `count` elements, or nullptr when they cannot be allocated.
  T* reserve(std::int64_t count) noexcept {
    if (count > capacity_) {
      data_.reset(new (std::align_val_t(64), std::nothrow) T[static_cast<std::size_t>(count)]);
      capacity_ = data_ ? count : 0;
    }
    return data_.get();
  }

 private:
  struct AlignedDelete {
    void operator()(T* p) const noexcept { ::operator delete[](p, std::align_val_t(64)); }
  };
  std::unique_ptr<T[], AlignedDelete> data_;
  std::int64_t capacity_ = 0;
};

}  // namespace infini::cpu
