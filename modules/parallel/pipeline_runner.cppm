// PipelineRunner: training a model split over the pipeline group's ranks, each holding only its
// part (its virtual stages' blocks; the embedding on the first stage, the head on the last: see
// stage_part). A step runs a schedule (gpipe, 1f1b, interleaved, zb-h1) on a ModelStage over
// this data-parallel rank's micro-batches. A data-parallel Reducer averages the gradients:
// each bucket's all-reduce starts as soon as its parameters' last gradients of the step are
// in (during the cool-down, overlapped with the other passes); finish_gradients waits for
// them and adds the last stage's gradients of the tied parameters into the first stage's. The first stage owns the tied parameters (GPT-2's wte): only its
// optimizer updates them (the last stage keeps no optimizer state for its copy), and
// share_tied_parameters copies them to the last stage after the update. Validation,
// generation and an export of the whole model run through the stages too.
//
//   const auto blocks = parallel::split_blocks(L, layout.pp() * layout.vpp());
//   MyModel part = build(parallel::stage_part(shape, groups.coord.pp, blocks));  // this rank's
//   parallel::PipelineRunner pipeline(staged(part), groups, layout, blocks, "1f1b", m);
//   optim::AdamW optimizer(pipeline.trained_parameters(), ...);
//   double loss_sum = pipeline.step(micro_batches);  // on the last stage
//   pipeline.finish_gradients();
//   optimizer.scaled_step(optim::clip_coefficient(pipeline.grad_norm(), 1.0));
//   pipeline.share_tied_parameters();
export module infini.parallel:pipeline_runner;
import infini.std;
import infini.nn;
import :process_group;
import :layout;
import :pipeline_stage;
import :pipeline_model;
import :reducer;
import :parameter_units;
import :tensor_parallel;

export namespace infini::parallel {

// A model as one pipeline rank holds it: its part of the whole and how to run that.
struct StagedModel {
  std::shared_ptr<nn::Module> module;  // this rank's part: the parameters it trains
  nn::ModelPart part;
  std::int64_t num_blocks = 0;                      // of the whole model
  std::function<Tensor(const Tensor& idx)> embed;   // with part.embed: idx (B, T) -> x
  std::vector<std::shared_ptr<nn::Module>> blocks;  // part.blocks[i] is blocks[i]: x -> x
  // With part.head: the last block's output and the targets -> the mean loss.
  std::function<Tensor(const Tensor& x, const Tensor& targets)> head_loss;
  // With part.head: the last block's output -> logits of every vocabulary column (generation;
  // may be empty when not needed).
  std::function<Tensor(const Tensor& x)> logits;
  // Parameters the first and last stage's parts share (GPT-2's wte): the first stage's copy
  // is trained with both stages' gradients and copied to the last stage after each update.
  std::vector<Tensor> tied_parameters;
};

struct PipelineOptions {
  std::shared_ptr<TensorParallel> tp = nullptr;  // the model's tensor-parallel layers (null without)
  // ZeRO over the data-parallel group (see ReducerOptions::zero). ZeRO-1: reducer()'s
  // shard_pieces() are what this rank's optimizer updates, and after the update
  // reducer()->all_gather_parameters() shares them. ZeRO-2: each gradient pass
  // reduce-scattered as it ends (interleaved: each chunk's parameters in buckets of their own,
  // reduce-scattered by that chunk's passes). ZeRO-3: and the parameters sharded too
  // (units(): each block gathered around its passes, the rest through the step; under
  // autocast the linear layers' weights gathered in its dtype, as the plan's).
  ZeroStage zero_stage = ZeroStage::kNone;
  // Activation checkpointing of every block (under zb-h1 a recomputed block's weight
  // gradients wait for the weight pass, as the block's own would).
  bool checkpoint_blocks = false;
  // Where the model's part lives (micro-batches are moved there) and the forward passes'
  // autocast dtype (PipelineModel).
  Device device = Device::cpu();
  std::optional<DataType> autocast = std::nullopt;
};

class PipelineRunner {
 public:
  // blocks_of_virtual_stage: split_blocks' ranges, which model.part must be this rank's
  // stage_part of. Collective over the
  // pipeline group (makes the group of its first and last rank). Error naming the schedule if
  // it cannot run the shape or its dry run on the simulator fails, or when the part is not this
  // rank's.
  PipelineRunner(StagedModel model, ParallelGroups groups, const Layout& layout,
                 std::vector<std::pair<int, int>> blocks_of_virtual_stage, const std::string& schedule, int micro_batches,
                 PipelineOptions options = {});

