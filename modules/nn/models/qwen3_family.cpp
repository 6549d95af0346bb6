// Qwen3's model family (see model_family.cppm): transformers' Qwen3ForCausalLM directories and
// PEFT's Qwen3 targets. Qwen3 has no llm.c file.
//
// Tensor map (transformers <-> Infini's stacked list, Qwen3Impl::llmc_layout), per layer l:
//   model.layers.l.input_layernorm.weight            ln1w[l]
//   model.layers.l.self_attn.{q,k,v}_proj.weight      qkvw[l] = q | k | v rows, q and k per head
//                                                     from rotate-half to interleaved pairs
//   model.layers.l.self_attn.{q,k}_norm.weight        {q,k}normw[l], permuted as one head's rows
//   model.layers.l.self_attn.o_proj.weight            attprojw[l]
//   model.layers.l.post_attention_layernorm.weight    ln2w[l]
//   model.layers.l.mlp.{up,gate,down}_proj.weight     fcw[l], fc2w[l], fcprojw[l]
// and model.embed_tokens.weight (wte), model.norm.weight (lnfw), lm_head.weight (wlmhead,
// absent when tie_word_embeddings).
module;
#include <cstdint>
#include <nlohmann/json.hpp>
#include "../checkpoint/hf_config.h"
#include "../checkpoint/json_text.h"
module infini.nn;
import infini.std;

