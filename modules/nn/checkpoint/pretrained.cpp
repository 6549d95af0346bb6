// load_pretrained / save_pretrained (see pretrained.cppm): config.json's model_type picks the
// model family (model_family.cppm), whose mapping reads and writes the directory.
module;
#include <nlohmann/json.hpp>
module infini.nn;
import infini.std;

namespace infini::nn {

std::shared_ptr<Module> load_pretrained(const std::filesystem::path& dir) {
  constexpr const char* op = "nn::load_pretrained";
  const nlohmann::json config =
      nlohmann::json::parse(text::detail::read_text_file(op, dir / "config.json"), nullptr, /*allow_exceptions=*/false);
  const auto type = config.is_object() ? config.find("model_type") : config.end();
  if (type == config.end() || !type->is_string())
    throw IOError(op, concat("'", dir.string(), "': config.json is not a JSON object with a \"model_type\" string"));
  if (const ModelFamily* family = model_family_for_hf_type(type->get<std::string>())) return family->load_hf(dir, true);
  std::string known;
  for (const ModelFamily& family : model_families())
    for (const std::string& t : family.hf_model_types)
      known += concat(known.empty() ? "" : ", ", "\"", t, "\" (", family.hf_architecture, ")");
  throw IOError(op, concat("'", dir.string(), "': model_type \"", type->get<std::string>(), "\" is not supported: expected ",
                           known));
}

void save_pretrained(Module& model, const std::filesystem::path& dir, hf::WriteOptions options) {
  constexpr const char* op = "nn::save_pretrained";
  if (!lora::adapters(model).empty())
    throw Error(op, concat(model.type_name(), " has LoRA adapters: merge them first (nn::lora::merge) or save them "
                                              "with nn::lora::save_adapters"));
  const ModelFamily& family = model_family_of(model, op);
  const CausalLM& lm = causal_lm(model);
  if (lm.tp && lm.tp->size() > 1)
    throw Error(op, concat("expected a model of one process, got a tensor-parallel one (tp = ", lm.tp->size(), ")"));
  if (!lm.part.is_whole(lm.sizes().num_layers)) throw Error(op, "expected the whole model, got a part");
  family.save_hf(model, dir, options);
}

}  // namespace infini::nn
