// parallel::PipelineRunner over a user's model built from nn layers (an embedding, four
// Linear-Tanh blocks, a head whose weight is the embedding's table, tied as GPT-2's), split
// over the world as pipeline stages that each hold only their part: three SGD steps of 1F1B
// give the losses, gradient norms and weights of the same model trained on one process (the
// last stage's copy of the table too), and validation and the gathered parameters match it.
// The same model through a TrainingPlan: data parallel and data x pipeline parallel, with and
// without ZeRO-1 / ZeRO-2 and activation checkpointing, train as one process does on all the ranks'
// micro-batches.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "comm_test_util.h"

import infini.parallel;

namespace infini::parallel::test::pipeline_runner_test {
namespace {

constexpr std::int64_t kVocab = 40, kChannels = 16, kBlocks = 4, kMicroBatches = 4;

// The head: x (B, T, C) -> x table^T + bias (B, T, V), with the embedding's table.
struct TiedHeadImpl : nn::Module {
  std::shared_ptr<nn::EmbeddingImpl> table;
  Tensor bias;
  explicit TiedHeadImpl(std::shared_ptr<nn::EmbeddingImpl> embed) : table(std::move(embed)) {
    bias = register_parameter("bias", mul(randn({kVocab}), 0.1));
  }
  Tensor forward(const Tensor& x) override { return linear(x, table->weight, bias); }
};

// The whole model, drawn from `seed`: named as a user's model would be ("embed", "h.<l>",
// "head").
struct UserModel {
  std::shared_ptr<nn::EmbeddingImpl> embed;
  std::vector<std::shared_ptr<nn::Module>> blocks;
  std::shared_ptr<TiedHeadImpl> head;

