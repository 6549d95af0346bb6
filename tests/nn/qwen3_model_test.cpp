// nn::Qwen3 against transformers' Qwen3ForCausalLM semantics, from Hugging Face-named weights:
// a float64 forward written here from modeling_qwen3.py (RMSNorm by formula, q_norm / k_norm
// per head before RoPE, rotate-half RoPE on (i, i + hd/2), head_dim independent of C / NH, GQA,
// causal softmax by loops, SwiGLU, tied or untied head) on weights the test writes as a
// directory; the directory round trip, KV-cached generation, gradients by finite differences,
// LoRA adapters in PEFT's names and order, and refused configs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "layer_test_util.h"

import infini.nn;

namespace infini::nn::test::qwen3_model_test {
namespace {

namespace fs = std::filesystem;

// C 16, NH 4, KV 2, hd 6 (not C / NH = 4: q_proj is 16 -> 24), H 20, L 2, V 29, maxT 8.
struct Sizes {
  std::int64_t C = 16, NH = 4, KV = 2, hd = 6, H = 20, L = 2, V = 29, maxT = 8;
  double eps = 1e-6, theta = 100;  // a small theta: every pair rotates visibly within 8 positions
  bool tied = false;
};

std::string config_json(const Sizes& s, const std::string& extra = "") {
  std::ostringstream out;
  out << "{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", \"hidden_size\": " << s.C
      << ", \"intermediate_size\": " << s.H << ", \"num_attention_heads\": " << s.NH
      << ", \"num_key_value_heads\": " << s.KV << ", \"head_dim\": " << s.hd << ", \"num_hidden_layers\": " << s.L
      << ", \"vocab_size\": " << s.V << ", \"max_position_embeddings\": " << s.maxT << ", \"rms_norm_eps\": " << s.eps
      << ", \"rope_theta\": " << s.theta << ", \"hidden_act\": \"silu\", \"attention_bias\": false"
      << ", \"tie_word_embeddings\": " << (s.tied ? "true" : "false") << extra << "}";
  return out.str();
}

// transformers' tensors of a random model, float64 values exactly representable in float32.
using Weights = std::map<std::string, std::vector<double>>;
std::map<std::string, Shape> hf_shapes(const Sizes& s) {
  std::map<std::string, Shape> shapes = {{"model.embed_tokens.weight", {s.V, s.C}}, {"model.norm.weight", {s.C}}};
  if (!s.tied) shapes["lm_head.weight"] = {s.V, s.C};
  for (std::int64_t l = 0; l < s.L; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    shapes[p + "input_layernorm.weight"] = {s.C};
    shapes[p + "post_attention_layernorm.weight"] = {s.C};
    shapes[p + "self_attn.q_proj.weight"] = {s.NH * s.hd, s.C};
    shapes[p + "self_attn.k_proj.weight"] = {s.KV * s.hd, s.C};
    shapes[p + "self_attn.v_proj.weight"] = {s.KV * s.hd, s.C};
    shapes[p + "self_attn.o_proj.weight"] = {s.C, s.NH * s.hd};
    shapes[p + "self_attn.q_norm.weight"] = {s.hd};
    shapes[p + "self_attn.k_norm.weight"] = {s.hd};
    shapes[p + "mlp.gate_proj.weight"] = {s.H, s.C};
    shapes[p + "mlp.up_proj.weight"] = {s.H, s.C};
    shapes[p + "mlp.down_proj.weight"] = {s.C, s.H};
  }
  return shapes;
}

Weights random_weights(const Sizes& s, std::uint64_t seed) {
  Weights w;
  for (const auto& [name, shape] : hf_shapes(s)) {
    std::vector<double> v = sample(shape, seed++);
    const bool norm = name.find("norm") != std::string::npos;
    for (double& x : v) x = static_cast<double>(static_cast<float>(norm ? 1 + 0.3 * x : 0.4 * x));
    w[name] = std::move(v);
  }
  return w;
}

void write_text(const fs::path& file, const std::string& text) { std::ofstream(file, std::ios::binary) << text; }

// The directory transformers' save_pretrained would write for these weights (float32).
void write_directory(const fs::path& dir, const Sizes& s, const Weights& w, const std::string& extra = "") {
  fs::create_directories(dir);
  StateDict tensors;
  const auto shapes = hf_shapes(s);
  for (const auto& [name, v] : w) tensors[name] = tensor(v, shapes.at(name), kFloat32);
  io::save_safetensors(dir / "model.safetensors", tensors, {{"format", "pt"}});
  write_text(dir / "config.json", config_json(s, extra));
}

std::vector<double> rms_norm(const double* x, std::size_t n, const std::vector<double>& w, double eps) {
  double ms = 0;
  for (std::size_t i = 0; i < n; ++i) ms += x[i] * x[i];
  const double r = 1 / std::sqrt(ms / static_cast<double>(n) + eps);
  std::vector<double> y(n);
  for (std::size_t i = 0; i < n; ++i) y[i] = x[i] * r * w[i];
  return y;
}

// y (rows) = W (rows, cols) x.
std::vector<double> matvec(const std::vector<double>& W, const std::vector<double>& x) {
  const std::size_t cols = x.size(), rows = W.size() / cols;
  std::vector<double> y(rows, 0);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) y[r] += W[r * cols + c] * x[c];
  return y;
}

// modeling_qwen3.py's forward of one sequence, float64: logits (T, V).
std::vector<double> reference_logits(const Sizes& s, const Weights& w, const std::vector<std::int64_t>& idx) {
  const auto C = static_cast<std::size_t>(s.C), hd = static_cast<std::size_t>(s.hd), T = idx.size();
  const auto NH = static_cast<std::size_t>(s.NH), KV = static_cast<std::size_t>(s.KV), V = static_cast<std::size_t>(s.V);
  std::vector<std::vector<double>> x(T);
  for (std::size_t t = 0; t < T; ++t) {
    const auto& E = w.at("model.embed_tokens.weight");
    x[t].assign(E.begin() + static_cast<std::ptrdiff_t>(idx[t] * s.C), E.begin() + static_cast<std::ptrdiff_t>((idx[t] + 1) * s.C));
  }
  // rotate_half RoPE on one head at position t: pairs (i, i + hd/2) rotate by t * theta^(-2i/hd).
  const auto rope = [&](double* h, std::size_t t) {
    for (std::size_t i = 0; i < hd / 2; ++i) {
      const double angle = static_cast<double>(t) * std::pow(s.theta, -2.0 * static_cast<double>(i) / static_cast<double>(hd));
      const double a = h[i], b = h[i + hd / 2];
      h[i] = a * std::cos(angle) - b * std::sin(angle);
      h[i + hd / 2] = b * std::cos(angle) + a * std::sin(angle);
    }
  };
  for (std::int64_t l = 0; l < s.L; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    std::vector<std::vector<double>> q(T), k(T), v(T);
    for (std::size_t t = 0; t < T; ++t) {
      const std::vector<double> h = rms_norm(x[t].data(), C, w.at(p + "input_layernorm.weight"), s.eps);
      q[t] = matvec(w.at(p + "self_attn.q_proj.weight"), h);
      k[t] = matvec(w.at(p + "self_attn.k_proj.weight"), h);
      v[t] = matvec(w.at(p + "self_attn.v_proj.weight"), h);
      for (std::size_t n = 0; n < NH; ++n) {
        const auto y = rms_norm(&q[t][n * hd], hd, w.at(p + "self_attn.q_norm.weight"), s.eps);
        std::copy(y.begin(), y.end(), q[t].begin() + static_cast<std::ptrdiff_t>(n * hd));
        rope(&q[t][n * hd], t);
      }
      for (std::size_t n = 0; n < KV; ++n) {
        const auto y = rms_norm(&k[t][n * hd], hd, w.at(p + "self_attn.k_norm.weight"), s.eps);
        std::copy(y.begin(), y.end(), k[t].begin() + static_cast<std::ptrdiff_t>(n * hd));
        rope(&k[t][n * hd], t);
      }
    }
    for (std::size_t t = 0; t < T; ++t) {
      std::vector<double> heads(NH * hd, 0);
      for (std::size_t n = 0; n < NH; ++n) {
        const std::size_t g = n / (NH / KV);  // the key/value head query head n reads
        std::vector<double> score(t + 1);
        double m = -INFINITY;
        for (std::size_t u = 0; u <= t; ++u) {
          double dot = 0;
          for (std::size_t i = 0; i < hd; ++i) dot += q[t][n * hd + i] * k[u][g * hd + i];
          score[u] = dot / std::sqrt(static_cast<double>(hd));
          m = std::max(m, score[u]);
        }
        double z = 0;
        for (double& e : score) z += (e = std::exp(e - m));
        for (std::size_t u = 0; u <= t; ++u)
          for (std::size_t i = 0; i < hd; ++i) heads[n * hd + i] += score[u] / z * v[u][g * hd + i];
      }
      const std::vector<double> o = matvec(w.at(p + "self_attn.o_proj.weight"), heads);
      for (std::size_t c = 0; c < C; ++c) x[t][c] += o[c];
      const std::vector<double> h = rms_norm(x[t].data(), C, w.at(p + "post_attention_layernorm.weight"), s.eps);
      std::vector<double> gate = matvec(w.at(p + "mlp.gate_proj.weight"), h), up = matvec(w.at(p + "mlp.up_proj.weight"), h);
      for (std::size_t j = 0; j < gate.size(); ++j) gate[j] = gate[j] / (1 + std::exp(-gate[j])) * up[j];
      const std::vector<double> down = matvec(w.at(p + "mlp.down_proj.weight"), gate);
      for (std::size_t c = 0; c < C; ++c) x[t][c] += down[c];
    }
  }
  std::vector<double> logits;
  for (std::size_t t = 0; t < T; ++t) {
    const std::vector<double> h = rms_norm(x[t].data(), C, w.at("model.norm.weight"), s.eps);
    const std::vector<double> row = matvec(w.at(s.tied ? "model.embed_tokens.weight" : "lm_head.weight"), h);
    EXPECT_EQ(row.size(), V);
    logits.insert(logits.end(), row.begin(), row.end());
  }
  return logits;
}

std::vector<std::int64_t> tokens(std::size_t n, std::int64_t V, std::int64_t mul) {
  std::vector<std::int64_t> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = (static_cast<std::int64_t>(i) * mul + 3) % V;
  return out;
}

Tensor as_idx(const std::vector<std::int64_t>& v, std::int64_t B, std::int64_t T) {
  return from_vector(v, {B, T}, {.dtype = kInt64});
}

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("qwen3_model_test_" + std::to_string(::getpid()));
  TempDir() { fs::remove_all(path); }
  ~TempDir() { fs::remove_all(path); }
};

