// DistributedDataParallel: a model replicated on every rank of a group, trained on
// different data, with gradients averaged over the ranks while backward runs (see
// :reducer). Construction broadcasts rank 0's parameters and buffers, so every replica
// starts equal; after each synchronised `loss.backward()` every rank holds the same averaged
// gradients, and the optimizer steps identically everywhere.
//
//   parallel::DistributedDataParallel ddp(model.ptr(), world);
//   for (micro-step k of A) {
//     auto no_sync = k + 1 < A ? ddp.no_sync() : parallel::DistributedDataParallel::NoSync();
//     (loss(model(x_k), y_k) / A).backward();   // the last one averages over the ranks
//   }
//   optimizer.step();
export module infini.parallel:ddp;
import infini.std;
import infini.nn;
import :buckets;
import :process_group;
import :reducer;
import :runtime;

export namespace infini::parallel {

// DistributedDataParallel's options are its reducer's; DDP ends each synchronised backward
// itself, so finalize_explicitly is refused.
using DDPOptions = ReducerOptions;

// The parameters of `module` that require grad, in registration order: those a
// DistributedDataParallel reduces (and ZeRO shards). Frozen ones (a LoRA model's base weights)
// are left out, as PyTorch's DDP does.
std::vector<Tensor> trained_parameters(const nn::Module& module);

class DistributedDataParallel {
 public:
  // Collective over `group`: every rank must construct it with the same model structure. Rank
  // 0's parameters and buffers are broadcast; the reducer takes the parameters that require
  // grad (the indices in bucket_groups and gather_dtypes count only those), so frozen ones
  // (a LoRA model's base weights) are neither reduced nor sharded.
  DistributedDataParallel(std::shared_ptr<nn::Module> module, std::shared_ptr<ProcessGroup> group,
                          DDPOptions options = {});

  nn::Module& module() const { return *module_; }
  const std::shared_ptr<ProcessGroup>& group() const { return group_; }
  Reducer& reducer() { return reducer_; }

  // While alive, backward passes accumulate gradients locally without averaging them; the
  // first synchronised backward after it averages all that was accumulated. A
  // default-constructed NoSync does nothing.
  class NoSync {
   public:
    NoSync() = default;
    explicit NoSync(Reducer& reducer) : reducer_(&reducer), previous_(reducer.sync()) { reducer.set_sync(false); }
    ~NoSync() {
      if (reducer_) reducer_->set_sync(previous_);
    }
    NoSync(NoSync&& other) noexcept : reducer_(other.reducer_), previous_(other.previous_) { other.reducer_ = nullptr; }
    NoSync& operator=(NoSync&&) = delete;

   private:
    Reducer* reducer_ = nullptr;
    bool previous_ = true;
  };
  [[nodiscard]] NoSync no_sync() { return NoSync(reducer_); }

 private:
  std::shared_ptr<nn::Module> module_;
  std::shared_ptr<ProcessGroup> group_;
  Reducer reducer_;
};

}  // namespace infini::parallel
