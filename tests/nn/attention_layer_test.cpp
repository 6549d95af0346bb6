// MultiheadAttention against projections and an explicit per-head softmax in float64: both
// layouts, unbatched inputs, self-attention, every mask kind, kdim / vdim; gradients by
// gradcheck, parameters and their initialisation, state dict names, clone, hooks and errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "layer_test_util.h"

import infini.nn;

namespace infini::nn::attention_layer_test {
namespace {

using test::expect_error;
using test::make;
using test::sample;
using test::values;

constexpr double kInf = std::numeric_limits<double>::infinity();

// The additive score mask of (batch b, head h, query i, key j): 0, -inf or any value.
using MaskFn = std::function<double(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j)>;
const MaskFn kNoMask = [](std::int64_t, std::int64_t, std::int64_t, std::int64_t) { return 0.0; };

// y (rows, out) = x (rows, in) W^T + bias, W (out, in).
std::vector<double> project(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& bias,
                            std::int64_t rows, std::int64_t in, std::int64_t out) {
  std::vector<double> y;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t o = 0; o < out; ++o) {
      double acc = bias.empty() ? 0.0 : bias[o];
      for (std::int64_t i = 0; i < in; ++i) acc += x[r * in + i] * w[o * in + i];
      y.push_back(acc);
    }
  return y;
}

// The layer's parameters, split as the reference uses them.
struct Weights {
  std::vector<double> wq, wk, wv, bq, bk, bv, wo, bo;
};

Weights weights_of(const MultiheadAttention& mha) {
  Weights w;
  const std::int64_t e = mha->embed_dim;
  const auto rows = [](const Tensor& t, std::int64_t from, std::int64_t count) {
    return values(t.narrow(0, from, count));
  };
  if (mha->in_proj_weight.defined()) {
    w.wq = rows(mha->in_proj_weight, 0, e);
    w.wk = rows(mha->in_proj_weight, e, e);
    w.wv = rows(mha->in_proj_weight, 2 * e, e);
  } else {
    w.wq = values(mha->q_proj_weight);
    w.wk = values(mha->k_proj_weight);
    w.wv = values(mha->v_proj_weight);
  }
  if (mha->in_proj_bias.defined()) {
    w.bq = rows(mha->in_proj_bias, 0, e);
    w.bk = rows(mha->in_proj_bias, e, e);
    w.bv = rows(mha->in_proj_bias, 2 * e, e);
    w.bo = values(mha->out_proj->bias);
  }
  w.wo = values(mha->out_proj->weight);
  return w;
}

// Multi-head attention of batch-first q (B, L, E), k (B, S, kdim), v (B, S, vdim) -> (B, L, E).
std::vector<double> attention_reference(const MultiheadAttention& mha, const std::vector<double>& q,
                                        const std::vector<double>& k, const std::vector<double>& v, std::int64_t b,
                                        std::int64_t l, std::int64_t s, const MaskFn& mask = kNoMask) {
  const Weights w = weights_of(mha);
  const std::int64_t e = mha->embed_dim, heads = mha->num_heads, d = e / heads;
  const std::vector<double> qp = project(q, w.wq, w.bq, b * l, e, e);
  const std::vector<double> kp = project(k, w.wk, w.bk, b * s, mha->kdim, e);
  const std::vector<double> vp = project(v, w.wv, w.bv, b * s, mha->vdim, e);
  std::vector<double> out(static_cast<std::size_t>(b * l * e), 0.0);
  for (std::int64_t n = 0; n < b; ++n)
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t i = 0; i < l; ++i) {
        std::vector<double> score(static_cast<std::size_t>(s));
        double top = -kInf;
        for (std::int64_t j = 0; j < s; ++j) {
          double dot = 0;
          for (std::int64_t c = 0; c < d; ++c) dot += qp[(n * l + i) * e + h * d + c] * kp[(n * s + j) * e + h * d + c];
          score[j] = dot / std::sqrt(static_cast<double>(d)) + mask(n, h, i, j);
          top = std::max(top, score[j]);
        }
        double total = 0;
        for (double& x : score) total += (x = std::exp(x - top));
        for (std::int64_t j = 0; j < s; ++j)
          for (std::int64_t c = 0; c < d; ++c)
            out[(n * l + i) * e + h * d + c] += score[j] / total * vp[(n * s + j) * e + h * d + c];
      }
  return project(out, w.wo, w.bo, b * l, e, e);
}

