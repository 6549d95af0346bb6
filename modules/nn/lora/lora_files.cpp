// PEFT's adapter files (see lora.cppm): adapter_model.safetensors with transformers' module
// names, adapter_config.json with LoraConfig's keys. LLaMA-3's q_proj / k_proj lora_B rows are
// stored in transformers' rotate-half order, as its q_proj / k_proj weights are.
module;
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "../checkpoint/json_text.h"
module infini.nn;
import infini.std;

namespace infini::nn::lora {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
constexpr const char* kWeights = "adapter_model.safetensors";
constexpr const char* kConfig = "adapter_config.json";

std::string key(const AdapterImpl& adapter, const char* matrix) {
  return concat("base_model.model.", adapter.peft_name, ".lora_", matrix, ".weight");
}

// The one LoraConfig all adapters share (a PEFT file has one); Error from `op` otherwise.
LoraConfig shared_config(const char* op, const std::vector<std::shared_ptr<AdapterImpl>>& list, const Module& model) {
  if (list.empty()) throw Error(op, concat(model.type_name(), " has no LoRA adapters"));
  LoraConfig config = list.front()->config;
  config.targets.clear();
  for (const auto& a : list) {
    if (a->config.rank != config.rank || a->config.alpha != config.alpha || a->config.dropout != config.dropout)
      throw Error(op, concat("the adapters differ in rank, alpha or dropout (", a->peft_name,
                             "): one adapter_config.json cannot describe them"));
    if (std::ranges::find(config.targets, a->target) == config.targets.end()) config.targets.push_back(a->target);
  }
  return config;
}

}  // namespace

void save_adapters(Module& model, const fs::path& dir) {
  const std::vector<std::shared_ptr<AdapterImpl>> list = adapters(model);
  const LoraConfig config = shared_config("lora::save_adapters", list, model);
  StateDict tensors;
  for (const auto& a : list) {
    const Tensor B = a->B.to(Device::cpu()).to(kFloat32);
    tensors[key(*a, "A")] = a->A.to(Device::cpu()).to(kFloat32).contiguous();
    tensors[key(*a, "B")] = a->rope_heads > 0 ? hf::rotate_half_rows(B, a->rope_heads) : B.contiguous();
  }
  nlohmann::ordered_json peft = {
      {"peft_type", "LORA"},
      {"task_type", "CAUSAL_LM"},
      {"r", config.rank},
      {"lora_alpha", config.alpha},
      {"lora_dropout", config.dropout},
      {"target_modules", config.targets},
      {"bias", "none"},
      {"fan_in_fan_out", model_family_of(model).lora_fan_in_fan_out},  // GPT-2's Conv1D layers
      {"use_rslora", false},
      {"modules_to_save", nullptr},
      {"init_lora_weights", true},
      {"inference_mode", true},
      {"base_model_name_or_path", nullptr},
  };
  fs::create_directories(dir);
  io::save_safetensors(dir / kWeights, tensors, {{"format", "pt"}});
  io::write_file_atomically(dir / kConfig, [&](io::FileSink& out) { out.write(infini::detail::json_text(peft, 2) + "\n"); });
}

std::vector<std::shared_ptr<AdapterImpl>> load_adapters(Module& model, const fs::path& dir) {
  constexpr const char* op = "lora::load_adapters";
  const std::string config_path = (dir / kConfig).string();
  auto fail = [&](const std::string& file, const std::string& what) -> void {
    throw IOError(op, concat(file, ": ", what));
  };
  const json peft = json::parse(text::detail::read_text_file(op, dir / kConfig), nullptr, /*allow_exceptions=*/false);
  if (peft.is_discarded() || !peft.is_object()) fail(config_path, "not a JSON object");
  auto value = [&](const char* name) -> const json* {
    const auto it = peft.find(name);
    return it == peft.end() || it->is_null() ? nullptr : &*it;
  };
  auto number = [&](const char* name) {
    const json* v = value(name);
    if (!v || !v->is_number()) fail(config_path, concat("\"", name, "\" must be a number"));
    return v->get<double>();
  };
  if (const json* type = value("peft_type"); !type || *type != "LORA") fail(config_path, "\"peft_type\" must be \"LORA\"");
  if (const json* rs = value("use_rslora"); rs && *rs != false)
    fail(config_path, "\"use_rslora\" is not supported (scaling alpha / sqrt(r))");
  if (const json* bias = value("bias"); bias && *bias != "none") fail(config_path, "only \"bias\": \"none\" is supported");
  if (const json* m = value("modules_to_save"); m && !(m->is_array() && m->empty()))
    fail(config_path, "\"modules_to_save\" is not supported");
  for (const char* unsupported : {"rank_pattern", "alpha_pattern", "layers_to_transform"})
    if (const json* v = value(unsupported); v && !v->empty()) fail(config_path, concat("\"", unsupported, "\" is not supported"));
  const json* targets = value("target_modules");
  if (!targets || !targets->is_array() || targets->empty() ||
      std::ranges::any_of(*targets, [](const json& t) { return !t.is_string(); }))
    fail(config_path, "\"target_modules\" must be a list of module names");
  const double r = number("r");
  if (r != std::floor(r) || r < 1) fail(config_path, concat("\"r\" must be a positive integer"));
  LoraConfig config{.rank = static_cast<std::int64_t>(r),
                    .alpha = number("lora_alpha"),
                    .dropout = value("lora_dropout") ? number("lora_dropout") : 0.0,
                    .targets = targets->get<std::vector<std::string>>()};
  if (!adapters(model).empty()) throw Error(op, concat(model.type_name(), " has LoRA adapters already"));

  const std::string weights_path = (dir / kWeights).string();
  io::SafetensorsFile file = io::load_safetensors(dir / kWeights);
  const std::vector<std::shared_ptr<AdapterImpl>> made = lora::apply(model, config);
  NoGradGuard no_grad;
  std::vector<std::string> missing;
  for (const auto& a : made)
    for (const char* matrix : {"A", "B"}) {
      const std::string name = key(*a, matrix);
      const auto it = file.tensors.find(name);
      if (it == file.tensors.end()) {
        missing.push_back(name);
        continue;
      }
      Tensor t = it->second;
      Tensor& target = matrix[0] == 'A' ? a->A : a->B;
      if (t.dtype() != kFloat32 && t.dtype() != kBFloat16 && t.dtype() != kFloat16)
        fail(weights_path, concat(name, " is ", t.dtype(), ": expected float32, bfloat16 or float16"));
      if (t.shape() != target.shape())
        fail(weights_path, concat(name, " has shape ", t.shape(), ", expected ", target.shape()));
      t = t.to(kFloat32);
      if (matrix[0] == 'B' && a->rope_heads > 0) t = hf::interleaved_pairs(t, a->rope_heads);
      target.copy_(t.to(target.device()).to(target.dtype()));
      file.tensors.erase(it);
    }
  if (!missing.empty() || !file.tensors.empty()) {
    std::string what;
    for (const auto& name : missing) what += (what.empty() ? "missing " : ", missing ") + name;
    for (const auto& [name, t] : file.tensors) what += (what.empty() ? "unexpected " : ", unexpected ") + name;
    fail(weights_path, what);
  }
  return made;
}

}  // namespace infini::nn::lora