  explicit UserModel(std::uint64_t seed) {
    manual_seed(seed);
    embed = std::make_shared<nn::EmbeddingImpl>(kVocab, kChannels);
    for (std::int64_t l = 0; l < kBlocks; ++l)
      blocks.push_back(nn::Sequential(nn::Linear(kChannels, kChannels), nn::Tanh()).ptr());
    head = std::make_shared<TiedHeadImpl>(embed);
  }
  static Tensor loss(const Tensor& logits, const Tensor& targets) {
    return cross_entropy(logits.reshape({-1, kVocab}), targets.reshape({-1}));
  }
  Tensor forward_loss(const data::Example& batch) const {
    Tensor x = (*embed)(batch.data);
    for (const auto& block : blocks) x = block->forward(x);
    return loss(head->forward(x), batch.target);
  }
};

// This rank's part of `whole` as the runner sees it: only the pieces `part` names, in a
// module of their own; the head's part holds the table too.
StagedModel staged(const UserModel& whole, const nn::ModelPart& part) {
  auto module = std::make_shared<nn::ModuleDictImpl>();
  StagedModel model;
  model.module = module;
  model.part = part;
  model.num_blocks = kBlocks;
  model.tied_parameters = {whole.embed->weight};
  if (part.embed || part.head) module->insert("embed", whole.embed);
  if (part.embed) model.embed = [embed = whole.embed](const Tensor& idx) { return (*embed)(idx); };
  for (const std::int64_t l : part.blocks) {
    module->insert("h" + std::to_string(l), whole.blocks[static_cast<std::size_t>(l)]);
    model.blocks.push_back(whole.blocks[static_cast<std::size_t>(l)]);
  }
  if (part.head) {
    module->insert("head", whole.head);
    model.head_loss = [head = whole.head](const Tensor& x, const Tensor& targets) {
      return UserModel::loss(head->forward(x), targets);
    };
    model.logits = [head = whole.head](const Tensor& x) { return head->forward(x); };
  }
  return model;
}

// Step s's micro-batches: (2, 5) token ids and the next tokens.
std::vector<data::Example> micro_batches(int step) {
  std::vector<data::Example> batches;
  for (int i = 0; i < kMicroBatches; ++i) {
    std::vector<std::int64_t> ids(12);
    for (std::size_t j = 0; j < ids.size(); ++j)
      ids[j] = static_cast<std::int64_t>((j * 7 + static_cast<std::size_t>(i) * 13 + static_cast<std::size_t>(step) * 5) %
                                         static_cast<std::size_t>(kVocab));
    const Tensor all = from_vector(ids, {2, 6});
    batches.push_back({all.slice(1, 0, 5).contiguous(), all.slice(1, 1, 6).contiguous()});
  }
  return batches;
}

// Forward and backward of `batches` on one process, their losses scaled by 1 / their count;
// returns the mean loss.
double reference_passes(const UserModel& reference, const std::vector<data::Example>& batches) {
  double mean = 0;
  for (const data::Example& batch : batches) {
    const Tensor loss = reference.forward_loss(batch);
    mean += loss.item<double>() / static_cast<double>(batches.size());
    div(loss, static_cast<double>(batches.size())).backward();
  }
  return mean;
}

TEST(PipelineRunner, UserModelTrainsLikeOneProcess) {
  auto pg = world();
  const Layout layout(pg->size(), 1, pg->size());
  const ParallelGroups groups = make_parallel_groups(layout, pg);
  const auto blocks = split_blocks(kBlocks, layout.pp());
  const PipelineShape shape{.stages = layout.pp(), .micro_batches = kMicroBatches};
  const nn::ModelPart part = stage_part(shape, groups.coord.pp, blocks);

  const UserModel reference(3), mine(3);  // the same weights; this rank trains its part of `mine`
  PipelineRunner pipeline(staged(mine, part), groups, layout, blocks, "1f1b", kMicroBatches);
  std::vector<Tensor> reference_params = reference.embed->parameters(), params;
  for (const auto& block : reference.blocks)
    for (const Tensor& p : block->parameters()) reference_params.push_back(p);
  for (const Tensor& p : reference.head->parameters()) reference_params.push_back(p);
  optim::SGD reference_sgd(reference_params, {.lr = 0.5});
  const std::vector<Tensor> part_params = staged(mine, part).module->parameters();
  // The first stage owns the table: the last one trains its copy only through it.
  const std::vector<Tensor> trained = pipeline.trained_parameters();
  EXPECT_EQ(trained.size(), part_params.size() - (part.head && groups.coord.pp != 0 ? 1 : 0));
  optim::SGD sgd(trained, {.lr = 0.5});
  std::int64_t held = 0;  // this rank's parameters: its part's only
  for (const Tensor& p : part_params) held += p.numel();
  const std::int64_t block = kChannels * kChannels + kChannels;
  EXPECT_EQ(held, static_cast<std::int64_t>(part.blocks.size()) * block +
                      (part.embed || part.head ? kVocab * kChannels : 0) + (part.head ? kVocab : 0));

  for (int step = 0; step < 3; ++step) {
    const auto batches = micro_batches(step);
    reference_sgd.zero_grad();
    const double reference_loss = reference_passes(reference, batches);
    sgd.zero_grad();
    Tensor loss = full({1}, pipeline.step(batches) / kMicroBatches, {.dtype = kFloat64});  // on the last stage
    pipeline.finish_gradients();
    groups.pp->all_reduce(loss).wait();
    EXPECT_NEAR(loss.item<double>(), reference_loss, 1e-5) << "step " << step;
    const double reference_norm = optim::total_grad_norm(reference_params);
    EXPECT_NEAR(pipeline.grad_norm(), reference_norm, 1e-5 * reference_norm) << "step " << step;
    reference_sgd.step();
    sgd.step();
    pipeline.share_tied_parameters();
    if (part.embed || part.head)  // either end's copy of the table
      expect_near(mine.embed->weight, reference.embed->weight, 1e-5, "embed.weight, step " + std::to_string(step));
  }

  // Validation through the stages, and the whole model gathered on rank 0.
  NoGradGuard no_grad;
  const auto held_out = micro_batches(7);
  double reference_loss = 0;
  for (const data::Example& batch : held_out) reference_loss += reference.forward_loss(batch).item<double>() / kMicroBatches;
  EXPECT_NEAR(pipeline.loss(held_out), reference_loss, 1e-5);
  const nn::Named<Tensor> gathered = pipeline.gather_parameters();
  if (groups.coord.pp != 0) {
    EXPECT_TRUE(gathered.empty());
    return;
  }
  ASSERT_EQ(gathered.size(), 1 + 2 * kBlocks + 1);  // embed.weight, h<l>.0.weight / bias, head.bias
  for (const auto& [name, tensor] : gathered) {
    const Tensor& expected = name == "embed.weight" ? reference.embed->weight
                             : name == "head.bias"  ? reference.head->bias
                                                    : Tensor();
    if (expected.defined()) {
      expect_near(tensor, expected, 1e-5, name);
      continue;
    }
    const std::int64_t l = name[1] - '0';  // "h<l>.0.weight"
    const auto& linear = *std::dynamic_pointer_cast<nn::SequentialImpl>(reference.blocks[static_cast<std::size_t>(l)]);
    expect_near(tensor, linear.named_parameters().at(name.ends_with("weight") ? 0 : 1).second, 1e-5, name);
  }
}

// The plan's layouts for this world: pp, ZeRO stage, activation checkpointing.
struct PlanLayout {
  int pp, zero_stage;
  bool checkpoint_blocks;
  std::string schedule = "1f1b";
};
std::vector<PlanLayout> plan_layouts(int world_size) {
  std::vector<PlanLayout> layouts = {{1, 0, false}, {1, 1, false}, {1, 2, false}, {1, 0, true}, {1, 3, false},
                                     {1, 3, true}};
  if (world_size % 2 == 0)
    layouts.insert(layouts.end(), {{2, 0, false},
                                   {2, 1, false},
                                   {2, 2, false},
                                   {2, 1, true},
                                   {2, 2, true, "zb-h1"},
                                   {2, 3, false},
                                   {2, 3, false, "zb-h1"},
                                   {2, 3, true, "zb-h1"},
                                   {2, 3, false, "gpipe"}});
  return layouts;
}

TEST(TrainingPlan, UserModelTrainsLikeOneProcessUnderEveryLayout) {
  auto pg = world();
  for (const auto& [pp, zero_stage, checkpoint_blocks, schedule] : plan_layouts(pg->size())) {
    const std::string name = concat("pp ", pp, " x dp ", pg->size() / pp, ", ZeRO ", zero_stage,
                                    checkpoint_blocks ? ", checkpointed blocks" : "", ", ", schedule);
    const Layout layout(pg->size(), 1, pp);
    const ParallelGroups groups = make_parallel_groups(layout, pg);
    const int dp = layout.dp(), m = kMicroBatches / dp;  // this data-parallel rank's micro-batches
    if (m == 0) continue;
    const UserModel reference(5), mine(5);
    nn::ModelPart part;
    const BuildModel build = [&](std::shared_ptr<TensorParallel> tp, const PartFor& part_for) {
      EXPECT_EQ(tp, nullptr);
      part = part_for(kBlocks);
      return staged(mine, part);
    };
    std::int64_t optimized = 0;  // elements this rank's optimizer updates
    const MakeOptimizer sgd = [&](const std::vector<OptimizedTensor>& tensors) {
      std::vector<Tensor> list;
      for (const OptimizedTensor& t : tensors) {
        list.push_back(t.tensor);
        optimized += t.tensor.numel();
      }
      return std::make_unique<optim::SGD>(list, optim::SGDOptions{.lr = 0.5});
    };
    TrainingPlan plan(layout, groups, build,
                      {.zero_stage = ZeroStage(zero_stage), .schedule = schedule, .micro_batches = m, .grad_clip = 0.5,
                       .checkpoint_blocks = checkpoint_blocks},
                      sgd);
    std::int64_t held = 0;
    for (const Tensor& p : plan.module().parameters()) held += p.numel();
    if (zero_stage >= 1 && dp > 1) EXPECT_LT(optimized, held) << name;  // its pieces only
    std::vector<Tensor> reference_params = reference.embed->parameters();
    for (const auto& block : reference.blocks)
      for (const Tensor& p : block->parameters()) reference_params.push_back(p);
    for (const Tensor& p : reference.head->parameters()) reference_params.push_back(p);
    optim::SGD reference_sgd(reference_params, {.lr = 0.5});
    for (int step = 0; step < 3; ++step) {
      const auto batches = micro_batches(step);  // every data-parallel rank's
      reference_sgd.zero_grad();
      const double reference_loss = reference_passes(reference, batches);
      const double reference_norm = optim::total_grad_norm(reference_params);
      reference_sgd.scaled_step(optim::clip_coefficient(reference_norm, 0.5));
      const std::vector<data::Example> mine_batches(batches.begin() + groups.coord.dp * m,
                                                    batches.begin() + (groups.coord.dp + 1) * m);
      const StepResult result = plan.step(mine_batches);
      EXPECT_NEAR(result.loss, reference_loss, 1e-5) << name << ", step " << step;
      EXPECT_NEAR(result.grad_norm, reference_norm, 1e-5 * reference_norm) << name << ", step " << step;
      if (zero_stage >= 2 && dp > 1)  // ZeRO-2 and 3 keep only the pieces' gradients
        for (const Tensor& p : plan.module().parameters())
          EXPECT_FALSE(p.grad().defined() && !(pp > 1 && p.is_same(mine.embed->weight))) << name << ": a full gradient";
    }
    // ZeRO-3: between steps no parameter holds memory (but a pipeline's last stage's copy of the
    // table, which the first stage trains); gathered, they hold the reference's values.
    if (zero_stage == 3 && dp > 1)
      for (const Tensor& p : plan.module().parameters())
        EXPECT_EQ(p.storage().resident(), pp > 1 && !part.embed && p.is_same(mine.embed->weight)) << name;
    const auto gathered = plan.gather_parameters();
    if (part.embed || part.head) expect_near(mine.embed->weight, reference.embed->weight, 1e-5, name + ": the table");
    for (const std::int64_t l : part.blocks) {
      const std::vector<Tensor> got = mine.blocks[static_cast<std::size_t>(l)]->parameters(),
                                want = reference.blocks[static_cast<std::size_t>(l)]->parameters();
      for (std::size_t i = 0; i < got.size(); ++i) expect_near(got[i], want[i], 1e-5, concat(name, ": block ", l));
    }
    if (part.head) expect_near(mine.head->bias, reference.head->bias, 1e-5, name + ": head.bias");
    EXPECT_NEAR(plan.loss(micro_batches(7)), [&] {
      NoGradGuard no_grad;
      double total = 0;
      for (const data::Example& batch : micro_batches(7)) total += reference.forward_loss(batch).item<double>();
      return total / kMicroBatches;
    }(), 1e-5) << name;
  }
}

// Whether a and b hold the same bits (float32).
bool same_bits(const Tensor& a, const Tensor& b) {
  const Tensor x = a.detach().contiguous(), y = b.detach().contiguous();
  return x.shape() == y.shape() && std::memcmp(x.data_ptr(), y.data_ptr(), static_cast<std::size_t>(x.nbytes())) == 0;
}

// A NaN made on the last rank only (a forward hook on its first block, one step) skips that
// step on every rank: every rank's weights keep their bits, equal on all ranks, and the next
// step updates them again. Data parallel over the world, plain and with ZeRO-1.
TEST(TrainingPlan, NaNOnOneRankSkipsTheStepOnEveryRank) {
  auto pg = world();
  for (const int zero_stage : {0, 1}) {
    const std::string name = concat("dp ", pg->size(), ", ZeRO ", zero_stage);
    const Layout layout(pg->size(), 1, 1);
    const ParallelGroups groups = make_parallel_groups(layout, pg);
    const int m = kMicroBatches / layout.dp();
    if (m == 0) continue;
    const UserModel mine(5);
    const BuildModel build = [&](std::shared_ptr<TensorParallel>, const PartFor& part_for) {
      return staged(mine, part_for(kBlocks));
    };
    const MakeOptimizer sgd = [](const std::vector<OptimizedTensor>& tensors) {
      std::vector<Tensor> list;
      for (const OptimizedTensor& t : tensors) list.push_back(t.tensor);
      return std::make_unique<optim::SGD>(list, optim::SGDOptions{.lr = 0.5});
    };
    TrainingPlan plan(layout, groups, build, {.zero_stage = ZeroStage(zero_stage), .micro_batches = m, .grad_clip = 0.5}, sgd);
    bool inject = false;
    if (pg->rank() == pg->size() - 1)
      mine.blocks[0]->register_forward_hook([&inject](nn::Module&, const TensorList&, Tensor& output) {
        if (inject) output = mul(output, std::numeric_limits<double>::quiet_NaN());
      });
    const auto mine_batches = [&](int step) {
      const auto batches = micro_batches(step);
      return std::vector<data::Example>(batches.begin() + groups.coord.dp * m,
                                        batches.begin() + (groups.coord.dp + 1) * m);
    };
    const StepResult first = plan.step(mine_batches(0));
    EXPECT_FALSE(first.non_finite || first.skipped) << name;
    std::vector<Tensor> before;
    for (const Tensor& p : plan.module().parameters()) before.push_back(p.detach().clone());

    inject = true;
    const StepResult poisoned = plan.step(mine_batches(1));
    inject = false;
    EXPECT_TRUE(poisoned.non_finite) << name << ", rank " << pg->rank();
    EXPECT_TRUE(poisoned.skipped) << name << ", rank " << pg->rank();
    EXPECT_TRUE(std::isnan(poisoned.loss)) << name << ": the world-mean loss, rank " << pg->rank();
    const std::vector<Tensor> after = plan.module().parameters();
    for (std::size_t i = 0; i < after.size(); ++i) {
      EXPECT_TRUE(same_bits(after[i], before[i])) << name << ": parameter " << i << " moved on rank " << pg->rank();
      // Equal on every rank: the largest and smallest over the ranks are this rank's values.
      Tensor largest = after[i].detach().clone(), smallest = after[i].detach().clone();
      pg->all_reduce(largest, {.op = ReduceOp::Max}).wait();
      pg->all_reduce(smallest, {.op = ReduceOp::Min}).wait();
      EXPECT_TRUE(same_bits(largest, after[i]) && same_bits(smallest, after[i])) << name << ": parameter " << i;
    }

    const StepResult next = plan.step(mine_batches(2));
    EXPECT_FALSE(next.non_finite || next.skipped) << name;
    EXPECT_TRUE(std::isfinite(next.loss)) << name;
    EXPECT_FALSE(same_bits(plan.module().parameters()[0], before[0])) << name << ": the next step updates";
  }
}

// ZeRO-3 under autocast to bfloat16, data parallel over the world: the blocks' linear layers
// are gathered in bfloat16 (their forward sees bfloat16 weights; the table and the head's
// bias stay float32), and the run keeps the losses, gradient norms and weights of plain data
// parallel under the same autocast (autocast casts those weights to bfloat16 anyway: the same
// bits but for the order of the gradient sums). Gathered for reading, the weights are float32.
// Under two pipeline stages the forward passes autocast too: the losses are plain data
// parallel's, not float32's.
TEST(TrainingPlan, ZeRO3GathersLinearLayersInAutocastsDtype) {
  auto pg = world();
  const Layout layout(pg->size(), 1, 1);
  const ParallelGroups groups = make_parallel_groups(layout, pg);
  const int m = kMicroBatches / layout.dp();
  if (m == 0) GTEST_SKIP() << "more ranks than micro-batches";
  const MakeOptimizer sgd = [](const std::vector<OptimizedTensor>& tensors) {
    std::vector<Tensor> list;
    for (const OptimizedTensor& t : tensors) list.push_back(t.tensor);
    return std::make_unique<optim::SGD>(list, optim::SGDOptions{.lr = 0.5});
  };
  struct Run {
    std::vector<StepResult> steps;
    std::vector<Tensor> weights;        // gathered after the last step
    std::set<std::string> seen_dtypes;  // "<linear weight dtype>/<table dtype>" in each block's forward
  };
  const auto train = [&](int zero_stage, std::optional<DataType> autocast, int pp = 1) {
    const UserModel mine(5);
    const BuildModel build = [&](std::shared_ptr<TensorParallel>, const PartFor& part_for) {
      return staged(mine, part_for(kBlocks));
    };
    const Layout run_layout(pg->size(), 1, pp);
    const ParallelGroups run_groups = pp == 1 ? groups : make_parallel_groups(run_layout, pg);
    const int run_m = kMicroBatches / run_layout.dp();
    TrainingPlan plan(run_layout, run_groups, build,
                      {.zero_stage = ZeroStage(zero_stage), .micro_batches = run_m, .grad_clip = 0.5, .autocast = autocast}, sgd);
    Run run;
    const auto linear = std::dynamic_pointer_cast<nn::SequentialImpl>(mine.blocks[1])->children().at(0);
    mine.blocks[1]->register_forward_pre_hook([&](nn::Module&, const TensorList&) {
      run.seen_dtypes.insert(concat(linear->parameters()[0].dtype(), "/", mine.embed->weight.dtype()));
    });
    for (int step = 0; step < 3; ++step) {
      const auto batches = micro_batches(step);
      const int dp_rank = run_groups.coord.dp;
      run.steps.push_back(plan.step(std::vector<data::Example>(batches.begin() + dp_rank * run_m,
                                                               batches.begin() + (dp_rank + 1) * run_m)));
    }
    const auto gathered = plan.gather_parameters();
    for (const Tensor& p : plan.module().parameters()) run.weights.push_back(p.detach().clone());
    return run;
  };
  const Run plain = train(0, kBFloat16), zero3 = train(3, kBFloat16), float32 = train(0, std::nullopt);
  const std::string rank = concat("rank ", pg->rank());
  // Autocast is on: its bfloat16 products move the losses off float32's.
  for (std::size_t s = 0; s < plain.steps.size(); ++s)
    EXPECT_GT(std::abs(plain.steps[s].loss - float32.steps[s].loss), 1e-5) << rank << ", step " << s;
  if (pg->size() > 1) EXPECT_EQ(zero3.seen_dtypes, std::set<std::string>{"bfloat16/float32"}) << rank;
  EXPECT_EQ(plain.seen_dtypes, std::set<std::string>{"float32/float32"}) << rank;
  for (std::size_t s = 0; s < plain.steps.size(); ++s) {
    EXPECT_NEAR(zero3.steps[s].loss, plain.steps[s].loss, 1e-6) << rank << ", step " << s;
    EXPECT_NEAR(zero3.steps[s].grad_norm, plain.steps[s].grad_norm, 1e-6 * plain.steps[s].grad_norm)
        << rank << ", step " << s;
  }
  ASSERT_EQ(zero3.weights.size(), plain.weights.size());
  for (std::size_t i = 0; i < plain.weights.size(); ++i) {
    EXPECT_EQ(zero3.weights[i].dtype(), kFloat32) << rank << ": parameter " << i << " gathered for reading";
    expect_near(zero3.weights[i], plain.weights[i], 1e-6, concat(rank, ": parameter ", i));
  }
  if (pg->size() % 2 == 0 && kMicroBatches % (pg->size() / 2) == 0) {
    const Run pipelined = train(0, kBFloat16, 2);
    for (std::size_t s = 0; s < plain.steps.size(); ++s) {
      EXPECT_NEAR(pipelined.steps[s].loss, plain.steps[s].loss, 1e-5) << rank << ", pp 2, step " << s;
      EXPECT_GT(std::abs(pipelined.steps[s].loss - float32.steps[s].loss), 1e-5) << rank << ", pp 2, step " << s;
    }
  }
  if (pg->size() == 4) {  // dp 2 x pp 2: ZeRO-3 under the pipeline gathers the linear weights in bfloat16 too
    const Run pipelined = train(3, kBFloat16, 2);
    const bool holds_block_1 = make_parallel_groups(Layout(4, 1, 2), pg).coord.pp == 0;  // blocks 0-1 on stage 0
    EXPECT_EQ(pipelined.seen_dtypes, holds_block_1 ? std::set<std::string>{"bfloat16/float32"} : std::set<std::string>{})
        << rank;
    for (std::size_t s = 0; s < plain.steps.size(); ++s) {
      EXPECT_NEAR(pipelined.steps[s].loss, plain.steps[s].loss, 1e-5) << rank << ", pp 2 ZeRO-3, step " << s;
      EXPECT_NEAR(pipelined.steps[s].grad_norm, plain.steps[s].grad_norm, 1e-5 * plain.steps[s].grad_norm)
          << rank << ", pp 2 ZeRO-3, step " << s;
    }
  }
}

// A checkpoint a TrainingPlan saves under one layout loads under another: after two Adam steps
// under layout `from` the plan saves; a plan under `to`, its model drawn from another seed,
// loads it, and the next two steps of both give the same losses, gradient norms and weights.
// Then a checkpoint missing one rank's shard fails to load on every rank and changes nothing.
TEST(TrainingPlan, CheckpointLoadsUnderAnotherLayout) {
  auto pg = world();
  const std::optional<std::filesystem::path> dir = shared_directory(*pg, "plan_checkpoint");
  if (!dir) GTEST_SKIP() << "the ranks share no filesystem";
  std::vector<std::pair<PlanLayout, PlanLayout>> pairs = {{{1, 0, false}, {1, 0, false}}};
  if (pg->size() >= 2)
    pairs = {{{1, 1, false}, {2, 0, false}}, {{2, 0, false}, {1, 2, false}}, {{1, 3, false}, {2, 1, false}},
             {{1, 2, false}, {1, 3, false}}};
  if (pg->size() == 4)  // dp2 x pp2 ZeRO-1 -> dp4 ZeRO-2 -> dp2 x pp2 ZeRO-3 -> dp4 ZeRO-1 -> dp2 x pp2 ZeRO-3
    pairs.insert(pairs.end(), {{{2, 1, false}, {1, 2, false}}, {{1, 2, false}, {2, 3, false}},
                               {{2, 3, false}, {1, 1, false}}, {{1, 1, false}, {2, 3, false}}});
  const MakeOptimizer adam = [](const std::vector<OptimizedTensor>& tensors) {
    std::vector<Tensor> list;
    for (const OptimizedTensor& t : tensors) list.push_back(t.tensor);
    return std::make_unique<optim::Adam>(list, optim::AdamOptions{.lr = 0.05});
  };
  struct Run {
    UserModel model;
    Layout layout;
    ParallelGroups groups;
    std::unique_ptr<TrainingPlan> plan;
    nn::ModelPart part;
    Run(std::uint64_t seed, const PlanLayout& l, const std::shared_ptr<ProcessGroup>& pg, const MakeOptimizer& make)
        : model(seed), layout(pg->size(), 1, l.pp), groups(make_parallel_groups(layout, pg)) {
      const BuildModel build = [this](std::shared_ptr<TensorParallel>, const PartFor& part_for) {
        part = part_for(kBlocks);
        return staged(model, part);
      };
      plan = std::make_unique<TrainingPlan>(layout, groups, build,
                                            PlanOptions{.zero_stage = ZeroStage(l.zero_stage),
                                                        .micro_batches = static_cast<int>(kMicroBatches / layout.dp()),
                                                        .grad_clip = 0.5},
                                            make);
    }
    StepResult step(int s) {
      const auto batches = micro_batches(s);
      const int m = static_cast<int>(kMicroBatches / layout.dp());
      return plan->step(std::vector<data::Example>(batches.begin() + groups.coord.dp * m,
                                                   batches.begin() + (groups.coord.dp + 1) * m));
    }
  };
  std::string last_name;
  PlanLayout last_to{1, 0, false};
  for (const auto& [from, to] : pairs) {
    const std::string name = concat("pp ", from.pp, " ZeRO ", from.zero_stage, " -> pp ", to.pp, " ZeRO ", to.zero_stage);
    Run saved(5, from, pg, adam);
    for (int s = 0; s < 2; ++s) saved.step(s);
    save_distributed_checkpoint(*dir, 2, saved.plan->sharded_state(), pg);
    Run loaded(9, to, pg, adam);
    const DistributedCheckpoint checkpoint(*dir);
    EXPECT_EQ(checkpoint.step(), 2) << name;
    loaded.plan->load_sharded_state(checkpoint);
    for (int s = 2; s < 4; ++s) {
      const StepResult a = saved.step(s), b = loaded.step(s);
      EXPECT_NEAR(b.loss, a.loss, 1e-5) << name << ", step " << s;
      EXPECT_NEAR(b.grad_norm, a.grad_norm, 1e-5 * a.grad_norm) << name << ", step " << s;
    }
    // What both runs hold of the model on this rank (under ZeRO-3, gathered).
    const auto saved_params = saved.plan->gather_parameters(), loaded_params = loaded.plan->gather_parameters();
    if ((saved.part.embed || saved.part.head) && (loaded.part.embed || loaded.part.head))
      expect_near(loaded.model.embed->weight, saved.model.embed->weight, 1e-5, name + ": the table");
    if (saved.part.head && loaded.part.head)
      expect_near(loaded.model.head->bias, saved.model.head->bias, 1e-5, name + ": head.bias");
    for (const std::int64_t l : loaded.part.blocks)
      if (saved.part.has_block(l)) {
        const auto& got = loaded.model.blocks[static_cast<std::size_t>(l)];
        const auto& want = saved.model.blocks[static_cast<std::size_t>(l)];
        for (std::size_t i = 0; i < got->parameters().size(); ++i)
          expect_near(got->parameters()[i], want->parameters()[i], 1e-5, concat(name, ": block ", l));
      }
    last_to = to;
  }

  // One rank's shard gone: every rank raises, no rank loads anything.
  const DistributedCheckpoint checkpoint(*dir);
  const std::string missing = checkpoint.files().back().name;
  pg->barrier().wait();
  if (pg->rank() == 0) std::filesystem::remove(*dir / missing);
  pg->barrier().wait();
  Run fresh(11, last_to, pg, adam);
  std::vector<Tensor> before;
  {
    const auto gathered = fresh.plan->gather_parameters();  // ZeRO-3 (the last pair's target)
    for (const Tensor& p : fresh.plan->module().parameters()) before.push_back(p.detach().clone());
  }
  try {
    fresh.plan->load_sharded_state(checkpoint);
    ADD_FAILURE() << "loaded a checkpoint without " << missing;
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_TRUE(what.find(missing) != std::string::npos || what.find("could not read its part") != std::string::npos)
        << what;
  }
  const auto gathered = fresh.plan->gather_parameters();
  const std::vector<Tensor> after = fresh.plan->module().parameters();
  for (std::size_t i = 0; i < after.size(); ++i)
    EXPECT_TRUE(same_bits(after[i], before[i])) << "parameter " << i << " changed on rank " << pg->rank();
  pg->barrier().wait();
  if (pg->rank() == 0) std::filesystem::remove_all(*dir);
}

}  // namespace
}  // namespace infini::parallel::test::pipeline_runner_test
