// TrainingPlan: a model's training step under any layout of the world (dp x tp x pp, with or
// without ZeRO-1), decided in one place (torchtitan's parallelize-then-train; Megatron's
// distributed optimizer). From the Layout, a description of the model and PlanOptions it
//   - builds this rank's part of the model: the blocks of its pipeline stages, the embedding
//     on the first stage and the head on the last (tied weights kept in sync between them),
//     split by tensor-parallel layers when tp > 1;
//   - wraps it for data parallelism: DDP's reducer, or the pipeline's over its stages, both
//     overlapped with backward;
//   - makes the optimizer over what this rank updates: its parameters (less a pipeline's tied
//     copies), or under ZeRO-1 its pieces of the averaged gradients;
//   - runs one step over a batch: forward and backward of the micro-batches (by the pipeline
//     schedule when pp > 1), the gradient average, the global gradient norm, clipping folded
//     into the update, and the updated parameters shared again.
//
//   parallel::TrainingPlan plan(layout, groups, build_my_model, {.zero_stage = ZeroStage::kOptimizerState, .micro_batches = 4},
//                               [](const std::vector<parallel::OptimizedTensor>& t) { return my_adamw(t); });
//   optim::CosineWithWarmupLR schedule(plan.optimizer(), ...);
//   for (step ...) {
//     const parallel::StepResult r = plan.step(micro_batches);  // this data-parallel rank's
//     schedule.step();
//   }
export module infini.parallel:training_plan;
import infini.std;
import infini.nn;
import :layout;
import :ddp;
import :tensor_parallel;
import :pipeline_runner;
import :reducer;
import :parameter_units;
import :work;
import :sharded_tensor;
import :distributed_checkpoint;

