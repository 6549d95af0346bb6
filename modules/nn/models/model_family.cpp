// The registry of model families and the config fields the trainers change (see
// model_family.cppm).
module;
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
module infini.nn;
import infini.std;

namespace infini::nn {

const std::vector<ModelFamily>& model_families() {
  static const std::vector<ModelFamily> families = {
      gpt2_family(),
      llama3_family(),
      qwen3_family(),
  };
  return families;
}

namespace {

std::string family_names() {
  std::string names;
  for (const ModelFamily& family : model_families()) names += (names.empty() ? "" : ", ") + family.name;
  return names;
}

}  // namespace

const ModelFamily& model_family(std::string_view name) {
  for (const ModelFamily& family : model_families())
    if (family.name == name) return family;
  throw Error("nn::model_family", concat("no model family \"", name, "\"; the families: ", family_names()));
}

const ModelFamily& model_family_of(const Module& model, std::string_view op) {
  for (const ModelFamily& family : model_families())
    if (family.holds(model)) return family;
  throw Error(std::string(op),
              concat("expected a model of a registered family (", family_names(), "), got ", model.type_name()));
}

const ModelFamily* model_family_for_hf_type(std::string_view type) {
  for (const ModelFamily& family : model_families())
    if (std::ranges::find(family.hf_model_types, type) != family.hf_model_types.end()) return &family;
  return nullptr;
}

const ModelFamily& model_family_of_hf(const std::filesystem::path& dir, std::string_view op) {
  const std::string o(op);
  const nlohmann::json config = nlohmann::json::parse(text::detail::read_text_file(o.c_str(), dir / "config.json"),
                                                      nullptr, /*allow_exceptions=*/false);
  const auto type = config.is_object() ? config.find("model_type") : config.end();
  if (type == config.end() || !type->is_string())
    throw IOError(o, concat("'", dir.string(), "': config.json is not a JSON object with a \"model_type\" string"));
  if (const ModelFamily* family = model_family_for_hf_type(type->get<std::string>())) return *family;
  std::string known;
  for (const ModelFamily& family : model_families())
    for (const std::string& t : family.hf_model_types)
      known += concat(known.empty() ? "" : ", ", "\"", t, "\" (", family.hf_architecture, ")");
  throw IOError(o, concat("'", dir.string(), "': model_type \"", type->get<std::string>(),
                          "\" is not supported: expected ", known));
}

const ModelFamily* model_family_with_size(std::string_view size) {
  for (const ModelFamily& family : model_families())
    if (std::ranges::find(family.sizes, size) != family.sizes.end()) return &family;
  return nullptr;
}

CausalLM& causal_lm(Module& model) {
  auto* lm = dynamic_cast<CausalLM*>(&model);
  if (!lm) throw Error("nn::causal_lm", concat("expected a causal language model, got ", model.type_name()));
  return *lm;
}

const CausalLM& causal_lm(const Module& model) { return causal_lm(const_cast<Module&>(model)); }

const std::string* ConfigFields::take(const std::string& field) {
  read_.push_back(field);
  const auto it = values_.find(field);
  return it == values_.end() ? nullptr : &it->second;
}

std::int64_t ConfigFields::size(const std::string& field, std::int64_t current) {
  const std::string* text = take(field);
  if (!text) return current;
  char* end = nullptr;
  const long long value = std::strtoll(text->c_str(), &end, 10);
  if (text->empty() || *end != '\0') throw Error("model config", concat("--", field, " ", *text, ": expected a whole number"));
  return value;
}

float ConfigFields::number(const std::string& field, float current) {
  const std::string* text = take(field);
  if (!text) return current;
  char* end = nullptr;
  const float value = std::strtof(text->c_str(), &end);
  if (text->empty() || *end != '\0') throw Error("model config", concat("--", field, " ", *text, ": expected a number"));
  return value;
}

bool ConfigFields::flag(const std::string& field, bool current) {
  const std::string* text = take(field);
  if (!text) return current;
  if (*text == "1" || *text == "true") return true;
  if (*text == "0" || *text == "false") return false;
  throw Error("model config", concat("--", field, " ", *text, ": expected 0, 1, true or false"));
}

void ConfigFields::finish(std::string_view op) const {
  std::string unknown, known;
  for (const auto& [field, value] : values_)
    if (std::ranges::find(read_, field) == read_.end()) unknown += concat(unknown.empty() ? "" : ", ", "--", field);
  if (unknown.empty()) return;
  for (std::size_t i = 0; i < read_.size(); ++i)
    if (std::find(read_.begin(), read_.begin() + static_cast<std::ptrdiff_t>(i), read_[i]) == read_.begin() + static_cast<std::ptrdiff_t>(i))
      known += concat(known.empty() ? "" : ", ", "--", read_[i]);
  throw Error(std::string(op), concat(unknown, ": not a field of this model (its fields: ", known, ")"));
}

}  // namespace infini::nn
