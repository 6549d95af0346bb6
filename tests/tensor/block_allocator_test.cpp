// The CUDA caching allocator's logic (infini/cuda/block_allocator.h) driven on the CPU by a
// fake device: addresses from a counter, a byte capacity, and events the test completes.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "infini/cuda/block_allocator.h"

namespace block_allocator_test {
namespace {

using infini::memory::BlockAllocator;
using infini::memory::EventId;
using infini::memory::StreamId;

constexpr std::size_t MiB = std::size_t{1} << 20;

class FakeDevice final : public infini::memory::DeviceMemory {
 public:
  explicit FakeDevice(std::size_t capacity) : capacity_(capacity) {}

  void* allocate(std::size_t bytes) override {
    if (used_ + bytes > capacity_) {
      ++failed_allocations;
      return nullptr;
    }
    used_ += bytes;
    const std::uintptr_t at = next_;
    next_ += bytes + 4096;  // segments never touch
    segments_[at] = bytes;
    return reinterpret_cast<void*>(at);
  }
  void free(void* ptr) override {
    auto it = segments_.find(reinterpret_cast<std::uintptr_t>(ptr));
    ASSERT_NE(it, segments_.end()) << "free of an address that is not a segment";
    used_ -= it->second;
    segments_.erase(it);
    ++frees;
  }
  EventId record_event(StreamId stream) override {
    const EventId id = ++last_event_;
    events_[id] = stream;
    return id;
  }
  bool event_done(EventId event) override { return completed_.contains(event); }
  void destroy_event(EventId event) override {
    EXPECT_TRUE(events_.contains(event));
    events_.erase(event);
  }

  // Completes every event recorded so far on `stream`.
  void complete(StreamId stream) {
    for (const auto& [id, s] : events_)
      if (s == stream) completed_.insert(id);
  }
  std::size_t used() const { return used_; }
  std::size_t live_events() const { return events_.size(); }

  int failed_allocations = 0;
  int frees = 0;