export namespace infini::parallel {

// The part of a model of `num_blocks` blocks this rank builds.
using PartFor = std::function<nn::ModelPart(std::int64_t num_blocks)>;
// A model's description: builds this rank's part of it (part_for(its number of blocks)),
// with tp's layers (null: the single-process ones).
using BuildModel = std::function<StagedModel(std::shared_ptr<TensorParallel> tp, const PartFor& part_for)>;

// A tensor the optimizer updates and the parameter it is (or, under ZeRO-1, a block of):
// per-parameter rules such as weight decay follow `parameter`.
struct OptimizedTensor {
  Tensor tensor, parameter;
  std::int64_t offset = 0;  // where tensor starts among parameter's elements (a ZeRO piece)
};
using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(const std::vector<OptimizedTensor>& tensors)>;

// State that every rank holds alike (an LR scheduler, RNG states), saved with the plan's in
// one copy as "<name>/<key>".
struct ReplicatedState {
  std::string name;
  std::function<StateDict()> save;
  std::function<void(const StateDict&)> load;
};

struct PlanOptions {
  // 1 (ZeRO-1): optimizer state and averaged gradients sharded over dp; 2 (ZeRO-2): and the
  // full gradient never kept (each micro-batch's reduce-scattered as its backward runs; under
  // a pipeline, each gradient pass's, with virtual stages its chunk's buckets); 3 (ZeRO-3,
  // FSDP): and the parameters, each block's all-gathered just before its forward (the next
  // block's while it computes) and again before its backward, and released after each; the
  // embedding and head stay gathered through the step's micro-batches (under a pipeline, a
  // stage's blocks around each of their passes).
  ZeroStage zero_stage = ZeroStage::kNone;
  bool sequence_parallel = false;  // activations between tensor-parallel regions split along T
  std::string schedule = "1f1b";   // pipeline schedule (pp > 1): gpipe, 1f1b, interleaved, zb-h1
  std::vector<int> pipeline_blocks = {};  // blocks of each virtual stage (empty: balanced)
  int micro_batches = 1;           // per data-parallel rank and step
  double grad_clip = 0;            // the largest gradient norm (0: no clipping)
  // Activation checkpointing of every block: only each block's input is kept, and the block
  // runs again in backward (under zb-h1 its weight gradients wait for the weight pass).
  bool checkpoint_blocks = false;
  // Selective activation checkpointing: the attention layers recompute their inner part from
  // the q/k/v projection in backward (nn::SelectiveRecompute around the step's passes).
  bool recompute_attention = false;
  Device device = Device::cpu();   // where the part trains (built on the CPU, then moved)
  // The forward passes autocast to it (bfloat16 or float16) on the device's type; under ZeRO-3
  // the linear layers' weights are gathered in it (gather_dtypes). Not with pp > 1.
  std::optional<DataType> autocast = std::nullopt;
  bool loss_scaling = false;       // float16: dynamic loss scaling (GradScaler)
  // One process, one micro-batch: steps after the first replay a CUDA graph (make_optimizer
  // returns a capturable Adam or AdamW).
  bool cuda_graph = false;
  // A step whose loss or gradient norm is NaN or infinite skips the update (both are reduced
  // over the ranks, so every rank decides alike). Loss scaling keeps its own rule; a CUDA
  // graph's update is part of the graph and cannot be skipped.
  bool skip_non_finite = true;
};

struct StepResult {
  double loss = 0;       // the mean over the step's micro-batches of every data-parallel rank
  double grad_norm = 0;  // of the whole model's averaged gradient, before clipping
  bool skipped = false;  // the update was skipped (non_finite, or loss scaling's overflow)
  // The loss or the gradient norm was NaN or infinite (outside loss scaling's rule).
  bool non_finite = false;
  // Host time of the passes (under a pipeline schedule or a CUDA graph all in forward_ms) and
  // of the rest: the gradient finish, norm and update.
  double forward_ms = 0, backward_ms = 0, update_ms = 0;
  // Without a pipeline (eager steps): the most bytes a micro-batch's forward pass left allocated
  // on the device for its backward (saved activations, the loss's inputs); 0 otherwise.
  std::int64_t activation_bytes = 0;
};

class TrainingPlan {
 public:
  // Collective over groups.world (empty groups: one process). Error naming the option for a
  // combination the layout cannot run, or a pipeline split that does not fit the model.
  TrainingPlan(const Layout& layout, ParallelGroups groups, const BuildModel& build, PlanOptions options,
               const MakeOptimizer& make_optimizer);
  ~TrainingPlan();
  TrainingPlan(const TrainingPlan&) = delete;
  TrainingPlan& operator=(const TrainingPlan&) = delete;

  // One optimizer step over this data-parallel rank's options.micro_batches micro-batches.
  // Collective over the world.
  StepResult step(const std::vector<data::Example>& micro_batches);
  // The mean loss of `batches` without gradients, through the stages under a pipeline.
  // Collective over the pipeline and tensor-parallel groups.
  double loss(const std::vector<data::Example>& batches);