std::string file_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::shared_ptr<Qwen3Impl> load(const fs::path& dir) {
  auto model = std::dynamic_pointer_cast<Qwen3Impl>(load_pretrained(dir));
  EXPECT_NE(model, nullptr);
  return model;
}

TEST(Qwen3Model, LogitsFromAHuggingFaceDirectoryMatchTransformersForwardInFloat64) {
  for (const bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    TempDir tmp;
    const Sizes s{.tied = tied};
    const Weights w = random_weights(s, 40);
    write_directory(tmp.path, s, w);
    const auto model = load(tmp.path);
    EXPECT_EQ(model->config.head_dim, 6);
    EXPECT_EQ(model->config.tie_word_embeddings, tied);
    EXPECT_EQ(model->lm_head == nullptr, tied);
    EXPECT_EQ(model->tied_parameters().size(), tied ? 1u : 0u);
    model->to(kFloat64);
    const std::int64_t B = 2, T = 7;
    const std::vector<std::int64_t> idx = tokens(B * T, s.V, 5);
    const Tensor logits = (*model)(as_idx(idx, B, T));
    std::vector<double> expected;
    for (std::int64_t b = 0; b < B; ++b) {
      const auto row = reference_logits(s, w, {idx.begin() + b * T, idx.begin() + (b + 1) * T});
      expected.insert(expected.end(), row.begin(), row.end());
    }
    ASSERT_GT(max_abs(expected), 1.0);
    expect_all_near(logits, {B, T, s.V}, expected, 1e-9);

    // The cached forward, two positions at a time, gives the same logits.
    KVCache cache;
    std::vector<double> cached;
    for (std::int64_t t = 0; t < T; t += 2) {
      const std::int64_t n = std::min<std::int64_t>(2, T - t);
      const Tensor step = model->forward_cached(as_idx(idx, B, T).slice(1, t, t + n), cache);
      for (std::int64_t b = 0; b < B; ++b) {
        const auto v = values(step.select(0, b));
        cached.resize(static_cast<std::size_t>(B * T * s.V));
        std::copy(v.begin(), v.end(), cached.begin() + (b * T + t) * s.V);
      }
    }
    expect_close(cached, expected, 1e-9);
  }
}