// A float64 layer with every parameter (biases too) given seeded N(0, 1) values.
MultiheadAttention seeded(std::int64_t embed_dim, std::int64_t heads, MultiheadAttentionOptions options = {}) {
  MultiheadAttention mha(embed_dim, heads, options);
  mha->to(kFloat64);
  std::uint64_t seed = 100;
  for (const Tensor& p : mha->parameters()) test::assign(p, sample(p.shape(), seed++));
  return mha;
}

void expect_all_near(const Tensor& actual, const Shape& shape, const std::vector<double>& expected) {
  EXPECT_EQ(actual.shape(), shape);
  test::expect_close(values(actual), expected, 1e-10);
}

TEST(MultiheadAttentionLayer, BatchFirstCrossAttentionMatchesExplicitSoftmax) {
  auto mha = seeded(6, 2, {.batch_first = true});
  const std::vector<double> q = sample({2, 3, 6}, 1), k = sample({2, 4, 6}, 2), v = sample({2, 4, 6}, 3);
  expect_all_near(mha(make({2, 3, 6}, q), make({2, 4, 6}, k), make({2, 4, 6}, v)), {2, 3, 6},
                  attention_reference(mha, q, k, v, 2, 3, 4));
}

TEST(MultiheadAttentionLayer, SequenceFirstDefaultAndUnbatchedInputs) {
  auto mha = seeded(6, 3);
  EXPECT_FALSE(mha->batch_first);
  const std::vector<double> q = sample({2, 3, 6}, 4), k = sample({2, 5, 6}, 5), v = sample({2, 5, 6}, 6);
  // (T, B, E) inputs are the batch-first ones transposed; so is the output.
  const auto seq_first = [](const std::vector<double>& x, const Shape& batch_first_shape) {
    return make(batch_first_shape, x).transpose(0, 1).contiguous();
  };
  const Tensor y = mha(seq_first(q, {2, 3, 6}), seq_first(k, {2, 5, 6}), seq_first(v, {2, 5, 6}));
  EXPECT_EQ(y.shape(), (Shape{3, 2, 6}));
  expect_all_near(y.transpose(0, 1), {2, 3, 6}, attention_reference(mha, q, k, v, 2, 3, 5));
  // Unbatched (T, E): the first batch element alone.
  const std::vector<double> q0(q.begin(), q.begin() + 18), k0(k.begin(), k.begin() + 30), v0(v.begin(), v.begin() + 30);
  expect_all_near(mha(make({3, 6}, q0), make({5, 6}, k0), make({5, 6}, v0)), {3, 6},
                  attention_reference(mha, q0, k0, v0, 1, 3, 5));
}

TEST(MultiheadAttentionLayer, SelfAttentionThroughEveryEntryPoint) {
  auto mha = seeded(8, 2, {.batch_first = true});
  const std::vector<double> x = sample({2, 4, 8}, 7);
  const std::vector<double> expected = attention_reference(mha, x, x, x, 2, 4, 4);
  const Tensor xt = make({2, 4, 8}, x);
  expect_all_near(mha(xt), {2, 4, 8}, expected);            // Module::operator()(x)
  expect_all_near(mha(xt, xt, xt), {2, 4, 8}, expected);    // the packed projection
  expect_all_near(mha->forward(xt), {2, 4, 8}, expected);
  Sequential net(mha);
  expect_all_near(net(xt), {2, 4, 8}, expected);
}

