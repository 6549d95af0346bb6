// The loop's view of a model (see lm_trainer.h): a causal LM of a registered model family,
// exported and rebuilt through that family.
#include <memory>
#include <string>

#include "lm_trainer.h"

namespace samples {

using namespace infini;

namespace {

// `whole` (a whole model of one process) written in `format` through lm's family.
void write_whole(const LanguageModel& lm, const std::filesystem::path& path, ModelFormat format,
                 const nn::Module& whole) {
  if (format == ModelFormat::kLlmc) {
    if (!lm.family->save_llmc)
      throw Error("train", concat(lm.family->name, " has no llm.c checkpoint file: export it with --hf_out"));
    lm.family->save_llmc(whole, path);
  } else {
    lm.family->save_hf(whole, path, {});
  }
}

}  // namespace

LanguageModel language_model(std::shared_ptr<nn::Module> model) {
  const nn::ModelFamily& family = nn::model_family_of(*model, "train");
  nn::CausalLM& lm = nn::causal_lm(*model);
  return {.module = std::move(model),
          .lm = &lm,
          .family = &family,
          .vocab_size = lm.sizes().vocab_size,
          .max_seq_len = lm.sizes().max_seq_len,
          .num_blocks = lm.sizes().num_layers};
}

void LanguageModel::export_model(const std::filesystem::path& path, ModelFormat format, bool write) const {
  const auto tensors = lm->llmc_tensors();  // whole tensors: a collective under tensor parallelism
  if (!write) return;
  if (!lm->tp || lm->tp->size() == 1) {
    write_whole(*this, path, format, *module);
    return;
  }
  const auto whole = family->rebuild(*module, nullptr, nn::ModelPart::whole(num_blocks));
  nn::causal_lm(*whole).load_llmc_tensors(tensors);
  write_whole(*this, path, format, *whole);
}

void LanguageModel::write_model(const std::filesystem::path& path, ModelFormat format,
                                const nn::Named<Tensor>& named) const {
  write_whole(*this, path, format, *model_from(*module, nullptr, nn::ModelPart::whole(num_blocks), named));
}

std::string LanguageModel::llmc_name() const { return family->save_llmc ? family->name + ".bin" : std::string(); }

std::shared_ptr<nn::Module> model_from(const nn::Module& like, std::shared_ptr<nn::TensorParallelLayers> tp,
                                       const nn::ModelPart& part, const nn::Named<Tensor>& named) {
  Generator& rng = default_generator();
  const auto state = rng.state();
  const std::shared_ptr<nn::Module> model = nn::model_family_of(like, "train").rebuild(like, tp, part);
  rng.set_state(state);
  NoGradGuard no_grad;
  const std::map<std::string, Tensor> by_name(named.begin(), named.end());
  const nn::TensorParallelLayers& layers = *nn::causal_lm(*model).tp;
  for (const auto& [name, held] : model->named_parameters()) {
    const auto whole = by_name.find(name);
    if (whole == by_name.end()) throw Error("train", "no tensor named " + name);
    Tensor param = held;  // a handle: copy_ writes the parameter's storage
    const nn::ShardSpec spec = layers.shard_spec(param);
    param.copy_(spec.sharded() ? spec.shard(whole->second, layers.rank(), layers.size()) : whole->second);
  }
  return model;
}

std::shared_ptr<nn::Module> split_model(std::shared_ptr<nn::Module> whole, std::shared_ptr<nn::TensorParallelLayers> tp,
                                        const nn::ModelPart& part) {
  if (!tp && part.is_whole(nn::causal_lm(*whole).sizes().num_layers)) return whole;
  return model_from(*whole, std::move(tp), part, whole->named_parameters());
}

ModelFactory factory(std::function<std::shared_ptr<nn::Module>(const PartFor& part_for)> make) {
  return [make = std::move(make)](std::shared_ptr<nn::TensorParallelLayers> tp, const PartFor& part_for) {
    const std::shared_ptr<nn::Module> base = make(part_for);
    if (!tp) return language_model(base);
    return language_model(model_from(*base, std::move(tp), nn::causal_lm(*base).part, base->named_parameters()));
  };
}

}  // namespace samples
