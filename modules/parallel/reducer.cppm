// Reducer: data parallelism's gradient averaging, overlapped with backward (PyTorch DDP's
// reducer). Parameters share flat buckets (see :buckets). A post-accumulate-grad hook marks
// a parameter ready during a synchronised backward and copies its grad into its bucket;
// once every parameter of a bucket is ready and all buckets before it were launched, the
// bucket's all-reduce (average; float16/bfloat16 accumulated in float32) is launched at once,
// so communication runs while backward goes on (each hook also polls the progress engine:
// MPI moves a message only when called). Buckets are launched in index order on every
// rank, so the collectives match. When the backward pass ends (an autograd callback) the rest
// is launched, awaited, and the averaged gradients are written back into grad(): a caller sees
// `loss.backward()` return with every rank holding the same averaged gradients.
//
// After the first synchronised backward the buckets are rebuilt once from the order in which
// gradients became ready (rank 0's order, broadcast), so that early buckets fill early. The
// rebuild happens after the gradients were written back, never inside an accumulation.
//
// With set_sync(false) (DistributedDataParallel::no_sync) backward passes only accumulate
// locally; the next synchronised backward averages everything accumulated.
export module infini.parallel:reducer;
import infini.std;
import infini.tensor;
import :buckets;
import :process_group;
import :runtime;
import :work;

export namespace infini::parallel {

// ZeRO's stages: what each data-parallel rank shards over the group (ReducerOptions::zero).
enum class ZeroStage : std::uint8_t {
  kNone = 0,            // every rank holds everything; gradients all-reduced
  kOptimizerState = 1,  // ZeRO-1: the optimizer state and the averaged gradients
  kGradients = 2,       // ZeRO-2: and the full gradient is never kept
  kParameters = 3,      // ZeRO-3 (FSDP): and the parameters, gathered when used
};
// "ZeRO-2"; "no ZeRO" for kNone.
std::string name(ZeroStage stage);
// `stage` (0..3, as --zero_stage gives it); Error from `op` otherwise.
ZeroStage zero_stage(int stage, std::string_view op);

struct ReducerOptions {
  BucketOptions buckets = {};
  // Each grad() becomes a view into its bucket, so gradients are neither copied in before
  // nor out after the all-reduce (zero_grad(set_to_none = false) keeps the views).
  bool gradient_as_bucket_view = false;
  // A parameter without a gradient in a synchronised backward (unused by this rank's forward)
  // contributes zeros. With find_unused_parameters the ranks also agree on which parameters
  // no rank used, and those keep no grad; without it the step still completes on every rank
  // (nothing hangs, the others' gradients are right), then backward raises an Error naming
  // the parameters.
  bool find_unused_parameters = false;
  // Rebuild the buckets once, after the first synchronised backward, in gradient-ready order.
  bool rebuild_buckets = true;
  // How much of the data-parallel state each rank shards (ZeRO's stages):
  // - kOptimizerState (ZeRO-1, Megatron's distributed optimizer): each bucket, padded to a
  //   multiple of the group size, is reduce-scattered instead of all-reduced, so rank r
  //   receives the average of block r of it only. The parameters move into one flat buffer per
  //   bucket (they become views of it); shard_pieces() are this rank's blocks as leaf tensors for
  //   an optimizer, whose grad() is the averaged gradient after each synchronised backward;
  //   after the optimizer step all_gather_parameters() shares the updated blocks. The
  //   parameters' own grad() keeps the local gradients. Buckets are not rebuilt;
  //   gradient_as_bucket_view does not apply.
  // - kGradients (ZeRO-2): and the full gradient is never kept. Each parameter's grad() is
  //   released once copied into its bucket, a bucket's full-size buffer lives only from its
  //   first gradient until its reduce-scatter completes, and every synchronised backward's
  //   average is added into this rank's blocks (the pieces' grad(); after the optimizer's
  //   zero_grad the next backward starts a new sum). With gradient accumulation keep every
  //   backward synchronised (no no_sync): each micro-batch is reduce-scattered as its backward
  //   runs.
  // - kParameters (ZeRO-3): and the parameters are sharded too. This rank's block of each
  //   bucket's weights moves into storage of its own, behind shard_pieces() (which the
  //   optimizer updates), and the bucket's full weights are released: the parameters keep
  //   their shapes but hold memory only between gather_bucket(k) and release_bucket(k).
  //   all_gather_parameters() has nothing to do; the next gather reads the updated blocks.
  ZeroStage zero = ZeroStage::kNone;
  bool shard_gradients() const { return zero >= ZeroStage::kOptimizerState; }
  bool release_gradients() const { return zero >= ZeroStage::kGradients; }
  bool shard_parameters() const { return zero == ZeroStage::kParameters; }
  // kParameters: empty, or the dtype each parameter is gathered in (gather_dtypes() of
  // :parameter_units). A float32 parameter gathered in bfloat16 or float16 moves half the bytes
  // and holds that dtype while gathered, so its gradient arrives in it; the reduce-scatter, the
  // pieces and the optimizer stay in float32. Buckets never mix gather dtypes.
  std::vector<DataType> gather_dtypes = {};
  std::optional<Clock::duration> timeout = std::nullopt;  // of each all-reduce
  // The caller ends each synchronised step with finalize() instead of the backward pass's
  // end: for gradients accumulated over passes spread across a schedule (pipeline
  // micro-batches), where a bucket's parameters get their last gradients in different passes.
  // The caller turns sync on only around each parameter's last accumulation of the step.
  bool finalize_explicitly = false;
  // Empty, or a group number per parameter: buckets never mix groups, and set_sync(true, {g})
  // limits the synchronised passes that follow to group g's buckets (the others are neither
  // launched nor finalized, and keep their sums). ZeRO-2 under an interleaved pipeline: one
  // group per model chunk, each gradient pass reduce-scattering its own chunk's buckets.
  std::vector<int> bucket_groups = {};
};

class Reducer {
 public:
  // `names[i]` names params[i] in errors (may be empty). Hooks are registered on the
  // parameters; they do nothing once the Reducer is gone.
  Reducer(std::vector<Tensor> params, std::vector<std::string> names, std::shared_ptr<ProcessGroup> group,
          ReducerOptions options = {});
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // The parameters it averages, in the order given, and its group.
  const std::vector<Tensor>& parameters() const;
  const std::shared_ptr<ProcessGroup>& group() const;

