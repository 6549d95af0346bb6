// Hugging Face model directories (see hf_model.cppm): config.json, the weights and the shard
// index read into and written from llm.c's layout.
module;
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include "hf_config.h"
#include "json_text.h"
module infini.nn;
import infini.std;

namespace infini::hf {
namespace {

using infini::detail::json_text;
using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;
using namespace detail;  // hf_directory.cppm's Source, Weights, write_directory ...

// config.json of the directory `source` names.
ConfigJson read_config(const Source& source) {
  return ConfigJson(source.config_text(), [&source](const std::string& message) { source.fail(message); });
}

// ---- GPT-2 ----

// GPT-2's per-layer tensors: llm.c's name, the name under h.<l>., and whether it is a Conv1D
// weight, (in, out) in transformers against llm.c's (out, in).
struct GPT2LayerTensor {
  const char* llmc;
  const char* hf;
  bool conv1d;
};
constexpr std::array<GPT2LayerTensor, 12> kGPT2Layer = {{{"ln1w", "ln_1.weight", false},
                                                         {"ln1b", "ln_1.bias", false},
                                                         {"qkvw", "attn.c_attn.weight", true},
                                                         {"qkvb", "attn.c_attn.bias", false},
                                                         {"attprojw", "attn.c_proj.weight", true},
                                                         {"attprojb", "attn.c_proj.bias", false},
                                                         {"ln2w", "ln_2.weight", false},
                                                         {"ln2b", "ln_2.bias", false},
                                                         {"fcw", "mlp.c_fc.weight", true},
                                                         {"fcb", "mlp.c_fc.bias", false},
                                                         {"fcprojw", "mlp.c_proj.weight", true},
                                                         {"fcprojb", "mlp.c_proj.bias", false}}};

Shape transposed(Shape shape) {
  std::reverse(shape.begin(), shape.end());
  return shape;
}

}  // namespace

Tensor interleaved_pairs(const Tensor& w, std::int64_t heads) {
  const std::int64_t rows = w.size(0), cols = w.size(1);
  return w.reshape({heads, 2, rows / heads / 2, cols}).transpose(1, 2).reshape({rows, cols}).contiguous();
}

Tensor rotate_half_rows(const Tensor& w, std::int64_t heads) {
  const std::int64_t rows = w.size(0), cols = w.size(1);
  return w.reshape({heads, rows / heads / 2, 2, cols}).transpose(1, 2).reshape({rows, cols}).contiguous();
}

llmc::GPT2Config read_gpt2_config(const std::filesystem::path& dir) {
  const Source source{.op = "hf::read_gpt2", .dir = dir};
  const ConfigJson config = read_config(source);
  config.require("model_type", [](const Json& v) { return v == "gpt2"; }, "\"gpt2\"");
  const std::int64_t C = config.size("n_embd"), NH = config.size("n_head"), L = config.size("n_layer"),
                     maxT = config.size("n_positions"), V = config.size("vocab_size");
  if (C % NH != 0) source.fail("config.json: n_head ", NH, " does not divide n_embd ", C);
  config.require("activation_function", [](const Json& v) { return v == "gelu_new" || v == "gelu_pytorch_tanh"; },
                 "GELU's tanh form (\"gelu_new\")");
  config.require("n_inner", [&](const Json& v) { return v.is_number_integer() && v == 4 * C; },
                 concat("null or 4 n_embd = ", 4 * C));
  config.require("layer_norm_epsilon", [](const Json& v) { return v.is_number() && std::abs(v.get<double>() - 1e-5) <= 1e-12; },
                 "1e-05");
  config.require("tie_word_embeddings", [](const Json& v) { return v == true; },
                 "true (GPT-2's head is the token embedding)");
  const llmc::GPT2Config c{.max_seq_len = maxT, .vocab_size = V, .padded_vocab_size = (V + 127) / 128 * 128,
                           .num_layers = L, .num_heads = NH, .channels = C};
  return c;
}

llmc::GPT2Checkpoint read_gpt2(const std::filesystem::path& dir) {
  const Source source{.op = "hf::read_gpt2", .dir = dir};
  const llmc::GPT2Config c = read_gpt2_config(dir);
  const std::int64_t L = c.num_layers, C = c.channels, V = c.vocab_size;
  Weights weights(source);
  const std::string prefix = weights.has("transformer.wte.weight") ? "transformer." : "";
  llmc::GPT2Checkpoint checkpoint{.config = c, .tensors = {}};
  for (const auto& [name, shape] : llmc::gpt2_layout(c)) {
    Tensor tensor;
    if (const auto t = std::ranges::find_if(kGPT2Layer, [&](const auto& e) { return name == e.llmc; });
        t != kGPT2Layer.end()) {
      const Shape one(shape.begin() + 1, shape.end());  // a layer's
      TensorList layers;
      for (std::int64_t l = 0; l < L; ++l) {
        const Tensor x = weights.take(concat(prefix, "h.", l, ".", t->hf), t->conv1d ? transposed(one) : one);
        layers.push_back(x.defined() && t->conv1d ? x.t() : x);
      }
      tensor = stacked(layers, L);
    } else if (name == "wte") {
      tensor = weights.take(prefix + "wte.weight", {V, C});
      if (tensor.defined())  // llm.c's zero rows V..Vp-1
        tensor = cat({tensor, zeros({c.padded_vocab_size - V, C}, TensorOptions{.dtype = kFloat32})});
    } else {
      const char* hf = name == "wpe" ? "wpe.weight" : name == "lnfw" ? "ln_f.weight" : "ln_f.bias";
      tensor = weights.take(prefix + hf, shape);
    }
    checkpoint.tensors.emplace_back(name, tensor);
  }
  if (weights.has("lm_head.weight")) {
    const Tensor head = weights.take("lm_head.weight", {V, C}), &wte = checkpoint.tensors.front().second;
    if (head.defined() && wte.defined() && !same_bits(head, wte.narrow(0, 0, V)))
      source.fail("lm_head.weight differs from wte: an untied head, which Infini's GPT-2 does not have");
  }
  weights.finish("GPT-2", [&](const std::string& name) {  // the causal-mask buffers of older files
    return name.starts_with(prefix + "h.") && (name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias"));
  });
  return checkpoint;
}

void write_gpt2(const std::filesystem::path& dir, const llmc::GPT2Checkpoint& checkpoint, WriteOptions options) {
  const Source source{.op = "hf::write_gpt2", .dir = dir};
  check_options(source, options);
  const llmc::GPT2Config& c = checkpoint.config;
  llmc::detail::check_tensors(source.op, checkpoint.tensors, llmc::gpt2_layout(c));
  NoGradGuard no_grad;
  const auto stored = [&](const Tensor& t) { return t.to(Device::cpu(), options.dtype).contiguous(); };
  const auto llmc_tensor = [&](std::string_view name) { return named(checkpoint.tensors, name); };
  NamedTensors tensors = {{"transformer.wte.weight", stored(llmc_tensor("wte").narrow(0, 0, c.vocab_size))},
                          {"transformer.wpe.weight", stored(llmc_tensor("wpe"))}};
  for (std::int64_t l = 0; l < c.num_layers; ++l)
    for (const GPT2LayerTensor& t : kGPT2Layer) {
      const Tensor x = llmc_tensor(t.llmc).select(0, l);
      tensors.emplace_back(concat("transformer.h.", l, ".", t.hf), stored(t.conv1d ? x.t() : x));
    }
  tensors.emplace_back("transformer.ln_f.weight", stored(llmc_tensor("lnfw")));
  tensors.emplace_back("transformer.ln_f.bias", stored(llmc_tensor("lnfb")));
  OrderedJson config;
  config["architectures"] = {"GPT2LMHeadModel"};
  config["model_type"] = "gpt2";
  config["activation_function"] = "gelu_new";
  config["n_embd"] = c.channels;
  config["n_head"] = c.num_heads;
  config["n_layer"] = c.num_layers;
  config["n_positions"] = c.max_seq_len;
  config["n_ctx"] = c.max_seq_len;
  config["n_inner"] = nullptr;
  config["layer_norm_epsilon"] = 1e-5;
  config["vocab_size"] = c.vocab_size;
  config["tie_word_embeddings"] = true;
  config["torch_dtype"] = dtype_name(options.dtype);
  write_directory(source, tensors, json_text(config, 2) + "\n", options);
}

llmc::LLaMA3Config read_llama3_config(const std::filesystem::path& dir) {
  const Source source{.op = "hf::read_llama3", .dir = dir};
  const ConfigJson config = read_config(source);
  config.require("model_type", [](const Json& v) { return v == "llama"; }, "\"llama\"");
  const std::int64_t C = config.size("hidden_size"), NH = config.size("num_attention_heads"),
                     L = config.size("num_hidden_layers"), I = config.size("intermediate_size"),
                     V = config.size("vocab_size"), maxT = config.size("max_position_embeddings"),
                     KV = config.size("num_key_value_heads", NH);
  if (C % NH != 0 || (C / NH) % 2 != 0)
    source.fail("config.json: num_attention_heads ", NH, " does not divide hidden_size ", C, " into even head sizes");
  if (NH % KV != 0) source.fail("config.json: num_key_value_heads ", KV, " does not divide num_attention_heads ", NH);
  const std::int64_t hd = C / NH;
  config.require("head_dim", [&](const Json& v) { return v == hd; }, concat("hidden_size / num_attention_heads = ", hd));
  config.require("hidden_act", [](const Json& v) { return v == "silu"; }, "\"silu\"");
  config.require("attention_bias", [](const Json& v) { return v == false; }, "false");
  config.require("mlp_bias", [](const Json& v) { return v == false; }, "false");
  // intermediate_size becomes multiple_of, with no multiplier: (8C / 3) rounded up to it.
  if (const std::int64_t least = 2 * (4 * C) / 3; I < least)
    source.fail("config.json: intermediate_size ", I, " is below 8 hidden_size / 3 = ", least,
                ", which Infini's LLaMA-3 sizes cannot express");
  // rope_scaling: null, or LLaMA-3.1's rope_type "llama3" with its constants (3.2's factor 32).
  std::optional<llmc::RopeScaling> scaling;
  if (const Json* json = config.find("rope_scaling")) {
    const auto number = [&](const char* key) -> std::optional<double> {
      const auto it = json->find(key);
      if (it == json->end() || !it->is_number() || !(it->get<double>() > 0)) return std::nullopt;
      return it->get<double>();
    };
    const Json type = json->is_object() ? json->value("rope_type", json->value("type", Json())) : Json();
    const auto factor = number("factor"), low = number("low_freq_factor"), high = number("high_freq_factor"),
               context = number("original_max_position_embeddings");
    if (type != "llama3" || !factor || !low || !high || !context || !(*high > *low) ||
        *context != static_cast<double>(static_cast<std::int64_t>(*context)))
      source.fail("config.json: \"rope_scaling\" is ", json_text(*json),
                  "; Infini's scaled RoPE is LLaMA-3.1's: rope_type \"llama3\" with a factor, low_freq_factor < "
                  "high_freq_factor and original_max_position_embeddings, all positive");
    scaling = llmc::RopeScaling{.factor = *factor, .low_freq_factor = *low, .high_freq_factor = *high,
                                .original_context = static_cast<std::int64_t>(*context)};
  }

  const llmc::LLaMA3Config c{.max_seq_len = maxT, .vocab_size = V, .num_layers = L, .num_heads = NH,
                             .num_kv_heads = KV, .channels = C, .ffn_dim_multiplier = 0, .multiple_of = I,
                             .norm_eps = static_cast<float>(config.number("rms_norm_eps", 1e-6)),
                             .rope_theta = static_cast<float>(config.number("rope_theta", 10000.0)),
                             .use_scaled_rope = scaling.has_value(),
                             .rope_scaling = scaling.value_or(llmc::RopeScaling{}),
                             .tie_word_embeddings = config.flag("tie_word_embeddings", false)};
  return c;
}

llmc::LLaMA3Checkpoint read_llama3(const std::filesystem::path& dir) {
  const Source source{.op = "hf::read_llama3", .dir = dir};
  const llmc::LLaMA3Config c = read_llama3_config(dir);
  const bool tied = c.tie_word_embeddings;
  const std::int64_t C = c.channels, NH = c.num_heads, L = c.num_layers, I = c.multiple_of, V = c.vocab_size,
                     KV = c.num_kv_heads, hd = C / NH;
  Weights weights(source);
  const auto layer_name = [](std::int64_t l, const char* name) { return concat("model.layers.", l, ".", name); };
  const Tensor wte = weights.take("model.embed_tokens.weight", {V, C});
  TensorList ln1, qkv, o, ln2, up, gate, down;
  for (std::int64_t l = 0; l < L; ++l) {
    ln1.push_back(weights.take(layer_name(l, "input_layernorm.weight"), {C}));
    const Tensor q = weights.take(layer_name(l, "self_attn.q_proj.weight"), {NH * hd, C}),
                 k = weights.take(layer_name(l, "self_attn.k_proj.weight"), {KV * hd, C}),
                 v = weights.take(layer_name(l, "self_attn.v_proj.weight"), {KV * hd, C});
    qkv.push_back(q.defined() && k.defined() && v.defined()
                      ? cat({interleaved_pairs(q, NH), interleaved_pairs(k, KV), v})
                      : Tensor());
    o.push_back(weights.take(layer_name(l, "self_attn.o_proj.weight"), {C, C}));
    ln2.push_back(weights.take(layer_name(l, "post_attention_layernorm.weight"), {C}));
    up.push_back(weights.take(layer_name(l, "mlp.up_proj.weight"), {I, C}));
    gate.push_back(weights.take(layer_name(l, "mlp.gate_proj.weight"), {I, C}));
    down.push_back(weights.take(layer_name(l, "mlp.down_proj.weight"), {C, I}));
  }
  const Tensor norm = weights.take("model.norm.weight", {C});
  Tensor head;
  if (!tied || weights.has("lm_head.weight")) head = weights.take("lm_head.weight", {V, C});
  if (tied && head.defined() && wte.defined() && !same_bits(head, wte))
    source.fail("lm_head.weight differs from model.embed_tokens.weight, but config.json ties them");
  if (tied && wte.defined()) head = wte.clone();
  weights.finish("LLaMA", [](const std::string& name) { return name.ends_with(".rotary_emb.inv_freq"); });
  return {.config = c,
          .tensors = {{"wte", wte},
                      {"ln1w", stacked(ln1, L)},
                      {"qkvw", stacked(qkv, L)},
                      {"attprojw", stacked(o, L)},
                      {"ln2w", stacked(ln2, L)},
                      {"fcw", stacked(up, L)},
                      {"fc2w", stacked(gate, L)},
                      {"fcprojw", stacked(down, L)},
                      {"lnfw", norm},
                      {"wlmhead", head}}};
}

void write_llama3(const std::filesystem::path& dir, const llmc::LLaMA3Checkpoint& checkpoint, WriteOptions options) {
  const Source source{.op = "hf::write_llama3", .dir = dir};
  check_options(source, options);
  const llmc::LLaMA3Config& c = checkpoint.config;
  llmc::detail::check_tensors(source.op, checkpoint.tensors, llmc::llama3_layout(c));
  NoGradGuard no_grad;
  const auto stored = [&](const Tensor& t) { return t.to(Device::cpu(), options.dtype).contiguous(); };
  const auto llmc_tensor = [&](std::string_view name) { return named(checkpoint.tensors, name); };
  const std::int64_t NH = c.num_heads, KV = c.num_kv_heads, hd = c.channels / NH;
  const bool tied = same_bits(llmc_tensor("wlmhead").to(kFloat32), llmc_tensor("wte").to(kFloat32));
  NamedTensors tensors = {{"model.embed_tokens.weight", stored(llmc_tensor("wte"))}};
  for (std::int64_t l = 0; l < c.num_layers; ++l) {  // LlamaDecoderLayer's order: attention, MLP, norms
    const auto name = [l](const char* suffix) { return concat("model.layers.", l, ".", suffix); };
    const Tensor qkv = llmc_tensor("qkvw").select(0, l);
    tensors.emplace_back(name("self_attn.q_proj.weight"), stored(rotate_half_rows(qkv.narrow(0, 0, NH * hd), NH)));
    tensors.emplace_back(name("self_attn.k_proj.weight"), stored(rotate_half_rows(qkv.narrow(0, NH * hd, KV * hd), KV)));
    tensors.emplace_back(name("self_attn.v_proj.weight"), stored(qkv.narrow(0, (NH + KV) * hd, KV * hd)));
    tensors.emplace_back(name("self_attn.o_proj.weight"), stored(llmc_tensor("attprojw").select(0, l)));
    tensors.emplace_back(name("mlp.gate_proj.weight"), stored(llmc_tensor("fc2w").select(0, l)));
    tensors.emplace_back(name("mlp.up_proj.weight"), stored(llmc_tensor("fcw").select(0, l)));
    tensors.emplace_back(name("mlp.down_proj.weight"), stored(llmc_tensor("fcprojw").select(0, l)));
    tensors.emplace_back(name("input_layernorm.weight"), stored(llmc_tensor("ln1w").select(0, l)));
    tensors.emplace_back(name("post_attention_layernorm.weight"), stored(llmc_tensor("ln2w").select(0, l)));
  }
  tensors.emplace_back("model.norm.weight", stored(llmc_tensor("lnfw")));
  if (!tied) tensors.emplace_back("lm_head.weight", stored(llmc_tensor("wlmhead")));
  OrderedJson config;
  config["architectures"] = {"LlamaForCausalLM"};
  config["model_type"] = "llama";
  config["hidden_size"] = c.channels;
  config["intermediate_size"] = llmc::llama3_ffn_hidden_dim(c);
  config["num_attention_heads"] = NH;
  config["num_key_value_heads"] = KV;
  config["head_dim"] = hd;
  config["num_hidden_layers"] = c.num_layers;
  config["vocab_size"] = c.vocab_size;
  config["max_position_embeddings"] = c.max_seq_len;
  config["rms_norm_eps"] = decimal(c.norm_eps);
  config["rope_theta"] = decimal(c.rope_theta);
  if (c.use_scaled_rope)
    config["rope_scaling"] = {{"rope_type", "llama3"},
                              {"factor", c.rope_scaling.factor},
                              {"low_freq_factor", c.rope_scaling.low_freq_factor},
                              {"high_freq_factor", c.rope_scaling.high_freq_factor},
                              {"original_max_position_embeddings", c.rope_scaling.original_context}};
  else
    config["rope_scaling"] = nullptr;
  config["hidden_act"] = "silu";
  config["attention_bias"] = false;
  config["mlp_bias"] = false;
  config["tie_word_embeddings"] = tied;
  config["torch_dtype"] = dtype_name(options.dtype);
  write_directory(source, tensors, json_text(config, 2) + "\n", options);
}

}  // namespace infini::hf