TEST(MultiheadAttentionLayer, MasksFollowMultiheadAttentionConventions) {
  auto mha = seeded(4, 2, {.batch_first = true});
  const std::int64_t b = 2, l = 3, s = 4;
  const std::vector<double> q = sample({b, l, 4}, 8), k = sample({b, s, 4}, 9), v = sample({b, s, 4}, 10);
  const Tensor qt = make({b, l, 4}, q), kt = make({b, s, 4}, k), vt = make({b, s, 4}, v);
  const auto reference = [&](const MaskFn& mask) { return attention_reference(mha, q, k, v, b, l, s, mask); };

  // bool attn_mask (L, S): true = may not attend.
  const std::vector<bool> blocked{false, true, false, true, true, false, false, false, false, false, true, false};
  std::vector<double> blocked_values(blocked.begin(), blocked.end());
  const Tensor bool_mask = make({l, s}, blocked_values).to(kBool);
  const MaskFn blocked_fn = [&](std::int64_t, std::int64_t, std::int64_t i, std::int64_t j) {
    return blocked[i * s + j] ? -kInf : 0.0;
  };
  expect_all_near(mha(qt, kt, vt, bool_mask), {b, l, 4}, reference(blocked_fn));
  const Tensor strided_mask = bool_mask.t().contiguous().t();  // the same mask, column-major
  expect_all_near(mha(qt, kt, vt, strided_mask), {b, l, 4}, reference(blocked_fn));

  // float attn_mask (B * H, L, S), added to the scores.
  const std::vector<double> added = sample({b * 2, l, s}, 11);
  expect_all_near(mha(qt, kt, vt, make({b * 2, l, s}, added)), {b, l, 4},
                  reference([&](std::int64_t n, std::int64_t h, std::int64_t i, std::int64_t j) {
                    return added[((n * 2 + h) * l + i) * s + j];
                  }));

  // bool key_padding_mask (B, S): true = ignore the key; combined with the bool attn_mask.
  const std::vector<double> padded{0, 0, 1, 1, 0, 0, 0, 1};
  const Tensor padding = make({b, s}, padded).to(kBool);
  const MaskFn padding_fn = [&](std::int64_t n, std::int64_t, std::int64_t, std::int64_t j) {
    return padded[n * s + j] != 0 ? -kInf : 0.0;
  };
  expect_all_near(mha(qt, kt, vt, {}, false, false, padding), {b, l, 4}, reference(padding_fn));
  expect_all_near(mha(qt, kt, vt, bool_mask, false, false, padding), {b, l, 4},
                  reference([&](std::int64_t n, std::int64_t h, std::int64_t i, std::int64_t j) {
                    return blocked_fn(n, h, i, j) + padding_fn(n, h, i, j);
                  }));

  // Every key of batch element 1 ignored: its outputs are NaN, element 0's are not.
  const Tensor all_of_one = make({b, s}, {0, 0, 0, 0, 1, 1, 1, 1}).to(kBool);
  const std::vector<double> y = values(mha(qt, kt, vt, {}, false, false, all_of_one));
  for (std::size_t i = 0; i < y.size(); ++i) EXPECT_EQ(std::isnan(y[i]), i >= y.size() / 2) << "element " << i;

  // is_causal: key j > query i masked; alone, and with a float key_padding_mask.
  const MaskFn causal_fn = [](std::int64_t, std::int64_t, std::int64_t i, std::int64_t j) {
    return j > i ? -kInf : 0.0;
  };
  expect_all_near(mha(qt, kt, vt, {}, true), {b, l, 4}, reference(causal_fn));
  const std::vector<double> soft = sample({b, s}, 12);
  expect_all_near(mha(qt, kt, vt, {}, true, false, make({b, s}, soft)), {b, l, 4},
                  reference([&](std::int64_t n, std::int64_t h, std::int64_t i, std::int64_t j) {
                    return causal_fn(n, h, i, j) + soft[n * s + j];
                  }));
}

TEST(MultiheadAttentionLayer, SeparateKeyAndValueDims) {
  auto mha = seeded(6, 3, {.kdim = 4, .vdim = 5, .batch_first = true});
  EXPECT_EQ(test::names(mha->named_parameters()),
            (std::vector<std::string>{"q_proj_weight", "k_proj_weight", "v_proj_weight", "in_proj_bias",
                                      "out_proj.weight", "out_proj.bias"}));
  EXPECT_FALSE(mha->in_proj_weight.defined());
  EXPECT_EQ(mha->k_proj_weight.shape(), (Shape{6, 4}));
  EXPECT_EQ(mha->v_proj_weight.shape(), (Shape{6, 5}));
  const std::vector<double> q = sample({2, 2, 6}, 13), k = sample({2, 3, 4}, 14), v = sample({2, 3, 5}, 15);
  expect_all_near(mha(make({2, 2, 6}, q), make({2, 3, 4}, k), make({2, 3, 5}, v)), {2, 2, 6},
                  attention_reference(mha, q, k, v, 2, 2, 3));
}