// save_pretrained writes transformers' names, shapes and values (each tensor equal to the one
// the directory was read from, bit for bit in float32), and a directory written, read and
// written again is byte-identical.
TEST(Qwen3Model, DirectoryRoundTripWritesTransformersTensorsByteIdentically) {
  for (const bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    TempDir tmp;
    const Sizes s{.tied = tied};
    const Weights w = random_weights(s, 90);
    write_directory(tmp.path / "in", s, w);
    save_pretrained(*load(tmp.path / "in"), tmp.path / "once");
    const StateDict written = io::load_safetensors(tmp.path / "once" / "model.safetensors").tensors;
    const auto shapes = hf_shapes(s);
    ASSERT_EQ(written.size(), shapes.size());
    for (const auto& [name, v] : w) {
      ASSERT_TRUE(written.contains(name)) << name;
      EXPECT_EQ(written.at(name).shape(), shapes.at(name)) << name;
      EXPECT_EQ(values(written.at(name)), v) << name;
    }
    save_pretrained(*load(tmp.path / "once"), tmp.path / "twice");
    for (const char* file : {"model.safetensors", "config.json"})
      EXPECT_EQ(file_bytes(tmp.path / "once" / file), file_bytes(tmp.path / "twice" / file)) << file;
    const std::string config = file_bytes(tmp.path / "once" / "config.json");
    EXPECT_NE(config.find("\"model_type\": \"qwen3\""), std::string::npos);
    EXPECT_NE(config.find("\"head_dim\": 6"), std::string::npos);
    EXPECT_NE(config.find(tied ? "\"tie_word_embeddings\": true" : "\"tie_word_embeddings\": false"), std::string::npos);
  }
}

