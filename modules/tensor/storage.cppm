// Storage: a reference-counted block of bytes on one device, from the device's caching
// allocator or wrapped around memory the caller owns. Per-device memory statistics.
export module infini.tensor:storage;
import infini.std;
import :device;

export namespace infini {

struct MemoryStats {
  std::int64_t allocated_bytes = 0;       // held by live storages (size-class rounded)
  std::int64_t reserved_bytes = 0;        // allocated + cached for reuse
  std::int64_t peak_allocated_bytes = 0;  // max of allocated_bytes since the last reset
  std::int64_t live_allocations = 0;      // storages alive now
};

// Statistics of `device`'s caching allocator (only allocations made by Infini count).
MemoryStats memory_stats(Device device);
// Sets the peak back to the current allocated bytes.
void reset_peak_memory_stats(Device device);
// Returns cached, unused blocks of `device` to the system (reserved drops to allocated).
void empty_cache(Device device);

// Number of usable CUDA devices: 0 without a GPU or in a build without the CUDA backend.
int cuda_device_count() noexcept;
// Whether this build of Infini has the CUDA backend (it may still find no device).
bool cuda_is_built() noexcept;
bool cuda_is_available() noexcept;
// The PCI bus id of CUDA `device` ("0000:1b:00.0"): one physical GPU, whatever index
// CUDA_VISIBLE_DEVICES gives it in this process. DeviceError for a CPU or missing device.
std::string cuda_pci_bus_id(Device device);
// Waits until the work issued on `device` so far has finished (nothing to wait for on the
// CPU), like torch.cuda.synchronize; a kernel's asynchronous fault is raised here.
void synchronize(Device device);

class Storage {
 public:
  Storage() = default;

  // nbytes of uninitialised memory on `device`, 64-byte aligned; OutOfMemoryError on failure.
  static Storage allocate(std::int64_t nbytes, Device device);
  // Wraps memory owned by the caller; `deleter` (if any) runs when the last user goes away.
  static Storage from_blob(void* data, std::int64_t nbytes, Device device, std::function<void(void*)> deleter = {});

  bool defined() const noexcept { return impl_ != nullptr; }
  void* data() const noexcept { return impl_ ? impl_->data : nullptr; }
  std::int64_t nbytes() const noexcept { return impl_ ? impl_->nbytes : 0; }
  Device device() const noexcept { return impl_ ? impl_->device : Device::cpu(); }
  long use_count() const noexcept { return impl_.use_count(); }
  // FSDP's storage resize, for every tensor over this storage at once: release_memory() gives
  // the bytes back to the allocator (the tensors keep their shapes but must not be read or
  // written), reallocate() takes nbytes() new, uninitialised ones. Both do nothing when there
  // is nothing to do; Error for a storage from_blob wraps (its memory is not the allocator's).
  void release_memory() const;
  void reallocate() const;
  bool resident() const noexcept { return impl_ && (impl_->data != nullptr || impl_->nbytes == 0); }
  bool is_same(const Storage& other) const noexcept { return impl_ == other.impl_; }

  // Bumped by every in-place write to any tensor over this storage; autograd compares it
  // with the value recorded when a tensor was saved for backward.
  std::uint64_t version() const noexcept { return impl_ ? impl_->version : 0; }
  void bump_version() const noexcept {
    if (impl_) ++impl_->version;
  }

 private:
  struct Impl {
    void* data = nullptr;
    std::int64_t nbytes = 0;
    Device device;
    std::function<void(void*)> release;
    std::uint64_t version = 0;
    bool from_allocator = false;
    ~Impl() {
      if (release) release(data);
    }
  };
  std::shared_ptr<Impl> impl_;
};

// Synchronous copy of nbytes between any two devices.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, std::int64_t nbytes);

}  // namespace infini
