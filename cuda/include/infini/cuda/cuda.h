// Plain C++ interface to Infini's CUDA backend (no modules, no CUDA headers).
// Compiled by nvcc in cuda/src/*.cu; wrapped by infini.tensor / infini.kernels.
// Every function that can fail throws infini::cuda::CudaError with the CUDA error text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace infini::cuda {

struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Same order and meaning as infini::DataType.
enum class ElementType : std::uint8_t { Bool, U8, I8, I16, I32, I64, F16, BF16, F32, F64 };

// Number of usable devices; 0 when there is no driver or no GPU (never throws).
int device_count() noexcept;
// The PCI bus id of `device` ("0000:1b:00.0"): one physical GPU, whatever numbering
// CUDA_VISIBLE_DEVICES gives it in this process.
std::string pci_bus_id(int device);

// Raw device memory. malloc(0) returns nullptr.
void* malloc(std::size_t bytes, int device);
void free(void* ptr, int device) noexcept;

// Synchronous copies (the stream is the legacy default stream of `device`).
void copy_host_to_device(void* dst, const void* src, std::size_t bytes, int device);
void copy_device_to_host(void* dst, const void* src, std::size_t bytes, int device);
void copy_device_to_device(void* dst, int dst_device, const void* src, int src_device, std::size_t bytes);
void synchronize(int device);

// Events, for the caching allocator's frees of blocks used on several streams. A stream or
// event is an opaque handle; a null stream is the device's default stream.
void* event_record(void* stream, int device);
bool event_query(void* event);  // true once the work before the record has completed
void event_destroy(void* event) noexcept;

// A strided array on one device. Sizes and strides count elements; ndim <= kMaxDims.
inline constexpr int kMaxDims = 16;
struct StridedArray {
  void* data = nullptr;  // points at element [0, ..., 0]
  ElementType type = ElementType::F32;
  int ndim = 0;
  std::int64_t sizes[kMaxDims] = {};
  std::int64_t strides[kMaxDims] = {};
};

// dst[i] = value for every element; `value` holds one element of dst.type (itemsize bytes).
void fill(const StridedArray& dst, const void* value, int device);

// dst[i] = convert<dst.type>(src[i]); same sizes, any strides, both on `device`.
// Conversions follow C++ static_cast semantics (float -> int truncates toward zero,
// anything -> bool is `!= 0`); f16/bf16 round to nearest even.
void copy(const StridedArray& dst, const StridedArray& src, int device);

}  // namespace infini::cuda