TEST(MultiheadAttentionLayer, ParameterAndInputGradientsPassGradcheck) {
  auto mha = seeded(4, 2);
  const Tensor q = make({2, 2, 4}, sample({2, 2, 4}, 16)).requires_grad_();
  const Tensor kv = make({3, 2, 4}, sample({3, 2, 4}, 17)).requires_grad_();
  const Tensor padding = make({2, 3}, {0, 0, 1, 0, 0, 0}).to(kBool);
  test::expect_gradcheck(
      [&](const TensorList&) { return TensorList{mha(q, kv, kv, {}, false, false, padding)}; },
      {mha->in_proj_weight, mha->in_proj_bias, mha->out_proj->weight, mha->out_proj->bias, q, kv});
  // Self-attention (the packed projection), causal.
  const Tensor x = make({3, 4}, sample({3, 4}, 18)).requires_grad_();
  test::expect_gradcheck([&](const TensorList&) { return TensorList{mha(x, x, x, {}, true)}; },
                         {mha->in_proj_weight, mha->in_proj_bias, x});
}

TEST(MultiheadAttentionLayer, ParametersInitialisationAndStateDict) {
  MultiheadAttention mha(64, 4);
  EXPECT_EQ(test::names(mha->named_parameters()),
            (std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"}));
  EXPECT_EQ(mha->in_proj_weight.shape(), (Shape{192, 64}));
  EXPECT_EQ(mha->in_proj_bias.shape(), (Shape{192}));
  EXPECT_EQ(mha->out_proj->weight.shape(), (Shape{64, 64}));
  EXPECT_EQ(mha->head_dim, 16);
  // xavier_uniform_ on (3E, E): bound sqrt(6 / (E + 3E)); out_proj.weight as Linear: 1 / sqrt(E).
  const double in_bound = std::sqrt(6.0 / 256.0), out_bound = 1.0 / 8.0;
  EXPECT_LE(test::max_abs(values(mha->in_proj_weight)), in_bound);
  EXPECT_GE(test::max_abs(values(mha->in_proj_weight)), 0.95 * in_bound);
  EXPECT_LE(test::max_abs(values(mha->out_proj->weight)), out_bound);
  EXPECT_GE(test::max_abs(values(mha->out_proj->weight)), 0.9 * out_bound);
  EXPECT_EQ(test::max_abs(values(mha->in_proj_bias)), 0.0);
  EXPECT_EQ(test::max_abs(values(mha->out_proj->bias)), 0.0);
  EXPECT_EQ(test::keys(mha->state_dict()),
            (std::vector<std::string>{"in_proj_bias", "in_proj_weight", "out_proj.bias", "out_proj.weight"}));

  // reset_parameters(generator): equally seeded generators, equal parameters; biases zero again.
  MultiheadAttention other(64, 4);
  Generator g1(3), g2(3);
  test::assign(mha->in_proj_bias, std::vector<double>(192, 1.0));
  mha->reset_parameters(&g1);
  other->reset_parameters(&g2);
  EXPECT_EQ(values(mha->in_proj_weight), values(other->in_proj_weight));
  EXPECT_EQ(values(mha->out_proj->weight), values(other->out_proj->weight));
  EXPECT_EQ(test::max_abs(values(mha->in_proj_bias)), 0.0);

  MultiheadAttention plain(8, 2, {.bias = false});
  EXPECT_EQ(test::keys(plain->state_dict()), (std::vector<std::string>{"in_proj_weight", "out_proj.weight"}));
  EXPECT_FALSE(plain->in_proj_bias.defined());
}

TEST(MultiheadAttentionLayer, CloneHooksAndPrinting) {
  auto mha = seeded(4, 2, {.batch_first = true});
  const Tensor x = make({1, 3, 4}, sample({1, 3, 4}, 19));
  auto copy = std::dynamic_pointer_cast<MultiheadAttentionImpl>(mha->clone());
  ASSERT_TRUE(copy);
  EXPECT_TRUE(copy->batch_first);
  EXPECT_EQ(values((*copy)(x, x, x)), values(mha(x, x, x)));
  EXPECT_NE(copy->out_proj.get(), mha->out_proj.get());
  EXPECT_EQ(copy->out_proj, copy->named_children()[0].second);
  EXPECT_NE(copy->in_proj_weight.data_ptr(), mha->in_proj_weight.data_ptr());

  std::size_t seen = 0;
  mha->register_forward_pre_hook([&](Module&, const TensorList& inputs) { seen = inputs.size(); });
  mha->register_forward_hook([](Module&, const TensorList&, Tensor& out) { out = mul(out, 0.0); });
  EXPECT_EQ(test::max_abs(values(mha(x, x, x))), 0.0);
  EXPECT_EQ(seen, 3u);
  mha(x);
  EXPECT_EQ(seen, 1u);

  EXPECT_EQ(MultiheadAttention(8, 2, {.dropout = 0.1, .batch_first = true})->str(),
            "MultiheadAttention(embed_dim=8, num_heads=2, dropout=0.1, batch_first=true\n"
            "  (out_proj): Linear(in_features=8, out_features=8, bias=true)\n)");
}

TEST(MultiheadAttentionLayer, DropoutOnlyInTraining) {
  auto mha = seeded(8, 2, {.dropout = 0.5, .batch_first = true});
  const std::vector<double> x = sample({2, 5, 8}, 20);
  const Tensor xt = make({2, 5, 8}, x);
  mha->eval();
  expect_all_near(mha(xt), {2, 5, 8}, attention_reference(mha, x, x, x, 2, 5, 5));
  mha->train();
  EXPECT_NE(values(mha(xt)), values(mha(xt)));  // fresh dropout masks
}

TEST(MultiheadAttentionLayer, BadOptionsNameTheLayer) {
  expect_error<ShapeError>([] { MultiheadAttention(6, 4); }, "MultiheadAttention", "divisible by num_heads=4");
  expect_error<ShapeError>([] { MultiheadAttention(0, 1); }, "MultiheadAttention", "embed_dim and num_heads");
  expect_error<ShapeError>([] { MultiheadAttention(4, 2, {.kdim = 0}); }, "MultiheadAttention", "kdim");
  expect_error<Error>([] { MultiheadAttention(4, 2, {.dropout = 1.0}); }, "MultiheadAttention", "[0, 1)");
}

TEST(MultiheadAttentionLayer, BadInputsNameTheLayer) {
  MultiheadAttention mha(4, 2);
  const Tensor x = zeros({3, 2, 4});
  const std::string op = "MultiheadAttention";
  expect_error<Error>([&] { mha(x, x, x, {}, false, true); }, op, "need_weights");
  expect_error<Error>([&] { mha(x, x, x, zeros({3, 3}), true); }, op, "either attn_mask or is_causal");
  expect_error<ShapeError>([&] { mha(zeros({3, 2, 5})); }, op, "with 4, 4 and 4 features");
  expect_error<ShapeError>([&] { mha(zeros({2, 3, 2, 4})); }, op, "expected a query (T, B, features)");
  expect_error<ShapeError>([&] { mha(x, zeros({3, 4}), zeros({3, 4})); }, op, "all be batched or all unbatched");
  expect_error<ShapeError>([&] { mha(x, zeros({3, 1, 4}), zeros({3, 1, 4})); }, op, "share the batch size");
  expect_error<ShapeError>([&] { mha(x, zeros({3, 2, 4}), zeros({4, 2, 4})); }, op, "sequence length");
  expect_error<ShapeError>([&] { mha(x, x, x, zeros({3, 4})); }, op, "attn_mask of shape [3, 3] or [4, 3, 3]");
  expect_error<DTypeError>([&] { mha(x, x, x, zeros({3, 3}, {.dtype = kInt64})); }, op, "attn_mask must be bool");
  expect_error<ShapeError>([&] { mha(x, x, x, {}, false, false, zeros({3, 2})); }, op,
                           "key_padding_mask of shape [2, 3]");
  expect_error<DTypeError>([&] { mha(zeros({3, 2, 4}, {.dtype = kFloat64})); }, op, "linear");
}

}  // namespace
}  // namespace infini::nn::attention_layer_test