  nn::Module& module() const { return *model_.module; }  // this rank's part
  const StagedModel& model() const { return model_; }
  optim::Optimizer& optimizer() const { return *optimizer_; }
  optim::GradScaler& scaler() { return scaler_; }
  // Whether the model runs as pipeline stages (pp > 1): it then has no whole model on a rank
  // (logits and parameters come through the stages, below).
  bool pipelined() const { return pipeline_ != nullptr; }
  // idx (B, T) -> logits of every vocabulary column at every position through the stages, on
  // every rank of the pipeline group (generation without a cache). Collective over the pipeline
  // group. Error unless pipelined().
  Tensor pipeline_logits(const Tensor& idx) const;
  // The whole model's parameters (whole tensors by name) gathered from every stage on pipeline
  // rank 0 of tensor-parallel rank 0; empty elsewhere. Collective over the pipeline and
  // tensor-parallel groups. Error unless pipelined().
  nn::Named<Tensor> gather_stage_parameters() const;
  const std::shared_ptr<TensorParallel>& tensor_parallel() const { return tp_; }
  const Layout& layout() const { return layout_; }
  const ParallelGroups& groups() const { return groups_; }
  const PlanOptions& options() const { return options_; }
  // This rank's model and optimizer state, and `extra`, as pieces of the whole model's
  // tensors (for save_distributed_checkpoint): "model/<parameter>", "optimizer/<parameter>/
  // <state>" (exp_avg, exp_avg_sq, step), "optimizer/param_groups.<g>.<option>",
  // "grad_scaler/<key>" under loss scaling, "<extra name>/<key>". Names and chunks are the
  // whole model's, so the checkpoint loads under any layout.
  std::vector<ShardedTensor> sharded_state(const std::vector<ReplicatedState>& extra = {}) const;
  // Collective over the world: loads a checkpoint sharded_state saved under any layout (and
  // `extra`'s parts). Every rank reads all its pieces first; nothing is loaded on any rank
  // unless every rank read all of its own (the others raise an Error naming the rank that
  // could not). Optimizer state missing from the checkpoint (saved before a first step) is
  // left as it is.
  void load_sharded_state(const DistributedCheckpoint& checkpoint, const std::vector<ReplicatedState>& extra = {});
  // Under ZeRO-3 a parameter holds memory only while a pass uses it. While the returned object
  // lives, every parameter of this rank's part is gathered, for code that reads them outside a
  // step (sampling, an export, checks). Collective over the data-parallel group; nothing to do
  // under the other stages.
  class GatheredParameters {
   public:
    GatheredParameters(GatheredParameters&& other) noexcept : plan_(other.plan_) { other.plan_ = nullptr; }
    GatheredParameters& operator=(GatheredParameters&&) = delete;
    ~GatheredParameters();

   private:
    friend class TrainingPlan;
    explicit GatheredParameters(const TrainingPlan* plan) : plan_(plan) {}
    const TrainingPlan* plan_;
  };
  [[nodiscard]] GatheredParameters gather_parameters() const;
  // The whole model's parameter count (each tied parameter once, shards times their ranks).
  // Collective over the pipeline group.
  std::int64_t whole_model_parameters() const;

 private:
  struct Graph;
  Layout layout_;
  ParallelGroups groups_;
  PlanOptions options_;
  std::shared_ptr<TensorParallel> tp_;
  StagedModel model_;
  std::unique_ptr<DistributedDataParallel> ddp_;  // dp > 1 without a pipeline
  std::unique_ptr<PipelineRunner> pipeline_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  optim::GradScaler scaler_;
  std::unique_ptr<Graph> graph_;  // cuda_graph
  std::unique_ptr<ParameterUnits> units_;  // ZeRO-3 without a pipeline (the pipeline has its own)
  std::int64_t steps_ = 0;

  Reducer* reducer() const;  // the data-parallel one (null when dp = 1)
  ParameterUnits* units() const;  // ZeRO-3's (null under the other stages)
  bool zero() const { return options_.zero_stage != ZeroStage::kNone && reducer() != nullptr; }
  std::vector<OptimizedTensor> optimized_tensors() const;
  // Where each tensor the optimizer updates (in its numbering) lies in the whole model: the
  // parameter's name, and the chunks (a tensor-parallel shard, or under ZeRO a flat range of
  // one) with the tensor as local.
  struct OptimizedPiece {
    std::string name;
    ShardedTensor layout;
  };
  std::vector<OptimizedPiece> optimized_pieces() const;
  // "model/<name>": this rank's parameters (under ZeRO-3 its `pieces` of them) and buffers.
  std::vector<ShardedTensor> model_state(const std::vector<OptimizedPiece>& pieces) const;
  Tensor forward_loss(const Tensor& idx, const Tensor& targets) const;  // the whole model's
  Tensor sharded_forward_loss(const Tensor& idx, const Tensor& targets) const;  // ZeRO-3's
  void shard_parameters();  // ZeRO-3: DDP over sharded parameters, and the units
  // Forward and backward of every micro-batch; returns the sum of their losses (on the last
  // stage under a pipeline).
  double run_passes(const std::vector<data::Example>& micro_batches, StepResult& result);
  double grad_norm() const;
};

}  // namespace infini::parallel
