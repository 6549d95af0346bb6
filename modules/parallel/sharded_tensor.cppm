// ShardedTensor: what one rank holds of a tensor of the whole model, in the whole tensor's
// coordinates (Megatron's ShardedTensor with global offsets; PyTorch DCP's chunks), so that a
// distributed checkpoint saved under one layout (dp x tp x pp, any ZeRO stage) loads under
// another. A rank's piece is a list of chunks; each chunk is a box of the global tensor and a
// range of that box's elements in row-major order:
//   - a replicated tensor: one chunk, the whole box, every element;
//   - a tensor-parallel shard: one box per part of its ShardSpec (c_attn's q, k and v rows);
//   - a ZeRO piece (a flat range of a parameter's local elements): the ranges of those boxes
//     it overlaps.
//
//   auto shard = parallel::tensor_parallel_shard("model/h.0.attn.c_attn.weight", w, spec, rank, tp);
//   auto piece = parallel::flat_piece(shard, "optimizer/h.0.attn.c_attn.weight/exp_avg", m, 100, 900);
export module infini.parallel:sharded_tensor;
import infini.std;
import infini.nn;

export namespace infini::parallel {

// Elements [begin, end) in row-major order of the box [offsets, offsets + sizes) of a global
// tensor (a 0-d tensor: empty offsets and sizes, one element).
struct Chunk {
  std::vector<std::int64_t> offsets, sizes;
  std::int64_t begin = 0, end = 0;

  std::int64_t numel() const { return end - begin; }
  std::int64_t box_numel() const;
  friend bool operator==(const Chunk&, const Chunk&) = default;
};

struct ShardedTensor {
  std::string key;        // the whole tensor's name ("model/wte.weight")
  Tensor local;           // this rank's elements: the chunks' elements in order (any shape)
  std::vector<std::int64_t> global_shape;
  std::vector<Chunk> chunks;
};

// A tensor held whole (replicated on the ranks that hold it).
ShardedTensor replicated(std::string key, Tensor t);
// `local`, this rank's shard of a tensor split by `spec` over `ranks` tensor-parallel ranks
// (spec.shard(whole, rank, ranks)); a tensor spec does not split is held whole. ShapeError
// when local's shape does not fit spec, or for several parts along a dim other than 0.
ShardedTensor tensor_parallel_shard(std::string key, Tensor local, const nn::ShardSpec& spec, int rank, int ranks);
// Elements [begin, end) of whole.local's elements (flattened), held in `piece` (end - begin
// elements): under ZeRO, a rank's block of a parameter or of its optimizer state. IndexError
// unless 0 <= begin <= end <= whole.local.numel() and piece has end - begin elements.
ShardedTensor flat_piece(const ShardedTensor& whole, std::string key, Tensor piece, std::int64_t begin,
                         std::int64_t end);

}  // namespace infini::parallel
