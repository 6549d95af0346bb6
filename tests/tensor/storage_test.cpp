// Storage lifetime and the CPU caching allocator's statistics: allocated/live bytes return
// to their baseline when the last tensor (or view) dies, peak tracking, empty_cache, reuse.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>
import infini.tensor;

namespace storage_test {
using namespace infini;

namespace {

MemoryStats cpu_stats() { return memory_stats(Device::cpu()); }

constexpr std::int64_t kMiB = 1 << 20;

TEST(Storage, AllocatedAndLiveReturnToBaseline) {
  const MemoryStats base = cpu_stats();
  {
    const Tensor a = empty({1000});                         // 4000 bytes
    const Tensor b = zeros({10, 10}, {.dtype = kFloat64});  // 800 bytes
    const MemoryStats during = cpu_stats();
    EXPECT_EQ(during.live_allocations, base.live_allocations + 2);
    EXPECT_GE(during.allocated_bytes - base.allocated_bytes, 4800);
    EXPECT_LT(during.allocated_bytes - base.allocated_bytes, 2 * 4800);  // size classes round up < 2x
    EXPECT_GE(during.reserved_bytes, during.allocated_bytes);
    EXPECT_EQ(a.storage().nbytes(), 4000);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.storage().data()) % 64, 0u);
  }
  const MemoryStats after = cpu_stats();
  EXPECT_EQ(after.allocated_bytes, base.allocated_bytes);
  EXPECT_EQ(after.live_allocations, base.live_allocations);
}

TEST(Storage, ViewsKeepTheStorageUntilTheLastOneDies) {
  const MemoryStats base = cpu_stats();
  Tensor view;
  {
    const Tensor a = arange(1000);
    view = a.narrow(0, 10, 5).unsqueeze(0).t();  // (5, 1): a[10..14]
    EXPECT_EQ(view.storage().use_count(), 2);
  }
  // The base is gone; its storage lives on in the view.
  EXPECT_EQ(cpu_stats().live_allocations, base.live_allocations + 1);
  EXPECT_GE(cpu_stats().allocated_bytes - base.allocated_bytes, 8000);
  EXPECT_EQ(view.storage().use_count(), 1);
  const auto* data = static_cast<const std::int64_t*>(view.storage().data());
  for (std::int64_t i = 0; i < 5; ++i) EXPECT_EQ(data[view.storage_offset() + i * view.stride(0)], 10 + i);

  Tensor copy_of_view = view;  // another handle to the same view
  view = Tensor();
  EXPECT_EQ(cpu_stats().live_allocations, base.live_allocations + 1);
  copy_of_view = Tensor();
  EXPECT_EQ(cpu_stats().live_allocations, base.live_allocations);
  EXPECT_EQ(cpu_stats().allocated_bytes, base.allocated_bytes);
}

TEST(Storage, SplitPiecesShareOneAllocation) {
  const MemoryStats base = cpu_stats();
  {
    std::vector<Tensor> parts = ones({12, 4}).split(5);
    EXPECT_EQ(cpu_stats().live_allocations, base.live_allocations + 1);
    parts.erase(parts.begin(), parts.begin() + 2);  // keep the last piece only
    EXPECT_EQ(cpu_stats().live_allocations, base.live_allocations + 1);
    EXPECT_EQ(parts[0].shape(), (Shape{2, 4}));
  }
  EXPECT_EQ(cpu_stats().live_allocations, base.live_allocations);
  EXPECT_EQ(cpu_stats().allocated_bytes, base.allocated_bytes);
}

TEST(Storage, PeakTracksTheMaximum) {
  reset_peak_memory_stats(Device::cpu());
  const MemoryStats base = cpu_stats();
  EXPECT_EQ(base.peak_allocated_bytes, base.allocated_bytes);
  {
    const Tensor a = empty({kMiB / 4});  // 1 MiB
    { const Tensor b = empty({kMiB / 2}); }  // 2 MiB, freed again
    const Tensor c = empty({kMiB / 8});  // 512 KiB
  }
  const MemoryStats after = cpu_stats();
  EXPECT_EQ(after.allocated_bytes, base.allocated_bytes);
  EXPECT_GE(after.peak_allocated_bytes - base.allocated_bytes, 3 * kMiB);             // a + b
  EXPECT_LT(after.peak_allocated_bytes - base.allocated_bytes, 3 * kMiB + kMiB / 2);  // never a + b + c
  reset_peak_memory_stats(Device::cpu());
  EXPECT_EQ(cpu_stats().peak_allocated_bytes, base.allocated_bytes);
}

TEST(Storage, EmptyCacheDropsReservedToAllocated) {
  { const Tensor a = empty({kMiB / 4}); }
  const MemoryStats cached = cpu_stats();
  EXPECT_GE(cached.reserved_bytes - cached.allocated_bytes, kMiB);  // the freed block is kept
  empty_cache(Device::cpu());
  const MemoryStats emptied = cpu_stats();
  EXPECT_EQ(emptied.reserved_bytes, emptied.allocated_bytes);
  EXPECT_EQ(emptied.allocated_bytes, cached.allocated_bytes);
}

TEST(Storage, FreedBlocksAreReused) {
  empty_cache(Device::cpu());
  const MemoryStats base = cpu_stats();
  void* first = nullptr;
  { first = empty({777777}, {.dtype = kUInt8}).data_ptr(); }
  const MemoryStats freed = cpu_stats();
  EXPECT_GE(freed.reserved_bytes - base.reserved_bytes, 777777);
  EXPECT_EQ(freed.allocated_bytes, base.allocated_bytes);
  {
    const Tensor again = empty({777777}, {.dtype = kUInt8});
    EXPECT_EQ(again.data_ptr(), first);
    EXPECT_EQ(cpu_stats().reserved_bytes, freed.reserved_bytes);  // no new memory
    EXPECT_GT(cpu_stats().allocated_bytes, base.allocated_bytes);
  }
}