TEST(Qwen3Model, GradientsMatchFiniteDifferences) {
  for (const bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    Qwen3 model(Qwen3Config{.max_seq_len = 4, .vocab_size = 11, .num_layers = 2, .num_heads = 2, .num_kv_heads = 1,
                            .head_dim = 6, .channels = 8, .intermediate_size = 12, .norm_eps = 1e-6f,
                            .rope_theta = 100.0f, .tie_word_embeddings = tied});
    model->to(kFloat64);
    std::uint64_t seed = 3;
    for (const auto& [name, param] : model->named_parameters()) {
      std::vector<double> v = sample(param.shape(), seed++);
      for (double& x : v) x = name.find("norm") != std::string::npos || name.find("ln") != std::string::npos ? 1 + 0.3 * x : 0.5 * x;
      assign(param, v);
    }
    const Tensor idx = as_idx({1, 4, 9, 4, 0, 10}, 2, 3), targets = as_idx({4, 9, 2, 0, 10, 3}, 2, 3);
    expect_gradcheck([&](const TensorList&) { return TensorList{model->loss(model(idx), targets)}; },
                     model->parameters());
  }
}

// PEFT's q_proj / v_proj adapters on Qwen3: the file's names, and lora_B's q rows in
// transformers' order: the model with the adapters gives the reference's logits with
// W += (alpha / r) B A applied to transformers' weights.
TEST(Qwen3Model, LoraAdaptersUsePeftNamesAndTransformersRowOrder) {
  TempDir tmp;
  const Sizes s;
  Weights w = random_weights(s, 120);
  write_directory(tmp.path / "base", s, w);
  const auto model = load(tmp.path / "base");
  const auto adapters = lora::apply(*model, {.rank = 2, .alpha = 4, .targets = {"q_proj", "v_proj"}});
  ASSERT_EQ(adapters.size(), 4u);
  std::uint64_t seed = 7;
  for (const auto& a : adapters) assign(a->B, sample(a->B.shape(), seed++));
  lora::save_adapters(*model, tmp.path / "adapter");
  const StateDict file = io::load_safetensors(tmp.path / "adapter" / "adapter_model.safetensors").tensors;
  ASSERT_EQ(file.size(), 8u);
  for (std::int64_t l = 0; l < s.L; ++l)
    for (const char* proj : {"q_proj", "v_proj"}) {
      const std::string p = "base_model.model.model.layers." + std::to_string(l) + ".self_attn." + proj;
      const Tensor A = file.at(p + ".lora_A.weight"), B = file.at(p + ".lora_B.weight");
      const std::string weight = "model.layers." + std::to_string(l) + ".self_attn." + proj + ".weight";
      const std::vector<double> update = values(matmul(B.to(kFloat64), A.to(kFloat64)));
      for (std::size_t i = 0; i < update.size(); ++i) w[weight][i] += 2.0 * update[i];  // alpha / r = 2
    }
  const std::vector<std::int64_t> idx = tokens(6, s.V, 3);
  model->to(kFloat64);
  expect_close(values((*model)(as_idx(idx, 1, 6))), reference_logits(s, w, idx), 1e-5);
  const std::string config = file_bytes(tmp.path / "adapter" / "adapter_config.json");
  EXPECT_NE(config.find("\"fan_in_fan_out\": false"), std::string::npos);
}

