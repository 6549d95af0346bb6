// Trains a causal language model of any registered family (nn::model_families(): GPT-2,
// LLaMA-3, Qwen3) on an llm.c token file, from random init, an llm.c checkpoint or a Hugging
// Face directory. One program under three names: `lm`, and `gpt2` / `llama3`, whose --model
// custom and --llmc_filepath mean their own family.
//   build/release/bin/lm --model qwen3 --num_layers 2 --channels 64 --num_heads 4 --num_kv_heads 2 \
//       --head_dim 32 --intermediate_size 128 --vocab_size 50304 --max_seq_len 256 \
//       --input_bin train.bin --num_iteration 100 --learning_rate 3e-4 --metrics_out qwen3.jsonl
//   build/release/bin/lm --hf_model Qwen3-0.6B --tokenizer Qwen3-0.6B --input_bin chat.bin ...
// Each step prints one line and appends {"step", "loss", "lr", "grad_norm", "ms", "tokens_per_s",
// "peak_bytes"} to --metrics_out; docs/user-guide.md ("Training a language model") lists every flag.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "../common/lm_trainer.h"

import infini.nn;

using namespace infini;

#ifndef INFINI_TRAINER_FAMILY
#define INFINI_TRAINER_FAMILY ""  // lm: the family comes from --model or the directory
#endif

namespace {

constexpr const char* kProgram = INFINI_TRAINER_FAMILY[0] ? INFINI_TRAINER_FAMILY : "lm";

// The config fields the size flags change (each family reads those it has).
constexpr const char* kSizeFields[] = {"num_layers", "num_heads",          "num_kv_heads", "head_dim",
                                       "channels",   "intermediate_size",  "max_seq_len",  "vocab_size",
                                       "ffn_dim_multiplier", "multiple_of", "norm_eps",     "rope_theta",
                                       "use_scaled_rope",    "tie_word_embeddings"};

struct ModelFlags {
  std::string model, llmc_filepath, hf_model, hf_config;
  std::map<std::string, std::string> sizes;  // the size flags given
};

// The family and size --model names: a named size, a family (its default size), or custom (this
// program's family).
std::pair<const nn::ModelFamily*, std::string> family_and_size(const ModelFlags& m) {
  const std::string model = m.model.empty() ? (INFINI_TRAINER_FAMILY[0] ? "custom" : "gpt2") : m.model;
  if (model == "custom") {
    if (!INFINI_TRAINER_FAMILY[0]) throw Error(kProgram, "--model custom: name a family (gpt2, llama3, qwen3) instead");
    return {&nn::model_family(INFINI_TRAINER_FAMILY), ""};
  }
  if (const nn::ModelFamily* family = nn::model_family_with_size(model)) return {family, model};
  return {&nn::model_family(model), ""};
}

// The whole model from a file, or this rank's part of a new one.
std::shared_ptr<nn::Module> make_model(const ModelFlags& m, const samples::PartFor& part_for) {
  const int sources = !m.llmc_filepath.empty() + !m.hf_model.empty() + !m.hf_config.empty();
  if (sources > 1) throw Error(kProgram, "--llmc_filepath, --hf_model and --hf_config each give the model: pass one");
  if (sources > 0 && (!m.sizes.empty() || (!m.model.empty() && m.model != "custom")))
    throw Error(kProgram, "--model and the size flags make a new model: not with --llmc_filepath, --hf_model or --hf_config");
  if (!m.hf_model.empty()) {
    const std::shared_ptr<nn::Module> whole = nn::model_family_of_hf(m.hf_model, kProgram).load_hf(m.hf_model);
    return samples::split_model(whole, nullptr, part_for(nn::causal_lm(*whole).sizes().num_layers));
  }
  if (!m.hf_config.empty()) return nn::model_family_of_hf(m.hf_config, kProgram).from_hf_config(m.hf_config, part_for);
  const auto [family, size] = family_and_size(m);
  if (!m.llmc_filepath.empty()) {
    if (!family->load_llmc) throw Error(kProgram, concat(family->name, " has no llm.c checkpoint file"));
    const std::shared_ptr<nn::Module> whole = family->load_llmc(m.llmc_filepath);
    return samples::split_model(whole, nullptr, part_for(nn::causal_lm(*whole).sizes().num_layers));
  }
  return family->make(size, nn::ConfigFields(m.sizes), part_for);
}

std::string size_names() {
  std::string names;
  for (const nn::ModelFamily& family : nn::model_families()) {
    names += (names.empty() ? "" : "; ") + family.name + ":";
    for (const std::string& size : family.sizes) names += " " + size;
  }
  return names;
}

}  // namespace

int main(int argc, char** argv) {
  ModelFlags m;
  samples::TrainFlags f;
  CLI::App app{concat("Trains a causal language model (", INFINI_TRAINER_FAMILY[0] ? INFINI_TRAINER_FAMILY : "any family",
                      ") on the CPU or CUDA GPUs (--device cuda), one process or mpirun's ranks.")};
  app.add_option("--model", m.model,
                 concat("a named size (", size_names(), "), a family (its first size), or custom",
                        INFINI_TRAINER_FAMILY[0] ? concat(" (", INFINI_TRAINER_FAMILY, "'s first size)") : std::string(),
                        "; changed by the size flags; random init"));
  app.add_option("--llmc_filepath", m.llmc_filepath, "start from this llm.c checkpoint (of --model's family)");
  app.add_option("--hf_model", m.hf_model,
                 "start from this Hugging Face directory (config.json's model_type picks the family)");
  app.add_option("--hf_config", m.hf_config,
                 "a new model of this Hugging Face directory's config.json sizes (weights not read; random init)");
  for (const char* field : kSizeFields)
    app.add_option_function<std::string>(concat("--", field), [&m, field](const std::string& v) { m.sizes[field] = v; },
                                         "model size: the config field of that name (for the families that have it)");
  samples::add_train_flags(app, f);
  CLI11_PARSE(app, argc, argv);

  try {
    samples::prepare_run(f);
    return samples::train(samples::factory([&m](const samples::PartFor& part_for) { return make_model(m, part_for); }), f);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", kProgram, e.what());
    return 1;
  }
}
