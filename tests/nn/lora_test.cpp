// LoRA: adapters on GPT-2's and LLaMA-3's layers. The update is checked against a float64 loop,
// training touches only the adapters, merging keeps the logits, and PEFT's files hold
// transformers' names, shapes and (for LLaMA-3's q_proj / k_proj) row order, checked with an
// independent index formula; a model that loads them gives the saved model's logits.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "data_test_util.h"
#include "layer_test_util.h"

import infini.nn;

namespace infini::lora_test {
namespace {

namespace fs = std::filesystem;
using data::test::expect_error;
using nn::lora::LoraConfig;
using nn::test::values;

const nn::GPT2Config kGPT2{.max_seq_len = 16, .vocab_size = 50, .num_layers = 2, .num_heads = 2, .channels = 16};
const nn::LLaMA3Config kLLaMA3{.max_seq_len = 16, .vocab_size = 37, .num_layers = 2, .num_heads = 4, .num_kv_heads = 2,
                               .channels = 16, .ffn_dim_multiplier = 1.3f, .multiple_of = 8, .norm_eps = 1e-5f,
                               .rope_theta = 500000.0f, .use_scaled_rope = true};

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("infini_lora_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

double max_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = values(a), y = values(b);
  EXPECT_EQ(x.size(), y.size());
  double d = 0;
  for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) d = std::max(d, std::abs(x[i] - y[i]));
  return d;
}

// Gives every adapter's B random values, so that the adapters change the outputs.
void randomise_b(nn::Module& model) {
  NoGradGuard no_grad;
  for (const auto& adapter : nn::lora::adapters(model)) adapter->B.copy_(randn(adapter->B.shape()) * 0.2);
}

std::vector<std::string> trainable_names(const nn::Module& model) {
  std::vector<std::string> names;
  for (const auto& [name, p] : model.named_parameters())
    if (p.requires_grad()) names.push_back(name);
  return names;
}

TEST(LoRA, ApplyFreezesTheBaseAndStartsFromItsLogits) {
  manual_seed(1);
  nn::GPT2 model(kGPT2);
  const Tensor idx = randint(0, 50, {2, 8}, {.dtype = kInt64});
  const Tensor before = model(idx);
  const auto adapters = nn::lora::apply(*model, {.rank = 4, .alpha = 8, .targets = {"c_attn", "c_proj", "c_fc"}});
  ASSERT_EQ(adapters.size(), 8u);  // 2 blocks x (c_attn, attn.c_proj, c_fc, mlp.c_proj)
  EXPECT_EQ(adapters[0]->peft_name, "transformer.h.0.attn.c_attn");
  EXPECT_EQ(adapters[3]->peft_name, "transformer.h.0.mlp.c_proj");
  EXPECT_EQ(adapters[0]->scaling, 2.0);
  const std::vector<std::string> names = trainable_names(*model);
  EXPECT_EQ(names.size(), 16u);
  EXPECT_EQ(names[0], "h.0.attn.c_attn.lora_c_attn.A");
  EXPECT_EQ(names[1], "h.0.attn.c_attn.lora_c_attn.B");
  std::int64_t trainable = 0;
  for (const Tensor& p : model->parameters())
    if (p.requires_grad()) trainable += p.numel();
  const std::int64_t C = 16, r = 4;  // per block: r (in + out) for each adapted layer
  EXPECT_EQ(trainable, 2 * r * ((C + 3 * C) + (C + C) + (C + 4 * C) + (4 * C + C)));
  for (const auto& a : adapters) EXPECT_EQ(values(a->B), std::vector<double>(static_cast<std::size_t>(a->B.numel()), 0.0));
  EXPECT_LE(max_diff(model(idx), before), 1e-6);  // B = 0; the MLP now runs unfused
}

TEST(LoRA, UpdateIsTheScaledLowRankProduct) {
  manual_seed(2);
  nn::GPT2 model(kGPT2);
  nn::lora::apply(*model, {.rank = 3, .alpha = 6, .targets = {"c_fc"}});
  randomise_b(*model);
  nn::LinearImpl& layer = *model->h[1]->mlp->c_fc;
  const Tensor x = randn({5, 16});
  const std::vector<double> got = values(layer(x));
  const auto& adapter = *nn::lora::adapters(*model)[1];
  const std::vector<double> X = values(x), W = values(layer.weight), b = values(layer.bias), A = values(adapter.A),
                            B = values(adapter.B);
  const std::size_t in = 16, out = 64, rank = 3;
  for (std::size_t n = 0; n < 5; ++n)
    for (std::size_t o = 0; o < out; ++o) {
      double y = b[o];
      for (std::size_t i = 0; i < in; ++i) y += X[n * in + i] * W[o * in + i];
      double low = 0;
      for (std::size_t k = 0; k < rank; ++k) {
        double ax = 0;
        for (std::size_t i = 0; i < in; ++i) ax += A[k * in + i] * X[n * in + i];
        low += B[o * rank + k] * ax;
      }
      EXPECT_NEAR(got[n * out + o], y + 2.0 * low, 1e-5) << n << ", " << o;
    }
}

TEST(LoRA, TrainsOnlyTheAdaptersAndMergesToTheSameLogits) {
  manual_seed(3);
  nn::GPT2 model(kGPT2);
  {  // a token table of a trained model's scale: the frozen head can then tell tokens apart
    NoGradGuard no_grad;
    model->wte->weight.copy_(randn(model->wte->weight.shape()));
  }
  nn::lora::apply(*model, {.rank = 8, .alpha = 16, .targets = {"c_attn", "c_proj", "c_fc"}});
  StateDict base;
  for (const auto& [name, p] : model->named_parameters())
    if (!p.requires_grad()) base[name] = p.clone();
  std::vector<Tensor> trainable;
  for (const Tensor& p : model->parameters())
    if (p.requires_grad()) trainable.push_back(p);
  optim::AdamW optimizer(trainable, {.lr = 1e-2, .weight_decay = 0});
  // A small fine-tuning set: each token's target is a fixed function of it.
  const Tensor idx = randint(0, 50, {4, 12}, {.dtype = kInt64});
  const Tensor mapped = idx * 7 + 3;
  const Tensor targets = mapped - floor_divide(mapped, 50) * 50;  // (7 idx + 3) mod 50
  std::vector<double> losses;
  for (int step = 0; step < 60; ++step) {
    optimizer.zero_grad();
    Tensor loss = model->loss(model(idx), targets);
    loss.backward();
    losses.push_back(values(loss)[0]);
    optimizer.step();
  }
  EXPECT_LT(losses.back(), 0.5 * losses.front()) << losses.front() << " -> " << losses.back();
  std::printf("LoRA fine-tuning loss %.4f -> %.4f\n", losses.front(), losses.back());
  for (const auto& [name, p] : model->named_parameters()) {
    if (p.requires_grad()) continue;
    EXPECT_FALSE(p.grad().defined()) << name;
    EXPECT_EQ(max_diff(p, base.at(name)), 0.0) << name;
  }

  model->eval();
  const Tensor adapted = model(idx);
  nn::lora::merge(*model);
  EXPECT_TRUE(nn::lora::adapters(*model).empty());
  for (const auto& [name, p] : model->named_parameters()) EXPECT_EQ(name.find("lora"), std::string::npos) << name;
  // float32 rounding of logits this large (the trained table makes them tens)
  EXPECT_LE(max_diff(model(idx), adapted), 1e-6 * nn::test::max_abs(values(adapted)));
  EXPECT_GT(max_diff(model->h[0]->attn->c_attn->weight, base.at("h.0.attn.c_attn.weight")), 1e-3);  // folded in
  expect_error<Error>([&] { nn::lora::merge(*model); }, "lora::merge", "GPT2 has no LoRA adapters");
}

// Under bfloat16 autocast the adapters' products run in bfloat16 like the layers', their
// parameters and gradients stay float32, and training still takes the loss down.
TEST(LoRA, TrainsUnderBFloat16Autocast) {
  manual_seed(6);
  nn::GPT2 model(kGPT2);
  {
    NoGradGuard no_grad;
    model->wte->weight.copy_(randn(model->wte->weight.shape()));
  }
  const auto adapters = nn::lora::apply(*model, {.rank = 8, .alpha = 16, .targets = {"c_attn", "c_proj", "c_fc"}});
  randomise_b(*model);
  const Tensor idx = randint(0, 50, {4, 12}, {.dtype = kInt64});
  const Tensor mapped = idx * 7 + 3;
  const Tensor targets = mapped - floor_divide(mapped, 50) * 50;
  const double float32_loss = values(model->loss(model(idx), targets))[0];
  {
    AutocastGuard autocast(DeviceType::CPU, kBFloat16);
    const Tensor x = randn({3, 16});
    EXPECT_EQ(adapters[0]->delta(x).dtype(), kBFloat16);
    EXPECT_NEAR(values(model->loss(model(idx), targets))[0], float32_loss, 0.05 * float32_loss);
  }
  std::vector<Tensor> trainable;
  for (const auto& a : adapters)
    for (const Tensor& p : a->parameters()) trainable.push_back(p);
  optim::AdamW optimizer(trainable, {.lr = 1e-2, .weight_decay = 0});
  std::vector<double> losses;
  for (int step = 0; step < 40; ++step) {
    optimizer.zero_grad();
    Tensor loss;
    {
      AutocastGuard autocast(DeviceType::CPU, kBFloat16);
      loss = model->loss(model(idx), targets);
    }
    loss.backward();
    losses.push_back(values(loss)[0]);
    optimizer.step();
  }
  for (const Tensor& p : trainable) {
    EXPECT_EQ(p.dtype(), kFloat32);
    EXPECT_EQ(p.grad().dtype(), kFloat32);
  }
  EXPECT_LT(losses.back(), 0.5 * losses.front()) << losses.front() << " -> " << losses.back();
}

TEST(LoRA, GPT2AdaptersInPeftsFiles) {
  manual_seed(4);
  nn::GPT2 model(kGPT2);
  nn::lora::apply(*model, {.rank = 2, .alpha = 4, .dropout = 0.1, .targets = {"c_attn"}});
  randomise_b(*model);
  const fs::path dir = fresh_dir("gpt2");
  nn::lora::save_adapters(*model, dir);
  const io::SafetensorsFile file = io::load_safetensors(dir / "adapter_model.safetensors");
  std::set<std::string> keys;
  for (const auto& [name, t] : file.tensors) keys.insert(name);
  EXPECT_EQ(keys, (std::set<std::string>{"base_model.model.transformer.h.0.attn.c_attn.lora_A.weight",
                                         "base_model.model.transformer.h.0.attn.c_attn.lora_B.weight",
                                         "base_model.model.transformer.h.1.attn.c_attn.lora_A.weight",
                                         "base_model.model.transformer.h.1.attn.c_attn.lora_B.weight"}));
  EXPECT_EQ(file.tensors.at("base_model.model.transformer.h.1.attn.c_attn.lora_A.weight").shape(), (Shape{2, 16}));
  EXPECT_EQ(max_diff(file.tensors.at("base_model.model.transformer.h.1.attn.c_attn.lora_B.weight"),
                     nn::lora::adapters(*model)[1]->B),
            0.0);
  std::ifstream in(dir / "adapter_config.json");
  const nlohmann::json config = nlohmann::json::parse(in);
  EXPECT_EQ(config["peft_type"], "LORA");
  EXPECT_EQ(config["r"], 2);
  EXPECT_EQ(config["lora_alpha"], 4.0);
  EXPECT_EQ(config["lora_dropout"], 0.1);
  EXPECT_EQ(config["target_modules"], nlohmann::json::array({"c_attn"}));
  EXPECT_EQ(config["fan_in_fan_out"], true);
  fs::remove_all(dir);
}

// LLaMA-3: every target, q_proj / k_proj / v_proj as rows of the fused c_attn.
TEST(LoRA, LLaMA3AdaptersRoundTripThroughPeftsFiles) {
  manual_seed(5);
  nn::LLaMA3 model(kLLaMA3);
  const StateDict base = model->state_dict();
  const auto adapters = nn::lora::apply(*model, {.rank = 2, .alpha = 3, .targets = {"q_proj", "k_proj", "v_proj", "o_proj",
                                                                                    "gate_proj", "up_proj", "down_proj"}});
  ASSERT_EQ(adapters.size(), 14u);
  randomise_b(*model);
  model->eval();
  const Tensor idx = randint(0, 37, {2, 9}, {.dtype = kInt64});
  const Tensor adapted = model(idx);
  const fs::path dir = fresh_dir("llama3");
  nn::lora::save_adapters(*model, dir);

  const io::SafetensorsFile file = io::load_safetensors(dir / "adapter_model.safetensors");
  EXPECT_EQ(file.tensors.size(), 28u);
  const std::string q = "base_model.model.model.layers.1.self_attn.q_proj.lora_B.weight";
  EXPECT_EQ(file.tensors.at(q).shape(), (Shape{16, 2}));  // 4 heads of 4
  EXPECT_EQ(file.tensors.at("base_model.model.model.layers.0.self_attn.k_proj.lora_B.weight").shape(), (Shape{8, 2}));
  EXPECT_EQ(file.tensors.at("base_model.model.model.layers.0.mlp.gate_proj.lora_A.weight").shape(), (Shape{2, 16}));
  // transformers' rotate-half rows: per head of 4, HF row j < 2 is Infini's row 2 j, HF row 2 + j
  // is Infini's row 2 j + 1.
  const std::vector<double> ours = values(adapters[7]->B), theirs = values(file.tensors.at(q));  // block 1's q_proj
  ASSERT_EQ(adapters[7]->peft_name, "model.layers.1.self_attn.q_proj");
  for (std::size_t h = 0; h < 4; ++h)
    for (std::size_t j = 0; j < 2; ++j)
      for (std::size_t k = 0; k < 2; ++k) {
        EXPECT_EQ(theirs[(h * 4 + j) * 2 + k], ours[(h * 4 + 2 * j) * 2 + k]);
        EXPECT_EQ(theirs[(h * 4 + 2 + j) * 2 + k], ours[(h * 4 + 2 * j + 1) * 2 + k]);
      }

  nn::LLaMA3 loaded(kLLaMA3);
  loaded->load_state_dict(base);
  loaded->eval();
  EXPECT_GT(max_diff(loaded(idx), adapted), 1e-3);
  EXPECT_EQ(nn::lora::load_adapters(*loaded, dir).size(), 14u);
  loaded->eval();
  EXPECT_LE(max_diff(loaded(idx), adapted), 1e-6);
  nn::lora::merge(*loaded);
  EXPECT_LE(max_diff(loaded(idx), adapted), 1e-5);
  fs::remove_all(dir);
}

// A second apply adds its adapters and keeps the first's trainable; adapters() walks a model
// that no shared_ptr owns.
TEST(LoRA, ASecondApplyKeepsTheFirstsAdaptersTrainable) {
  nn::GPT2Impl model(kGPT2);
  nn::lora::apply(model, {.targets = {"c_fc"}});
  nn::lora::apply(model, {.targets = {"c_attn"}});
  const auto list = nn::lora::adapters(model);
  ASSERT_EQ(list.size(), 4u);
  EXPECT_EQ(list[0]->peft_name, "transformer.h.0.attn.c_attn");  // model order, not apply order
  EXPECT_EQ(list[1]->peft_name, "transformer.h.0.mlp.c_fc");
  for (const auto& a : list) EXPECT_TRUE(a->A.requires_grad() && a->B.requires_grad()) << a->peft_name;
  EXPECT_FALSE(model.h[0]->attn->c_attn->weight.requires_grad());
  EXPECT_FALSE(model.h[1]->mlp->c_fc->bias.requires_grad());
}

TEST(LoRA, RefusesWhatItCannotDo) {
  nn::GPT2 model(kGPT2);
  expect_error<Error>([&] { nn::lora::apply(*model, {.targets = {"q_proj"}}); }, "lora::apply",
                      "target \"q_proj\" names no layer of GPT2; its targets: c_attn, c_proj, c_fc");
  expect_error<Error>([&] { nn::lora::apply(*model, {.rank = 0, .targets = {"c_fc"}}); }, "lora::apply", "rank 0");
  expect_error<Error>([&] { nn::lora::apply(*model, {.dropout = 1, .targets = {"c_fc"}}); }, "lora::apply", "dropout 1");
  expect_error<Error>([&] { nn::lora::apply(*model, {.targets = {}}); }, "lora::apply", "at least one target");
  nn::Linear linear(4, 4);
  expect_error<Error>([&] { nn::lora::apply(*linear, {.targets = {"c_fc"}}); }, "lora::apply",
                      "expected a model of a registered family (gpt2, llama3, qwen3), got Linear");
  expect_error<Error>([&] { nn::lora::save_adapters(*model, fresh_dir("none")); }, "lora::save_adapters",
                      "GPT2 has no LoRA adapters");
  nn::lora::apply(*model, {.targets = {"c_fc"}});
  expect_error<Error>([&] { nn::lora::apply(*model, {.targets = {"c_fc"}}); }, "lora::apply",
                      "transformer.h.0.mlp.c_fc has a LoRA adapter already");

  const fs::path dir = fresh_dir("bad");
  nn::lora::save_adapters(*model, dir);
  auto edit_config = [&](const std::function<void(nlohmann::json&)>& edit) {
    std::ifstream in(dir / "adapter_config.json");
    nlohmann::json config = nlohmann::json::parse(in);
    in.close();
    edit(config);
    std::ofstream(dir / "adapter_config.json") << config.dump();
  };
  nn::GPT2 fresh(kGPT2);
  expect_error<Error>([&] { nn::lora::load_adapters(*model, dir); }, "lora::load_adapters", "has LoRA adapters already");
  edit_config([](nlohmann::json& c) { c["use_rslora"] = true; });
  expect_error<IOError>([&] { nn::lora::load_adapters(*fresh, dir); }, "lora::load_adapters",
                        "\"use_rslora\" is not supported");
  edit_config([](nlohmann::json& c) {
    c["use_rslora"] = false;
    c["target_modules"] = "c_fc";
  });
  expect_error<IOError>([&] { nn::lora::load_adapters(*fresh, dir); }, "lora::load_adapters",
                        "\"target_modules\" must be a list of module names");
  edit_config([](nlohmann::json& c) {
    c["target_modules"] = {"c_fc"};
    c["r"] = 4;
  });
  expect_error<IOError>([&] { nn::lora::load_adapters(*fresh, dir); }, "lora::load_adapters",
                        "base_model.model.transformer.h.0.mlp.c_fc.lora_A.weight has shape [8, 16], expected [4, 16]");
  edit_config([](nlohmann::json& c) {
    c["r"] = 8;
    c["target_modules"] = {"c_fc", "c_attn"};
  });
  nn::GPT2 third(kGPT2);
  expect_error<IOError>([&] { nn::lora::load_adapters(*third, dir); }, "lora::load_adapters",
                        "missing base_model.model.transformer.h.0.attn.c_attn.lora_A.weight");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace infini::lora_test
