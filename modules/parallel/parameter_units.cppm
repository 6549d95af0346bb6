// ParameterUnits: ZeRO-3's (FSDP's) units, the sets of a sharded Reducer's buckets gathered
// and released together: one per block, and the rest (embedding, final norm, head) as the
// last. A block runs through run_block: gathered just before its forward (the next block's
// gather launched meanwhile) and released after it; with gradients, hooks on its output and
// input gather it again for its backward (launching the previous block's) and release it once
// its input's gradient is done.
//
//   const UnitAssignment a = assign_units(params, blocks);
//   Reducer reducer(params, names, dp, {.buckets = kBucketPerGroup, ..., .shard_parameters = true,
//                                       .bucket_groups = a.group_of});
//   ParameterUnits units(reducer, a);
//   units.gather(units.rest());
//   Tensor x = embed(idx);
//   for (b ...) x = units.run_block(b, blocks[b], x, false, b + 1 < n ? b + 1 : none, b > 0 ? b - 1 : none);
export module infini.parallel:parameter_units;
import infini.std;
import infini.nn;
import :buckets;
import :reducer;

export namespace infini::parallel {

// Which unit and bucket group each of `params` belongs to: block b's parameters unit and
// group b; the others (params in no block) unit blocks.size(), each its own group after the
// blocks' (a large tied table reduces its gradient alone, in place).
struct UnitAssignment {
  std::vector<int> unit_of, group_of;
  int units = 1;  // blocks.size() + 1
};
UnitAssignment assign_units(const std::vector<Tensor>& params, const std::vector<std::shared_ptr<nn::Module>>& blocks);

// A unit's buckets: one per bucket group, however large (a unit is gathered at once).
inline constexpr BucketOptions kBucketPerGroup{.first_bucket_bytes = std::int64_t{1} << 62,
                                               .bucket_bytes = std::int64_t{1} << 62};

// The dtype each of `params` (all of `model`'s) is gathered in for the passes (the Reducer's
// gather_dtypes): under autocast to bfloat16 or float16, that dtype for the float32 parameters
// that only linear layers (nn::LinearImpl and its tensor-parallel kinds) hold, which autocast
// casts to it anyway, so gathering them in it moves half the bytes and computes the same bits
// (FSDP's param_dtype where autocast applies); each parameter's own dtype for the others
// (norms, embeddings, a table tied to an embedding, a row-parallel layer's bias, which is
// added after its all-reduce) and without autocast.
std::vector<DataType> gather_dtypes(nn::Module& model, const std::vector<Tensor>& params,
                                    std::optional<DataType> autocast);

class ParameterUnits {
 public:
  // reducer: built with shard_parameters over the parameters `assignment` numbers, its buckets
  // never mixing units (bucket_groups = its group_of). Kept by reference.
  ParameterUnits(Reducer& reducer, const UnitAssignment& assignment);

  std::size_t size() const { return buckets_.size(); }
  std::size_t rest() const { return buckets_.size() - 1; }  // the parameters outside the blocks
  // Launches the gathers of a unit's buckets (nothing past the last unit).
  // The parameters come in their gather dtypes, or with full_precision in their own (a unit
  // gathered so also serves the passes).
  void prefetch(std::size_t unit, bool full_precision = false) const;
  void gather(std::size_t unit, bool full_precision = false) const;  // and waits for them
  void release(std::size_t unit) const;  // nothing while every unit is held
  void release_all() const;
  // Every unit gathered in full precision and kept so (release does nothing) until as many
  // drop_hold calls: for code reading the parameters outside a pass
  // (TrainingPlan::GatheredParameters: exports, sampling).
  void hold_all();
  void drop_hold();

  // x through block `unit` (run_block's checkpoint), gathered around it as the file's
  // comment says. next / previous: the units whose gathers to launch before this one's
  // forward / backward (empty: none, such as the first block of a pipeline stage).
  Tensor run_block(std::size_t unit, const std::shared_ptr<nn::Module>& block, const Tensor& x, bool checkpoint,
                   std::optional<std::size_t> next, std::optional<std::size_t> previous) const;

 private:
  Reducer* reducer_;
  std::vector<std::vector<std::size_t>> buckets_;  // of each unit
  int holds_ = 0;
};

}  // namespace infini::parallel
