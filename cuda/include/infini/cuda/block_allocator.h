// The caching logic of Infini's CUDA allocator, after PyTorch's CUDACachingAllocator, kept
// apart from CUDA so the CPU tests can drive it with fake memory and fake events.
//
// - Sizes round up to 512 bytes. Requests up to 1 MiB come from 2 MiB segments (the small
//   pool); larger ones from 20 MiB segments below 10 MiB, else from a segment of their own
//   rounded up to 2 MiB (the large pool).
// - A free block is reused only by requests on the stream it was allocated on: best fit by
//   (stream, size, address). A block bigger than the request is split when the rest is
//   worth keeping (>= 512 bytes in the small pool, > 1 MiB in the large one); freed
//   neighbours in one segment merge again.
// - A block also used on other streams (record_stream) returns to its pool only after an
//   event recorded on each of them at free time has completed.
// - When the device has no memory left, the allocator frees every cached segment that is
//   wholly free and tries once more; allocate() then returns nullptr and the caller raises
//   the out-of-memory error with stats().
// - A CUDA graph's capture allocates from a private pool: a stream id of its own, so its
//   blocks are reused only by that capture. While the pool is retained (its graph lives),
//   its segments are never given back, and a block of another pool that the capture frees
//   is held back until release_pool: the graph's replays still use both.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace infini::memory {

using StreamId = std::uintptr_t;  // an opaque stream handle; 0 is the default stream
using EventId = std::uintptr_t;

// The device under the allocator.
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  virtual void* allocate(std::size_t bytes) = 0;  // nullptr when out of memory
  virtual void free(void* ptr) = 0;
  virtual EventId record_event(StreamId stream) = 0;  // completes after the stream's current work
  virtual bool event_done(EventId event) = 0;
  virtual void destroy_event(EventId event) = 0;
};

struct BlockStats {
  std::int64_t allocated_bytes = 0;  // rounded sizes of live blocks
  std::int64_t reserved_bytes = 0;   // bytes of all segments held from the device
  std::int64_t peak_allocated_bytes = 0;
  std::int64_t live_allocations = 0;
  std::int64_t segments = 0;
};

class BlockAllocator {
 public:
  static constexpr std::size_t kRound = 512;
  static constexpr std::size_t kSmallRequest = std::size_t{1} << 20;   // small pool up to 1 MiB
  static constexpr std::size_t kSmallSegment = std::size_t{2} << 20;   // 2 MiB
  static constexpr std::size_t kMediumRequest = std::size_t{10} << 20;  // below: 20 MiB segments
  static constexpr std::size_t kMediumSegment = std::size_t{20} << 20;
  static constexpr std::size_t kLargeRound = std::size_t{2} << 20;

  explicit BlockAllocator(DeviceMemory& memory) : memory_(memory) {}
  BlockAllocator(const BlockAllocator&) = delete;
  BlockAllocator& operator=(const BlockAllocator&) = delete;
  // Deletes the bookkeeping; the segments stay with the device.
  ~BlockAllocator() {
    std::set<Block*> blocks(small_.begin(), small_.end());
    blocks.insert(large_.begin(), large_.end());
    for (const auto& [ptr, block] : live_) blocks.insert(block);
    for (const PendingEvent& p : pending_) blocks.insert(p.block);
    for (const auto& [pool, held] : held_back_) blocks.insert(held.begin(), held.end());
    for (Block* b : blocks) delete b;
  }

  // A block of at least `bytes` (> 0) for use on `stream`, or nullptr when the device is out
  // of memory even after releasing the cache.
  void* allocate(std::size_t bytes, StreamId stream) {
    process_events();
    const std::size_t size = round_size(bytes);
    const bool small = size <= kSmallRequest;
    Pool& pool = small ? small_ : large_;
    Block* block = best_fit(pool, stream, size);
    if (!block) block = new_segment(small, stream, size);
    if (!block) return nullptr;
    pool.erase(block);
    split(pool, block, size, small);
    block->allocated = true;
    live_.emplace(block->ptr, block);
    stats_.allocated_bytes += static_cast<std::int64_t>(block->size);
    stats_.live_allocations += 1;
    stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
    return block->ptr;
  }

  // Returns ptr's block to its pool, or (when it was used on other streams) once those
  // streams' work recorded now has completed. `capture`: the retained pool of the capture
  // that frees it, if any; a block of another pool is then held back until release_pool.
  void free(void* ptr, StreamId capture = 0) {
    Block* block = live_.at(ptr);
    live_.erase(ptr);
    block->allocated = false;
    stats_.allocated_bytes -= static_cast<std::int64_t>(block->size);
    stats_.live_allocations -= 1;
    if (capture != 0 && block->stream != capture && held_back_.contains(capture)) {
      block->pending_events += 1;  // not free: no reuse, no merging
      held_back_[capture].push_back(block);
      return;
    }
    return_block(block);
  }

  // Makes `pool` (a stream id no stream uses) a graph's private pool until release_pool.
  void retain_pool(StreamId pool) { held_back_.try_emplace(pool); }

  // The graph is gone: the pool's free segments may be given back, and the blocks its
  // capture freed return to their pools.
  void release_pool(StreamId pool) {
    auto node = held_back_.extract(pool);
    if (node.empty()) return;
    for (Block* block : node.mapped()) {
      block->pending_events -= 1;
      return_block(block);
    }
  }

  // Marks ptr's block as used by `stream` too (PyTorch's recordStream).
  void record_stream(void* ptr, StreamId stream) {
    Block* block = live_.at(ptr);
    if (stream != block->stream && std::find(block->other_streams.begin(), block->other_streams.end(), stream) ==
                                       block->other_streams.end())
      block->other_streams.push_back(stream);
  }

