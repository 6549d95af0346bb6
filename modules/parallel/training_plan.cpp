// TrainingPlan (see training_plan.cppm).
module;
#include <cmath>
#include <cstdint>
module infini.parallel;
import infini.std;

namespace infini::parallel {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double squared_norm(const std::vector<Tensor>& params) { return std::pow(optim::total_grad_norm(params), 2); }

// Sums `values` over `group`'s ranks in place (nothing for a group of one).
void sum_over(const GroupPtr& group, std::vector<double>& values) {
  if (!group || group->size() == 1) return;
  Tensor t = from_vector(values, {static_cast<std::int64_t>(values.size())}, {.dtype = kFloat64});
  group->all_reduce(t).wait();
  values.assign(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
}

}  // namespace

// cuda_graph: the whole step (forward, backward, the norm and the capturable update) recorded
// once and replayed, so the GPU runs it without waiting for the host to launch each kernel.
// The batch goes into tensors made before the capture; loss and norm are tensors the capture
// made, written again by every replay.
struct TrainingPlan::Graph {
  std::unique_ptr<CudaGraph> graph;
  Tensor inputs, targets, loss, norm;
};

TrainingPlan::TrainingPlan(const Layout& layout, ParallelGroups groups, const BuildModel& build, PlanOptions options,
                           const MakeOptimizer& make_optimizer)
    : layout_(layout),
      groups_(std::move(groups)),
      options_(std::move(options)),
      scaler_({.enabled = options_.loss_scaling}) {
  const PlanOptions& o = options_;
  if (o.zero_stage > ZeroStage::kParameters)
    throw Error("TrainingPlan", concat("zero_stage ", static_cast<int>(o.zero_stage), ": expected 0, 1, 2 or 3"));
  if (!groups_.world && layout_.world_size() > 1)
    throw Error("TrainingPlan", concat("a layout of ", layout_.world_size(), " ranks (", layout_.str(),
                                       ") needs the groups of a world that size; got none"));
  if (o.micro_batches < 1) throw Error("TrainingPlan", concat("micro_batches ", o.micro_batches, ": expected >= 1"));
  if (o.sequence_parallel && layout_.tp() == 1)
    throw Error("TrainingPlan", "sequence_parallel splits the sequence over tensor-parallel ranks: it needs tp > 1");
  if (!o.pipeline_blocks.empty() && layout_.pp() == 1)
    throw Error("TrainingPlan", "pipeline_blocks splits the blocks between pipeline stages: it needs pp > 1");
  if (o.cuda_graph && (o.micro_batches > 1 || layout_.world_size() > 1 || !o.device.is_cuda()))
    throw Error("TrainingPlan", concat("cuda_graph replays one micro-batch of one process on a CUDA device; got ",
                                       o.micro_batches, " micro-batches, ", layout_.world_size(), " ranks, ",
                                       o.device.str()));
  const bool pipelined = layout_.pp() > 1;
  if (o.loss_scaling && pipelined)
    throw Error("TrainingPlan", concat("loss scaling (float16) scales the loss of a plan without pipeline stages; got "
                                       "pp = ", layout_.pp(), " (", layout_.str(), "): use bfloat16"));
  if (layout_.tp() > 1) tp_ = std::make_shared<TensorParallel>(groups_.tp, o.sequence_parallel);
  std::vector<std::pair<int, int>> stage_blocks;  // the virtual stages' blocks [first, last)
  const PartFor part_for = [&](std::int64_t num_blocks) {
    if (!pipelined) return nn::ModelPart::whole(num_blocks);
    stage_blocks = split_blocks(static_cast<int>(num_blocks), layout_.pp() * layout_.vpp(), o.pipeline_blocks);
    return stage_part({.stages = layout_.pp(), .virtual_stages = layout_.vpp()}, groups_.coord.pp, stage_blocks);
  };
  model_ = build(tp_, part_for);
  // Built on the CPU (the same initialisation on every device), then moved: parameter
  // handles stay valid.
  if (o.device.is_cuda()) model_.module->to(o.device);
  if (pipelined)
    pipeline_ = std::make_unique<PipelineRunner>(
        model_, groups_, layout_, stage_blocks, o.schedule, o.micro_batches,
        PipelineOptions{.tp = tp_,
                        .zero_stage = o.zero_stage,
                        .checkpoint_blocks = o.checkpoint_blocks,
                        .device = o.device,
                        .autocast = o.autocast});
  else if (layout_.dp() > 1 && o.zero_stage == ZeroStage::kParameters)
    shard_parameters();
  else if (layout_.dp() > 1)  // replicas start from rank 0's weights
    ddp_ = std::make_unique<DistributedDataParallel>(
        model_.module, groups_.dp,
        DDPOptions{.zero = o.zero_stage});
  optimizer_ = make_optimizer(optimized_tensors());
  if (o.cuda_graph) {  // the graph holds the update too
    const auto* adam = dynamic_cast<const optim::Adam*>(optimizer_.get());
    const auto* adamw = dynamic_cast<const optim::AdamW*>(optimizer_.get());
    if (!(adam && adam->capturable()) && !(adamw && adamw->capturable()))
      throw Error("TrainingPlan", "cuda_graph captures the update too: make_optimizer must return a capturable Adam or "
                                  "AdamW (set_capturable(true))");
    graph_ = std::make_unique<Graph>();
  }
}

TrainingPlan::~TrainingPlan() = default;

void TrainingPlan::shard_parameters() {
  // Each block one unit (one bucket per gather dtype, however large), the rest (embedding,
  // head) another; under autocast the linear layers' weights are gathered in its dtype.
  const std::vector<Tensor> params = trained_parameters(*model_.module);  // what the reducer takes
  const UnitAssignment units = assign_units(params, model_.blocks);
  ddp_ = std::make_unique<DistributedDataParallel>(
      model_.module, groups_.dp,
      DDPOptions{.buckets = kBucketPerGroup,
                 .zero = ZeroStage::kParameters,
                 .gather_dtypes = gather_dtypes(*model_.module, params, options_.autocast),
                 .bucket_groups = units.group_of});
  units_ = std::make_unique<ParameterUnits>(ddp_->reducer(), units);
}

TrainingPlan::GatheredParameters TrainingPlan::gather_parameters() const {
  if (units()) units()->hold_all();
  return GatheredParameters(this);
}

TrainingPlan::GatheredParameters::~GatheredParameters() {
  if (plan_ && plan_->units()) plan_->units()->drop_hold();
}

Reducer* TrainingPlan::reducer() const {
  if (pipeline_) return pipeline_->reducer();
  return ddp_ ? &ddp_->reducer() : nullptr;
}

ParameterUnits* TrainingPlan::units() const { return pipeline_ ? pipeline_->units() : units_.get(); }

std::vector<OptimizedTensor> TrainingPlan::optimized_tensors() const {
  std::vector<OptimizedTensor> tensors;
  if (zero()) {
    const Reducer& r = *reducer();
    for (std::size_t k = 0; k < r.shard_pieces().size(); ++k)
      tensors.push_back({r.shard_pieces()[k], r.parameters().at(r.shard_owners()[k]), r.shard_offsets()[k]});
    return tensors;
  }
  // A pipeline's last stage leaves its copies of tied parameters to the first.
  for (const Tensor& p : pipeline_ ? pipeline_->trained_parameters() : model_.module->parameters())
    if (p.requires_grad()) tensors.push_back({p, p});  // frozen ones (a LoRA model's base) are not trained
  return tensors;
}

Tensor TrainingPlan::forward_loss(const Tensor& idx, const Tensor& targets) const {
  std::optional<AutocastGuard> autocast;  // the forward pass only
  if (options_.autocast) autocast.emplace(options_.device.type, *options_.autocast);
  if (units_) return sharded_forward_loss(idx, targets);
  Tensor x = model_.embed(idx);
  for (const auto& block : model_.blocks) x = run_block(block, x, options_.checkpoint_blocks);
  return model_.head_loss(x, targets);
}

Tensor TrainingPlan::sharded_forward_loss(const Tensor& idx, const Tensor& targets) const {
  // Each block gathered around its forward and its backward (ParameterUnits::run_block). The
  // rest (embedding, final norm, head) is gathered for the forward and, with gradients,
  // released once the head's backward is done: the embedding's backward reads no weights, so
  // the tied table's weights and its whole gradient are never alive together during the blocks'
  // backward. Without gradients the caller releases it (after the evaluation).
  const std::size_t n = model_.blocks.size();
  const ParameterUnits* units = units_.get();
  units->gather(units->rest());
  units->prefetch(0);
  Tensor x = model_.embed(idx);
  for (std::size_t i = 0; i < n; ++i)
    x = units->run_block(i, model_.blocks[i], x, options_.checkpoint_blocks,
                         i + 1 < n ? std::optional(i + 1) : std::nullopt, i > 0 ? std::optional(i - 1) : std::nullopt);
  if (GradMode::is_enabled() && x.requires_grad()) x.register_hook([units](const Tensor& grad) {
    units->release(units->rest());
    return grad;
  });
  return model_.head_loss(x, targets);
}

double TrainingPlan::run_passes(const std::vector<data::Example>& micro_batches, StepResult& result) {
  if (pipeline_) {  // forward and backward interleaved by the schedule
    const auto start = Clock::now();
    const double loss_sum = pipeline_->step(micro_batches);
    pipeline_->finish_gradients();
    result.forward_ms = ms_since(start);
    return loss_sum;
  }
  const Device device = options_.device;
  const double m = static_cast<double>(micro_batches.size());
  double loss_sum = 0;
  for (std::size_t k = 0; k < micro_batches.size(); ++k) {
    // All but the last micro-batch accumulate locally; the last one's backward averages
    // everything over the data-parallel ranks. ZeRO-2 reduce-scatters every micro-batch's.
    const auto no_sync = ddp_ && options_.zero_stage < ZeroStage::kGradients && k + 1 < micro_batches.size()
                             ? ddp_->no_sync()
                             : DistributedDataParallel::NoSync();
    const Tensor inputs = micro_batches[k].data.to(device), targets = micro_batches[k].target.to(device);
    const std::int64_t allocated = memory_stats(device).allocated_bytes;
    const auto start = Clock::now();
    std::optional<trace::Span> span(std::in_place, concat("forward ", k), "step");
    const Tensor loss = forward_loss(inputs, targets);
    loss_sum += loss.item<double>();  // on a GPU, waits for the forward pass
    result.forward_ms += ms_since(start);
    result.activation_bytes =
        std::max(result.activation_bytes, memory_stats(device).allocated_bytes - allocated);
    span.emplace(concat("backward ", k), "step");
    const auto backward_start = Clock::now();
    scaler_.scale(div(loss, m)).backward();
    synchronize(device);
    result.backward_ms += ms_since(backward_start);
  }
  if (units_) units_->release_all();  // ZeRO-3: what a pass left gathered (none unless it threw)
  return loss_sum;
}

StepResult TrainingPlan::step(const std::vector<data::Example>& micro_batches) {
  if (static_cast<int>(micro_batches.size()) != options_.micro_batches)
    throw Error("TrainingPlan::step", concat("expected ", options_.micro_batches, " micro-batches (the plan's), got ",
                                             micro_batches.size()));
  model_.module->train();
  const trace::Span span("step", "step");
  const nn::SelectiveRecompute recompute(options_.recompute_attention);
  StepResult result;
  // With cuda_graph the first step runs eagerly (it warms up plan caches and lazily loaded
  // kernels and makes the optimizer's state); the next one captures the graph, which then
  // writes the grads in every replay.
  const bool graphed = graph_ && steps_ > 0;
  if (!graphed || !graph_->graph) optimizer_->zero_grad();
  if (zero()) model_.module->zero_grad();  // the optimizer holds the pieces, not the parameters
  // ZeRO-2 and 3: no gradient memory until the backward's first reduce-scatter lands.
  if (zero() && options_.zero_stage >= ZeroStage::kGradients) reducer()->release_gradient_blocks();
  double loss_sum = 0;
  if (graphed) {
    const auto start = Clock::now();
    const data::Example& batch = micro_batches.front();
    if (!graph_->graph) {
      graph_->inputs = batch.data.to(options_.device);
      graph_->targets = batch.target.to(options_.device);
      auto graph = std::make_unique<CudaGraph>();
      graph->capture_begin(options_.device);
      graph_->loss = forward_loss(graph_->inputs, graph_->targets);  // an error abandons the capture
      graph_->loss.backward();
      graph_->norm = optim::total_grad_norm_tensor(model_.module->parameters());
      optimizer_->scaled_step(options_.grad_clip > 0
                                  ? optim::clip_coefficient(graph_->norm, options_.grad_clip)
                                  : full({}, 1.0, {.dtype = kFloat64, .device = options_.device}));
      graph->capture_end();
      graph_->graph = std::move(graph);
    } else {
      graph_->inputs.copy_(batch.data);
      graph_->targets.copy_(batch.target);
    }
    graph_->graph->replay();
    loss_sum = graph_->loss.item<double>();
    result.grad_norm = graph_->norm.item<double>();
    result.forward_ms = ms_since(start);
  } else {
    loss_sum = run_passes(micro_batches, result);
  }
  // Under a pipeline only the last stage has the losses: the mean over the world counts them
  // once per pipeline rank. Every rank then has it (and the norm) to decide a skip alike.
  std::vector<double> mean = {loss_sum / static_cast<double>(micro_batches.size())};
  sum_over(groups_.world, mean);
  result.loss = mean[0] / static_cast<double>(layout_.world_size()) * static_cast<double>(layout_.pp());
  if (graphed) result.non_finite = !std::isfinite(result.loss) || !std::isfinite(result.grad_norm);  // updated anyway
  const auto update_start = Clock::now();
  std::optional<trace::Span> update(std::in_place, "update", "step");
  if (!graphed) {
    if (scaler_.is_enabled()) scaler_.unscale_(*optimizer_);  // records whether a grad overflowed
    if (tp_ && zero()) tp_->reduce_partial_grads(*reducer());  // on the optimizer's pieces
    else if (tp_) tp_->reduce_partial_grads();
    result.grad_norm = grad_norm();
    // A loss-scaled step whose grads overflowed is skipped, and the scale backs off; else one
    // whose loss or norm is not finite, with skip_non_finite.
    result.non_finite = !scaler_.is_enabled() && (!std::isfinite(result.loss) || !std::isfinite(result.grad_norm));
    result.skipped = scaler_.is_enabled() ? !std::isfinite(result.grad_norm)
                                          : result.non_finite && options_.skip_non_finite;
    // Clipping's scale is folded into the update (no pass over the grads of its own).
    if (!result.skipped)
      optimizer_->scaled_step(options_.grad_clip > 0 ? optim::clip_coefficient(result.grad_norm, options_.grad_clip)
                                                     : 1.0);
    if (scaler_.is_enabled()) scaler_.update();
  }
  if (zero()) reducer()->all_gather_parameters().wait();  // every rank's updated blocks
  if (pipeline_) pipeline_->share_tied_parameters();      // the first stage's to the last
  synchronize(options_.device);  // the update: the clock read next covers the device's work
  result.update_ms = ms_since(update_start);
  update.reset();
  ++steps_;
  return result;
}

double TrainingPlan::grad_norm() const {
  std::vector<Tensor> held[2];  // gradients this rank holds: tensor-parallel shards, the rest
  for (const OptimizedTensor& t : optimized_tensors())
    held[tp_ && tp_->shard_spec(t.parameter).sharded() ? 0 : 1].push_back(t.tensor);
  if (!tp_ && !zero() && !pipeline_) return optim::total_grad_norm(held[1]);
  std::vector<double> squares = {squared_norm(held[0]), squared_norm(held[1])};
  if (zero()) sum_over(reducer()->group(), squares);  // disjoint blocks over the data-parallel ranks
  std::vector<double> shards = {squares[0]};
  if (tp_) sum_over(groups_.tp, shards);  // replicated ones are alike on every tensor-parallel rank
  std::vector<double> total = {shards[0] + squares[1]};
  if (pipeline_) sum_over(groups_.pp, total);  // each stage's own parameters
  return std::sqrt(total[0]);
}

double TrainingPlan::loss(const std::vector<data::Example>& batches) {
  NoGradGuard no_grad;
  if (pipeline_) return pipeline_->loss(batches);
  double total = 0;
  for (const data::Example& batch : batches)
    total += forward_loss(batch.data.to(options_.device), batch.target.to(options_.device)).item<double>();
  if (units_) units_->release_all();
  return total / static_cast<double>(batches.size());
}

std::int64_t TrainingPlan::whole_model_parameters() const {
  std::vector<double> count = {0};
  for (const Tensor& p : pipeline_ ? pipeline_->trained_parameters() : model_.module->parameters())
    count[0] += static_cast<double>(tp_ && tp_->shard_spec(p).sharded() ? p.numel() * layout_.tp() : p.numel());
  if (pipeline_) sum_over(groups_.pp, count);
  return std::llround(count[0]);
}

Tensor TrainingPlan::pipeline_logits(const Tensor& idx) const {
  if (!pipeline_) throw Error("TrainingPlan.pipeline_logits", "the model is not pipelined (pp = 1)");
  return pipeline_->logits(idx);
}

nn::Named<Tensor> TrainingPlan::gather_stage_parameters() const {
  if (!pipeline_) throw Error("TrainingPlan.gather_stage_parameters", "the model is not pipelined (pp = 1)");
  return pipeline_->gather_parameters();
}

}  // namespace infini::parallel
