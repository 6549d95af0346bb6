// Hugging Face model directories (see hf_model.cppm): config.json, the weights and the shard
// index read into and written from llm.c's layout.
module;
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include "json_text.h"
module infini.nn;
import infini.std;

namespace infini::hf {
namespace {

namespace fs = std::filesystem;
using infini::detail::json_text;
using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

// Errors name the operation and the directory.
struct Source {
  std::string op;
  fs::path dir;
  template <class... Parts>
  [[noreturn]] void fail(const Parts&... parts) const {
    throw IOError(op, concat("'", dir.string(), "': ", parts...));
  }
};

Json read_json(const Source& source, const std::string& file) {
  std::ifstream in(source.dir / file, std::ios::binary);
  if (!in) source.fail("cannot open ", file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Json value;
  try {
    value = Json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    source.fail(file, " is not JSON: ", e.what());
  }
  if (!value.is_object()) source.fail(file, " is not a JSON object");
  return value;
}

// config.json, read and checked key by key.
class Config {
 public:
  explicit Config(const Source& source) : source_(source), json_(read_json(source, "config.json")) {}

  // The integer `key` (>= 1); `fallback` when absent (none: the key is required).
  std::int64_t size(const char* key, std::optional<std::int64_t> fallback = std::nullopt) const {
    const auto it = json_.find(key);
    if (it == json_.end() || (fallback && it->is_null())) {
      if (!fallback) source_.fail("config.json has no \"", key, "\"");
      return *fallback;
    }
    if (!it->is_number_integer() || it->get<std::int64_t>() < 1)
      source_.fail("config.json: \"", key, "\" must be a positive integer, got ", json_text(*it));
    return it->get<std::int64_t>();
  }
  double number(const char* key, double fallback) const {
    const auto it = json_.find(key);
    if (it == json_.end() || it->is_null()) return fallback;
    if (!it->is_number()) source_.fail("config.json: \"", key, "\" must be a number, got ", json_text(*it));
    return it->get<double>();
  }
  bool flag(const char* key, bool fallback) const {
    const auto it = json_.find(key);
    if (it == json_.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) source_.fail("config.json: \"", key, "\" must be true or false, got ", json_text(*it));
    return it->get<bool>();
  }
  // `key` must be absent, null or satisfy `ok`; else an error saying Infini needs `expected`.
  template <class Ok>
  void require(const char* key, Ok&& ok, std::string_view expected) const {
    const auto it = json_.find(key);
    if (it == json_.end() || it->is_null() || ok(*it)) return;
    source_.fail("config.json: \"", key, "\" is ", json_text(*it), "; Infini's model needs ", expected);
  }
  const Json* find(const char* key) const {
    const auto it = json_.find(key);
    return it == json_.end() || it->is_null() ? nullptr : &*it;
  }

 private:
  const Source& source_;
  Json json_;
};

bool stored_dtype(DataType t) { return t == kFloat32 || t == kBFloat16 || t == kFloat16; }

// Every tensor of the directory: model.safetensors, or the shards its index lists (each name
// in the file the index maps it to, and every file holding only what the index maps to it).
StateDict read_weights(const Source& source) {
  if (fs::exists(source.dir / kSingleFile)) return io::load_safetensors(source.dir / kSingleFile).tensors;
  if (!fs::exists(source.dir / kIndexFile)) source.fail("holds neither ", kSingleFile, " nor ", kIndexFile);
  const Json index = read_json(source, kIndexFile);
  const auto map = index.find("weight_map");
  if (map == index.end() || !map->is_object()) source.fail(kIndexFile, " has no \"weight_map\" object");
  std::map<std::string, std::vector<std::string>> names_in;  // shard file -> the names the index maps to it
  for (const auto& [name, file] : map->items()) {
    if (!file.is_string()) source.fail(kIndexFile, " maps '", name, "' to ", json_text(file), ", not a file name");
    const std::string f = file.get<std::string>();
    if (f.empty() || f == "." || f == ".." || f.find('/') != std::string::npos)
      source.fail(kIndexFile, " maps '", name, "' to \"", f, "\", not a file in the directory");
    names_in[f].push_back(name);
  }
  StateDict all;
  for (const auto& [file, names] : names_in) {
    StateDict shard = io::load_safetensors(source.dir / file).tensors;
    for (auto& [name, tensor] : shard) {
      const auto listed = map->find(name);
      if (listed == map->end()) source.fail(file, " holds '", name, "', which ", kIndexFile, " does not list");
      if (listed->get<std::string>() != file)
        source.fail(file, " holds '", name, "', which ", kIndexFile, " maps to ", json_text(*listed));
      all.emplace(name, std::move(tensor));
    }
    for (const std::string& name : names)
      if (!all.contains(name)) source.fail(kIndexFile, " maps '", name, "' to ", file, ", which does not hold it");
  }
  return all;
}

// The directory's tensors, taken one by one by name and shape; what is missing, misshapen,
// of another dtype or left over is reported at once by finish().
class Weights {
 public:
  explicit Weights(const Source& source) : source_(source), all_(read_weights(source)) {}

  bool has(const std::string& name) const { return all_.contains(name); }
  // The tensor as float32, or undefined (the problem noted) when missing or unfit.
  Tensor take(const std::string& name, const Shape& shape) {
    const auto it = all_.find(name);
    if (it == all_.end()) {
      missing_.push_back(name);
      return {};
    }
    taken_.insert(name);
    if (!stored_dtype(it->second.dtype())) {
      bad_dtype_.push_back(concat(name, " (", it->second.dtype(), ")"));
      return {};
    }
    if (it->second.shape() != shape) {
      misshapen_.push_back(concat(name, " is ", it->second.shape(), ", expected ", shape));
      return {};
    }
    return it->second.to(kFloat32);
  }
  // Fails listing every problem and every tensor neither taken nor `skipped`.
  void finish(std::string_view model, const std::function<bool(const std::string&)>& skipped) const {
    std::vector<std::string> unexpected;
    for (const auto& [name, tensor] : all_)
      if (!taken_.contains(name) && !skipped(name)) unexpected.push_back(name);
    std::string report;
    const auto add = [&](const char* what, const std::vector<std::string>& items) {
      if (items.empty()) return;
      report += concat(report.empty() ? "" : "; ", what, " ");
      for (std::size_t i = 0; i < items.size(); ++i) report += concat(i ? ", " : "", items[i]);
    };
    add("missing", missing_);
    add("misshapen", misshapen_);
    add("not float32, bfloat16 or float16:", bad_dtype_);
    add("unexpected", unexpected);
    if (!report.empty()) source_.fail("the weights do not match config.json's ", model, ": ", report);
  }

 private:
  const Source& source_;
  StateDict all_;
  std::set<std::string> taken_;
  std::vector<std::string> missing_, misshapen_, bad_dtype_;
};

// `per_layer` (one defined tensor per layer) stacked along a new dim 0; undefined when a
// layer's tensor was missing or unfit.
Tensor stacked(const TensorList& per_layer, std::int64_t layers) {
  for (const Tensor& t : per_layer)
    if (!t.defined()) return {};
  return static_cast<std::int64_t>(per_layer.size()) == layers ? stack(per_layer).contiguous() : Tensor();
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined() || a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor x = a.contiguous(), y = b.contiguous();
  return std::memcmp(x.data_ptr(), y.data_ptr(), static_cast<std::size_t>(x.nbytes())) == 0;
}

// transformers' shard names: model-00001-of-00003.safetensors.
std::string shard_name(std::size_t k, std::size_t n) {
  char name[64];
  std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", k, n);
  return name;
}

const char* dtype_name(DataType t) { return t == kFloat32 ? "float32" : t == kBFloat16 ? "bfloat16" : "float16"; }

// The shortest decimal that reads back as `x` (config.json's 1e-05, not 9.99999974737875e-06).
double decimal(float x) {
  char text[32];
  for (int digits = 1; digits <= 9; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, static_cast<double>(x));
    if (static_cast<float>(std::strtod(text, nullptr)) == x) break;
  }
  return std::strtod(text, nullptr);
}

void check_options(const Source& source, const WriteOptions& options) {
  if (!stored_dtype(options.dtype))
    throw DTypeError(source.op, concat("stores float32, bfloat16 or float16, got ", options.dtype));
  if (options.max_shard_bytes < 1)
    throw Error(source.op, concat("max_shard_bytes ", options.max_shard_bytes, ": expected >= 1"));
}

// Writes `tensors` (in state-dict order, already in the stored dtype) as model.safetensors
// or shards with their index, then `config` as config.json; removes the other layout's file.
void write_directory(const Source& source, const NamedTensors& tensors, const OrderedJson& config,
                     const WriteOptions& options) {
  std::int64_t total = 0;
  std::vector<StateDict> shards(1);
  std::int64_t in_shard = 0;
  for (const auto& [name, t] : tensors) {
    total += t.nbytes();
    if (!shards.back().empty() && in_shard + t.nbytes() > options.max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().emplace(name, t);
    in_shard += t.nbytes();
  }
  std::error_code ec;
  fs::create_directories(source.dir, ec);
  if (ec) source.fail("cannot create the directory: ", ec.message());
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  const auto write_text = [&](const char* file, const std::string& text) {
    io::write_file_atomically(source.dir / file, [&](io::FileSink& out) { out.write(text); });
  };
  if (shards.size() == 1) {
    io::save_safetensors(source.dir / kSingleFile, shards.front(), metadata);
    fs::remove(source.dir / kIndexFile, ec);
  } else {
    OrderedJson weight_map = OrderedJson::object();
    for (std::size_t k = 0; k < shards.size(); ++k) {
      const std::string file = shard_name(k + 1, shards.size());
      io::save_safetensors(source.dir / file, shards[k], metadata);
      for (const auto& [name, t] : tensors)
        if (shards[k].contains(name)) weight_map[name] = file;
    }
    OrderedJson index;
    index["metadata"] = {{"total_size", total}};
    index["weight_map"] = std::move(weight_map);
    write_text(kIndexFile, json_text(index, 2) + "\n");
    fs::remove(source.dir / kSingleFile, ec);
  }
  write_text("config.json", json_text(config, 2) + "\n");
}

const Tensor& named(const NamedTensors& tensors, std::string_view name) {
  return std::find_if(tensors.begin(), tensors.end(), [&](const auto& entry) { return entry.first == name; })->second;
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

// ---- LLaMA-3 ----

// Infini's scaled RoPE is LLaMA-3.1's: these constants (llama3.cpp).
constexpr double kRopeFactor = 8, kRopeLowFreqFactor = 1, kRopeHighFreqFactor = 4;
constexpr std::int64_t kRopeOriginalContext = 8192;

}  // namespace

Tensor interleaved_pairs(const Tensor& w, std::int64_t heads) {
  const std::int64_t rows = w.size(0), cols = w.size(1);
  return w.reshape({heads, 2, rows / heads / 2, cols}).transpose(1, 2).reshape({rows, cols}).contiguous();
}

Tensor rotate_half_rows(const Tensor& w, std::int64_t heads) {
  const std::int64_t rows = w.size(0), cols = w.size(1);
  return w.reshape({heads, rows / heads / 2, 2, cols}).transpose(1, 2).reshape({rows, cols}).contiguous();
}

llmc::GPT2Checkpoint read_gpt2(const std::filesystem::path& dir) {
  const Source source{.op = "hf::read_gpt2", .dir = dir};
  const Config config(source);
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
  write_directory(source, tensors, config, options);
}

llmc::LLaMA3Checkpoint read_llama3(const std::filesystem::path& dir) {
  const Source source{.op = "hf::read_llama3", .dir = dir};
  const Config config(source);
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
  bool scaled = false;
  if (const Json* scaling = config.find("rope_scaling")) {
    const auto value = [&](const char* key) { return scaling->contains(key) ? (*scaling)[key] : Json(); };
    const Json type = scaling->contains("rope_type") ? value("rope_type") : value("type");
    scaled = scaling->is_object() && type == "llama3" && value("factor") == kRopeFactor &&
             value("low_freq_factor") == kRopeLowFreqFactor && value("high_freq_factor") == kRopeHighFreqFactor &&
             value("original_max_position_embeddings") == kRopeOriginalContext;
    if (!scaled)
      source.fail("config.json: \"rope_scaling\" is ", json_text(*scaling),
                  "; Infini's scaled RoPE is LLaMA-3.1's: rope_type \"llama3\", factor 8, low_freq_factor 1, "
                  "high_freq_factor 4, original_max_position_embeddings 8192");
  }
  const bool tied = config.flag("tie_word_embeddings", false);
  const llmc::LLaMA3Config c{.max_seq_len = maxT, .vocab_size = V, .num_layers = L, .num_heads = NH,
                             .num_kv_heads = KV, .channels = C, .ffn_dim_multiplier = 0, .multiple_of = I,
                             .norm_eps = static_cast<float>(config.number("rms_norm_eps", 1e-6)),
                             .rope_theta = static_cast<float>(config.number("rope_theta", 10000.0)),
                             .use_scaled_rope = scaled};

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
                              {"factor", kRopeFactor},
                              {"low_freq_factor", kRopeLowFreqFactor},
                              {"high_freq_factor", kRopeHighFreqFactor},
                              {"original_max_position_embeddings", kRopeOriginalContext}};
  else
    config["rope_scaling"] = nullptr;
  config["hidden_act"] = "silu";
  config["attention_bias"] = false;
  config["mlp_bias"] = false;
  config["tie_word_embeddings"] = tied;
  config["torch_dtype"] = dtype_name(options.dtype);
  write_directory(source, tensors, config, options);
}

}  // namespace infini::hf