  // Gives every wholly free segment back to the device.
  void empty_cache() {
    process_events();
    release_free_segments();
  }

  const BlockStats& stats() const { return stats_; }
  void reset_peak() { stats_.peak_allocated_bytes = stats_.allocated_bytes; }

  static std::size_t round_size(std::size_t bytes) {
    return std::max(kRound, (bytes + kRound - 1) / kRound * kRound);
  }
  static std::size_t segment_size(std::size_t size) {
    if (size <= kSmallRequest) return kSmallSegment;
    if (size < kMediumRequest) return kMediumSegment;
    return (size + kLargeRound - 1) / kLargeRound * kLargeRound;
  }

 private:
  struct Block {
    char* ptr = nullptr;
    std::size_t size = 0;
    StreamId stream = 0;
    bool small = false;
    bool allocated = false;
    int pending_events = 0;
    Block* prev = nullptr;  // neighbours within the segment
    Block* next = nullptr;
    std::vector<StreamId> other_streams;
  };
  struct ByStreamSizeAddress {
    bool operator()(const Block* a, const Block* b) const {
      return std::tie(a->stream, a->size, a->ptr) < std::tie(b->stream, b->size, b->ptr);
    }
  };
  using Pool = std::set<Block*, ByStreamSizeAddress>;
  struct PendingEvent {
    EventId event;
    Block* block;
  };

  static Block* best_fit(Pool& pool, StreamId stream, std::size_t size) {
    Block key;
    key.stream = stream;
    key.size = size;
    auto it = pool.lower_bound(&key);
    return it != pool.end() && (*it)->stream == stream ? *it : nullptr;
  }

  Block* new_segment(bool small, StreamId stream, std::size_t size) {
    const std::size_t bytes = segment_size(size);
    void* raw = memory_.allocate(bytes);
    if (!raw) {
      process_events();
      release_free_segments();
      raw = memory_.allocate(bytes);
    }
    if (!raw) return nullptr;
    auto block = std::make_unique<Block>();
    block->ptr = static_cast<char*>(raw);
    block->size = bytes;
    block->stream = stream;
    block->small = small;
    stats_.reserved_bytes += static_cast<std::int64_t>(bytes);
    stats_.segments += 1;
    Block* b = block.release();
    (small ? small_ : large_).insert(b);
    return b;
  }

  // Cuts `block` (out of its pool) down to `size`, returning the rest to the pool.
  static void split(Pool& pool, Block* block, std::size_t size, bool small) {
    const std::size_t rest = block->size - size;
    if (small ? rest < kRound : rest <= kSmallRequest) return;
    auto tail = std::make_unique<Block>();
    tail->ptr = block->ptr + size;
    tail->size = rest;
    tail->stream = block->stream;
    tail->small = block->small;
    tail->prev = block;
    tail->next = block->next;
    if (block->next) block->next->prev = tail.get();
    block->next = tail.get();
    block->size = size;
    pool.insert(tail.release());
  }

  static bool is_free(const Block* b) { return b && !b->allocated && b->pending_events == 0; }

  // Merges `next`, the block after `block` (both out of any pool), into block and deletes it.
  static void absorb_next(Block* block, Block* next) {
    block->size += next->size;
    block->next = next->next;
    if (next->next) next->next->prev = block;
    delete next;
  }

  // A freed block goes back to its pool now, or once the other streams' work recorded now
  // has completed.
  void return_block(Block* block) {
    if (block->other_streams.empty()) return release_block(block);
    for (StreamId stream : block->other_streams) pending_.push_back({memory_.record_event(stream), block});
    block->pending_events = static_cast<int>(block->other_streams.size());
    block->other_streams.clear();
  }

  // Puts a no longer used block back into its pool, merged with free neighbours.
  void release_block(Block* block) {
    Pool& pool = block->small ? small_ : large_;
    if (is_free(block->prev)) {
      Block* prev = block->prev;
      pool.erase(prev);
      absorb_next(prev, block);
      block = prev;
    }
    if (is_free(block->next)) {
      Block* next = block->next;
      pool.erase(next);
      absorb_next(block, next);
    }
    pool.insert(block);
  }

  void process_events() {
    auto done = std::partition(pending_.begin(), pending_.end(),
                               [&](const PendingEvent& p) { return !memory_.event_done(p.event); });
    std::vector<PendingEvent> completed(done, pending_.end());
    pending_.erase(done, pending_.end());
    for (const PendingEvent& p : completed) {
      memory_.destroy_event(p.event);
      if (--p.block->pending_events == 0) release_block(p.block);
    }
  }

  void release_free_segments() {
    for (Pool* pool : {&small_, &large_}) {
      for (auto it = pool->begin(); it != pool->end();) {
        Block* b = *it;
        if (b->prev || b->next || held_back_.contains(b->stream)) {  // in use, or a live graph's
          ++it;
          continue;
        }
        it = pool->erase(it);
        memory_.free(b->ptr);
        stats_.reserved_bytes -= static_cast<std::int64_t>(b->size);
        stats_.segments -= 1;
        delete b;
      }
    }
  }

  DeviceMemory& memory_;
  Pool small_, large_;
  std::unordered_map<void*, Block*> live_;
  std::vector<PendingEvent> pending_;
  std::map<StreamId, std::vector<Block*>> held_back_;  // retained pools: the blocks their captures freed
  BlockStats stats_;
};

}  // namespace infini::memory