namespace infini::nn {
namespace {

using hf::detail::ConfigJson;
using hf::detail::Source;
using Json = nlohmann::json;
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// transformers' Qwen3Config defaults for the keys a file may leave out.
constexpr double kDefaultRopeTheta = 10000, kDefaultNormEps = 1e-6;

Qwen3Config read_config(const Source& source) {
  const ConfigJson config(source.config_text(), [&source](const std::string& message) { source.fail(message); });
  config.require("model_type", [](const Json& v) { return v == "qwen3"; }, "\"qwen3\"");
  const std::int64_t C = config.size("hidden_size"), NH = config.size("num_attention_heads");
  config.require("hidden_act", [](const Json& v) { return v == "silu"; }, "\"silu\"");
  config.require("attention_bias", [](const Json& v) { return v == false; }, "false");
  config.require("use_sliding_window", [](const Json& v) { return v == false; }, "false (no sliding window)");
  config.require("rope_scaling", [](const Json&) { return false; }, "null (Infini's Qwen3 has no RoPE scaling yet)");
  Qwen3Config c{.max_seq_len = config.size("max_position_embeddings"),
                .vocab_size = config.size("vocab_size"),
                .num_layers = config.size("num_hidden_layers"),
                .num_heads = NH,
                .num_kv_heads = config.size("num_key_value_heads", NH),
                .head_dim = config.size("head_dim", C / NH),
                .channels = C,
                .intermediate_size = config.size("intermediate_size"),
                .norm_eps = static_cast<float>(config.number("rms_norm_eps", kDefaultNormEps)),
                .rope_theta = static_cast<float>(config.number("rope_theta", kDefaultRopeTheta)),
                .tie_word_embeddings = config.flag("tie_word_embeddings", false)};
  try {
    c.validate();
  } catch (const Error& e) {
    source.fail("config.json: ", e.what());
  }
  return c;
}

// One head's norm weight (hd) from rotate-half to interleaved pairs, and back.
Tensor interleaved_norm(const Tensor& w) { return hf::interleaved_pairs(w.reshape({w.numel(), 1}), 1).reshape({w.numel()}); }
Tensor rotate_half_norm(const Tensor& w) { return hf::rotate_half_rows(w.reshape({w.numel(), 1}), 1).reshape({w.numel()}); }

std::shared_ptr<Module> read_model(const std::filesystem::path& dir) {
  const Source source{.op = "nn::load_pretrained", .dir = dir};
  const Qwen3Config c = read_config(source);
  const std::int64_t C = c.channels, NH = c.num_heads, KV = c.num_kv_heads, hd = c.head_dim, I = c.intermediate_size,
                     V = c.vocab_size, L = c.num_layers;
  hf::detail::Weights weights(source);
  const auto name = [](std::int64_t l, const char* suffix) { return concat("model.layers.", l, ".", suffix); };
  const auto defined = [](std::initializer_list<Tensor> ts) {
    return std::ranges::all_of(ts, [](const Tensor& t) { return t.defined(); });
  };
  const Tensor wte = weights.take("model.embed_tokens.weight", {V, C});
  TensorList ln1, qkv, qnorm, knorm, o, ln2, up, gate, down;
  for (std::int64_t l = 0; l < L; ++l) {
    ln1.push_back(weights.take(name(l, "input_layernorm.weight"), {C}));
    const Tensor q = weights.take(name(l, "self_attn.q_proj.weight"), {NH * hd, C}),
                 k = weights.take(name(l, "self_attn.k_proj.weight"), {KV * hd, C}),
                 v = weights.take(name(l, "self_attn.v_proj.weight"), {KV * hd, C});
    qkv.push_back(defined({q, k, v}) ? cat({hf::interleaved_pairs(q, NH), hf::interleaved_pairs(k, KV), v}) : Tensor());
    const Tensor qn = weights.take(name(l, "self_attn.q_norm.weight"), {hd}),
                 kn = weights.take(name(l, "self_attn.k_norm.weight"), {hd});
    qnorm.push_back(qn.defined() ? interleaved_norm(qn) : Tensor());
    knorm.push_back(kn.defined() ? interleaved_norm(kn) : Tensor());
    o.push_back(weights.take(name(l, "self_attn.o_proj.weight"), {C, NH * hd}));
    ln2.push_back(weights.take(name(l, "post_attention_layernorm.weight"), {C}));
    up.push_back(weights.take(name(l, "mlp.up_proj.weight"), {I, C}));
    gate.push_back(weights.take(name(l, "mlp.gate_proj.weight"), {I, C}));
    down.push_back(weights.take(name(l, "mlp.down_proj.weight"), {C, I}));
  }
  const Tensor norm = weights.take("model.norm.weight", {C});
  Tensor head;
  if (!c.tie_word_embeddings || weights.has("lm_head.weight")) head = weights.take("lm_head.weight", {V, C});
  if (c.tie_word_embeddings && head.defined() && wte.defined() && !hf::detail::same_bits(head, wte))
    source.fail("lm_head.weight differs from model.embed_tokens.weight, but config.json ties them");
  weights.finish("Qwen3", [](const std::string& n) { return n.ends_with(".rotary_emb.inv_freq"); });
  NamedTensors tensors = {{"wte", wte},
                          {"ln1w", hf::detail::stacked(ln1, L)},
                          {"qkvw", hf::detail::stacked(qkv, L)},
                          {"qnormw", hf::detail::stacked(qnorm, L)},
                          {"knormw", hf::detail::stacked(knorm, L)},
                          {"attprojw", hf::detail::stacked(o, L)},
                          {"ln2w", hf::detail::stacked(ln2, L)},
                          {"fcw", hf::detail::stacked(up, L)},
                          {"fc2w", hf::detail::stacked(gate, L)},
                          {"fcprojw", hf::detail::stacked(down, L)},
                          {"lnfw", norm}};
  if (!c.tie_word_embeddings) tensors.emplace_back("wlmhead", head);
  auto model = std::make_shared<Qwen3Impl>(c);
  model->load_llmc_tensors(tensors);
  return model;
}

void write_model(const Module& module, const std::filesystem::path& dir, const hf::WriteOptions& options) {
  const Source source{.op = "nn::save_pretrained", .dir = dir};
  hf::detail::check_options(source, options);
  const auto& model = dynamic_cast<const Qwen3Impl&>(module);
  const Qwen3Config& c = model.config;
  if (!model.part.is_whole(c.num_layers)) throw Error(source.op, "expected the whole model, got a part");
  const NamedTensors list = model.llmc_tensors();
  NoGradGuard no_grad;
  const auto stored = [&](const Tensor& t) { return t.to(Device::cpu(), options.dtype).contiguous(); };
  const auto tensor = [&](std::string_view n) { return hf::detail::named(list, n); };
  const std::int64_t NH = c.num_heads, KV = c.num_kv_heads, hd = c.head_dim;
  NamedTensors tensors = {{"model.embed_tokens.weight", stored(tensor("wte"))}};
  for (std::int64_t l = 0; l < c.num_layers; ++l) {  // Qwen3DecoderLayer's order
    const auto name = [l](const char* suffix) { return concat("model.layers.", l, ".", suffix); };
    const Tensor qkv = tensor("qkvw").select(0, l);
    tensors.emplace_back(name("self_attn.q_proj.weight"), stored(hf::rotate_half_rows(qkv.narrow(0, 0, NH * hd), NH)));
    tensors.emplace_back(name("self_attn.k_proj.weight"),
                         stored(hf::rotate_half_rows(qkv.narrow(0, NH * hd, KV * hd), KV)));
    tensors.emplace_back(name("self_attn.v_proj.weight"), stored(qkv.narrow(0, (NH + KV) * hd, KV * hd)));
    tensors.emplace_back(name("self_attn.o_proj.weight"), stored(tensor("attprojw").select(0, l)));
    tensors.emplace_back(name("self_attn.q_norm.weight"), stored(rotate_half_norm(tensor("qnormw").select(0, l))));
    tensors.emplace_back(name("self_attn.k_norm.weight"), stored(rotate_half_norm(tensor("knormw").select(0, l))));
    tensors.emplace_back(name("mlp.gate_proj.weight"), stored(tensor("fc2w").select(0, l)));
    tensors.emplace_back(name("mlp.up_proj.weight"), stored(tensor("fcw").select(0, l)));
    tensors.emplace_back(name("mlp.down_proj.weight"), stored(tensor("fcprojw").select(0, l)));
    tensors.emplace_back(name("input_layernorm.weight"), stored(tensor("ln1w").select(0, l)));
    tensors.emplace_back(name("post_attention_layernorm.weight"), stored(tensor("ln2w").select(0, l)));
  }
  tensors.emplace_back("model.norm.weight", stored(tensor("lnfw")));
  if (!c.tie_word_embeddings) tensors.emplace_back("lm_head.weight", stored(tensor("wlmhead")));
  nlohmann::ordered_json config;
  config["architectures"] = {"Qwen3ForCausalLM"};
  config["model_type"] = "qwen3";
  config["hidden_size"] = c.channels;
  config["intermediate_size"] = c.intermediate_size;
  config["num_attention_heads"] = NH;
  config["num_key_value_heads"] = KV;
  config["head_dim"] = hd;
  config["num_hidden_layers"] = c.num_layers;
  config["vocab_size"] = c.vocab_size;
  config["max_position_embeddings"] = c.max_seq_len;
  config["rms_norm_eps"] = hf::detail::decimal(c.norm_eps);
  config["rope_theta"] = hf::detail::decimal(c.rope_theta);
  config["rope_scaling"] = nullptr;
  config["hidden_act"] = "silu";
  config["attention_bias"] = false;
  config["attention_dropout"] = 0.0;
  config["use_sliding_window"] = false;
  config["sliding_window"] = nullptr;
  config["tie_word_embeddings"] = c.tie_word_embeddings;
  config["torch_dtype"] = hf::detail::dtype_name(options.dtype);
  hf::detail::write_directory(source, tensors, infini::detail::json_text(config, 2) + "\n", options);
}

std::vector<LoraSite> lora_sites(Module& module) {
  const auto& model = dynamic_cast<const Qwen3Impl&>(module);
  return llama_style_lora_sites(model.h, model.config.num_heads, model.config.num_kv_heads, model.config.head_dim);
}

std::shared_ptr<Module> make(std::string_view size, ConfigFields fields, const PartOf& part_of) {
  Qwen3Config c = Qwen3Config::from_name(size.empty() ? "qwen3_0.6B" : size);
  c.num_layers = fields.size("num_layers", c.num_layers);
  c.num_heads = fields.size("num_heads", c.num_heads);
  c.num_kv_heads = fields.size("num_kv_heads", c.num_kv_heads);
  c.head_dim = fields.size("head_dim", c.head_dim);
  c.channels = fields.size("channels", c.channels);
  c.intermediate_size = fields.size("intermediate_size", c.intermediate_size);
  c.max_seq_len = fields.size("max_seq_len", c.max_seq_len);
  c.vocab_size = fields.size("vocab_size", c.vocab_size);
  c.norm_eps = fields.number("norm_eps", c.norm_eps);
  c.rope_theta = fields.number("rope_theta", c.rope_theta);
  c.tie_word_embeddings = fields.flag("tie_word_embeddings", c.tie_word_embeddings);
  fields.finish("Qwen3Config");
  return std::make_shared<Qwen3Impl>(c, nullptr, part_of(c.num_layers));
}

}  // namespace

ModelFamily qwen3_family() {
  return {
      .name = "qwen3",
      .hf_model_types = {"qwen3"},
      .hf_architecture = "Qwen3ForCausalLM",
      .holds = [](const Module& model) { return dynamic_cast<const Qwen3Impl*>(&model) != nullptr; },
      .sizes = {"qwen3_0.6B", "qwen3_1.7B"},
      .make = make,
      .load_hf = read_model,
      .from_hf_config = [](const std::filesystem::path& dir, const PartOf& part_of) -> std::shared_ptr<Module> {
        const Qwen3Config config = read_config(Source{.op = "nn::load_pretrained", .dir = dir});
        return std::make_shared<Qwen3Impl>(config, nullptr, part_of(config.num_layers));
      },
      .save_hf = write_model,
      .load_llmc = {},
      .save_llmc = {},
      .rebuild = [](const Module& model, std::shared_ptr<TensorParallelLayers> tp,
                    const ModelPart& part) -> std::shared_ptr<Module> {
        return std::make_shared<Qwen3Impl>(dynamic_cast<const Qwen3Impl&>(model).config, std::move(tp), part);
      },
      .lora_sites = lora_sites,
      .default_lora_targets = {"q_proj", "v_proj"},  // PEFT's for Qwen2 / Qwen3
  };
}

}  // namespace infini::nn
