// Trains LLaMA-3 on an llm.c token file, from random init or from an llm.c / InfiniTrain
// LLaMA-3 checkpoint.
//   build/release/bin/llama3 --model custom --num_layers 4 --num_heads 8 --num_kv_heads 2 --channels 256 \
//       --max_seq_len 256 --vocab_size 50304 --input_bin train.bin --batch_size 4 --sequence_length 64 \
//       --num_iteration 100 --learning_rate 3e-4 --metrics_out llama3.jsonl
// Flags, output and metrics are the gpt2 sample's (samples/common/lm_trainer.h);
// docs/user-guide.md ("Training LLaMA-3") lists the model flags.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>

#include "../common/lm_trainer.h"

import infini.nn;

using namespace infini;

namespace {

struct ModelFlags {
  std::string llmc_filepath, hf_model;
  std::string model = "llama3_1B";
  nn::LLaMA3Config custom;  // llama3_1B's config, changed by the custom-model flags
};

// The model (this rank's part of it): an llm.c checkpoint's or a Hugging Face directory's (read
// whole, then the part kept), a named size, or "custom" from the flags.
nn::LLaMA3 make_model(const ModelFlags& f, const samples::PartFor& part_for) {
  if (!f.llmc_filepath.empty() && !f.hf_model.empty())
    throw Error("llama3", "--llmc_filepath and --hf_model both give the starting weights: pass one");
  if (!f.llmc_filepath.empty() || !f.hf_model.empty()) {
    const llmc::LLaMA3Checkpoint checkpoint =
        f.hf_model.empty() ? llmc::read_llama3_checkpoint(f.llmc_filepath) : hf::read_llama3(f.hf_model);
    nn::LLaMA3 whole(nn::LLaMA3Config::from_llmc(checkpoint.config));
    whole->load_llmc_tensors(checkpoint.tensors);
    const nn::ModelPart part = part_for(whole->config.num_layers);
    if (part.is_whole(whole->config.num_layers)) return whole;
    return samples::model_from<nn::LLaMA3>(whole->config, nullptr, part, whole->named_parameters());
  }
  const nn::LLaMA3Config config = f.model != "custom" ? nn::LLaMA3Config::from_name(f.model) : f.custom;
  return nn::LLaMA3(config, nullptr, part_for(config.num_layers));
}

llmc::LLaMA3Checkpoint to_llmc(const nn::LLaMA3& model) {
  return {.config = model->config.to_llmc(), .tensors = model->llmc_tensors()};
}

void write_checkpoint(const std::filesystem::path& path, samples::ModelFormat format,
                      const llmc::LLaMA3Checkpoint& checkpoint) {
  if (format == samples::ModelFormat::kLlmc) llmc::write_llama3_checkpoint(path, checkpoint);
  else hf::write_llama3(path, checkpoint);
}

}  // namespace

int main(int argc, char** argv) {
  ModelFlags m;
  samples::TrainFlags f;
  CLI::App app{"Trains LLaMA-3 (Meta's model, llm.c / InfiniTrain file formats) on CPU."};
  app.add_option("--llmc_filepath", m.llmc_filepath, "start from this LLaMA-3 checkpoint (llm.c / InfiniTrain)");
  app.add_option("--hf_model", m.hf_model,
                 "start from this Hugging Face LLaMA directory (config.json, model.safetensors or shards)");
  app.add_option("--model", m.model, "llama3_1B, llama3_3B, llama3_8B (random init), or custom (llama3_1B changed by "
                                     "--num_layers ...)")
      ->check(CLI::IsMember({"llama3_1B", "llama3_3B", "llama3_8B", "custom"}));
  nn::LLaMA3Config& c = m.custom;
  app.add_option("--num_layers", c.num_layers, "custom model: layers")->capture_default_str();
  app.add_option("--num_heads", c.num_heads, "custom model: query heads")->capture_default_str();
  app.add_option("--num_kv_heads", c.num_kv_heads, "custom model: key/value heads")->capture_default_str();
  app.add_option("--channels", c.channels, "custom model: channels")->capture_default_str();
  app.add_option("--max_seq_len", c.max_seq_len, "custom model: positions")->capture_default_str();
  app.add_option("--vocab_size", c.vocab_size, "custom model: vocabulary")->capture_default_str();
  app.add_option("--ffn_dim_multiplier", c.ffn_dim_multiplier, "custom model: MLP size multiplier (0: none)")
      ->capture_default_str();
  app.add_option("--multiple_of", c.multiple_of, "custom model: MLP size rounded up to a multiple of this")
      ->capture_default_str();
  app.add_option("--norm_eps", c.norm_eps, "custom model: RMSNorm epsilon")->capture_default_str();
  app.add_option("--rope_theta", c.rope_theta, "custom model: RoPE base")->capture_default_str();
  app.add_option("--use_scaled_rope", c.use_scaled_rope, "custom model: LLaMA-3.1's RoPE scaling (0 or 1)")
      ->capture_default_str();
  samples::add_train_flags(app, f);
  CLI11_PARSE(app, argc, argv);

  try {
    samples::prepare_run(f);
    const auto make = [&m](std::shared_ptr<nn::TensorParallelLayers> tp, const samples::PartFor& part_for) {
      const nn::LLaMA3 base = make_model(m, part_for);
      const nn::LLaMA3 model = tp ? samples::split_model(base, tp) : base;
      const auto export_model = [model](const std::filesystem::path& path, samples::ModelFormat format, bool write) {
        const llmc::LLaMA3Checkpoint checkpoint = to_llmc(model);  // collective under tensor parallelism
        if (write) write_checkpoint(path, format, checkpoint);
      };
      const nn::LLaMA3Config config = model->config;
      const auto write_named = [config](const std::filesystem::path& path, samples::ModelFormat format,
                                        const nn::Named<Tensor>& named) {
        write_checkpoint(path, format, to_llmc(samples::model_from<nn::LLaMA3>(config, nullptr,
                                                                               nn::ModelPart::whole(config.num_layers), named)));
      };
      return samples::language_model(model, export_model, write_named, "llama3.bin", {});
    };
    return samples::train(make, f);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "llama3: %s\n", e.what());
    return 1;
  }
}