TEST(Qwen3Model, RefusesWhatItCannotRun) {
  TempDir tmp;
  const Sizes s;
  const Weights w = random_weights(s, 5);
  write_directory(tmp.path / "yarn", s, w, ", \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0}");
  expect_error<IOError>([&] { load_pretrained(tmp.path / "yarn"); }, "nn::load_pretrained", "rope_scaling");
  write_directory(tmp.path / "odd", Sizes{.hd = 5}, random_weights(Sizes{.hd = 5}, 5));
  expect_error<IOError>([&] { load_pretrained(tmp.path / "odd"); }, "nn::load_pretrained", "head_dim 5 must be even");
  Weights missing = w;
  missing.erase("model.layers.1.self_attn.k_norm.weight");
  write_directory(tmp.path / "missing", s, missing);
  expect_error<IOError>([&] { load_pretrained(tmp.path / "missing"); }, "nn::load_pretrained",
                        "missing model.layers.1.self_attn.k_norm.weight");
  expect_error([] { Qwen3Config::from_name("qwen3_7B"); }, "Qwen3Config.from_name", "qwen3_0.6B");
  // Qwen3-0.6B's shapes, one layer of them: 15,730,944 parameters a layer (28 of them: the
  // 0.44 B "non-embedding" parameters of Qwen's model card), q_proj 1024 -> 2048.
  Qwen3Config c = Qwen3Config::from_name("qwen3_0.6B");
  c.num_layers = 1;
  c.vocab_size = 8;
  c.max_seq_len = 4;
  Qwen3 small(c);
  std::int64_t count = 0;
  for (const Tensor& p : small->parameters()) count += p.numel();
  EXPECT_EQ(count, 15'730'944 + 8 * 1024 + 1024);
  EXPECT_EQ(small->h[0]->attn->c_attn->weight.shape(), (Shape{2048 + 2 * 1024, 1024}));
  EXPECT_EQ(small->h[0]->attn->c_proj->weight.shape(), (Shape{1024, 2048}));
  EXPECT_EQ(&model_family("qwen3"), &model_family_of(Qwen3Impl(Qwen3Config{.max_seq_len = 4, .vocab_size = 8,
                                                                             .num_layers = 1, .num_heads = 2,
                                                                             .num_kv_heads = 1, .head_dim = 4,
                                                                             .channels = 8, .intermediate_size = 8})));
}

}  // namespace
}  // namespace infini::nn::test::qwen3_model_test
