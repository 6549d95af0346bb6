// Internal: launches over a list of tensors in the manner of PyTorch's multi_tensor_apply.
// Every tensor is cut into chunks of kChunk elements; one launch covers a Batch of up to
// kMaxTensors tensors, passed by value as a kernel argument (no device table to copy), and
// block b processes chunks b, b + gridDim.x, ... of the batch in order.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

namespace infini::cuda::detail {

inline constexpr int kMaxTensors = 48;
inline constexpr std::int64_t kChunk = 16384;  // elements per chunk
inline constexpr unsigned kMaxChunkBlocks = 65535;

inline std::int64_t chunks_of(std::int64_t numel) { return (numel + kChunk - 1) / kChunk; }

// Entry: a struct with `std::int64_t numel` and `std::int64_t first_chunk` (the batch's chunk
// number of the entry's first chunk; the entry owns the chunks up to the next entry's first).
template <class Entry>
struct Batch {
  Entry entries[kMaxTensors];
  int count = 0;
  std::int64_t chunks = 0;  // of all entries together
};

inline unsigned chunk_blocks(std::int64_t chunks) {
  return static_cast<unsigned>(std::min<std::int64_t>(chunks, kMaxChunkBlocks));
}

// Host: calls launch(batch) for consecutive groups of at most kMaxTensors of `entries` (each
// with numel > 0), first_chunk filled in, in order.
template <class Entry, class Launch>
void for_each_batch(std::span<const Entry> entries, Launch&& launch) {
  Batch<Entry> batch;
  for (const Entry& entry : entries) {
    Entry& e = batch.entries[batch.count++] = entry;
    e.first_chunk = batch.chunks;
    batch.chunks += chunks_of(e.numel);
    if (batch.count == kMaxTensors) {
      launch(batch);
      batch = {};
    }
  }
  if (batch.count > 0) launch(batch);
}

// Device: fn(entry, c, begin, length) for every chunk c of `batch` this block owns: elements
// [begin, begin + length) of `entry`.
template <class Entry, class Fn>
__device__ void for_each_chunk(const Batch<Entry>& batch, Fn&& fn) {
  int t = 0;
  for (std::int64_t c = blockIdx.x; c < batch.chunks; c += gridDim.x) {
    while (t + 1 < batch.count && c >= batch.entries[t + 1].first_chunk) ++t;
    const Entry& e = batch.entries[t];
    const std::int64_t begin = (c - e.first_chunk) * kChunk;
    fn(e, c, begin, e.numel - begin < kChunk ? e.numel - begin : kChunk);
  }
}

}  // namespace infini::cuda::detail