TEST(Storage, CallerOwnedAndEmptyStoragesAreNotCounted) {
  const MemoryStats base = cpu_stats();
  {
    float buffer[16] = {};
    const Tensor blob = from_blob(buffer, {16}, kFloat32);
    const Tensor none = empty({0, 5});
    EXPECT_EQ(none.storage().nbytes(), 0);
    EXPECT_EQ(none.storage().data(), nullptr);
    const MemoryStats during = cpu_stats();
    EXPECT_EQ(during.live_allocations, base.live_allocations);
    EXPECT_EQ(during.allocated_bytes, base.allocated_bytes);
    EXPECT_EQ(during.reserved_bytes, base.reserved_bytes);
  }
  EXPECT_EQ(cpu_stats().live_allocations, base.live_allocations);
}

TEST(Storage, AllocateDirectly) {
  const MemoryStats base = cpu_stats();
  {
    const Storage s = Storage::allocate(100, Device::cpu());
    EXPECT_EQ(s.nbytes(), 100);
    EXPECT_EQ(s.device(), Device::cpu());
    const Storage shared = s;
    EXPECT_TRUE(shared.is_same(s));
    EXPECT_EQ(s.use_count(), 2);
    EXPECT_EQ(cpu_stats().live_allocations, base.live_allocations + 1);
    // A tensor over part of it.
    const Tensor t(s, {5}, {2}, 1, kInt32);  // elements 1, 3, 5, 7, 9 of 25
    EXPECT_EQ(t.data_ptr(), static_cast<char*>(s.data()) + 4);
    EXPECT_EQ(s.use_count(), 3);
  }
  EXPECT_EQ(cpu_stats().live_allocations, base.live_allocations);
}

// A request the system cannot satisfy raises OutOfMemoryError naming the size and device,
// and leaves the statistics as they were.
TEST(Storage, FailedAllocationRaisesOutOfMemory) {
  const MemoryStats before = memory_stats(Device::cpu());
  try {
    empty({std::int64_t{1} << 61}, {.dtype = kUInt8});
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.op(), "allocate");
    EXPECT_NE(std::string(e.what()).find("2305843009213693952 bytes on cpu"), std::string::npos) << e.what();
  }
  const MemoryStats after = memory_stats(Device::cpu());
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(after.live_allocations, before.live_allocations);
}

// Threads share the CPU allocator (the data loader's workers allocate batches that the main
// thread frees): four threads allocate, fill and free blocks of every size class, half of
// them handed to another thread to free. Run under ThreadSanitizer by tsan.threads.
TEST(Storage, ThreadsAllocateAndFreeConcurrently) {
  const MemoryStats base = cpu_stats();
  constexpr int kThreads = 4, kRounds = 300;
  std::vector<std::vector<Tensor>> handed(kThreads);
  std::vector<double> sums(kThreads, 0.0);
  {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([t, &handed, &sums] {
        for (int i = 0; i < kRounds; ++i) {
          const std::int64_t n = std::int64_t{1} << ((i + t) % 14);  // 1 .. 8192 elements
          Tensor block = full({n}, static_cast<double>(t + 1));
          const auto* values = static_cast<const float*>(block.data_ptr());
          double sum = 0.0;
          for (std::int64_t j = 0; j < n; ++j) sum += values[j];
          sums[t] += sum / static_cast<double>(n);
          if (i % 2 == 0) handed[t].push_back(std::move(block));
        }
      });
    for (std::thread& thread : threads) thread.join();
    // Each thread frees the blocks another one allocated.
    std::vector<std::thread> freers;
    for (int t = 0; t < kThreads; ++t)
      freers.emplace_back([&handed, t] { handed[(t + 1) % kThreads].clear(); });
    for (std::thread& thread : freers) thread.join();
  }
  for (int t = 0; t < kThreads; ++t) EXPECT_DOUBLE_EQ(sums[t], static_cast<double>((t + 1) * kRounds));
  const MemoryStats after = cpu_stats();
  EXPECT_EQ(after.allocated_bytes, base.allocated_bytes);
  EXPECT_EQ(after.live_allocations, base.live_allocations);
  EXPECT_GE(after.reserved_bytes, after.allocated_bytes);
}

}  // namespace

// FSDP's storage resize: the bytes go back to the allocator and come again, for every tensor
// over the storage; a from_blob storage refuses.
TEST(Storage, ReleaseMemoryAndReallocate) {
  const Tensor t = full({256, 4}, 2.0);
  const Tensor view = t.narrow(0, 10, 5);
  const std::int64_t before = memory_stats(Device::cpu()).allocated_bytes;
  t.storage().release_memory();
  EXPECT_FALSE(t.storage().resident());
  EXPECT_EQ(memory_stats(Device::cpu()).allocated_bytes, before - 4096);
  EXPECT_EQ(t.shape(), (Shape{256, 4}));
  t.storage().release_memory();  // nothing to do
  t.storage().reallocate();
  EXPECT_TRUE(t.storage().resident());
  EXPECT_EQ(memory_stats(Device::cpu()).allocated_bytes, before);
  Tensor(view).fill_(3.0);
  EXPECT_EQ(t.data_ptr<float>()[10 * 4], 3.0f) << "the view writes the new bytes";
  EXPECT_EQ(t.storage().nbytes(), 4096);
  float outside[4] = {};
  const Storage blob = Storage::from_blob(outside, sizeof outside, Device::cpu());
  EXPECT_THROW(blob.release_memory(), Error);
}

}  // namespace storage_test
