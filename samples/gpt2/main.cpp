// Trains GPT-2 on an llm.c token file, from random init or from an llm.c checkpoint.
//   build/release/bin/gpt2 --model d12 --input_bin train.bin --batch_size 4 --sequence_length 64 \
//       --total_batch_size 256 --num_iteration 100 --learning_rate 6e-4 --metrics_out gpt2.jsonl
// Each step prints one line and appends {"step", "loss", "lr", "grad_norm", "ms", "tokens_per_s",
// "peak_bytes"} to --metrics_out; validation adds {"step", "val_loss"} lines and the run ends
// with a {"summary": ...} line. docs/user-guide.md ("Training GPT-2") lists every flag.
#include <CLI/CLI.hpp>
#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../common/lm_trainer.h"

import infini.nn;

using namespace infini;

namespace {

struct ModelFlags {
  std::string llmc_filepath, hf_model;
  std::string model = "d12";
  std::int64_t num_layers = 0, num_heads = 0, channels = 0, max_seq_len = 1024, vocab_size = 50257;
};

// The model (this rank's part of it): an llm.c checkpoint's or a Hugging Face directory's (read
// whole, then the part kept), a named size, or "custom" from the flags (vocabulary padded to a
// multiple of 128).
nn::GPT2 make_model(const ModelFlags& f, const samples::PartFor& part_for) {
  if (!f.llmc_filepath.empty() && !f.hf_model.empty())
    throw Error("gpt2", "--llmc_filepath and --hf_model both give the starting weights: pass one");
  if (!f.llmc_filepath.empty() || !f.hf_model.empty()) {
    const llmc::GPT2Checkpoint checkpoint =
        f.hf_model.empty() ? llmc::read_gpt2_checkpoint(f.llmc_filepath) : hf::read_gpt2(f.hf_model);
    nn::GPT2 whole(nn::GPT2Config::from_llmc(checkpoint.config));
    whole->load_llmc_tensors(checkpoint.tensors);
    const std::int64_t layers = checkpoint.config.num_layers;
    const nn::ModelPart part = part_for(layers);
    if (part.is_whole(layers)) return whole;
    return samples::model_from<nn::GPT2>(whole->config, nullptr, part, whole->named_parameters());
  }
  const nn::GPT2Config config =
      f.model != "custom" ? nn::GPT2Config::from_name(f.model)
                          : nn::GPT2Config{.max_seq_len = f.max_seq_len, .vocab_size = f.vocab_size,
                                           .padded_vocab_size = (f.vocab_size + 127) / 128 * 128,
                                           .num_layers = f.num_layers, .num_heads = f.num_heads, .channels = f.channels};
  return nn::GPT2(config, nullptr, part_for(config.num_layers));
}

llmc::GPT2Checkpoint to_llmc(const nn::GPT2& model) {
  return {.config = model->config.to_llmc(), .tensors = model->llmc_tensors()};
}

void write_checkpoint(const std::filesystem::path& path, samples::ModelFormat format,
                      const llmc::GPT2Checkpoint& checkpoint) {
  if (format == samples::ModelFormat::kLlmc) llmc::write_gpt2_checkpoint(path, checkpoint);
  else hf::write_gpt2(path, checkpoint);
}

}  // namespace

int main(int argc, char** argv) {
  ModelFlags m;
  samples::TrainFlags f;
  CLI::App app{"Trains GPT-2 (llm.c's model and file formats) on the CPU or CUDA GPUs (--device cuda), one process or mpirun's ranks."};
  app.add_option("--llmc_filepath", m.llmc_filepath, "start from this llm.c GPT-2 checkpoint");
  app.add_option("--hf_model", m.hf_model,
                 "start from this Hugging Face GPT-2 directory (config.json, model.safetensors or shards)");
  app.add_option("--model", m.model, "d12, d24, d36, d48 (random init), or custom (see --num_layers ...)")
      ->check(CLI::IsMember({"d12", "d24", "d36", "d48", "custom"}));
  app.add_option("--num_layers", m.num_layers, "custom model: layers");
  app.add_option("--num_heads", m.num_heads, "custom model: attention heads");
  app.add_option("--channels", m.channels, "custom model: channels");
  app.add_option("--max_seq_len", m.max_seq_len, "custom model: positions");
  app.add_option("--vocab_size", m.vocab_size, "custom model: vocabulary (padded to a multiple of 128)");
  samples::add_train_flags(app, f);
  CLI11_PARSE(app, argc, argv);

  try {
    samples::prepare_run(f);
    const auto make = [&m](std::shared_ptr<nn::TensorParallelLayers> tp, const samples::PartFor& part_for) {
      const nn::GPT2 base = make_model(m, part_for);
      const nn::GPT2 model = tp ? samples::split_model(base, tp) : base;
      const auto export_model = [model](const std::filesystem::path& path, samples::ModelFormat format, bool write) {
        const llmc::GPT2Checkpoint checkpoint = to_llmc(model);
        if (write) write_checkpoint(path, format, checkpoint);
      };
      const nn::GPT2Config config = model->config;
      const auto write_named = [config](const std::filesystem::path& path, samples::ModelFormat format,
                                        const nn::Named<Tensor>& named) {
        write_checkpoint(path, format, to_llmc(samples::model_from<nn::GPT2>(config, nullptr,
                                                                             nn::ModelPart::whole(config.num_layers), named)));
      };
      // wte is the embedding and the LM head: tied between the first and the last stage.
      return samples::language_model(model, export_model, write_named, "gpt2.bin",
                                     model->wte ? std::vector<Tensor>{model->wte->weight} : std::vector<Tensor>{});
    };
    return samples::train(make, f);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpt2: %s\n", e.what());
    return 1;
  }
}