  // Whether backward passes average gradients (false: accumulate locally only); with groups
  // (of bucket_groups), only those groups' parameters get gradients in those passes, and only
  // their buckets are averaged.
  void set_sync(bool sync, std::vector<int> groups = {});
  bool sync() const;
  // finalize_explicitly: after the step's last synchronised pass, launches what is left,
  // waits, and writes the averages back (as the end of a synchronised backward does
  // otherwise). Nothing when no synchronised pass ran.
  void finalize();

  // The buckets as parameter indices, in launch order.
  std::vector<std::vector<std::size_t>> buckets() const;
  // Parameter indices in the order their gradients became ready in the first synchronised
  // backward (unused ones last, in reverse order).
  const std::vector<std::size_t>& ready_order() const;
  // Bucket indices in the order the last synchronised backward launched them.
  const std::vector<std::size_t>& launch_order() const;
  // How many buckets the last synchronised backward launched while it was still running.
  std::size_t buckets_launched_during_backward() const;
  std::int64_t synchronized_backwards() const;

  // shard_gradients: this rank's block of every bucket, one leaf tensor per parameter it
  // overlaps (1-d views of that parameter's storage), and the index of that parameter.
  const std::vector<Tensor>& shard_pieces() const;
  const std::vector<std::size_t>& shard_owners() const;
  // shard_gradients: where each piece starts among its parameter's elements (flattened).
  const std::vector<std::int64_t>& shard_offsets() const;
  // shard_gradients: the 2-norm of the whole averaged gradient, from every rank's blocks
  // (collective over the group).
  double sharded_grad_norm() const;
  // release_gradients, once the optimizer's zero_grad cleared the pieces' gradients: gives the
  // memory of this rank's gradient blocks back until the next pass's reduce-scatter starts a
  // new sum in them, so that a step's forward and the start of its backward hold no gradient.
  // Error while a piece still holds its gradient.
  void release_gradient_blocks();
  // shard_gradients: every rank's parameter blocks into every rank's parameters (nothing to do
  // under shard_parameters).
  Work all_gather_parameters();
  // shard_parameters: launches the all-gather of bucket k's weights (its parameters) from every
  // rank's block, in the bucket's gather dtype or, with full_precision, in the parameters' own;
  // wait on the Work before reading them. When they are gathered or on their way (a full
  // precision gather serves both), the Work of that gather (done or not); gathered in the
  // gather dtype and asked for full precision, it releases them and gathers again.
  Work gather_bucket(std::size_t k, bool full_precision = false);
  // shard_parameters: gives bucket k's full weights back (after its gather finished).
  void release_bucket(std::size_t k);
  bool bucket_gathered(std::size_t k) const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace infini::parallel
