// load_pretrained / save_pretrained (see pretrained.cppm): config.json's model_type picks the
// model family (model_family.cppm), whose mapping reads and writes the directory.
module infini.nn;
import infini.std;

namespace infini::nn {

std::shared_ptr<Module> load_pretrained(const std::filesystem::path& dir) {
  return model_family_of_hf(dir, "nn::load_pretrained").load_hf(dir);
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
