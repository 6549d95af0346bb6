// ShardedTensor builders (see sharded_tensor.cppm).
module;
#include <cstdint>
module infini.parallel;
import infini.std;

namespace infini::parallel {

std::int64_t Chunk::box_numel() const {
  return std::accumulate(sizes.begin(), sizes.end(), std::int64_t{1}, std::multiplies<>());
}

ShardedTensor replicated(std::string key, Tensor t) {
  const Shape shape = t.shape();
  Chunk whole{.offsets = std::vector<std::int64_t>(shape.size(), 0), .sizes = shape, .begin = 0, .end = t.numel()};
  return {.key = std::move(key), .local = std::move(t), .global_shape = std::move(shape), .chunks = {std::move(whole)}};
}

ShardedTensor tensor_parallel_shard(std::string key, Tensor local, const nn::ShardSpec& spec, int rank, int ranks) {
  if (!spec.sharded() || ranks == 1) return replicated(std::move(key), std::move(local));
  const std::string op = "tensor_parallel_shard";
  const Shape shape = local.shape();
  const auto dim = static_cast<std::size_t>(spec.dim);
  if (dim >= shape.size() || shape[dim] * ranks != spec.whole_size())
    throw ShapeError(op, concat(key, ": a shard of shape ", local.shape(), " is not 1/", ranks, " of ",
                                spec.whole_size(), " entries along dim ", spec.dim));
  if (spec.parts.size() > 1 && dim != 0)
    throw ShapeError(op, concat(key, ": several parts along dim ", spec.dim, "; expected them along dim 0"));
  ShardedTensor sharded{.key = std::move(key), .local = std::move(local), .global_shape = shape, .chunks = {}};
  sharded.global_shape[dim] = spec.whole_size();
  // Along dim, the shard is every part's block `rank` in turn; along dim 0 each block's
  // elements follow the previous block's.
  std::int64_t part_start = 0;
  for (const std::int64_t part : spec.parts) {
    const std::int64_t block = part / ranks;
    Chunk chunk{.offsets = std::vector<std::int64_t>(shape.size(), 0), .sizes = shape, .begin = 0, .end = 0};
    chunk.offsets[dim] = part_start + rank * block;
    chunk.sizes[dim] = block;
    chunk.end = chunk.box_numel();
    sharded.chunks.push_back(std::move(chunk));
    part_start += part;
  }
  return sharded;
}

ShardedTensor flat_piece(const ShardedTensor& whole, std::string key, Tensor piece, std::int64_t begin,
                         std::int64_t end) {
  if (begin < 0 || begin > end || end > whole.local.numel() || piece.numel() != end - begin)
    throw IndexError("flat_piece", concat(key, ": elements [", begin, ", ", end, ") of ", whole.local.numel(),
                                          " held in ", piece.numel()));
  ShardedTensor sharded{.key = std::move(key), .local = std::move(piece), .global_shape = whole.global_shape,
                        .chunks = {}};
  std::int64_t start = 0;  // of each chunk among whole's local elements
  for (const Chunk& chunk : whole.chunks) {
    const std::int64_t lo = std::max(begin, start), hi = std::min(end, start + chunk.numel());
    if (lo < hi) {
      Chunk part = chunk;
      part.begin = chunk.begin + (lo - start);
      part.end = chunk.begin + (hi - start);
      sharded.chunks.push_back(std::move(part));
    }
    start += chunk.numel();
  }
  return sharded;
}

}  // namespace infini::parallel
