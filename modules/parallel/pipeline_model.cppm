// A language model run as a pipeline stage: ModelStage is the PipelineStage whose forward and
// backward run this rank's blocks of a model on real micro-batches, exchanging activations
// and gradients (any dtype and shape: send_tensor) with the neighbouring stages of the
// pipeline group. Virtual stage 0 also embeds the tokens; the last one also runs the head and
// the loss. A step makes one ModelStage, runs a schedule on it and finishes it.
export module infini.parallel:pipeline_model;
import infini.std;
import infini.nn;
import :process_group;
import :work;
import :tensor_messages;
import :pipeline_stage;
import :asio;

export namespace infini::parallel {

// A model as a pipeline sees it (GPT2 and LLaMA3 give theirs: embed, h, head and loss).
struct PipelineModel {
  std::function<Tensor(const Tensor& idx)> embed;  // idx (B, T) -> x (B, T, C)
  // x -> x, by index in the whole model (null for a block another rank holds)
  std::vector<std::shared_ptr<nn::Module>> blocks;
  std::function<Tensor(const Tensor& x, const Tensor& targets)> head_loss;  // -> the mean loss
  // Activation checkpointing: each block keeps only its input and is run again in backward.
  bool checkpoint_blocks = false;
  // The device of this rank's part: token ids and targets are moved to it.
  Device device = Device::cpu();
  // The forward passes' autocast dtype (bfloat16 or float16 on device's type); none when unset.
  std::optional<DataType> autocast;
  // When set, runs block b on x in place of run_block(blocks[b], x, checkpoint_blocks) (ZeRO-3:
  // the block's parameters gathered around it).
  std::function<Tensor(int b, const Tensor& x)> block_runner = nullptr;
  // When set, called with a virtual stage's blocks [first, end) before (true) and after (false)
  // each of its weight passes (backward_weight), which may read their weights: a fused op's
  // weight gradient can need another weight (dense_gelu_dense's w1 needs w2), and virtual stage
  // 0 runs all of its backward there. ZeRO-3 gathers the blocks around it.
  std::function<void(int first, int end, bool before)> around_weight_pass = nullptr;

  Tensor run_block(int b, const Tensor& x) const;  // block b (by index in the whole model) on x
  // Autocast for a forward pass, when set (a guard: keep it alive for the pass, not across a wait).
  std::optional<AutocastGuard> forward_precision() const;
};

// x through `block`; with `checkpoint`, through autograd::checkpoint (only x kept for backward).
Tensor run_block(const std::shared_ptr<nn::Module>& block, const Tensor& x, bool checkpoint);

// The blocks [first, last) of each of n virtual stages: `counts` of them (must add up to the
// block count), or balanced (the first blocks % n stages one more). Error for a stage with
// none, or counts that do not fit.
std::vector<std::pair<int, int>> split_blocks(int blocks, int stages, const std::vector<int>& counts = {});

// What pipeline rank `rank` builds of a model whose blocks the virtual stages hold as
// split_blocks gave them: the blocks of its virtual stages, the embedding on the rank of
// virtual stage 0, the head on the rank of the last one.
nn::ModelPart stage_part(const PipelineShape& shape, int rank, const std::vector<std::pair<int, int>>& blocks_of_virtual_stage);

// idx (B, T) forward through the virtual stages of `group`'s pipeline, one after another and
// without gradients (validation, generation): virtual stage 0 embeds it, each stage runs its
// blocks (model.blocks, indexed in the whole model; only the rank's own are read), the last
// applies `last` to its output. Returns that on the rank of the last virtual stage, an
// undefined tensor elsewhere. Collective over the group; no schedule may be running.
Tensor pipeline_forward(ProcessGroup& group, const PipelineShape& shape, const PipelineModel& model,
                        const std::vector<std::pair<int, int>>& blocks_of_virtual_stage, const Tensor& idx,
                        const std::function<Tensor(const Tensor& x)>& last);

class ModelStage final : public PipelineStage {
 public:
  // micro_batches[i]: inputs (read by virtual stage 0) and targets (by the last) of
  // micro-batch i; each micro-batch's loss is scaled by loss_scale before backward (1 / m for
  // the mean over the step). Gradients accumulate into the parameters' grad(). backward_input
  // computes only what the input gradient needs (autograd::backward_input) and
  // backward_weight the rest: the parameters' gradients (on virtual stage 0, which has no
  // input gradient to send, all of the backward). Posts every receive.
  // around_gradients(chunk, last, true) runs before each pass that accumulates parameter
  // gradients of `chunk` (a backward or backward_weight), around_gradients(chunk, last, false)
  // after it; `last`: the pass is the chunk's m-th of the step, with its last gradients. A
  // data-parallel reducer syncs then (ZeRO-2: in every pass, the chunk's buckets).
  using AroundGradients = std::function<void(int chunk, bool last, bool before)>;
  ModelStage(std::shared_ptr<ProcessGroup> group, PipelineShape shape, const PipelineModel& model,
             std::vector<std::pair<int, int>> blocks_of_virtual_stage, std::vector<data::Example> micro_batches,
             double loss_scale, AroundGradients around_gradients = {});

  int rank() const override { return rank_; }
  const PipelineShape& shape() const override { return shape_; }
  Task forward(int micro, int chunk) override;
  Task backward(int micro, int chunk) override;
  Task backward_input(int micro, int chunk) override;
  Task backward_weight(int micro, int chunk) override;
  // Waits for the sends and checks that every pass ran.
  Task finish();

  // The sum of the micro-batches' losses (unscaled) on the rank of the last virtual stage, 0
  // elsewhere.
  double loss_sum() const { return loss_sum_; }

 private:
  struct Saved {
    Tensor input;           // received activation (requires grad), undefined on virtual stage 0
    Tensor output;          // sent activation, or the loss on the last virtual stage
    autograd::DeferredGrads deferred;  // what backward_input left for backward_weight
  };
  enum Kind : int { kActivation = 0, kGradient = 1 };
  Task input_gradient(PipelineOp op, int micro, int chunk);
  // Runs `pass`, which accumulates parameter gradients of `chunk`, between around_gradients'
  // calls.
  void gradient_pass(int chunk, const std::function<void()>& pass);
  int tag(Kind kind, int micro, int stage) const;
  int rank_of(int stage) const { return stage % shape_.stages; }
  TensorReceive& receive(Kind kind, int micro, int stage);

  std::shared_ptr<ProcessGroup> group_;
  int rank_;
  PipelineShape shape_;
  const PipelineModel& model_;
  std::vector<std::pair<int, int>> blocks_;
  std::vector<data::Example> batches_;
  double loss_scale_, loss_sum_ = 0;
  ScheduleChecker checker_;
  std::map<std::pair<int, int>, Saved> saved_;  // by (micro, chunk)
  std::map<std::tuple<int, int, int>, std::unique_ptr<TensorReceive>> receives_;  // (kind, micro, stage)
  std::vector<Work> sends_;
  AroundGradients around_gradients_;
  std::vector<int> gradient_passes_;  // per chunk, this step
};

}  // namespace infini::parallel
