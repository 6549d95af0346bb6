// ModelStage and the block split (see pipeline_model.cppm).
module;
#include <cstdint>
module infini.parallel;
import infini.std;

namespace infini::parallel {

std::vector<std::pair<int, int>> split_blocks(int blocks, int stages, const std::vector<int>& counts) {
  if (stages < 1) throw Error("split_blocks", concat("expected >= 1 stages, got ", stages));
  std::vector<int> n = counts;
  if (n.empty())
    for (int s = 0; s < stages; ++s) n.push_back(blocks / stages + (s < blocks % stages ? 1 : 0));
  if (static_cast<int>(n.size()) != stages)
    throw Error("split_blocks", concat("expected block counts for ", stages, " virtual stages, got ", n.size()));
  if (std::accumulate(n.begin(), n.end(), 0) != blocks)
    throw Error("split_blocks", concat("the block counts add up to ", std::accumulate(n.begin(), n.end(), 0),
                                       ", the model has ", blocks));
  std::vector<std::pair<int, int>> ranges;
  int first = 0;
  for (int s = 0; s < stages; ++s) {
    if (n[static_cast<std::size_t>(s)] < 1)
      throw Error("split_blocks", concat("virtual stage ", s, " would hold no blocks (", blocks, " blocks over ", stages,
                                         " virtual stages)"));
    ranges.emplace_back(first, first + n[static_cast<std::size_t>(s)]);
    first += n[static_cast<std::size_t>(s)];
  }
  return ranges;
}

nn::ModelPart stage_part(const PipelineShape& shape, int rank, const std::vector<std::pair<int, int>>& blocks_of_virtual_stage) {
  if (static_cast<int>(blocks_of_virtual_stage.size()) != shape.last_virtual_stage() + 1)
    throw Error("stage_part", concat("expected block ranges for ", shape.last_virtual_stage() + 1, " virtual stages, got ",
                                     blocks_of_virtual_stage.size()));
  nn::ModelPart part{.blocks = {}, .embed = rank == 0, .head = rank == shape.last_virtual_stage() % shape.stages};
  for (int c = 0; c < shape.virtual_stages; ++c) {
    const auto [first, last] = blocks_of_virtual_stage[static_cast<std::size_t>(shape.virtual_stage(rank, c))];
    for (int b = first; b < last; ++b) part.blocks.push_back(b);
  }
  return part;
}

Tensor run_block(const std::shared_ptr<nn::Module>& block, const Tensor& x, bool checkpoint) {
  if (!checkpoint) return (*block)(x);
  return autograd::checkpoint([block](const Tensor& t) { return (*block)(t); }, x);
}

Tensor PipelineModel::run_block(int b, const Tensor& x) const {
  if (block_runner) return block_runner(b, x);
  return parallel::run_block(blocks.at(static_cast<std::size_t>(b)), x, checkpoint_blocks);
}

std::optional<AutocastGuard> PipelineModel::forward_precision() const {
  if (!autocast) return std::nullopt;
  return std::optional<AutocastGuard>(std::in_place, device.type, *autocast);
}

Tensor pipeline_forward(ProcessGroup& group, const PipelineShape& shape, const PipelineModel& model,
                        const std::vector<std::pair<int, int>>& blocks_of_virtual_stage, const Tensor& idx,
                        const std::function<Tensor(const Tensor& x)>& last) {
  constexpr int kTag = 1 << 30;  // + the receiving virtual stage; apart from ModelStage's tags
  if (group.size() != shape.stages)
    throw Error("pipeline_forward", concat("a pipeline of ", shape.stages, " stages needs a group of as many ranks, got ",
                                           group.size()));
  NoGradGuard no_grad;
  const std::optional<AutocastGuard> autocast = model.forward_precision();
  const int rank = group.rank(), final_stage = shape.last_virtual_stage();
  Tensor result;
  for (int s = rank; s <= final_stage; s += shape.stages) {
    Tensor x = s == 0 ? model.embed(idx.to(model.device))
                      : TensorReceive(group, (s - 1) % shape.stages, kTag + s).wait();
    const auto [first, end] = blocks_of_virtual_stage.at(static_cast<std::size_t>(s));
    for (int b = first; b < end; ++b) x = model.run_block(b, x);
    if (s == final_stage)
      result = last(x);
    else
      send_tensor(group, x, (s + 1) % shape.stages, kTag + s + 1).wait();
  }
  return result;
}

ModelStage::ModelStage(std::shared_ptr<ProcessGroup> group, PipelineShape shape, const PipelineModel& model,
                       std::vector<std::pair<int, int>> blocks_of_virtual_stage,
                       std::vector<data::Example> micro_batches, double loss_scale,
                       AroundGradients around_gradients)
    : group_(std::move(group)),
      rank_(group_->rank()),
      shape_(shape),
      model_(model),
      blocks_(std::move(blocks_of_virtual_stage)),
      batches_(std::move(micro_batches)),
      loss_scale_(loss_scale),
      checker_(rank_, shape),
      around_gradients_(std::move(around_gradients)),
      gradient_passes_(static_cast<std::size_t>(shape.virtual_stages), 0) {
  if (group_->size() != shape_.stages)
    throw Error("ModelStage", concat("a pipeline of ", shape_.stages, " stages needs a group of as many ranks, got ",
                                     group_->size()));
  if (static_cast<int>(blocks_.size()) != shape_.stages * shape_.virtual_stages)
    throw Error("ModelStage", concat("expected block ranges for ", shape_.stages * shape_.virtual_stages,
                                     " virtual stages, got ", blocks_.size()));
  if (static_cast<int>(batches_.size()) != shape_.micro_batches)
    throw Error("ModelStage", concat("expected ", shape_.micro_batches, " micro-batches, got ", batches_.size()));
  for (int c = 0; c < shape_.virtual_stages; ++c)
    for (int i = 0; i < shape_.micro_batches; ++i) {
      const int s = shape_.virtual_stage(rank_, c);
      if (s > 0)
        receives_[{kActivation, i, s}] = std::make_unique<TensorReceive>(*group_, rank_of(s - 1), tag(kActivation, i, s));
      if (s < shape_.last_virtual_stage())
        receives_[{kGradient, i, s}] = std::make_unique<TensorReceive>(*group_, rank_of(s + 1), tag(kGradient, i, s));
    }
}

// Activations and gradients apart (with two ranks "next" and "previous" are the same rank),
// every (micro-batch, receiving virtual stage) its own.
int ModelStage::tag(Kind kind, int micro, int stage) const {
  return (micro * (shape_.last_virtual_stage() + 1) + stage) * 2 + kind;
}

TensorReceive& ModelStage::receive(Kind kind, int micro, int stage) { return *receives_.at({kind, micro, stage}); }

namespace {

// --profile: the time a pass waited for its input, as a "wait" slice.
void record_wait(std::string_view what, std::int64_t start_us) {
  if (!trace::recording()) return;
  trace::add({.name = std::string(what), .category = "wait", .ts_us = start_us,
              .duration_us = trace::now_us() - start_us, .track = trace::thread_track(), .id = 0, .args = {}});
}

}  // namespace

Task ModelStage::forward(int micro, int chunk) {
  checker_.check(PipelineOp::Forward, micro, chunk);
  const int s = shape_.virtual_stage(rank_, chunk);
  Saved saved;
  Tensor x;
  if (s > 0) {
    const std::int64_t wait_start = trace::now_us();
    saved.input = co_await receive(kActivation, micro, s).tensor();
    record_wait("receive activation", wait_start);
  }
  const trace::Span span(concat("F ", micro, ".", chunk), "pipeline");
  const std::optional<AutocastGuard> autocast = model_.forward_precision();  // after the wait
  const data::Example& batch = batches_[static_cast<std::size_t>(micro)];
  if (s == 0) {
    x = model_.embed(batch.data.to(model_.device));
  } else {
    saved.input.requires_grad_(true);
    x = saved.input;
  }
  for (int b = blocks_[static_cast<std::size_t>(s)].first; b < blocks_[static_cast<std::size_t>(s)].second; ++b)
    x = model_.run_block(b, x);
  if (s == shape_.last_virtual_stage()) {
    saved.output = model_.head_loss(x, batch.target.to(model_.device));
    loss_sum_ += saved.output.item<double>();
  } else {
    saved.output = x;
    sends_.push_back(send_tensor(*group_, x.detach(), rank_of(s + 1), tag(kActivation, micro, s + 1)));
  }
  saved_[{micro, chunk}] = std::move(saved);
}

Task ModelStage::backward(int micro, int chunk) { return input_gradient(PipelineOp::Backward, micro, chunk); }

Task ModelStage::backward_input(int micro, int chunk) {
  return input_gradient(PipelineOp::BackwardInput, micro, chunk);
}

Task ModelStage::input_gradient(PipelineOp op, int micro, int chunk) {
  checker_.check(op, micro, chunk);
  const int s = shape_.virtual_stage(rank_, chunk);
  Saved& saved = saved_.at({micro, chunk});
  const std::int64_t wait_start = trace::now_us();
  const Tensor output_grad = s == shape_.last_virtual_stage() ? full_like(saved.output, loss_scale_)
                                                              : co_await receive(kGradient, micro, s).tensor();
  if (s != shape_.last_virtual_stage()) record_wait("receive gradient", wait_start);
  const trace::Span span(concat(op == PipelineOp::Backward ? "B " : "I ", micro, ".", chunk), "pipeline");
  Tensor input_grad;
  if (op == PipelineOp::Backward) {
    gradient_pass(chunk, [&] { autograd::backward({saved.output}, {output_grad}); });
    if (s > 0) input_grad = saved.input.grad();
    saved_.erase({micro, chunk});
  } else {
    const TensorList inputs = s > 0 ? TensorList{saved.input} : TensorList{};
    const TensorList grads = autograd::backward_input({saved.output}, inputs, {output_grad}, saved.deferred);
    if (s > 0) input_grad = grads[0];
  }
  if (s > 0) sends_.push_back(send_tensor(*group_, input_grad, rank_of(s - 1), tag(kGradient, micro, s - 1)));
}

Task ModelStage::backward_weight(int micro, int chunk) {
  checker_.check(PipelineOp::BackwardWeight, micro, chunk);
  const trace::Span span(concat("W ", micro, ".", chunk), "pipeline");
  Saved& saved = saved_.at({micro, chunk});
  const auto [first, end] = blocks_[static_cast<std::size_t>(shape_.virtual_stage(rank_, chunk))];
  if (model_.around_weight_pass) model_.around_weight_pass(first, end, true);
  try {
    gradient_pass(chunk, [&] { autograd::backward_weight(saved.deferred); });
  } catch (...) {
    if (model_.around_weight_pass) model_.around_weight_pass(first, end, false);
    throw;
  }
  if (model_.around_weight_pass) model_.around_weight_pass(first, end, false);
  saved_.erase({micro, chunk});
  co_return;
}

void ModelStage::gradient_pass(int chunk, const std::function<void()>& pass) {
  const bool last = ++gradient_passes_.at(static_cast<std::size_t>(chunk)) == shape_.micro_batches;
  if (!around_gradients_) return pass();
  around_gradients_(chunk, last, true);
  try {
    pass();
  } catch (...) {
    around_gradients_(chunk, last, false);
    throw;
  }
  around_gradients_(chunk, last, false);
}

Task ModelStage::finish() {
  co_await when_all(sends_);
  checker_.finish();
}

}  // namespace infini::parallel
