#include "pipeline_runner.h"

#include <cmath>
#include <coroutine>
#include <utility>

namespace samples {

using namespace infini;
using namespace infini::parallel;

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

}  // namespace

PipelineRunner::PipelineRunner(const LanguageModel& lm, const ParallelGroups& groups, const Layout& layout,
                               const std::string& schedule, int micro_batches, const std::vector<int>& block_counts)
    : lm_(lm),
      groups_(groups),
      shape_{.stages = layout.pp(), .virtual_stages = layout.vpp(), .micro_batches = micro_batches},
      schedule_(schedule_by_name(schedule)) {
  check_schedule_shape(schedule, shape_);
  simulate_pipeline(schedule_, shape_, {});  // the dry run: every call valid, nothing left waiting
  const int blocks = static_cast<int>(lm.blocks.size());
  blocks_of_stage_ = split_blocks(blocks, shape_.stages * shape_.virtual_stages, block_counts);
  model_ = {.embed = lm.embed, .blocks = lm.blocks,
            .head_loss = [&lm](const Tensor& x, const Tensor& targets) { return lm.loss(lm.head(x), targets); }};
  if (shape_.stages > 1) embedding_group_ = groups.pp->new_group({0, shape_.stages - 1}, "embedding");
  // Owners: a block's parameters belong to its stage's rank, embed's to rank 0 (the tied ones
  // too), the rest (the head) to the last rank.
  std::vector<int> stage_of_block(static_cast<std::size_t>(blocks));
  for (std::size_t s = 0; s < blocks_of_stage_.size(); ++s)
    for (int b = blocks_of_stage_[s].first; b < blocks_of_stage_[s].second; ++b)
      stage_of_block[static_cast<std::size_t>(b)] = static_cast<int>(s) % shape_.stages;
  for (const Tensor& p : lm.module->parameters()) {
    int owner = shape_.stages - 1;
    if (contains(lm.embed_parameters, p)) owner = 0;
    for (int b = 0; b < blocks; ++b)
      if (contains(lm.blocks[static_cast<std::size_t>(b)]->parameters(), p)) owner = stage_of_block[static_cast<std::size_t>(b)];
    owner_.push_back(owner);
  }
}

double PipelineRunner::step(const std::vector<data::Example>& micro_batches) {
  ModelStage stage(groups_.pp, shape_, model_, blocks_of_stage_, micro_batches,
                   1.0 / static_cast<double>(shape_.micro_batches));
  run(run_step(schedule_, stage));
  return stage.loss_sum();
}

void PipelineRunner::finish_gradients() {
  NoGradGuard no_grad;
  if (embedding_group_ && shape_.stages > 1)
    for (const Tensor& p : lm_.tied_parameters)
      if (p.grad().defined()) embedding_group_->all_reduce(p.grad()).wait();
  if (groups_.dp->size() == 1) return;
  TensorList grads;  // the same parameters on every rank of the dp group (the same stage)
  for (const Tensor& p : lm_.module->parameters())
    if (p.grad().defined()) grads.push_back(p.grad());
  TensorList flat;
  for (const Tensor& g : grads) flat.push_back(g.reshape({-1}));
  Tensor buffer = cat(flat, 0);
  groups_.dp->all_reduce(buffer, {.op = parallel::ReduceOp::Avg}).wait();
  std::int64_t offset = 0;
  for (Tensor& g : grads) {
    g.copy_(buffer.slice(0, offset, offset + g.numel()).view(g.shape()));
    offset += g.numel();
  }
}

double PipelineRunner::grad_norm(const std::vector<Tensor>& params, const TensorParallel* tp) const {
  NoGradGuard no_grad;
  double sums[2] = {0, 0};  // tensor-parallel shards, the rest
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    if (owner_[i] != groups_.coord.pp || !p.grad().defined()) continue;
    const Tensor g = p.grad().to(kFloat64);
    sums[tp && tp->shard_spec(p).sharded() ? 0 : 1] += sum(mul(g, g)).item<double>();
  }
  Tensor sharded = full({1}, sums[0], TensorOptions{.dtype = kFloat64});
  groups_.tp->all_reduce(sharded).wait();
  Tensor total = full({1}, sharded.item<double>() + sums[1], TensorOptions{.dtype = kFloat64});
  groups_.pp->all_reduce(total).wait();
  return std::sqrt(total.item<double>());
}

void PipelineRunner::share_weights() {
  NoGradGuard no_grad;
  const std::vector<Tensor> params = lm_.module->parameters();
  for (std::size_t i = 0; i < params.size(); ++i) groups_.pp->broadcast(params[i], owner_[i]).wait();
}

}  // namespace samples