 private:
  std::size_t capacity_;
  std::size_t used_ = 0;
  std::uintptr_t next_ = 1 << 16;
  std::map<std::uintptr_t, std::size_t> segments_;
  EventId last_event_ = 0;
  std::map<EventId, StreamId> events_;
  std::set<EventId> completed_;
};

char* as_bytes(void* p) { return static_cast<char*>(p); }

TEST(BlockAllocator, RoundsSizesAndChoosesSegments) {
  EXPECT_EQ(BlockAllocator::round_size(1), 512u);
  EXPECT_EQ(BlockAllocator::round_size(512), 512u);
  EXPECT_EQ(BlockAllocator::round_size(513), 1024u);
  EXPECT_EQ(BlockAllocator::segment_size(1 * MiB), 2 * MiB);
  EXPECT_EQ(BlockAllocator::segment_size(1 * MiB + 512), 20 * MiB);
  EXPECT_EQ(BlockAllocator::segment_size(10 * MiB), 10 * MiB);
  EXPECT_EQ(BlockAllocator::segment_size(11 * MiB + 1), 12 * MiB);
}

TEST(BlockAllocator, SmallBlocksSplitOneSegmentAndMergeWhenFreed) {
  FakeDevice device(64 * MiB);
  BlockAllocator allocator(device);
  void* a = allocator.allocate(1000, 0);  // 1024 bytes
  void* b = allocator.allocate(3000, 0);  // 3072
  void* c = allocator.allocate(100, 0);   // 512
  EXPECT_EQ(as_bytes(b), as_bytes(a) + 1024);
  EXPECT_EQ(as_bytes(c), as_bytes(b) + 3072);
  EXPECT_EQ(allocator.stats().reserved_bytes, static_cast<std::int64_t>(2 * MiB));
  EXPECT_EQ(allocator.stats().allocated_bytes, 1024 + 3072 + 512);
  EXPECT_EQ(allocator.stats().segments, 1);

  // a and b merge into one 4096-byte block, which a 4000-byte request then fits exactly.
  allocator.free(b);
  allocator.free(a);
  EXPECT_EQ(allocator.stats().allocated_bytes, 512);
  EXPECT_EQ(allocator.allocate(4000, 0), a);
  allocator.free(c);
  allocator.free(a);
  EXPECT_EQ(allocator.stats().allocated_bytes, 0);
  EXPECT_EQ(allocator.stats().peak_allocated_bytes, 1024 + 3072 + 512);
  // Everything merged back: one free block spans the segment, and empty_cache returns it.
  allocator.empty_cache();
  EXPECT_EQ(allocator.stats().reserved_bytes, 0);
  EXPECT_EQ(device.used(), 0u);
  EXPECT_EQ(device.frees, 1);
}

TEST(BlockAllocator, BestFitPrefersTheSmallestFreeBlock) {
  FakeDevice device(64 * MiB);
  BlockAllocator allocator(device);
  void* big = allocator.allocate(8192, 0);
  void* keep1 = allocator.allocate(512, 0);
  void* mid = allocator.allocate(2048, 0);
  void* keep2 = allocator.allocate(512, 0);
  allocator.free(big);
  allocator.free(mid);
  EXPECT_EQ(allocator.allocate(2000, 0), mid);  // 2048 free block, not the 8192 one
  EXPECT_EQ(allocator.allocate(8000, 0), big);
  for (void* p : {keep1, keep2, mid, big}) allocator.free(p);
}

TEST(BlockAllocator, BlocksAreReusedOnlyOnTheirStream) {
  FakeDevice device(64 * MiB);
  BlockAllocator allocator(device);
  const StreamId s0 = 0, s1 = 7;
  void* a = allocator.allocate(4096, s0);
  allocator.free(a);
  void* b = allocator.allocate(4096, s1);
  EXPECT_NE(b, a);
  EXPECT_EQ(allocator.stats().segments, 2);  // s1 got a segment of its own
  EXPECT_EQ(allocator.allocate(4096, s0), a);
  allocator.free(b);
  allocator.free(a);
}

TEST(BlockAllocator, CrossStreamUseDelaysReuseUntilItsEventCompletes) {
  FakeDevice device(64 * MiB);
  BlockAllocator allocator(device);
  const StreamId compute = 0, comm = 3;
  void* a = allocator.allocate(1 << 16, compute);
  allocator.record_stream(a, comm);
  allocator.record_stream(a, compute);  // its own stream: no event needed
  allocator.free(a);
  EXPECT_EQ(device.live_events(), 1u);
  EXPECT_EQ(allocator.stats().allocated_bytes, 0);
  void* b = allocator.allocate(1 << 16, compute);
  EXPECT_NE(b, a) << "reused while the other stream may still read it";
  device.complete(comm);
  allocator.free(b);
  // The next allocation processes the completed event: a is free again (merged with b).
  EXPECT_EQ(allocator.allocate(1 << 16, compute), a);
  EXPECT_EQ(device.live_events(), 0u);
  allocator.free(a);
}

TEST(BlockAllocator, LargeRequestsUseSegmentsOfTheirOwnFromTenMiB) {
  FakeDevice device(256 * MiB);
  BlockAllocator allocator(device);
  void* large = allocator.allocate(11 * MiB, 0);  // a 12 MiB segment; the 1 MiB rest is not split off
  EXPECT_EQ(allocator.stats().allocated_bytes, static_cast<std::int64_t>(12 * MiB));
  allocator.free(large);
  void* again = allocator.allocate(11 * MiB + 512 * 1024, 0);
  EXPECT_EQ(again, large);
  void* medium = allocator.allocate(3 * MiB, 0);   // a 20 MiB segment, split
  void* medium2 = allocator.allocate(3 * MiB, 0);  // the same segment
  EXPECT_EQ(as_bytes(medium2), as_bytes(medium) + 3 * MiB);
  EXPECT_EQ(allocator.stats().reserved_bytes, static_cast<std::int64_t>(32 * MiB));
  EXPECT_EQ(allocator.stats().allocated_bytes, static_cast<std::int64_t>(18 * MiB));
  for (void* p : {medium, medium2, again}) allocator.free(p);
}

TEST(BlockAllocator, OutOfMemoryReleasesCachedSegmentsAndRetriesThenFails) {
  FakeDevice device(40 * MiB);
  BlockAllocator allocator(device);
  void* a = allocator.allocate(15 * MiB, 0);  // 16 MiB segment
  void* small = allocator.allocate(512, 0);   // 2 MiB segment, kept in use
  allocator.free(a);                          // cached, 18 MiB reserved
  void* b = allocator.allocate(30 * MiB, 0);  // 18 + 30 > 40: frees the cached 16 MiB, retries
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(device.failed_allocations, 1);
  EXPECT_EQ(allocator.stats().reserved_bytes, static_cast<std::int64_t>(32 * MiB));
  EXPECT_EQ(allocator.allocate(20 * MiB, 0), nullptr);  // really out of memory
  EXPECT_EQ(device.failed_allocations, 3);
  EXPECT_EQ(allocator.stats().allocated_bytes, static_cast<std::int64_t>(30 * MiB + 512));
  allocator.free(b);
  allocator.free(small);
  allocator.empty_cache();
  EXPECT_EQ(device.used(), 0u);
}

TEST(BlockAllocator, EmptyCacheKeepsSegmentsThatAreInUse) {
  FakeDevice device(64 * MiB);
  BlockAllocator allocator(device);
  void* a = allocator.allocate(512, 0);
  void* b = allocator.allocate(512, 0);
  void* c = allocator.allocate(2 * MiB, 0);  // 20 MiB segment
  allocator.free(a);
  allocator.free(c);
  allocator.empty_cache();  // the small segment still holds b
  EXPECT_EQ(allocator.stats().reserved_bytes, static_cast<std::int64_t>(2 * MiB));
  EXPECT_EQ(allocator.stats().live_allocations, 1);
  allocator.reset_peak();
  EXPECT_EQ(allocator.stats().peak_allocated_bytes, 512);
  allocator.free(b);
}

TEST(BlockAllocator, AGraphPoolIsReusedOnlyByItsCaptureAndKeptWhileRetained) {
  FakeDevice device(64 * MiB);
  BlockAllocator allocator(device);
  const StreamId eager = 0, pool = 0x5000;
  allocator.retain_pool(pool);
  void* a = allocator.allocate(4096, pool);  // under capture
  allocator.free(a, pool);                   // freed by the capture: reused by it
  void* b = allocator.allocate(4096, pool);
  EXPECT_EQ(b, a);
  allocator.free(b, pool);
  void* c = allocator.allocate(4096, eager);  // after capture: never the graph's memory
  EXPECT_NE(c, a);
  allocator.free(c);
  allocator.empty_cache();  // the graph's segment stays: its replays write there
  EXPECT_EQ(allocator.stats().reserved_bytes, static_cast<std::int64_t>(2 * MiB));
  EXPECT_EQ(device.frees, 1);
  allocator.release_pool(pool);
  allocator.empty_cache();
  EXPECT_EQ(allocator.stats().reserved_bytes, 0);
  EXPECT_EQ(device.used(), 0u);
}

TEST(BlockAllocator, ABlockFreedByACaptureFromAnotherPoolIsHeldBackUntilRelease) {
  FakeDevice device(64 * MiB);
  BlockAllocator allocator(device);
  const StreamId eager = 0, pool = 0x5000;
  void* before = allocator.allocate(4096, eager);  // allocated before the capture
  void* neighbour = allocator.allocate(4096, eager);
  allocator.retain_pool(pool);
  allocator.free(before, pool);  // the capture frees it: replays still use it
  EXPECT_EQ(allocator.stats().allocated_bytes, 4096);
  void* later = allocator.allocate(4096, eager);
  EXPECT_NE(later, before) << "handed out while the graph's replays use it";
  allocator.free(neighbour);  // no merge with the held-back block either
  allocator.free(later);
  void* wide = allocator.allocate(8192, eager);
  EXPECT_NE(wide, before);
  allocator.release_pool(pool);
  void* again = allocator.allocate(4096, eager);
  EXPECT_EQ(again, before);
  allocator.free(again);
  allocator.free(wide);
  allocator.release_pool(pool);  // a second release changes nothing
  EXPECT_EQ(allocator.stats().live_allocations, 0);
  allocator.empty_cache();
  EXPECT_EQ(device.used(), 0u);
}

}  // namespace

}  // namespace block_allocator_test
