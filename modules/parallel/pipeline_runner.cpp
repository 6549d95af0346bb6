// PipelineRunner (see pipeline_runner.cppm).
module;
#include <cmath>
#include <cstdint>
module infini.parallel;
import infini.std;

namespace infini::parallel {

namespace {

bool contains(const std::vector<Tensor>& list, const Tensor& t) {
  for (const Tensor& x : list)
    if (x.is_same(t)) return true;
  return false;
}

Task run_step(const Schedule& schedule, ModelStage& stage) {
  co_await schedule(stage);
  co_await stage.finish();
}

// The names of a part's parameters, one per line, as a uint8 tensor (a message).
Tensor encode_names(const nn::Named<Tensor>& named) {
  std::string text;
  for (const auto& [name, tensor] : named) text += name + "\n";
  Tensor bytes = empty({static_cast<std::int64_t>(text.size())}, {.dtype = kUInt8});
  std::copy(text.begin(), text.end(), bytes.data_ptr<std::uint8_t>());
  return bytes;
}

std::vector<std::string> decode_names(const Tensor& bytes) {
  std::vector<std::string> names(1);
  const auto* data = bytes.data_ptr<std::uint8_t>();
  for (std::int64_t i = 0; i < bytes.numel(); ++i)
    if (data[i] == '\n')
      names.emplace_back();
    else
      names.back() += static_cast<char>(data[i]);
  names.pop_back();  // after the last newline
  return names;
}

}  // namespace

PipelineRunner::PipelineRunner(StagedModel model, ParallelGroups groups, const Layout& layout,
                               std::vector<std::pair<int, int>> blocks_of_virtual_stage, const std::string& schedule,
                               int micro_batches, PipelineOptions options)
    : staged_(std::move(model)),
      groups_(std::move(groups)),
      tp_(std::move(options.tp)),
      zero_stage_(options.zero_stage),
      shape_{.stages = layout.pp(), .virtual_stages = layout.vpp(), .micro_batches = micro_batches},
      schedule_(schedule_by_name(schedule)),
      blocks_(std::move(blocks_of_virtual_stage)) {
  check_schedule_shape(schedule, shape_);
  if (options.zero_stage > ZeroStage::kParameters)
    throw Error("PipelineRunner", concat("zero_stage ", static_cast<int>(options.zero_stage), ": expected 0, 1, 2 or 3"));
  simulate_pipeline(schedule_, shape_, {});  // the dry run: every call valid, nothing left waiting
  const nn::ModelPart expected = stage_part(shape_, groups_.coord.pp, blocks_);
  if (staged_.part.blocks != expected.blocks || staged_.part.embed != expected.embed ||
      staged_.part.head != expected.head || staged_.blocks.size() != staged_.part.blocks.size())
    throw Error("PipelineRunner", concat("pipeline rank ", groups_.coord.pp, " must hold ", expected.str(), " (with ",
                                         expected.blocks.size(), " block modules), got ", staged_.part.str(), " with ",
                                         staged_.blocks.size()));
  model_ = {.embed = staged_.embed,
            .blocks = std::vector<std::shared_ptr<nn::Module>>(static_cast<std::size_t>(staged_.num_blocks)),
            .head_loss = staged_.head_loss,
            .checkpoint_blocks = options.checkpoint_blocks,
            .device = options.device,
            .autocast = options.autocast};
  for (std::size_t i = 0; i < staged_.blocks.size(); ++i)
    model_.blocks.at(static_cast<std::size_t>(staged_.part.blocks[i])) = staged_.blocks[i];
  if (shape_.stages > 1) embedding_group_ = groups_.pp->new_group({0, shape_.stages - 1}, "embedding");
  if (groups_.dp->size() > 1) {
    std::vector<std::string> names;  // of trained_parameters(), for the reducer's errors
    for (const auto& [name, p] : staged_.module->named_parameters())
      if (!holds_tied_copy(p)) names.push_back(name);
    // ZeRO-2 with virtual stages: a gradient pass has one chunk's gradients, so each chunk's
    // parameters get buckets of their own, reduce-scattered by that chunk's passes. ZeRO-3:
    // each block's parameters one bucket, each of the rest's its own (assign_units), and a
    // pass reduces its chunk's.
    const bool by_chunk = zero_stage_ >= ZeroStage::kGradients && shape_.virtual_stages > 1;
    const bool zero3 = zero_stage_ == ZeroStage::kParameters;
    const std::vector<int> chunk_of = chunk_of_parameters();
    UnitAssignment units;
    if (zero3) units = assign_units(trained_parameters(), staged_.blocks);
    std::vector<int> groups = zero3 ? units.group_of : by_chunk ? chunk_of : std::vector<int>{};
    if (by_chunk) {
      pass_groups_.resize(static_cast<std::size_t>(shape_.virtual_stages));
      for (std::size_t i = 0; i < groups.size(); ++i) {
        std::vector<int>& list = pass_groups_.at(static_cast<std::size_t>(chunk_of[i]));
        if (std::ranges::find(list, groups[i]) == list.end()) list.push_back(groups[i]);
      }
    }
    // ZeRO-3 under autocast: the linear layers' weights gathered in its dtype, as the plan's.
    std::vector<DataType> dtypes;
    if (zero3) dtypes = gather_dtypes(*staged_.module, trained_parameters(), options.autocast);
    reducer_ = std::make_unique<Reducer>(trained_parameters(), std::move(names), groups_.dp,
                                         ReducerOptions{.buckets = zero3 ? kBucketPerGroup : BucketOptions{},
                                                        .zero = zero_stage_,
                                                        .gather_dtypes = std::move(dtypes),
                                                        .finalize_explicitly = true,
                                                        .bucket_groups = std::move(groups)});
    reducer_->set_sync(false);
    if (zero3) shard_blocks(units);
  }
}

void PipelineRunner::shard_blocks(const UnitAssignment& assignment) {
  // Block staged_.blocks[i] (part.blocks[i] of the whole model) is unit i; the next and previous
  // ones are prefetched when they are this rank's and of the same chunk (consecutive).
  units_ = std::make_unique<ParameterUnits>(*reducer_, assignment);
  std::vector<int> local(static_cast<std::size_t>(staged_.num_blocks), -1);  // whole-model index -> unit
  for (std::size_t i = 0; i < staged_.part.blocks.size(); ++i)
    local.at(static_cast<std::size_t>(staged_.part.blocks[i])) = static_cast<int>(i);
  model_.block_runner = [units = units_.get(), local, blocks = staged_.blocks,
                         checkpoint = model_.checkpoint_blocks](int b, const Tensor& x) {
    const auto unit_at = [&](int block) -> std::optional<std::size_t> {
      if (block < 0 || block >= static_cast<int>(local.size()) || local[static_cast<std::size_t>(block)] < 0)
        return std::nullopt;
      return static_cast<std::size_t>(local[static_cast<std::size_t>(block)]);
    };
    const std::size_t unit = *unit_at(b);
    return units->run_block(unit, blocks[unit], x, checkpoint, unit_at(b + 1), unit_at(b - 1));
  };
  model_.around_weight_pass = [units = units_.get(), local](int first, int end, bool before) {
    for (int b = first; b < end; ++b) {
      const auto unit = static_cast<std::size_t>(local.at(static_cast<std::size_t>(b)));
      if (before)
        units->prefetch(unit);
      else
        units->release(unit);
    }
    if (before)
      for (int b = first; b < end; ++b) units->gather(static_cast<std::size_t>(local.at(static_cast<std::size_t>(b))));
  };
}

double PipelineRunner::step(const std::vector<data::Example>& micro_batches) {
  // The reducer syncs in each chunk's last gradient pass (its buckets launched in the
  // cool-down), under ZeRO-2 in every pass, each reduce-scattered as it ends (with virtual
  // stages, the pass's chunk's buckets only).
  ModelStage::AroundGradients around;
  if (reducer_ && zero_stage_ >= ZeroStage::kGradients)
    around = [reducer = reducer_.get(), &pass_groups = pass_groups_](int chunk, bool, bool before) {
      reducer->set_sync(before,
                        pass_groups.empty() ? std::vector<int>{} : pass_groups.at(static_cast<std::size_t>(chunk)));
      if (!before) reducer->finalize();
    };
  else if (reducer_)
    around = [reducer = reducer_.get()](int, bool last, bool before) {
      if (last) reducer->set_sync(before);
    };
  ModelStage stage(groups_.pp, shape_, model_, blocks_, micro_batches,
                   1.0 / static_cast<double>(shape_.micro_batches), std::move(around));
  if (units_) units_->gather(units_->rest());  // ZeRO-3: through the step's passes
  run(run_step(schedule_, stage));
  if (units_) units_->release_all();
  return stage.loss_sum();
}

bool PipelineRunner::holds_tied_copy(const Tensor& p) const {
  return groups_.coord.pp != 0 && contains(staged_.tied_parameters, p);
}

std::vector<int> PipelineRunner::chunk_of_parameters() const {
  // A block's parameters belong to the chunk holding it; the embedding to chunk 0 (virtual
  // stage 0, on pipeline rank 0) and the head to the last chunk (the last virtual stage).
  std::vector<int> chunk_of_block(static_cast<std::size_t>(staged_.num_blocks), -1);
  for (int c = 0; c < shape_.virtual_stages; ++c) {
    const auto [first, end] = blocks_.at(static_cast<std::size_t>(shape_.virtual_stage(groups_.coord.pp, c)));
    for (int b = first; b < end; ++b) chunk_of_block.at(static_cast<std::size_t>(b)) = c;
  }
  const int outside = groups_.coord.pp == 0 ? 0 : shape_.virtual_stages - 1;
  std::vector<int> chunks;
  for (const Tensor& p : trained_parameters()) {
    int chunk = outside;
    for (std::size_t i = 0; i < staged_.blocks.size(); ++i)
      if (contains(staged_.blocks[i]->parameters(), p))
        chunk = chunk_of_block.at(static_cast<std::size_t>(staged_.part.blocks[i]));
    chunks.push_back(chunk);
  }
  return chunks;
}

std::vector<Tensor> PipelineRunner::trained_parameters() const {
  std::vector<Tensor> params;
  for (const Tensor& p : staged_.module->parameters())
    if (!holds_tied_copy(p)) params.push_back(p);
  return params;
}

void PipelineRunner::finish_gradients() {
  NoGradGuard no_grad;
  if (reducer_) reducer_->finalize();
  if (!embedding_group_) return;  // rank 0 of it is the first stage
  for (const Tensor& p : staged_.tied_parameters) {
    const bool released = zero_stage_ >= ZeroStage::kGradients && reducer_ && !holds_tied_copy(p);  // in the pieces
    if (!released && !p.grad().defined())
      throw Error("PipelineRunner", concat("a tied parameter of shape ", p.shape(), " has no gradient on pipeline rank ",
                                           groups_.coord.pp, " after the step"));
    // The first stage's copy is averaged by the reducer; the sum of the averages is the
    // average of the sums. The two stages' sum is an all-reduce, not a reduce to the first
    // stage: the backend's ring shows its progress chunk by chunk, where MPI_Ireduce of a
    // 147 MiB table progressed only while polled, a fragment per poll between sleeps (11 s
    // of a GPT-2 d12 step at dp 2 x pp 2 on 2 cores). The last stage drops its copy after.
    if (holds_tied_copy(p) && groups_.dp->size() > 1) groups_.dp->all_reduce(p.grad(), {.op = ReduceOp::Avg}).wait();
    if (holds_tied_copy(p)) {
      embedding_group_->all_reduce(p.grad()).wait();
      p.set_grad(Tensor());
    } else if (reducer_ && zero_stage_ >= ZeroStage::kOptimizerState) {
      add_tied_gradient_to_pieces(p);
    } else {
      embedding_group_->all_reduce(p.grad()).wait();
    }
  }
}

void PipelineRunner::add_tied_gradient_to_pieces(const Tensor& p) {
  // The first stage's averaged gradient of p is in its pieces; the last stage's average comes
  // whole (this rank adds zeros to the sum) and each piece takes its block of it.
  Tensor last = zeros_like(p);
  embedding_group_->all_reduce(last).wait();
  const Tensor flat = last.reshape({-1});
  const std::vector<Tensor>& pieces = reducer_->shard_pieces();
  for (std::size_t k = 0; k < pieces.size(); ++k) {
    if (!reducer_->parameters().at(reducer_->shard_owners()[k]).is_same(p)) continue;
    kernels::accumulate_(pieces[k].grad(), flat.narrow(0, reducer_->shard_offsets()[k], pieces[k].numel()));
  }
}

void PipelineRunner::share_tied_parameters() {
  NoGradGuard no_grad;
  if (!embedding_group_) return;
  if (units_ && groups_.coord.pp == 0) units_->gather(units_->rest());  // ZeRO-3: the updated table
  for (const Tensor& p : staged_.tied_parameters) embedding_group_->broadcast(p, 0).wait();
  if (units_) units_->release_all();
}

double PipelineRunner::grad_norm() const {
  std::vector<Tensor> params[2];  // tensor-parallel shards, the rest
  for (const Tensor& p : trained_parameters()) params[tp_ && tp_->shard_spec(p).sharded() ? 0 : 1].push_back(p);
  const auto squares = [](const std::vector<Tensor>& list) { return std::pow(optim::total_grad_norm(list), 2); };
  Tensor sharded = full({1}, squares(params[0]), TensorOptions{.dtype = kFloat64});
  groups_.tp->all_reduce(sharded).wait();
  Tensor total = full({1}, sharded.item<double>() + squares(params[1]), TensorOptions{.dtype = kFloat64});
  groups_.pp->all_reduce(total).wait();
  return std::sqrt(total.item<double>());
}

double PipelineRunner::loss(const std::vector<data::Example>& batches) const {
  if (units_) units_->gather(units_->rest());  // ZeRO-3 (the blocks: each as it runs)
  double total = 0;
  for (const data::Example& batch : batches) {
    // The loss on the last stage: the targets go there (every rank has the batch).
    const Tensor out = pipeline_forward(*groups_.pp, shape_, model_, blocks_, batch.data,
                                        [&](const Tensor& x) {
                                          return staged_.head_loss(x, batch.target.to(model_.device));
                                        });
    if (out.defined()) total += out.item<double>();
  }
  Tensor sum_over_stages = full({1}, total, TensorOptions{.dtype = kFloat64});  // nonzero on the last stage only
  groups_.pp->all_reduce(sum_over_stages).wait();
  if (units_) units_->release_all();
  return sum_over_stages.item<double>() / static_cast<double>(batches.size());
}

Tensor PipelineRunner::logits(const Tensor& idx) const {
  std::optional<nn::SequenceParallelPause> pause;  // every position on every rank
  if (tp_) pause.emplace(*tp_, true);
  if (units_) units_->gather(units_->rest());  // ZeRO-3 (the blocks: each as it runs)
  const Tensor out = pipeline_forward(*groups_.pp, shape_, model_, blocks_, idx, staged_.logits);
  if (units_) units_->release_all();
  const int last = shape_.last_virtual_stage() % shape_.stages;
  constexpr int kTag = (1 << 30) - 1;
  if (groups_.coord.pp == last) {
    for (int r = 0; r < shape_.stages; ++r)
      if (r != last) send_tensor(*groups_.pp, out, r, kTag).wait();
    return out;
  }
  return TensorReceive(*groups_.pp, last, kTag).wait();
}

nn::Named<Tensor> PipelineRunner::gather_parameters() const {
  NoGradGuard no_grad;
  if (units_) units_->hold_all();  // ZeRO-3: every rank's blocks of them
  const std::shared_ptr<void> drop_hold(nullptr, [units = units_.get()](void*) {
    if (units) units->drop_hold();
  });
  nn::Named<Tensor> whole;  // this rank's part, whole tensors (gathered over its tensor-parallel group)
  for (const auto& [name, p] : staged_.module->named_parameters()) {
    const nn::ShardSpec spec = tp_ ? tp_->shard_spec(p) : nn::ShardSpec{};
    whole.emplace_back(name, spec.sharded() ? tp_->gather_shards(p, spec) : p);
  }
  if (groups_.coord.tp != 0) return {};
  constexpr int kNamesTag = (1 << 30) - 2, kTensorTag = (1 << 30) - 3;
  if (groups_.coord.pp != 0) {  // names, then the tensors in that order, to pipeline rank 0
    send_tensor(*groups_.pp, encode_names(whole), 0, kNamesTag).wait();
    for (const auto& [name, t] : whole) send_tensor(*groups_.pp, t, 0, kTensorTag).wait();
    return {};
  }
  for (int r = 1; r < shape_.stages; ++r) {
    for (const std::string& name : decode_names(TensorReceive(*groups_.pp, r, kNamesTag).wait())) {
      Tensor t = TensorReceive(*groups_.pp, r, kTensorTag).wait();
      bool known = false;  // the last stage's copy of a tied parameter: already here
      for (const auto& entry : whole) known = known || entry.first == name;
      if (!known) whole.emplace_back(name, std::move(t));
    }
  }
  return whole;
}

}  // namespace infini::parallel
