// CUDA tensors: host <-> device round trips, strided copies with conversion and fills on
// the device, and the device allocator's statistics. Skipped without a CUDA device,
// except for the error raised by a device that does not exist.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>
import infini.tensor;

#include "values.h"

namespace cuda_test {
using namespace infini;

namespace {

#define REQUIRE_CUDA() \
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device"

template <class T>
std::vector<T> host_values(const Tensor& t) {
  return test::contiguous_values<T>(t.to(Device::cpu()).contiguous());
}

TEST(Cuda, MissingDeviceThrowsDeviceError) {
  try {
    empty({4}, {.dtype = kFloat32, .device = Device::cuda(99)});
    ADD_FAILURE() << "expected DeviceError";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.op(), "allocate");
    EXPECT_NE(std::string(e.what()).find("cuda:99"), std::string::npos) << e.what();
  }
  EXPECT_THROW(arange(4).to(Device::cuda(99)), DeviceError);
  EXPECT_THROW(memory_stats(Device::cuda(99)), DeviceError);
  try {
    synchronize(Device::cuda(99));
    ADD_FAILURE() << "expected DeviceError";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.op(), "synchronize");
    EXPECT_NE(std::string(e.what()).find("cuda:99"), std::string::npos) << e.what();
  }
  synchronize(Device::cpu());  // nothing to wait for
}

TEST(Cuda, SynchronizeWaitsForTheKernels) {
  REQUIRE_CUDA();
  const Device gpu = Device::cuda(0);
  Tensor big = empty({1 << 24}, {.dtype = kFloat32, .device = gpu});
  big.fill_(1.5);
  synchronize(gpu);
  const MemoryStats stats = memory_stats(gpu);
  EXPECT_GE(stats.allocated_bytes, std::int64_t{4} << 24);
  EXPECT_EQ(big.narrow(0, (1 << 24) - 1, 1).item<float>(), 1.5f);
}

TEST(Cuda, RoundTripKeepsValues) {
  REQUIRE_CUDA();
  const Tensor host = arange(1000, {.dtype = kFloat32}).view({10, 100});
  const Tensor dev = host.to(Device::cuda(0));
  EXPECT_EQ(dev.device(), Device::cuda(0));
  EXPECT_EQ(dev.shape(), (Shape{10, 100}));
  EXPECT_TRUE(dev.to(Device::cuda(0)).is_same(dev));
  const Tensor back = dev.to(Device::cpu());
  EXPECT_EQ(back.device(), Device::cpu());
  const auto v = host_values<float>(back);
  for (std::int64_t k = 0; k < 1000; ++k) ASSERT_EQ(v[k], static_cast<float>(k));
  EXPECT_EQ(dev.narrow(1, 5, 1).narrow(0, 3, 1).item<float>(), 305.0f);
  EXPECT_EQ(from_vector<std::int64_t>({1, 2}, {}, {.dtype = kInt64, .device = Device::cuda(0)}).str(),
            "tensor([1, 2], device='cuda:0')");
}

TEST(Cuda, StridedCopyWithConversionOnDevice) {
  REQUIRE_CUDA();
  // src[i][j] = 3 i + j as float64, sliced with a step and transposed on the device.
  const Tensor src = arange(12 * 3, {.dtype = kFloat64}).view({12, 3}).to(Device::cuda(0));
  const Tensor strided = src.slice(0, 0, 12, 2).t();                              // (3, 6): src[2 c][r]
  Tensor dst = empty({6, 3}, {.dtype = kInt32, .device = Device::cuda(0)}).t();  // (3, 6), strides (1, 3)
  dst.copy_(strided);
  const auto v = host_values<std::int32_t>(dst);  // row-major (3, 6)
  for (std::int64_t r = 0; r < 3; ++r)
    for (std::int64_t c = 0; c < 6; ++c) EXPECT_EQ(v[6 * r + c], 3 * (2 * c) + r) << r << ", " << c;
  // float -> float16 and bool conversions on the device, values exactly representable.
  const Tensor f =
      from_vector<float>({-2.5f, 0.0f, 0.75f, 1024.0f}, {}, {.dtype = kFloat32, .device = Device::cuda(0)});
  const auto halves = host_values<Half>(f.to(kFloat16));
  const std::uint16_t bits[] = {0xc100, 0x0000, 0x3a00, 0x6400};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(halves[i].bits, bits[i]) << i;
  const auto truth = host_values<bool>(f.to(kBool));
  EXPECT_EQ(truth, (std::vector<bool>{true, false, true, true}));
  const auto ints = host_values<std::int32_t>(f.to(kInt32));
  EXPECT_EQ(ints, (std::vector<std::int32_t>{-2, 0, 0, 1024}));
}

