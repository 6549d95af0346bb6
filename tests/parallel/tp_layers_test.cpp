// Tensor- and sequence-parallel maps and layers over the world group (S ranks, 1 alone),
// each against the unsharded computation in the same test: values and gradients, in float64.
// Every rank builds the same whole tensors and keeps its block.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "comm_test_util.h"

import infini.parallel;

namespace infini::parallel::test::tp_layers_test {
namespace {

constexpr double kTol = 1e-12;

Tensor leaf(const Tensor& t) { return t.detach().clone().requires_grad_(true); }

// sum(y * g): a loss whose gradient with respect to y is g.
Tensor weighted_sum(const Tensor& y, const Tensor& g) { return sum(mul(y, g)); }

TEST(TensorParallelMaps, ForwardAndBackwardAreTransposes) {
  auto pg = world();
  const std::int64_t S = pg->size(), r = pg->rank();
  // Every rank's x and upstream gradient differ; the expected values are the closed forms.
  const Tensor x_r = pattern({2, 2 * S, 3}, 1.0 + static_cast<double>(r)), g_r = pattern({2, 2 * S, 3}, 40.0 + static_cast<double>(r));
  TensorList xs, gs;
  for (std::int64_t q = 0; q < S; ++q) {
    xs.push_back(pattern({2, 2 * S, 3}, 1.0 + static_cast<double>(q)));
    gs.push_back(pattern({2, 2 * S, 3}, 40.0 + static_cast<double>(q)));
  }
  const Tensor x_sum = sum(stack(xs), {0}), g_sum = sum(stack(gs), {0});
  auto block = [&](const Tensor& t, std::int64_t dim) { return t.slice(dim, r * (t.size(dim) / S), (r + 1) * (t.size(dim) / S)); };
  {  // copy: identity, gradient all-reduced
    const Tensor x = leaf(x_r);
    const Tensor y = copy_to_tensor_parallel(x, pg);
    expect_near(y, x_r, kTol, "copy_to_tensor_parallel forward");
    weighted_sum(y, g_r).backward();
    expect_near(x.grad(), g_sum, kTol, "copy_to_tensor_parallel backward");
  }
  {  // reduce: sum, gradient passed through
    const Tensor x = leaf(x_r);
    const Tensor y = reduce_from_tensor_parallel(x, pg);
    expect_near(y, x_sum, kTol, "reduce_from_tensor_parallel forward");
    weighted_sum(y, g_r).backward();
    expect_near(x.grad(), g_r, kTol, "reduce_from_tensor_parallel backward");
  }
  {  // gather along the last dim, gradient's block kept
    const Tensor x = leaf(x_r);
    const Tensor y = gather_from_tensor_parallel(x, pg);
    expect_near(y, cat(xs, 2), kTol, "gather_from_tensor_parallel forward");
    const Tensor g = pattern(y.shape(), 7.0);
    weighted_sum(y, g).backward();
    expect_near(x.grad(), block(g, 2), kTol, "gather_from_tensor_parallel backward");
  }
  {  // scatter along the last dim, gradient all-gathered
    const Tensor whole = pattern({2, 3, 2 * S}, 3.0);
    const Tensor x = leaf(whole);
    const Tensor y = scatter_to_tensor_parallel(x, pg);
    expect_near(y, block(whole, 2), kTol, "scatter_to_tensor_parallel forward");
    weighted_sum(y, block(g_r.reshape({2, 3, 2 * S}), 2)).backward();
    TensorList blocks;
    for (std::int64_t q = 0; q < S; ++q) blocks.push_back(gs[q].reshape({2, 3, 2 * S}).slice(2, q * 2, q * 2 + 2));
    expect_near(x.grad(), cat(blocks, 2), kTol, "scatter_to_tensor_parallel backward");
  }
  {  // sequence: scatter (block of dim 1), gradient all-gathered along dim 1
    const Tensor whole = pattern({2, 2 * S, 3}, 5.0);
    const Tensor x = leaf(whole);
    const Tensor y = scatter_to_sequence_parallel(x, pg);
    expect_near(y, block(whole, 1), kTol, "scatter_to_sequence_parallel forward");
    weighted_sum(y, block(g_r, 1)).backward();
    TensorList blocks;
    for (std::int64_t q = 0; q < S; ++q) blocks.push_back(gs[q].slice(1, q * 2, q * 2 + 2));
    expect_near(x.grad(), cat(blocks, 1), kTol, "scatter_to_sequence_parallel backward");
  }
  {  // sequence: gather along dim 1, gradient reduce-scattered
    const Tensor x = leaf(block(x_r, 1));
    const Tensor y = gather_from_sequence_parallel(x, pg);
    TensorList blocks;
    for (std::int64_t q = 0; q < S; ++q) blocks.push_back(xs[q].slice(1, q * 2, q * 2 + 2));
    expect_near(y, cat(blocks, 1), kTol, "gather_from_sequence_parallel forward");
    weighted_sum(y, g_r).backward();
    expect_near(x.grad(), block(g_sum, 1), kTol, "gather_from_sequence_parallel backward");
  }
  {  // sequence: reduce-scatter along dim 1, gradient all-gathered
    const Tensor x = leaf(x_r);
    const Tensor y = reduce_scatter_to_sequence_parallel(x, pg);
    expect_near(y, block(x_sum, 1), kTol, "reduce_scatter_to_sequence_parallel forward");
    weighted_sum(y, block(g_r, 1)).backward();
    TensorList blocks;
    for (std::int64_t q = 0; q < S; ++q) blocks.push_back(gs[q].slice(1, q * 2, q * 2 + 2));
    expect_near(x.grad(), cat(blocks, 1), kTol, "reduce_scatter_to_sequence_parallel backward");
  }
  // Zero-size and bad inputs.
  expect_near(copy_to_tensor_parallel(zeros({0, 3}, {.dtype = kFloat64}), pg), zeros({0, 3}, {.dtype = kFloat64}), kTol,
              "zero-size copy");
  if (S > 1) EXPECT_THROW(scatter_to_sequence_parallel(zeros({2, S + 1, 3}), pg), ShapeError);
  EXPECT_THROW(gather_from_sequence_parallel(zeros({3}), nullptr), Error);
}

// The layers against their unsharded versions, with and without sequence parallelism.
class TensorParallelLayer : public ::testing::TestWithParam<bool> {};

TEST_P(TensorParallelLayer, ColumnParallelLinearMatchesLinear) {
  auto pg = world();
  const std::int64_t S = pg->size(), r = pg->rank(), T = 2 * S;
  const bool sp = GetParam();
  auto tp = std::make_shared<TensorParallel>(pg, sp);
  // Whole layer: 3 inputs -> two parts of 2S outputs (like Q|K); rank r holds block r of each.
  const nn::ShardSpec spec{0, {2 * S, 2 * S}};
  const Tensor W = pattern({4 * S, 3}, 1.0), b = pattern({4 * S}, 2.0), x_whole = pattern({2, T, 3}, 3.0);
  const Tensor G = pattern({2, T, 4 * S}, 4.0);  // upstream gradient of the whole output
  auto column = std::make_shared<ColumnParallelLinearImpl>(tp, 3, 4 * S, true, spec.parts);
  column->to(kFloat64);
  {
    NoGradGuard no_grad;
    column->weight.copy_(spec.shard(W, static_cast<int>(r), static_cast<int>(S)));
    column->bias.copy_(spec.shard(b, static_cast<int>(r), static_cast<int>(S)));
  }
  EXPECT_EQ(tp->shard_spec(column->weight).parts, spec.parts);
  const Tensor Wr = leaf(W), br = leaf(b), xr = leaf(x_whole);
  weighted_sum(linear(xr, Wr, br), G).backward();

  const Tensor x = leaf(sp ? x_whole.slice(1, r * 2, r * 2 + 2) : x_whole);
  const Tensor y = (*column)(x);  // (2, T, 4S / S)
  const Tensor G_local = nn::ShardSpec{2, spec.parts}.shard(G, static_cast<int>(r), static_cast<int>(S));
  expect_near(y, nn::ShardSpec{2, spec.parts}.shard(linear(x_whole, W, b), static_cast<int>(r), static_cast<int>(S)),
              kTol, "column output");
  weighted_sum(y, G_local).backward();
  expect_near(x.grad(), sp ? xr.grad().slice(1, r * 2, r * 2 + 2) : xr.grad(), kTol, "column input gradient");
  expect_near(column->weight.grad(), spec.shard(Wr.grad(), static_cast<int>(r), static_cast<int>(S)), kTol,
              "column weight gradient");
  expect_near(column->bias.grad(), spec.shard(br.grad(), static_cast<int>(r), static_cast<int>(S)), kTol,
              "column bias gradient");
  // gather_output: the whole output on every rank (one part only).
  auto gathered = std::make_shared<ColumnParallelLinearImpl>(tp, 3, 4 * S, true, std::vector<std::int64_t>{}, true);
  gathered->to(kFloat64);
  {
    NoGradGuard no_grad;
    gathered->weight.copy_(W.slice(0, r * 4, r * 4 + 4));
    gathered->bias.copy_(b.slice(0, r * 4, r * 4 + 4));
  }
  expect_near((*gathered)(sp ? x_whole.slice(1, r * 2, r * 2 + 2) : x_whole), linear(x_whole, W, b), kTol,
              "gathered column output");
  EXPECT_THROW(std::make_shared<ColumnParallelLinearImpl>(tp, 3, 4 * S, true, spec.parts, true), Error);
  if (S > 1) EXPECT_THROW(std::make_shared<ColumnParallelLinearImpl>(tp, 3, 4 * S + 1, true), ShapeError);
}

TEST_P(TensorParallelLayer, RowParallelLinearMatchesLinear) {
  auto pg = world();
  const std::int64_t S = pg->size(), r = pg->rank(), T = 2 * S;
  const bool sp = GetParam();
  auto tp = std::make_shared<TensorParallel>(pg, sp);
  const Tensor W = pattern({3, 2 * S}, 1.0), b = pattern({3}, 2.0), x_whole = pattern({2, T, 2 * S}, 3.0);
  const Tensor G = pattern({2, T, 3}, 4.0);
  const Tensor Wr = leaf(W), br = leaf(b), xr = leaf(x_whole);
  weighted_sum(linear(xr, Wr, br), G).backward();
  for (const bool input_is_parallel : {true, false}) {
    auto row = std::make_shared<RowParallelLinearImpl>(tp, 2 * S, 3, true, input_is_parallel);
    row->to(kFloat64);
    {
      NoGradGuard no_grad;
      row->weight.copy_(W.slice(1, r * 2, r * 2 + 2));
      row->bias.copy_(b);
    }
    const Tensor x = leaf(input_is_parallel ? x_whole.slice(2, r * 2, r * 2 + 2) : x_whole);
    const Tensor y = (*row)(x);  // (2, T, 3), or (2, T / S, 3) under SP
    const Tensor y_whole = linear(x_whole, W, b);
    expect_near(y, sp ? y_whole.slice(1, r * 2, r * 2 + 2) : y_whole, kTol, "row output");
    weighted_sum(y, sp ? G.slice(1, r * 2, r * 2 + 2) : G).backward();
    expect_near(x.grad(), input_is_parallel ? xr.grad().slice(2, r * 2, r * 2 + 2) : xr.grad(), kTol,
                "row input gradient");
    expect_near(row->weight.grad(), Wr.grad().slice(1, r * 2, r * 2 + 2), kTol, "row weight gradient");
    // Under SP each rank's bias gradient covers its part of the sequence: summed, the whole one.
    tp->reduce_partial_grads();
    expect_near(row->bias.grad(), br.grad(), kTol, "row bias gradient");
  }
  EXPECT_THROW((*std::make_shared<RowParallelLinearImpl>(tp, 2 * S, 3))(zeros({2, T, 2 * S + 1})), ShapeError);
}

TEST_P(TensorParallelLayer, VocabParallelEmbeddingMatchesEmbedding) {
  auto pg = world();
  const std::int64_t S = pg->size(), r = pg->rank(), V = 3 * S;
  auto tp = std::make_shared<TensorParallel>(pg, GetParam());
  const Tensor W = pattern({V, 4}, 1.0);
  const Tensor ids = from_vector(std::vector<std::int64_t>{0, V - 1, 2, 1, V - 1, 0}, {2, 3});  // ids of every shard
  const Tensor G = pattern({2, 3, 4}, 2.0);
  const Tensor Wr = leaf(W);
  weighted_sum(embedding(ids, Wr), G).backward();
  auto table = std::make_shared<VocabParallelEmbeddingImpl>(tp, V, 4);
  table->to(kFloat64);
  {
    NoGradGuard no_grad;
    table->weight.copy_(W.slice(0, r * 3, r * 3 + 3));
  }
  const Tensor y = (*table)(ids);
  expect_near(y, embedding(ids, W), kTol, "vocab-parallel embedding output");
  weighted_sum(y, G).backward();
  expect_near(table->weight.grad(), Wr.grad().slice(0, r * 3, r * 3 + 3), kTol, "vocab-parallel embedding gradient");
  EXPECT_THROW((*table)(from_vector(std::vector<std::int64_t>{V}, {1})), IndexError);
  EXPECT_THROW((*table)(from_vector(std::vector<std::int64_t>{-1}, {1})), IndexError);
  EXPECT_THROW((*table)(zeros({2})), DTypeError);
}

INSTANTIATE_TEST_SUITE_P(SequenceParallel, TensorParallelLayer, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "sp" : "tp"; });

// -log softmax(row)[target] averaged over the rows not ignored, in a naive float64 loop over
// the whole logits (columns >= V excluded), and its gradient.
std::pair<double, Tensor> reference_cross_entropy(const Tensor& logits, const std::vector<std::int64_t>& targets,
                                                  std::int64_t V) {
  const std::int64_t N = logits.size(0), Vp = logits.size(1);
  const Tensor x = logits.contiguous();
  const double* p = x.data_ptr<double>();
  std::vector<double> grad(static_cast<std::size_t>(N * Vp), 0.0);
  double total = 0;
  std::int64_t kept = 0;
  for (std::int64_t n = 0; n < N; ++n) kept += targets[n] != -100;
  for (std::int64_t n = 0; n < N; ++n) {
    if (targets[n] == -100) continue;
    double m = -INFINITY, s = 0;
    for (std::int64_t v = 0; v < V; ++v) m = std::max(m, p[n * Vp + v]);
    for (std::int64_t v = 0; v < V; ++v) s += std::exp(p[n * Vp + v] - m);
    total += std::log(s) + m - p[n * Vp + targets[n]];
    for (std::int64_t v = 0; v < V; ++v)
      grad[n * Vp + v] = (std::exp(p[n * Vp + v] - m) / s - (v == targets[n] ? 1.0 : 0.0)) / static_cast<double>(kept);
  }
  return {total / static_cast<double>(kept), from_vector(grad, {N, Vp})};
}

// ZeRO-3's gather dtypes under autocast: autocast's dtype for what only the products read
// (linear and column-parallel weights and biases, a row-parallel weight); float32 for a
// row-parallel bias (added after the all-reduce), norms and embeddings; every parameter's own
// dtype without autocast.
TEST(TensorParallelLayers, ZeRO3GatherDtypesFollowAutocast) {
  auto pg = world();
  const std::int64_t S = pg->size();
  auto tp = std::make_shared<TensorParallel>(pg, false);
  auto model = std::make_shared<nn::ModuleDictImpl>();
  auto column = std::make_shared<ColumnParallelLinearImpl>(tp, 4, 2 * S);
  auto row = std::make_shared<RowParallelLinearImpl>(tp, 2 * S, 4, /*bias=*/true, /*input_is_parallel=*/true);
  auto plain = std::make_shared<nn::LinearImpl>(4, 3);
  auto norm = std::make_shared<nn::LayerNormImpl>(std::int64_t{4});
  auto embed = std::make_shared<nn::EmbeddingImpl>(3, 4);
  for (const auto& [name, module] : std::vector<std::pair<std::string, nn::ModulePtr>>{
           {"column", column}, {"row", row}, {"plain", plain}, {"norm", norm}, {"embed", embed}})
    model->insert(name, module);
  const std::vector<Tensor> params = model->parameters();
  const auto dtype_of = [&](const std::vector<DataType>& dtypes, const Tensor& p) {
    for (std::size_t i = 0; i < params.size(); ++i)
      if (params[i].is_same(p)) return dtypes[i];
    ADD_FAILURE() << "not a parameter";
    return kFloat64;
  };
  const std::vector<DataType> lower = gather_dtypes(*model, params, kFloat16);
  for (const Tensor& p : {column->weight, column->bias, row->weight, plain->weight, plain->bias})
    EXPECT_EQ(dtype_of(lower, p), kFloat16);
  for (const Tensor& p : {row->bias, norm->weight, norm->bias, embed->weight}) EXPECT_EQ(dtype_of(lower, p), kFloat32);
  for (const DataType d : gather_dtypes(*model, params, std::nullopt)) EXPECT_EQ(d, kFloat32);
}

TEST(VocabParallelCrossEntropy, MatchesTheWholeRowsWithPaddingAndIgnoredRows) {
  auto pg = world();
  const std::int64_t S = pg->size(), r = pg->rank(), Vl = 5, Vp = Vl * S, V = Vp - 3;  // 3 padded columns
  const Tensor whole = mul(pattern({6, Vp}, 1.0), 4.0);
  const std::vector<std::int64_t> targets = {0, V - 1, -100, 1, V / 2, -100};
  const auto [expected_loss, expected_grad] = reference_cross_entropy(whole, targets, V);
  const Tensor logits = leaf(whole.slice(1, r * Vl, (r + 1) * Vl));
  const Tensor loss = vocab_parallel_cross_entropy(logits, from_vector(targets, {6}), V, pg);
  EXPECT_NEAR(loss.item<double>(), expected_loss, 1e-12);
  loss.backward();
  expect_near(logits.grad(), expected_grad.slice(1, r * Vl, (r + 1) * Vl), 1e-12, "vocab-parallel cross-entropy gradient");
  // Float32 logits give the same loss to float32 precision.
  const Tensor loss32 = vocab_parallel_cross_entropy(logits.detach().to(kFloat32), from_vector(targets, {6}), V, pg);
  EXPECT_NEAR(loss32.item<double>(), expected_loss, 1e-5);
  // Every row ignored: NaN, like a mean over nothing.
  const Tensor none = vocab_parallel_cross_entropy(logits.detach(), full({6}, std::int64_t{-100}, {.dtype = kInt64}), V, pg);
  EXPECT_TRUE(std::isnan(none.item<double>()));
  // Bad inputs.
  EXPECT_THROW(vocab_parallel_cross_entropy(logits, from_vector(std::vector<std::int64_t>{0, 0, 0, 0, 0, V}, {6}), V, pg),
               IndexError);
  EXPECT_THROW(vocab_parallel_cross_entropy(logits, from_vector(std::vector<std::int64_t>{0, 0}, {2}), V, pg), ShapeError);
  EXPECT_THROW(vocab_parallel_cross_entropy(logits, from_vector(targets, {6}), Vp + 1, pg), ShapeError);
  EXPECT_THROW(vocab_parallel_cross_entropy(logits, from_vector(targets, {6}).to(kInt32), V, pg), DTypeError);
}

}  // namespace
}  // namespace infini::parallel::test::tp_layers_test
