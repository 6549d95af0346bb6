// nn::LLaMA3: logits of a tiny float64 model against a step-by-step float64 reference written
// here (RMSNorm by formula, RoPE on interleaved pairs (2i, 2i+1) as Meta's view_as_complex,
// GQA by repeating kv heads, causal softmax by loops, SwiGLU), the RoPE frequencies against
// Meta's apply_scaling, the checkpoint layout and file round trips, gradients by finite
// differences, autocast against float32, initialisation, sizes and bad inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <numbers>
#include <string>
#include <unistd.h>
#include <vector>

#include "layer_test_util.h"

import infini.nn;

namespace infini::nn::test::llama3_model_test {
namespace {

// C 16, L 2, NH 4, KV 2 (hd 4), V 37, maxT 8; H = round(1.3 * (2 * 64 / 3 = 42)) = 55,
// rounded up to a multiple of 8: 56. With theta 500000, hd 4 has freq[0] = 1 (wavelength
// 2 pi: kept) and freq[1] = 500000^-0.5 (wavelength 4443: in the blended band).
LLaMA3Config tiny_config() {
  return {.max_seq_len = 8, .vocab_size = 37, .num_layers = 2, .num_heads = 4, .num_kv_heads = 2, .channels = 16,
          .ffn_dim_multiplier = 1.3f, .multiple_of = 8, .norm_eps = 1e-5f, .rope_theta = 500000.0f,
          .use_scaled_rope = true};
}

// Meta's llama3 model.py, in float64: freqs = 1 / theta^(arange(0, hd, 2) / hd), then
// apply_scaling (scale_factor 8, low_freq_factor 1, high_freq_factor 4, old_context_len 8192).
std::vector<double> meta_frequencies(std::int64_t hd, double theta, bool use_scaled) {
  std::vector<double> freqs;
  for (std::int64_t j = 0; j < hd; j += 2)
    freqs.push_back(1.0 / std::pow(theta, static_cast<double>(j) / static_cast<double>(hd)));
  if (!use_scaled) return freqs;
  const double scale_factor = 8, low_freq_factor = 1, high_freq_factor = 4, old_context_len = 8192;
  const double low_freq_wavelen = old_context_len / low_freq_factor;
  const double high_freq_wavelen = old_context_len / high_freq_factor;
  std::vector<double> new_freqs;
  for (double freq : freqs) {
    const double wavelen = 2 * std::numbers::pi / freq;
    if (wavelen < high_freq_wavelen) {
      new_freqs.push_back(freq);
    } else if (wavelen > low_freq_wavelen) {
      new_freqs.push_back(freq / scale_factor);
    } else {
      const double smooth = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
      new_freqs.push_back((1 - smooth) * freq / scale_factor + smooth * freq);
    }
  }
  return new_freqs;
}

// y (rows) = W (rows, cols) x (cols).
std::vector<double> matvec(const std::vector<double>& w, std::size_t rows, const std::vector<double>& x) {
  const std::size_t cols = x.size();
  std::vector<double> y(rows, 0.0);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) y[r] += w[r * cols + c] * x[c];
  return y;
}

std::vector<double> rms_norm_ref(const std::vector<double>& x, const std::vector<double>& w, double eps) {
  double ms = 0;
  for (double v : x) ms += v * v;
  ms /= static_cast<double>(x.size());
  std::vector<double> y(x.size());
  for (std::size_t c = 0; c < x.size(); ++c) y[c] = x[c] / std::sqrt(ms + eps) * w[c];
  return y;
}

// Logits (B, T, V) of the model's weights for idx (B, T), step by step in float64.
std::vector<double> reference_logits(LLaMA3Impl& model, const std::vector<std::int64_t>& idx, std::size_t B,
                                     std::size_t T) {
  const LLaMA3Config& cfg = model.config;
  const auto C = static_cast<std::size_t>(cfg.channels), NH = static_cast<std::size_t>(cfg.num_heads),
             KV = static_cast<std::size_t>(cfg.num_kv_heads), V = static_cast<std::size_t>(cfg.vocab_size),
             H = static_cast<std::size_t>(cfg.ffn_hidden_dim()), hd = C / NH;
  const double eps = cfg.norm_eps;
  const std::vector<double> freq = meta_frequencies(static_cast<std::int64_t>(hd), cfg.rope_theta, cfg.use_scaled_rope);
  // Rotates the interleaved pairs (2i, 2i+1) of one head vector at position t.
  auto rotate = [&](std::vector<double> v, std::size_t t) {
    for (std::size_t i = 0; i < hd / 2; ++i) {
      const double a = static_cast<double>(t) * freq[i], x0 = v[2 * i], x1 = v[2 * i + 1];
      v[2 * i] = x0 * std::cos(a) - x1 * std::sin(a);
      v[2 * i + 1] = x0 * std::sin(a) + x1 * std::cos(a);
    }
    return v;
  };
  const std::vector<double> wte = values(model.wte->weight);
  std::vector<double> logits;
  for (std::size_t b = 0; b < B; ++b) {
    // x[t] (C): the residual stream of sequence b.
    std::vector<std::vector<double>> x(T);
    for (std::size_t t = 0; t < T; ++t) {
      const auto row = static_cast<std::size_t>(idx[b * T + t]);
      const auto first = wte.begin() + static_cast<std::ptrdiff_t>(row * C);
      x[t].assign(first, first + static_cast<std::ptrdiff_t>(C));
    }
    for (const auto& block : model.h) {
      const std::vector<double> ln1 = values(block->ln_1->weight), wqkv = values(block->attn->c_attn->weight),
                                wo = values(block->attn->c_proj->weight), ln2 = values(block->ln_2->weight),
                                wup = values(block->mlp->c_fc->weight), wgate = values(block->mlp->c_fc2->weight),
                                wdown = values(block->mlp->c_proj->weight);
      // q[t][h], k[t][g], v[t][g]: head vectors (hd), q and k rotated.
      std::vector<std::vector<std::vector<double>>> q(T), k(T), v(T);
      for (std::size_t t = 0; t < T; ++t) {
        const std::vector<double> qkv = matvec(wqkv, (NH + 2 * KV) * hd, rms_norm_ref(x[t], ln1, eps));
        auto head = [&](std::size_t row_head) {
          return std::vector<double>(qkv.begin() + static_cast<std::ptrdiff_t>(row_head * hd),
                                     qkv.begin() + static_cast<std::ptrdiff_t>((row_head + 1) * hd));
        };
        for (std::size_t h = 0; h < NH; ++h) q[t].push_back(rotate(head(h), t));
        for (std::size_t g = 0; g < KV; ++g) k[t].push_back(rotate(head(NH + g), t));
        for (std::size_t g = 0; g < KV; ++g) v[t].push_back(head(NH + KV + g));
      }
      for (std::size_t t = 0; t < T; ++t) {
        std::vector<double> y(C, 0.0);  // heads side by side
        for (std::size_t h = 0; h < NH; ++h) {
          const std::size_t g = h / (NH / KV);  // repeat_kv: kv head g serves query heads g*rep .. g*rep+rep-1
          std::vector<double> score(t + 1);
          double max_score = -INFINITY;
          for (std::size_t s = 0; s <= t; ++s) {
            score[s] = 0;
            for (std::size_t d = 0; d < hd; ++d) score[s] += q[t][h][d] * k[s][g][d];
            score[s] /= std::sqrt(static_cast<double>(hd));
            max_score = std::max(max_score, score[s]);
          }
          double total = 0;
          for (double& e : score) total += (e = std::exp(e - max_score));
          for (std::size_t s = 0; s <= t; ++s)
            for (std::size_t d = 0; d < hd; ++d) y[h * hd + d] += score[s] / total * v[s][g][d];
        }
        const std::vector<double> attn_out = matvec(wo, C, y);
        for (std::size_t c = 0; c < C; ++c) x[t][c] += attn_out[c];
      }
      for (std::size_t t = 0; t < T; ++t) {
        const std::vector<double> xn = rms_norm_ref(x[t], ln2, eps);
        const std::vector<double> gate = matvec(wgate, H, xn), up = matvec(wup, H, xn);
        std::vector<double> hidden(H);
        for (std::size_t j = 0; j < H; ++j) hidden[j] = gate[j] / (1 + std::exp(-gate[j])) * up[j];
        const std::vector<double> mlp_out = matvec(wdown, C, hidden);
        for (std::size_t c = 0; c < C; ++c) x[t][c] += mlp_out[c];
      }
    }
    const std::vector<double> lnf = values(model.ln_f->weight), head = values(model.lm_head->weight);
    for (std::size_t t = 0; t < T; ++t) {
      const std::vector<double> row = matvec(head, V, rms_norm_ref(x[t], lnf, eps));
      logits.insert(logits.end(), row.begin(), row.end());
    }
  }
  return logits;
}

// Mean over rows of logsumexp(logits row) - logits[target].
double reference_loss(const std::vector<double>& logits, const std::vector<std::int64_t>& targets, std::size_t V) {
  double total = 0;
  for (std::size_t r = 0; r < targets.size(); ++r) {
    double m = -INFINITY, sum = 0;
    for (std::size_t j = 0; j < V; ++j) m = std::max(m, logits[r * V + j]);
    for (std::size_t j = 0; j < V; ++j) sum += std::exp(logits[r * V + j] - m);
    total += m + std::log(sum) - logits[r * V + static_cast<std::size_t>(targets[r])];
  }
  return total / static_cast<double>(targets.size());
}

// Every parameter ~ N(0, 0.3), RMSNorm weights 1 + N(0, 0.3): far from the init, so every
// part of the computation shows in the logits.
void randomize(LLaMA3Impl& model, std::uint64_t seed) {
  for (const auto& [name, param] : model.named_parameters()) {
    std::vector<double> v = sample(param.shape(), seed++);
    for (double& x : v) x *= 0.3;
    if (name.find("ln") != std::string::npos)
      for (double& x : v) x += 1;
    assign(param, v);
  }
}

std::vector<std::int64_t> tokens(std::size_t n, std::int64_t V, std::int64_t mul) {
  std::vector<std::int64_t> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = (static_cast<std::int64_t>(i) * mul + 3) % V;
  return out;
}

Tensor as_idx(const std::vector<std::int64_t>& v, std::int64_t B, std::int64_t T) {
  return from_vector(v, {B, T}, {.dtype = kInt64});
}

TEST(LLaMA3Model, Float64LogitsAndLossMatchAStepByStepReference) {
  LLaMA3 model(tiny_config());
  model->to(kFloat64);
  randomize(*model, 11);
  const std::int64_t B = 2, T = 5, V = 37;
  const std::vector<std::int64_t> idx = tokens(B * T, V, 7), targets = tokens(B * T, V, 5);
  const Tensor logits = model(as_idx(idx, B, T));
  ASSERT_EQ(logits.dtype(), kFloat64);
  const std::vector<double> expected = reference_logits(*model, idx, B, T);
  ASSERT_GT(max_abs(expected), 1.0);  // not a trivial output
  expect_all_near(logits, {B, T, V}, expected, 1e-9);
  EXPECT_NEAR(model->loss(logits, as_idx(targets, B, T)).item<double>(), reference_loss(expected, targets, V), 1e-9);

  // A clone computes the same; the first T' positions do not depend on later tokens (causal).
  const auto copy = std::dynamic_pointer_cast<LLaMA3Impl>(model->clone());
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(max_abs(values(sub((*copy)(as_idx(idx, B, T)), logits))), 0.0);
  const Tensor prefix = model(as_idx(idx, B, T).slice(1, 0, 3));
  expect_close(values(prefix), values(logits.slice(1, 0, 3)), 1e-12);
}

// The float32 model under CPU autocast (bfloat16): the logits come from the lm_head product
// in bfloat16, the loss is float32 and within 2e-2 of the autocast-off loss (yet not equal),
// and every parameter gets a float32 gradient within 5% of the largest autocast-off one.
// RMSNorm, RoPE on bfloat16 heads, grouped-query attention and SwiGLU all run in the mix.
TEST(LLaMA3Model, AutocastBfloat16TracksFloat32) {
  LLaMA3 model(tiny_config());
  randomize(*model, 11);
  const std::int64_t B = 2, T = 5, V = 37;
  const Tensor idx = as_idx(tokens(B * T, V, 7), B, T), targets = as_idx(tokens(B * T, V, 5), B, T);
  const auto run = [&](bool autocast) {
    model->zero_grad();
    Tensor loss;
    {
      AutocastGuard guard(DeviceType::CPU, kBFloat16, autocast);
      const Tensor logits = model(idx);
      EXPECT_EQ(logits.dtype(), autocast ? kBFloat16 : kFloat32);
      loss = model->loss(logits, targets);
    }
    EXPECT_EQ(loss.dtype(), kFloat32);
    loss.backward();
    std::vector<std::vector<double>> grads;
    for (const Tensor& p : model->parameters()) {
      EXPECT_EQ(p.grad().dtype(), kFloat32);
      grads.push_back(values(p.grad()));
    }
    return std::pair{loss.item<double>(), grads};
  };
  const auto [loss32, grads32] = run(false);
  const auto [loss16, grads16] = run(true);
  EXPECT_NEAR(loss16, loss32, 2e-2);
  EXPECT_NE(loss16, loss32);
  ASSERT_EQ(grads16.size(), grads32.size());
  for (std::size_t i = 0; i < grads32.size(); ++i) {
    SCOPED_TRACE(i);
    const double scale = max_abs(grads32[i]);
    ASSERT_GT(scale, 0.0);
    for (std::size_t j = 0; j < grads32[i].size(); ++j) EXPECT_NEAR(grads16[i][j], grads32[i][j], 0.05 * scale);
  }
}

TEST(LLaMA3Model, RopeFrequenciesFollowMetaApplyScaling) {
  // LLaMA 3.1 8B's head dim 128: all three bands of apply_scaling occur.
  const std::vector<double> meta = meta_frequencies(128, 500000.0, true);
  const std::vector<double> plain = meta_frequencies(128, 500000.0, false);
  int kept = 0, divided = 0, blended = 0;
  for (std::size_t i = 0; i < meta.size(); ++i) {
    kept += meta[i] == plain[i];
    divided += meta[i] == plain[i] / 8;
    blended += meta[i] != plain[i] && meta[i] != plain[i] / 8;
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(blended, 0);
  const LLaMA3RopeTable scaled(128, 8192, 500000.0, llmc::RopeScaling{}), unscaled(128, 8192, 500000.0);
  expect_close(scaled.inverse_frequencies, meta, 1e-15);
  expect_close(unscaled.inverse_frequencies, plain, 1e-15);

  // cos / sin of t * freq[i], in float64 and converted; autograd's float32 tables agree.
  const auto [cos64, sin64] = scaled.get(8192, kFloat64, Device::cpu());
  ASSERT_EQ(cos64.shape(), (Shape{8192, 64}));
  const std::vector<double> c = values(cos64), s = values(sin64);
  for (std::size_t t : {0u, 1u, 777u, 8191u})
    for (std::size_t i : {0u, 20u, 45u, 63u}) {
      EXPECT_NEAR(c[t * 64 + i], std::cos(static_cast<double>(t) * meta[i]), 1e-15);
      EXPECT_NEAR(s[t * 64 + i], std::sin(static_cast<double>(t) * meta[i]), 1e-15);
    }
  const auto [cos32, sin32] = scaled.get(100, kFloat32, Device::cpu());
  EXPECT_EQ(cos32.dtype(), kFloat32);
  EXPECT_EQ(cos32.shape(), (Shape{100, 64}));
  const RopeFrequencies autograd_tables = rope_frequencies(128, 100, 500000.0, true);
  EXPECT_LT(max_abs(values(sub(cos32, autograd_tables.cos))), 1e-6);
  EXPECT_LT(max_abs(values(sub(sin32, autograd_tables.sin))), 1e-6);
  expect_error<ShapeError>([&] { (void)scaled.get(8193, kFloat32, Device::cpu()); }, "LLaMA3RopeTable",
                           "sequence length 8193 exceeds the table's 8192 positions");
  expect_error<ShapeError>([] { LLaMA3RopeTable odd(5, 8, 10000.0); }, "LLaMA3RopeTable",
                           "head_dim 5 must be positive and even");
}

TEST(LLaMA3Model, LlmcTensorsFollowTheLayoutAndRoundTrip) {
  manual_seed(1);
  LLaMA3 model(tiny_config());
  const auto tensors = model->llmc_tensors();
  const auto layout = llmc::llama3_layout(model->config.to_llmc());
  ASSERT_EQ(tensors.size(), layout.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(tensors[i].first, layout[i].first);
    EXPECT_EQ(tensors[i].second.shape(), layout[i].second) << layout[i].first;
    EXPECT_EQ(tensors[i].second.dtype(), kFloat32);
  }
  // qkvw (L, (4 + 2*2) * 4, 16): layer 1 is row 1; fc2w is the gate c_fc2; wlmhead is last.
  EXPECT_EQ(tensors[2].first, "qkvw");
  EXPECT_EQ(tensors[2].second.shape(), (Shape{2, 32, 16}));
  EXPECT_EQ(max_abs(values(sub(tensors[2].second.select(0, 1), model->h[1]->attn->c_attn->weight))), 0.0);
  EXPECT_EQ(tensors[6].first, "fc2w");
  EXPECT_EQ(max_abs(values(sub(tensors[6].second.select(0, 0), model->h[0]->mlp->c_fc2->weight))), 0.0);
  EXPECT_EQ(tensors[6].second.shape(), (Shape{2, 56, 16}));
  EXPECT_EQ(max_abs(values(sub(tensors.back().second, model->lm_head->weight))), 0.0);

  manual_seed(2);
  LLaMA3 other(tiny_config());
  other->load_llmc_tensors(tensors);
  const auto again = other->llmc_tensors();
  for (std::size_t i = 0; i < tensors.size(); ++i)
    EXPECT_EQ(max_abs(values(sub(again[i].second, tensors[i].second))), 0.0) << tensors[i].first;
}

TEST(LLaMA3Model, CheckpointFileRoundTripGivesTheSameLogits) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("infini_llama3_model_" + std::to_string(::getpid()) + ".bin");
  manual_seed(3);
  LLaMA3 model(tiny_config());
  randomize(*model, 40);
  llmc::write_llama3_checkpoint(path, {.config = model->config.to_llmc(), .tensors = model->llmc_tensors()});
  const llmc::LLaMA3Checkpoint checkpoint = llmc::read_llama3_checkpoint(path);
  std::filesystem::remove(path);
  EXPECT_EQ(LLaMA3Config::from_llmc(checkpoint.config), model->config);
  manual_seed(4);
  LLaMA3 loaded(LLaMA3Config::from_llmc(checkpoint.config));
  loaded->load_llmc_tensors(checkpoint.tensors);
  const Tensor idx = as_idx(tokens(12, 37, 11), 2, 6);
  const Tensor expected = model(idx);
  EXPECT_EQ(max_abs(values(sub(loaded(idx), expected))), 0.0);
  EXPECT_GT(max_abs(values(expected)), 0.1);
}

TEST(LLaMA3Model, GradientsMatchFiniteDifferences) {
  // C 8, L 2, NH 2, KV 1 (hd 4), V 11, H = 2 * 32 / 3 = 21 rounded up to 24.
  LLaMA3 model(LLaMA3Config{.max_seq_len = 4, .vocab_size = 11, .num_layers = 2, .num_heads = 2, .num_kv_heads = 1,
                            .channels = 8, .ffn_dim_multiplier = 0, .multiple_of = 4, .norm_eps = 1e-5f,
                            .rope_theta = 10000.0f, .use_scaled_rope = false});
  model->to(kFloat64);
  randomize(*model, 70);
  const Tensor idx = as_idx({1, 4, 9, 4, 0, 10}, 2, 3), targets = as_idx({4, 9, 2, 0, 10, 3}, 2, 3);
  const TensorList params = model->parameters();
  expect_gradcheck([&](const TensorList&) { return TensorList{model->loss(model(idx), targets)}; }, params);

  // llmc_tensors(true) stacks the gradients in the checkpoint layout.
  model->zero_grad();
  model->loss(model(idx), targets).backward();
  const auto grads = model->llmc_tensors(/*gradients=*/true);
  EXPECT_EQ(grads[6].first, "fc2w");
  expect_close(values(grads[6].second.select(0, 1)), values(model->h[1]->mlp->c_fc2->weight.grad()), 1e-7);
  expect_close(values(grads.back().second), values(model->lm_head->weight.grad()), 1e-7);
}

TEST(LLaMA3Model, ParameterNamesSizesAndInitialisation) {
  manual_seed(5);
  LLaMA3Config config = tiny_config();
  config.channels = 64;
  config.vocab_size = 500;
  LLaMA3 model(config);
  const std::vector<std::string> expected_names = {
      "wte.weight",         "h.0.ln_1.weight",    "h.0.attn.c_attn.weight", "h.0.attn.c_proj.weight",
      "h.0.ln_2.weight",    "h.0.mlp.c_fc.weight", "h.0.mlp.c_fc2.weight",  "h.0.mlp.c_proj.weight"};
  const std::vector<std::string> all = names(model->named_parameters());
  ASSERT_EQ(all.size(), 1 + 2 * 7 + 2u);
  EXPECT_EQ(std::vector<std::string>(all.begin(), all.begin() + 8), expected_names);
  EXPECT_EQ(all[all.size() - 2], "ln_f.weight");
  EXPECT_EQ(all.back(), "lm_head.weight");
  EXPECT_TRUE(model->buffers().empty());  // the RoPE tables are not state

  // N(0, 0.02) for matrices and the embedding, RMSNorm weights 1.
  EXPECT_NEAR(std_of(values(model->wte->weight)), 0.02, 0.001);
  EXPECT_NEAR(std_of(values(model->h[1]->attn->c_attn->weight)), 0.02, 0.001);
  EXPECT_NEAR(std_of(values(model->h[0]->mlp->c_proj->weight)), 0.02, 0.001);
  EXPECT_NEAR(std_of(values(model->lm_head->weight)), 0.02, 0.001);
  EXPECT_NEAR(mean_of(values(model->lm_head->weight)), 0.0, 0.001);
  EXPECT_EQ(std_of(values(model->h[1]->ln_2->weight)), 0.0);
  EXPECT_EQ(mean_of(values(model->ln_f->weight)), 1.0);

  // Meta's sizes. LLaMA 3.2 1B has 1235814400 parameters with its LM head tied to the
  // embedding; ours is separate: V * C more.
  const LLaMA3Config b1 = LLaMA3Config::from_name("llama3_1B");
  EXPECT_EQ(b1, LLaMA3Config{});
  EXPECT_EQ(b1.ffn_hidden_dim(), 8192);
  EXPECT_EQ(LLaMA3Config::from_name("llama3_3B").ffn_hidden_dim(), 8192);
  EXPECT_EQ(LLaMA3Config::from_name("llama3_8B").ffn_hidden_dim(), 14336);
  std::int64_t count = 0;
  for (const auto& [name, shape] : llmc::llama3_layout(b1.to_llmc())) {
    std::int64_t n = 1;
    for (std::int64_t d : shape) n *= d;
    count += n;
  }
  EXPECT_EQ(count, 1235814400 + 128256 * 2048);
  std::int64_t tiny_count = 0, tiny_layout = 0;
  for (const Tensor& p : model->parameters()) tiny_count += p.numel();
  for (const auto& [name, t] : model->llmc_tensors()) tiny_layout += t.numel();
  EXPECT_EQ(tiny_count, tiny_layout);
}

TEST(LLaMA3Model, RejectsBadConfigsAndInputs) {
  auto bad = [](auto change) {
    LLaMA3Config c = tiny_config();
    change(c);
    return c;
  };
  expect_error<Error>([&] { LLaMA3 m(bad([](auto& c) { c.channels = 18; })); }, "LLaMA3Config",
                      "channels 18 is not a multiple of num_heads 4");
  expect_error<Error>([&] { LLaMA3 m(bad([](auto& c) { c.num_kv_heads = 3; })); }, "LLaMA3Config",
                      "num_heads 4 is not a multiple of num_kv_heads 3");
  expect_error<Error>([&] { LLaMA3 m(bad([](auto& c) { c.channels = 12; })); }, "LLaMA3Config",
                      "the head dim channels / num_heads = 3 must be even");
  expect_error<Error>([&] { LLaMA3 m(bad([](auto& c) { c.num_layers = 0; })); }, "LLaMA3Config",
                      "num_layers must be >= 1, got 0");
  expect_error<Error>([&] { LLaMA3 m(bad([](auto& c) { c.ffn_dim_multiplier = -1; })); }, "LLaMA3Config",
                      "ffn_dim_multiplier must be 0 (none) or in [0.01, 100], got -1");
  expect_error<Error>([&] { LLaMA3 m(bad([](auto& c) { c.norm_eps = 0; })); }, "LLaMA3Config",
                      "norm_eps must be finite and > 0, got 0");
  expect_error<Error>([&] { LLaMA3 m(bad([](auto& c) { c.rope_theta = NAN; })); }, "LLaMA3Config",
                      "rope_theta must be finite and > 0");
  expect_error<Error>([] { (void)LLaMA3Config::from_name("llama3_70B"); }, "LLaMA3Config.from_name",
                      "unknown model \"llama3_70B\"");

  LLaMA3 model(tiny_config());
  expect_error<ShapeError>([&] { (void)model(zeros({2, 3})); }, "LLaMA3", "expected idx (B, T) int64");
  expect_error<ShapeError>([&] { (void)model(zeros({1, 9}, {.dtype = kInt64})); }, "LLaMA3",
                           "sequence length 9 exceeds max_seq_len 8");
  expect_error<ShapeError>([&] { (void)model->loss(zeros({2, 3, 37}), zeros({2, 4}, {.dtype = kInt64})); },
                           "LLaMA3.loss", "expected logits (B, T, 37) and targets (B, T)");
  expect_error<ShapeError>([&] { (void)(*model->h[0]->attn)(zeros({2, 3, 8})); }, "LLaMA3Attention",
                           "expected x (B, T, 16)");
  auto tensors = model->llmc_tensors();
  tensors[6].first = "fc3w";
  expect_error<Error>([&] { model->load_llmc_tensors(tensors); }, "LLaMA3.load_llmc_tensors",
                      "tensor 6 should be \"fc2w\", got \"fc3w\"");
  tensors = model->llmc_tensors();
  tensors[2].second = zeros({2, 48, 16});  // q, k, v of 4 heads each: not GQA's 32 rows
  expect_error<ShapeError>([&] { model->load_llmc_tensors(tensors); }, "LLaMA3.load_llmc_tensors",
                           "\"qkvw\" should have shape");
  tensors.pop_back();
  expect_error<Error>([&] { model->load_llmc_tensors(tensors); }, "LLaMA3.load_llmc_tensors",
                      "expected 10 tensors, got 9");
  expect_error<Error>([&] { (void)model->llmc_tensors(true); }, "LLaMA3.llmc_tensors", "has no gradient");
}

}  // namespace
}  // namespace infini::nn::test::llama3_model_test