TEST(Cuda, FillOnStridedView) {
  REQUIRE_CUDA();
  Tensor m = zeros({6, 8}, {.dtype = kFloat32, .device = Device::cuda(0)});
  m.slice(0, 1, 6, 2).slice(1, 0, 8, 3).fill_(2.5);  // rows 1, 3, 5; columns 0, 3, 6
  const auto v = host_values<float>(m);
  for (std::int64_t i = 0; i < 6; ++i)
    for (std::int64_t j = 0; j < 8; ++j)
      EXPECT_EQ(v[8 * i + j], i % 2 == 1 && j % 3 == 0 ? 2.5f : 0.0f) << i << ", " << j;
}

TEST(Cuda, MemoryStatsReturnToBaseline) {
  REQUIRE_CUDA();
  const Device gpu = Device::cuda(0);
  const MemoryStats base = memory_stats(gpu);
  {
    const Tensor a = empty({1 << 20}, {.dtype = kFloat32, .device = gpu});  // 4 MiB
    const Tensor view = a.narrow(0, 10, 10);
    const MemoryStats during = memory_stats(gpu);
    EXPECT_EQ(during.live_allocations, base.live_allocations + 1);
    EXPECT_GE(during.allocated_bytes - base.allocated_bytes, 4 << 20);
  }
  const MemoryStats after = memory_stats(gpu);
  EXPECT_EQ(after.allocated_bytes, base.allocated_bytes);
  EXPECT_EQ(after.live_allocations, base.live_allocations);
  empty_cache(gpu);
  const MemoryStats emptied = memory_stats(gpu);
  EXPECT_LE(emptied.allocated_bytes, emptied.reserved_bytes);
  if (emptied.allocated_bytes == 0) EXPECT_EQ(emptied.reserved_bytes, 0);
}

TEST(Cuda, SmallTensorsShareOneSegment) {
  REQUIRE_CUDA();
  const Device gpu = Device::cuda(0);
  empty_cache(gpu);
  const MemoryStats base = memory_stats(gpu);
  const Tensor a = empty({100}, {.dtype = kFloat32, .device = gpu});  // 400 bytes -> 512
  const Tensor b = empty({100}, {.dtype = kFloat32, .device = gpu});
  EXPECT_EQ(static_cast<const char*>(b.data_ptr()) - static_cast<const char*>(a.data_ptr()), 512);
  EXPECT_EQ(memory_stats(gpu).allocated_bytes - base.allocated_bytes, 1024);
  EXPECT_LE(memory_stats(gpu).reserved_bytes - base.reserved_bytes, 2 << 20);
}

TEST(Cuda, OutOfMemoryIsAnErrorWithTheNumbers) {
  REQUIRE_CUDA();
  try {
    empty({std::int64_t{1} << 50}, {.dtype = kFloat32, .device = Device::cuda(0)});  // 4 PiB
    ADD_FAILURE() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("bytes allocated"), std::string::npos) << e.what();
  }
}

// Every kernel table with a CPU entry has a CUDA one in a build with the CUDA backend;
// needs no GPU.
TEST(CudaKernels, EveryKernelTableHasACudaEntry) {
  if (!cuda_is_built()) GTEST_SKIP() << "this build has no CUDA backend";
  const std::vector<KernelTableInfo> tables = kernel_tables();
  EXPECT_GE(tables.size(), 31u);
  for (const KernelTableInfo& table : tables)
    if (table.has(DeviceType::CPU)) EXPECT_TRUE(table.has(DeviceType::CUDA)) << table.name << " has no CUDA kernel";
}

}  // namespace

}  // namespace cuda_test