  // One step over `micro_batches` (this data-parallel rank's, the shape's number of them);
  // returns the sum of their losses on the rank of the last stage (0 elsewhere). Gradients
  // accumulate, each micro-batch's loss scaled by 1 / micro_batches.
  double step(const std::vector<data::Example>& micro_batches);
  // The parameters this rank's optimizer updates: its part's, less the last stage's copies
  // of the tied parameters.
  std::vector<Tensor> trained_parameters() const;
  // After step: finishes the data-parallel average of every gradient and adds the last
  // stage's gradients of the tied parameters into the first stage's (the last stage's are
  // dropped); under ZeRO into the first stage's pieces of them.
  void finish_gradients();
  // The data-parallel reducer over trained_parameters() (null when dp = 1).
  Reducer* reducer() const { return reducer_.get(); }
  // ZeRO-3 (dp > 1): the units of trained_parameters() (null otherwise).
  ParameterUnits* units() const { return units_.get(); }
  // After the optimizer's update: the first stage's tied parameters into the last stage's
  // copies. Collective over the first and last pipeline rank.
  void share_tied_parameters();
  // The 2-norm of the whole model's gradients (after finish_gradients): each parameter
  // counted once, tensor-parallel shards summed. Collective over the pipeline and
  // tensor-parallel groups.
  double grad_norm() const;
  // The mean loss of `batches` through the stages (no gradients), on every rank of the
  // pipeline group. Collective over it.
  double loss(const std::vector<data::Example>& batches) const;
  // idx (B, T) -> model.logits of it, on every rank of the pipeline group (every position on
  // every tensor-parallel rank). Collective over it.
  Tensor logits(const Tensor& idx) const;
  // The whole model's parameters (whole tensors, by name) on pipeline rank 0 of tensor-parallel
  // rank 0, from every stage's part; empty elsewhere. Collective over the pipeline and
  // tensor-parallel groups.
  nn::Named<Tensor> gather_parameters() const;

  const PipelineShape& shape() const { return shape_; }

 private:
  // The chunk (0 .. virtual_stages - 1) of each of trained_parameters().
  std::vector<int> chunk_of_parameters() const;
  // ZeRO-3: the units and the blocks run through them.
  void shard_blocks(const UnitAssignment& assignment);
  StagedModel staged_;
  ParallelGroups groups_;
  std::shared_ptr<TensorParallel> tp_;
  ZeroStage zero_stage_;
  PipelineShape shape_;
  Schedule schedule_;
  PipelineModel model_;
  std::vector<std::pair<int, int>> blocks_;
  std::shared_ptr<ProcessGroup> embedding_group_;  // pp ranks 0 and p - 1 (null elsewhere)
  // The data-parallel average of trained_parameters() (dp > 1), launched bucket by bucket
  // during each chunk's last gradient pass and finished by finish_gradients.
  std::unique_ptr<Reducer> reducer_;
  std::unique_ptr<ParameterUnits> units_;
  // The bucket groups each chunk's gradient passes reduce (empty: every group).
  std::vector<std::vector<int>> pass_groups_;
  // Whether p is this rank's copy of a tied parameter that the first stage owns.
  bool holds_tied_copy(const Tensor& p) const;
  // shard_gradients, on the first stage: the last stage's averaged gradient of tied parameter
  // p into this rank's pieces of p. Collective over the embedding group.
  void add_tied_gradient_to_pieces(const Tensor& p);
};

}  // namespace infini::parallel
