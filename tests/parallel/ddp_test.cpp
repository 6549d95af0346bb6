// DistributedDataParallel and its Reducer against one process that sees every rank's data:
// averaged gradients, bucket assignment and rebuild, launch order, no_sync accumulation,
// unused and shared parameters, gradient_as_bucket_view, and the broadcast at construction.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm_test_util.h"

import infini.parallel;

namespace infini::parallel::test::ddp_test {
namespace {

// A toy model whose registration order differs from the order backward reaches it:
// `late` is registered first but used last, `shared` is used twice, `spare` only on request.
//   x (N, 5) -> h = tanh(x early^T + shared) (N, 4) -> y = (h * shared) late^T (N, 3) [+ spare]
//   loss = mean over rows of sum_j y_ij^2
class ToyImpl : public nn::Module {
 public:
  explicit ToyImpl(double seed) : Module("Toy") {
    late = register_parameter("late", pattern({3, 4}, seed + 1));
    early = register_parameter("early", pattern({4, 5}, seed + 2));
    shared = register_parameter("shared", pattern({4}, seed + 3));
    spare = register_parameter("spare", pattern({3}, seed + 4));
  }
  Tensor loss(const Tensor& x, bool use_spare) const {
    Tensor h = tanh(add(matmul(x, early.t()), shared));
    Tensor y = matmul(mul(h, shared), late.t());
    if (use_spare) y = add(y, spare);
    return div(sum(mul(y, y)), static_cast<double>(x.size(0)));
  }
  Tensor late, early, shared, spare;
};

constexpr std::int64_t kRows = 3;  // rows per rank and micro-batch

// Rank r's rows of micro-batch k.
Tensor rows(int r, int k) { return pattern({kRows, 5}, 10.0 * r + 100.0 * k + 0.5); }

// The gradients one process gets from all `n` ranks' rows of micro-batches 0..steps-1 (the
// mean over every row: each batch's mean loss divided by the batch count), starting from
// rank 0's parameters; rank q's batches use spare when uses_spare(q).
std::vector<Tensor> reference_grads_by_rank(int n, int steps, const std::function<bool(int)>& uses_spare) {
  auto model = std::make_shared<ToyImpl>(0.0);
  for (int k = 0; k < steps; ++k)
    for (int q = 0; q < n; ++q) div(model->loss(rows(q, k), uses_spare(q)), static_cast<double>(n * steps)).backward();
  std::vector<Tensor> grads;
  for (const Tensor& p : model->parameters()) grads.push_back(p.grad());
  return grads;
}
std::vector<Tensor> reference_grads(int n, int steps, bool use_spare) {
  return reference_grads_by_rank(n, steps, [use_spare](int) { return use_spare; });
}

void expect_close(const Tensor& actual, const Tensor& expected, const std::string& what) {
  expect_near(actual, expected, 1e-12, what);
}

TEST(Buckets, ReverseOrderCapsAndDtypes) {
  // Bytes: 400, 40, 400, 400, 20 (float32) and 16 (float64).
  const std::vector<Tensor> params = {zeros({100}), zeros({10}), zeros({100}), zeros({100}), zeros({5}),
                                      zeros({2}, TensorOptions{.dtype = kFloat64})};
  // Caps 48 B first, then 500 B. Reverse order 5, 4, 3, 2, 1, 0: float64 holds {5} (open
  // to the end); float32 closes {4, 3} at 420 B >= 48, then {2, 1, 0} at 840 B >= 500.
  const auto buckets = assign_buckets(params, reverse_order(6), {.first_bucket_bytes = 48, .bucket_bytes = 500});
  EXPECT_EQ(buckets, (std::vector<std::vector<std::size_t>>{{5}, {4, 3}, {2, 1, 0}}));
  // One big cap: one bucket per dtype, in the order of their first parameters.
  const auto two = assign_buckets(params, {0, 1, 2, 3, 4, 5}, {.first_bucket_bytes = 1 << 20, .bucket_bytes = 1 << 20});
  EXPECT_EQ(two, (std::vector<std::vector<std::size_t>>{{0, 1, 2, 3, 4}, {5}}));
  // A cap below every parameter: one bucket each.
  EXPECT_EQ(assign_buckets(params, reverse_order(6), {.first_bucket_bytes = 1, .bucket_bytes = 1}).size(), 6u);
  EXPECT_THROW(assign_buckets(params, {0, 1, 2, 3, 4}), Error);
  EXPECT_THROW(assign_buckets(params, {0, 1, 2, 3, 4, 4}), Error);
  EXPECT_THROW(assign_buckets(params, reverse_order(6), {.first_bucket_bytes = 0}), Error);
}

TEST(DistributedDataParallel, BroadcastsRankZerosParameters) {
  auto pg = world();
  auto model = std::make_shared<ToyImpl>(static_cast<double>(pg->rank()));
  DistributedDataParallel ddp(model, pg);
  const auto expected = std::make_shared<ToyImpl>(0.0)->parameters();
  const auto actual = model->parameters();
  for (std::size_t i = 0; i < actual.size(); ++i) expect_close(actual[i], expected[i], "parameter after broadcast");
}

TEST(DistributedDataParallel, AveragesLikeOneProcessAndRebuildsBucketsInReadyOrder) {
  auto pg = world();
  const int r = pg->rank(), n = pg->size();
  auto model = std::make_shared<ToyImpl>(static_cast<double>(r));
  // Caps small enough that every parameter gets a bucket of its own.
  DistributedDataParallel ddp(model, pg, {.buckets = {.first_bucket_bytes = 8, .bucket_bytes = 8}});
  Reducer& reducer = ddp.reducer();
  // Registration order late(0), early(1), shared(2), spare(3): buckets in reverse.
  EXPECT_EQ(reducer.buckets(), (std::vector<std::vector<std::size_t>>{{3}, {2}, {1}, {0}}));
  const auto expected = reference_grads(n, 1, true);
  for (int step = 0; step < 2; ++step) {
    for (const Tensor& p : model->parameters()) p.set_grad(Tensor());
    model->loss(rows(r, 0), true).backward();
    const auto params = model->parameters();
    for (std::size_t i = 0; i < params.size(); ++i)
      expect_close(params[i].grad(), expected[i], concat("step ", step, " gradient of parameter ", i));
    EXPECT_EQ(reducer.synchronized_backwards(), step + 1);
    // Buckets launch in index order, and the ones before the last launched during backward.
    EXPECT_EQ(reducer.launch_order(), (std::vector<std::size_t>{0, 1, 2, 3}));
    EXPECT_EQ(reducer.buckets_launched_during_backward(), 4u);
  }
  // Backward reaches late (next to the output) before shared (behind tanh), unlike the
  // reverse registration order; the rebuilt buckets follow the observed order.
  const auto order = reducer.ready_order();
  ASSERT_EQ(order.size(), 4u);
  EXPECT_LT(std::find(order.begin(), order.end(), 0u), std::find(order.begin(), order.end(), 2u));
  std::vector<std::vector<std::size_t>> rebuilt;
  for (std::size_t i : order) rebuilt.push_back({i});
  EXPECT_EQ(reducer.buckets(), rebuilt);
}

// Frozen parameters (a LoRA model's base weights) are broadcast but neither bucketed nor
// reduced; the others average as with no frozen ones.
TEST(DistributedDataParallel, FrozenParametersAreBroadcastButNotReduced) {
  auto pg = world();
  const int r = pg->rank(), n = pg->size();
  auto model = std::make_shared<ToyImpl>(static_cast<double>(r));
  model->early.requires_grad_(false);
  model->spare.requires_grad_(false);
  DistributedDataParallel ddp(model, pg, {.buckets = {.first_bucket_bytes = 8, .bucket_bytes = 8}});
  const Reducer& reducer = ddp.reducer();
  ASSERT_EQ(reducer.parameters().size(), 2u);  // late and shared
  EXPECT_TRUE(reducer.parameters()[0].is_same(model->late));
  EXPECT_TRUE(reducer.parameters()[1].is_same(model->shared));
  EXPECT_EQ(reducer.buckets(), (std::vector<std::vector<std::size_t>>{{1}, {0}}));
  const auto rank0 = std::make_shared<ToyImpl>(0.0);
  expect_close(model->early, rank0->early, "frozen parameter after broadcast");
  model->loss(rows(r, 0), true).backward();
  EXPECT_FALSE(model->early.grad().defined());
  EXPECT_FALSE(model->spare.grad().defined());
  const auto expected = reference_grads(n, 1, true);  // late(0), early(1), shared(2), spare(3)
  expect_close(model->late.grad(), expected[0], "late's averaged gradient");
  expect_close(model->shared.grad(), expected[2], "shared's averaged gradient");
  EXPECT_EQ(reducer.synchronized_backwards(), 1);
}

TEST(DistributedDataParallel, NoSyncAccumulatesLocallyThenAveragesEverything) {
  auto pg = world();
  const int r = pg->rank(), n = pg->size();
  auto model = std::make_shared<ToyImpl>(static_cast<double>(r));
  DistributedDataParallel ddp(model, pg);
  constexpr int kMicro = 3;
  {
    auto no_sync = ddp.no_sync();
    for (int k = 0; k + 1 < kMicro; ++k) div(model->loss(rows(r, k), true), static_cast<double>(kMicro)).backward();
  }
  EXPECT_EQ(ddp.reducer().synchronized_backwards(), 0);
  // Inside no_sync the gradients are this rank's own: its rows only.
  if (n > 1) {
    auto local = std::make_shared<ToyImpl>(0.0);
    for (int k = 0; k + 1 < kMicro; ++k) div(local->loss(rows(r, k), true), static_cast<double>(kMicro)).backward();
    expect_close(model->late.grad(), local->late.grad(), "local gradient inside no_sync");
  }
  div(model->loss(rows(r, kMicro - 1), true), static_cast<double>(kMicro)).backward();
  // kMicro micro-batches of n ranks each: the reference is the mean over all those rows.
  const auto expected = reference_grads(n, kMicro, true);
  const auto params = model->parameters();
  for (std::size_t i = 0; i < params.size(); ++i)
    expect_close(params[i].grad(), expected[i], concat("accumulated gradient of parameter ", i));
}

TEST(DistributedDataParallel, UnusedParametersNeitherHangNorCorrupt) {
  auto pg = world();
  const int r = pg->rank(), n = pg->size();
  {  // spare is used by rank 0 only: its gradient is rank 0's divided by n; the rest as usual.
    auto model = std::make_shared<ToyImpl>(static_cast<double>(r));
    DistributedDataParallel ddp(model, pg, {.find_unused_parameters = true});
    model->loss(rows(r, 0), r == 0).backward();
    const auto expected = reference_grads_by_rank(n, 1, [](int q) { return q == 0; });
    const auto params = model->parameters();
    for (std::size_t i = 0; i < params.size(); ++i)
      expect_close(params[i].grad(), expected[i], concat("spare used on rank 0 only: gradient ", i));
  }
  {  // spare is used by no rank: it keeps no gradient.
    auto model = std::make_shared<ToyImpl>(static_cast<double>(r));
    DistributedDataParallel ddp(model, pg, {.find_unused_parameters = true});
    model->loss(rows(r, 0), false).backward();
    EXPECT_FALSE(model->spare.grad().defined());
    expect_close(model->late.grad(), reference_grads(n, 1, false)[0], "late with spare unused everywhere");
  }
  {  // Without find_unused_parameters: the step completes everywhere, then an Error names spare.
    auto model = std::make_shared<ToyImpl>(static_cast<double>(r));
    DistributedDataParallel ddp(model, pg);
    try {
      model->loss(rows(r, 0), false).backward();
      ADD_FAILURE() << "no error for a parameter without a gradient";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("parameter 'spare' received no gradient"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("find_unused_parameters"), std::string::npos) << e.what();
    }
    expect_close(model->late.grad(), reference_grads(n, 1, false)[0], "late next to an unused parameter");
    // The next step works (no collective is left half done).
    for (const Tensor& p : model->parameters()) p.set_grad(Tensor());
    model->loss(rows(r, 0), true).backward();
    expect_close(model->late.grad(), reference_grads(n, 1, true)[0], "late in the next step");
  }
}

TEST(DistributedDataParallel, GradientsAsBucketViews) {
  auto pg = world();
  const int r = pg->rank(), n = pg->size();
  auto model = std::make_shared<ToyImpl>(static_cast<double>(r));
  DistributedDataParallel ddp(model, pg, {.gradient_as_bucket_view = true, .rebuild_buckets = false});
  const auto expected = reference_grads(n, 1, true);
  for (int step = 0; step < 2; ++step) {
    for (const Tensor& p : model->parameters())
      if (p.grad().defined()) Tensor(p.grad()).zero_();  // zero_grad(set_to_none = false)
    model->loss(rows(r, 0), true).backward();
    const auto params = model->parameters();
    // One bucket of 39 float64 (every parameter fits in 1 MiB), spare first: the grads are
    // slices of one buffer.
    const auto* base = static_cast<const char*>(params[3].grad().data_ptr());
    for (std::size_t i = 0; i < params.size(); ++i) {
      expect_close(params[i].grad(), expected[i], concat("step ", step, " bucket-view gradient ", i));
      const auto* at = static_cast<const char*>(params[i].grad().data_ptr());
      EXPECT_TRUE(at >= base && at < base + 39 * 8) << "grad " << i << " is not a view of the bucket";
    }
  }
}

// Every piece of `reducer` (ZeRO, float64 parameters) is a slice of its parameter
// (same storage) whose grad is the same slice of `expected` (its parameter's gradient).
void expect_piece_gradients(const Reducer& reducer, const std::vector<Tensor>& params,
                            const std::vector<Tensor>& expected, const std::string& label) {
  const auto& pieces = reducer.shard_pieces();
  const auto& owners = reducer.shard_owners();
  ASSERT_EQ(pieces.size(), owners.size());
  for (std::size_t k = 0; k < pieces.size(); ++k) {
    const Tensor& param = params[owners[k]];
    const auto* base = static_cast<const char*>(param.data_ptr());
    const std::int64_t offset =
        (static_cast<const char*>(pieces[k].data_ptr()) - base) / static_cast<std::int64_t>(sizeof(double));
    ASSERT_TRUE(offset >= 0 && offset + pieces[k].numel() <= param.numel()) << label << ", piece " << k;
    expect_close(pieces[k].grad(), expected[owners[k]].reshape({-1}).narrow(0, offset, pieces[k].numel()),
                 concat(label, " gradient piece ", k));
  }
}

// ZeRO-1: rank r's pieces hold block r of the averaged gradient; an update of the pieces
// followed by all_gather_parameters() gives every rank the fully updated parameters.
TEST(DistributedDataParallel, ShardedGradientsAndParameterGather) {
  auto pg = world();
  const int r = pg->rank(), n = pg->size();
  auto model = std::make_shared<ToyImpl>(static_cast<double>(r));
  // Small caps: several buckets, most of them split between ranks inside a parameter.
  DistributedDataParallel ddp(model, pg, {.buckets = {.first_bucket_bytes = 64, .bucket_bytes = 128},
                                          .zero = ZeroStage::kOptimizerState});
  Reducer& reducer = ddp.reducer();
  // One process on every rank's rows, from rank 0's initial parameters.
  auto reference = std::make_shared<ToyImpl>(0.0);
  std::vector<Tensor> params = model->parameters(), reference_params = reference->parameters();
  for (int step = 0; step < 2; ++step) {
    for (Tensor& p : reference_params) p.set_grad(Tensor());
    for (int q = 0; q < n; ++q) div(reference->loss(rows(q, step), true), static_cast<double>(n)).backward();
    std::vector<Tensor> expected;
    for (const Tensor& p : reference_params) expected.push_back(p.grad());
    model->loss(rows(r, step), true).backward();
    const auto& pieces = reducer.shard_pieces();
    expect_piece_gradients(reducer, params, expected, concat("step ", step));
    std::int64_t covered = 0;
    double squares = 0;
    for (std::size_t k = 0; k < pieces.size(); ++k) {
      covered += pieces[k].numel();
      const Tensor g = pieces[k].grad();
      squares += sum(mul(g, g)).item<double>();
    }
    // The ranks' pieces cover every element once, and the norm counts each once.
    Tensor total = full({1}, static_cast<double>(covered), TensorOptions{.dtype = kFloat64});
    pg->all_reduce(total).wait();
    EXPECT_EQ(total.item<double>(), 39.0);
    double reference_squares = 0;
    for (const Tensor& g : expected) reference_squares += sum(mul(g, g)).item<double>();
    Tensor total_squares = full({1}, squares, TensorOptions{.dtype = kFloat64});
    pg->all_reduce(total_squares).wait();
    EXPECT_NEAR(total_squares.item<double>(), reference_squares, 1e-12 * reference_squares);
    EXPECT_NEAR(reducer.sharded_grad_norm(), std::sqrt(reference_squares), 1e-12);
    // An SGD step on the pieces, then the gather: every parameter fully updated.
    {
      NoGradGuard no_grad;
      for (Tensor piece : pieces) sub_(piece, mul(piece.grad(), 0.1));
      for (std::size_t i = 0; i < reference_params.size(); ++i) sub_(reference_params[i], mul(expected[i], 0.1));
    }
    reducer.all_gather_parameters().wait();
    for (std::size_t i = 0; i < params.size(); ++i)
      expect_close(params[i], reference_params[i], concat("step ", step, " parameter ", i, " after the gather"));
    for (const Tensor& p : params) p.set_grad(Tensor());
  }
}

// ZeRO-2: every synchronised backward adds its average into the pieces' grads, each
// parameter's grad is released once its bucket holds it, and zero_grad of the pieces (set to
// none, as an optimizer's) starts the next step's sum.
TEST(DistributedDataParallel, ZeRO2AddsEveryMicroBatchIntoThePiecesAndKeepsNoGradient) {
  auto pg = world();
  const int r = pg->rank(), n = pg->size();
  auto model = std::make_shared<ToyImpl>(static_cast<double>(r));
  DistributedDataParallel ddp(model, pg, {.buckets = {.first_bucket_bytes = 64, .bucket_bytes = 128},
                                          .zero = ZeroStage::kGradients});
  auto reference = std::make_shared<ToyImpl>(0.0);
  const std::vector<Tensor> params = model->parameters(), reference_params = reference->parameters();
  for (int step = 0; step < 2; ++step) {
    for (Tensor p : reference_params) p.set_grad(Tensor());
    for (int k = 0; k < 2; ++k)  // two micro-batches of every rank's rows
      for (int q = 0; q < n; ++q) div(reference->loss(rows(q, 2 * step + k), true), 2.0 * n).backward();
    std::vector<Tensor> expected;
    for (const Tensor& p : reference_params) expected.push_back(p.grad());
    for (Tensor piece : ddp.reducer().shard_pieces()) piece.set_grad(Tensor());  // the optimizer's zero_grad
    for (int k = 0; k < 2; ++k) {
      div(model->loss(rows(r, 2 * step + k), true), 2.0).backward();
      for (std::size_t i = 0; i < params.size(); ++i)
        EXPECT_FALSE(params[i].grad().defined()) << "step " << step << ": parameter " << i << " kept its gradient";
    }
    expect_piece_gradients(ddp.reducer(), params, expected, concat("step ", step));
  }
  // DDP ends each synchronised backward itself: a pipeline's explicit finalize is refused.
  EXPECT_THROW(DistributedDataParallel(model, pg, {.finalize_explicitly = true}), Error);
}

// ZeRO-2 with bucket groups (an interleaved pipeline's chunks): buckets never mix groups, a
// pass synchronising group g launches and finalizes g's buckets only, and the other groups'
// sums carry on untouched into the step's later passes.
TEST(DistributedDataParallel, BucketGroupsReduceOnlyTheirPasses) {
  auto pg = world();
  const int r = pg->rank(), n = pg->size();
  // a in group 0; b and c in group 1. Pass losses: group 0 (r + 1) k sum(a^2), group 1
  // (r + 1) k (sum(b^2) + sum(c)), for micro-batch coefficient k.
  std::vector<Tensor> params = {pattern({7}, 1.0).requires_grad_(), pattern({5}, 2.0).requires_grad_(),
                                pattern({6}, 3.0).requires_grad_()};
  const std::vector<Tensor> initial = {params[0].detach().clone(), params[1].detach().clone(), params[2].detach().clone()};
  Reducer reducer(params, {"a", "b", "c"}, pg,
                  {.buckets = {.first_bucket_bytes = 16, .bucket_bytes = 32}, .zero = ZeroStage::kGradients,
                   .finalize_explicitly = true, .bucket_groups = {0, 1, 1}});
  const std::vector<int> groups = {0, 1, 1};
  for (const auto& bucket : reducer.buckets())
    for (std::size_t i : bucket) EXPECT_EQ(groups[i], groups[bucket.front()]) << "a bucket mixes groups";
  const auto pass = [&](int group, double k) {
    reducer.set_sync(true, {group});
    const double scale = (r + 1) * k;
    const Tensor loss = group == 0 ? mul(sum(mul(params[0], params[0])), scale)
                                   : mul(add(sum(mul(params[1], params[1])), sum(params[2])), scale);
    loss.backward();
    reducer.set_sync(false, {group});
    reducer.finalize();
    const auto buckets = reducer.buckets();
    for (std::size_t b : reducer.launch_order())
      for (std::size_t i : buckets[b]) EXPECT_EQ(groups[i], group) << "a bucket of another group launched";
    EXPECT_FALSE(reducer.launch_order().empty());
  };
  // The blocks behind the pieces' gradients hold no memory until a pass's sum lands in them.
  for (Tensor piece : reducer.shard_pieces()) piece.set_grad(Tensor());
  reducer.release_gradient_blocks();
  pass(1, 1.0);
  pass(0, 2.0);
  pass(1, 3.0);
  // The mean over ranks of (r + 1) is (n + 1) / 2: a got 2 a k (k = 2); b 2 b (1 + 3); c 1 + 3.
  const double mean = (n + 1) / 2.0;
  const std::vector<Tensor> expected = {mul(initial[0], 4.0 * mean), mul(initial[1], 8.0 * mean),
                                        full({6}, 4.0 * mean, TensorOptions{.dtype = kFloat64})};
  expect_piece_gradients(reducer, reducer.parameters(), expected, "after three passes");
  for (const Tensor& p : params) EXPECT_FALSE(p.grad().defined()) << "ZeRO-2 kept a parameter's gradient";
  // Released while a piece holds its gradient: refused, naming the piece's parameter.
  const auto& pieces = reducer.shard_pieces();
  const std::size_t held =
      std::find_if(pieces.begin(), pieces.end(), [](const Tensor& t) { return t.grad().defined(); }) - pieces.begin();
  ASSERT_LT(held, pieces.size());
  try {
    reducer.release_gradient_blocks();
    ADD_FAILURE() << "released the block of a piece that holds its gradient";
  } catch (const Error& e) {
    const std::string expected_message = concat("piece ", held, " (of parameter '", "abc"[reducer.shard_owners()[held]],
                                                "') still holds its gradient: clear it first (zero_grad)");
    EXPECT_NE(std::string(e.what()).find(expected_message), std::string::npos) << e.what();
  }
  // Released again after clearing: a pass of group 0 starts a new sum (a's mean gradient is
  // 2 a mean); the other pieces stay without a gradient.
  for (Tensor piece : pieces) piece.set_grad(Tensor());
  reducer.release_gradient_blocks();
  pass(0, 1.0);
  const Tensor a_grad = mul(initial[0], 2.0 * mean).reshape({-1});
  for (std::size_t k = 0; k < pieces.size(); ++k) {
    if (reducer.shard_owners()[k] != 0) {
      EXPECT_FALSE(pieces[k].grad().defined()) << "piece " << k << " got a gradient in another group's pass";
      continue;
    }
    expect_close(pieces[k].grad(), a_grad.narrow(0, reducer.shard_offsets()[k], pieces[k].numel()),
                 concat("after a release, piece ", k));
  }
  // A gradient of group 0 in a pass of group 1 only is an error, as is a group without groups.
  Reducer plain(std::vector<Tensor>{pattern({3}, 4.0).requires_grad_()}, {}, pg, {.zero = ZeroStage::kOptimizerState});
  EXPECT_THROW(plain.set_sync(true, {0}), Error);
  reducer.set_sync(true, {1});
  EXPECT_THROW(sum(mul(params[0], params[0])).backward(), Error);
}

// ZeRO-3 with gather_dtypes: a float32 parameter gathered in bfloat16 (or float16) holds that
// dtype (its float32 values rounded once) while gathered for the passes, its 16-bit gradient is
// averaged into float32 pieces, and a full-precision gather gives its float32 values back (and
// serves the passes too); buckets never mix gather dtypes. Bad gather dtypes are refused.
TEST(DistributedDataParallel, ZeRO3GathersEachBucketInItsGatherDtype) {
  auto pg = world();
  const int r = pg->rank(), n = pg->size();
  // All float32: a gathered in bfloat16, b as it is, c in float16.
  std::vector<Tensor> params = {pattern({7}, 1.0).to(kFloat32).requires_grad_(),
                                pattern({5}, 2.0).to(kFloat32).requires_grad_(),
                                pattern({6}, 3.0).to(kFloat32).requires_grad_()};
  std::vector<Tensor> initial;
  for (const Tensor& p : params) initial.push_back(p.detach().clone());
  Reducer reducer(params, {"a", "b", "c"}, pg,
                  {.buckets = {.first_bucket_bytes = 1 << 20, .bucket_bytes = 1 << 20}, .zero = ZeroStage::kParameters,
                   .gather_dtypes = {kBFloat16, kFloat32, kFloat16}});
  const auto buckets = reducer.buckets();
  const std::vector<DataType> gathered_in = {kBFloat16, kFloat32, kFloat16};
  for (const auto& bucket : buckets)
    for (std::size_t i : bucket) EXPECT_EQ(gathered_in[i], gathered_in[bucket.front()]) << "a bucket mixes gather dtypes";
  const auto gather_all = [&](bool full_precision) {
    std::vector<Work> works;
    for (std::size_t k = 0; k < buckets.size(); ++k) works.push_back(reducer.gather_bucket(k, full_precision));
    when_all(works).wait();
  };
  gather_all(false);
  for (std::size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(params[i].dtype(), gathered_in[i]) << "parameter " << i;
    expect_near(params[i], initial[i].to(gathered_in[i]), 0, concat("gathered parameter ", i));
  }
  // Loss (r + 1) (sum(a) + 2 sum(b) + 4 sum(c)): the mean gradients are (n + 1) / 2 times 1, 2, 4.
  mul(add(add(sum(params[0]).to(kFloat32), mul(sum(params[1]), 2.0)), mul(sum(params[2]).to(kFloat32), 4.0)),
      static_cast<double>(r + 1))
      .backward();
  const double mean = (n + 1) / 2.0;
  const auto& pieces = reducer.shard_pieces();
  for (std::size_t k = 0; k < pieces.size(); ++k) {
    const std::size_t owner = reducer.shard_owners()[k];
    EXPECT_EQ(pieces[k].dtype(), kFloat32);
    expect_values(pieces[k].grad(), [&](std::int64_t) { return mean * (owner == 0 ? 1 : owner == 1 ? 2 : 4); },
                  concat("piece ", k, " of parameter ", owner));
  }
  for (std::size_t k = 0; k < buckets.size(); ++k) reducer.release_bucket(k);
  gather_all(true);  // float32 again, the values unrounded; a gather for the passes keeps them
  gather_all(false);
  for (std::size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(params[i].dtype(), kFloat32) << "parameter " << i << " gathered in full precision";
    expect_near(params[i], initial[i], 0, concat("parameter ", i, " in full precision"));
  }
  for (std::size_t k = 0; k < buckets.size(); ++k) reducer.release_bucket(k);
  const auto refused = [&](ReducerOptions options, const std::string& message) {
    try {
      Reducer(params, {"a", "b", "c"}, pg, options);
      ADD_FAILURE() << "accepted: " << message;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  refused({.zero = ZeroStage::kGradients, .gather_dtypes = {kBFloat16, kFloat32, kFloat32}},
          "gather_dtypes is the dtype of sharded parameters' gathers: it needs ZeRO-3");
  refused({.zero = ZeroStage::kParameters, .gather_dtypes = {kBFloat16}},
          "gather_dtypes has 1 entries for 3 parameters");
  refused({.zero = ZeroStage::kParameters,
           .gather_dtypes = {kFloat64, kFloat32, kFloat32}},
          "parameter 'a' (float32) cannot be gathered in float64: expected its own dtype, or bfloat16 or float16 for a "
          "float32 parameter");
}

TEST(DistributedDataParallel, BFloat16GradientsAccumulateInFloat32) {
  auto pg = world();
  const int n = pg->size();
  auto model = std::make_shared<nn::Module>("Scale");
  Tensor w = model->register_parameter("w", ones({4}, TensorOptions{.dtype = kBFloat16}));
  DistributedDataParallel ddp(model, pg);
  // Rank 0's gradient is 256, the others' 1: the float32 sum 256 + n - 1 divided by n, rounded once.
  const double g = pg->rank() == 0 ? 256.0 : 1.0;
  sum(mul(w, full({4}, g, TensorOptions{.dtype = kBFloat16}))).backward();
  const double once = static_cast<float>(BFloat16(static_cast<float>(256 + n - 1) / static_cast<float>(n)));
  expect_values(w.grad(), [&](std::int64_t) { return once; }, "bfloat16 gradient average");
}

}  // namespace
}  // namespace infini::parallel::test::ddp_test
