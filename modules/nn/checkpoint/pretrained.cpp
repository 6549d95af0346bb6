// load_pretrained / save_pretrained (see pretrained.cppm): config.json's model_type picks the
// model; the weights go through llm.c's layout, which both models load and export.
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
  if (*type == "gpt2") {
    const llmc::GPT2Checkpoint checkpoint = hf::read_gpt2(dir);
    auto model = std::make_shared<GPT2Impl>(GPT2Config::from_llmc(checkpoint.config));
    model->load_llmc_tensors(checkpoint.tensors);
    return model;
  }
  if (*type == "llama") {
    const llmc::LLaMA3Checkpoint checkpoint = hf::read_llama3(dir);
    auto model = std::make_shared<LLaMA3Impl>(LLaMA3Config::from_llmc(checkpoint.config));
    model->load_llmc_tensors(checkpoint.tensors);
    return model;
  }
  throw IOError(op, concat("'", dir.string(), "': model_type \"", type->get<std::string>(),
                           "\" is not supported: expected \"gpt2\" (GPT2LMHeadModel) or \"llama\" (LlamaForCausalLM)"));
}

void save_pretrained(Module& model, const std::filesystem::path& dir, hf::WriteOptions options) {
  constexpr const char* op = "nn::save_pretrained";
  if (!lora::adapters(model).empty())
    throw Error(op, concat(model.type_name(), " has LoRA adapters: merge them first (nn::lora::merge) or save them "
                                              "with nn::lora::save_adapters"));
  const auto* lm = dynamic_cast<const CausalLM*>(&model);
  if (lm && lm->tp && lm->tp->size() > 1)
    throw Error(op, concat("expected a model of one process, got a tensor-parallel one (tp = ", lm->tp->size(), ")"));
  if (const auto* gpt2 = dynamic_cast<const GPT2Impl*>(&model)) {
    if (!gpt2->part.is_whole(gpt2->config.num_layers)) throw Error(op, "expected the whole model, got a part");
    hf::write_gpt2(dir, {.config = gpt2->config.to_llmc(), .tensors = gpt2->llmc_tensors()}, options);
    return;
  }
  if (const auto* llama = dynamic_cast<const LLaMA3Impl*>(&model)) {
    if (!llama->part.is_whole(llama->config.num_layers)) throw Error(op, "expected the whole model, got a part");
    hf::write_llama3(dir, {.config = llama->config.to_llmc(), .tensors = llama->llmc_tensors()}, options);
    return;
  }
  throw Error(op, concat("expected a GPT2 or LLaMA3 model, got ", model.type_name()));
}

}  // namespace infini::nn
