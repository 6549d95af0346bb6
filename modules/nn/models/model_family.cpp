// The registry of model families (see model_family.cppm).
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

const ModelFamily& model_family(std::string_view name) {
  std::string names;
  for (const ModelFamily& family : model_families()) {
    if (family.name == name) return family;
    names += (names.empty() ? "" : ", ") + family.name;
  }
  throw Error("nn::model_family", concat("no model family \"", name, "\"; the families: ", names));
}

const ModelFamily& model_family_of(const Module& model, std::string_view op) {
  std::string names;
  for (const ModelFamily& family : model_families()) {
    if (family.holds(model)) return family;
    names += (names.empty() ? "" : ", ") + family.name;
  }
  throw Error(std::string(op), concat("expected a model of a registered family (", names, "), got ", model.type_name()));
}

const ModelFamily* model_family_for_hf_type(std::string_view type) {
  for (const ModelFamily& family : model_families())
    if (std::ranges::find(family.hf_model_types, type) != family.hf_model_types.end()) return &family;
  return nullptr;
}

CausalLM& causal_lm(Module& model) {
  auto* lm = dynamic_cast<CausalLM*>(&model);
  if (!lm) throw Error("nn::causal_lm", concat("expected a causal language model, got ", model.type_name()));
  return *lm;
}

const CausalLM& causal_lm(const Module& model) { return causal_lm(const_cast<Module&>(model)); }

}  // namespace infini::nn
