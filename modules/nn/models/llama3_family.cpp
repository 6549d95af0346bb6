// LLaMA-3's model family (see model_family.cppm): transformers' LlamaForCausalLM directories and
// llm.c / InfiniTrain's checkpoint through llm.c's layout, and PEFT's LLaMA targets.
module infini.nn;
import infini.std;

namespace infini::nn {
namespace {

const LLaMA3Impl& whole_llama3(const Module& model, const char* op) {
  const auto& llama = dynamic_cast<const LLaMA3Impl&>(model);
  if (!llama.part.is_whole(llama.config.num_layers)) throw Error(op, "expected the whole model, got a part");
  return llama;
}

std::shared_ptr<Module> from_checkpoint(const llmc::LLaMA3Checkpoint& checkpoint) {
  auto model = std::make_shared<LLaMA3Impl>(LLaMA3Config::from_llmc(checkpoint.config));
  model->load_llmc_tensors(checkpoint.tensors);
  return model;
}

llmc::LLaMA3Checkpoint to_checkpoint(const Module& model, const char* op) {
  const LLaMA3Impl& llama = whole_llama3(model, op);
  return {.config = llama.config.to_llmc(), .tensors = llama.llmc_tensors()};
}

std::vector<LoraSite> lora_sites(Module& model) {
  const auto& llama = dynamic_cast<const LLaMA3Impl&>(model);
  return llama_style_lora_sites(llama.h, llama.config.num_heads, llama.config.num_kv_heads, llama.config.head_dim());
}

std::shared_ptr<Module> make(std::string_view size, ConfigFields fields, const PartOf& part_of) {
  LLaMA3Config c = LLaMA3Config::from_name(size.empty() ? "llama3_1B" : size);
  c.num_layers = fields.size("num_layers", c.num_layers);
  c.num_heads = fields.size("num_heads", c.num_heads);
  c.num_kv_heads = fields.size("num_kv_heads", c.num_kv_heads);
  c.channels = fields.size("channels", c.channels);
  c.max_seq_len = fields.size("max_seq_len", c.max_seq_len);
  c.vocab_size = fields.size("vocab_size", c.vocab_size);
  c.ffn_dim_multiplier = fields.number("ffn_dim_multiplier", c.ffn_dim_multiplier);
  c.multiple_of = fields.size("multiple_of", c.multiple_of);
  c.norm_eps = fields.number("norm_eps", c.norm_eps);
  c.rope_theta = fields.number("rope_theta", c.rope_theta);
  c.use_scaled_rope = fields.flag("use_scaled_rope", c.use_scaled_rope);
  c.tie_word_embeddings = fields.flag("tie_word_embeddings", c.tie_word_embeddings);
  fields.finish("LLaMA3Config");
  return std::make_shared<LLaMA3Impl>(c, nullptr, part_of(c.num_layers));
}

}  // namespace

ModelFamily llama3_family() {
  return {
      .name = "llama3",
      .hf_model_types = {"llama"},
      .hf_architecture = "LlamaForCausalLM",
      .holds = [](const Module& model) { return dynamic_cast<const LLaMA3Impl*>(&model) != nullptr; },
      .sizes = {"llama3_1B", "llama3_3B", "llama3_8B"},
      .make = make,
      .load_hf = [](const std::filesystem::path& dir) { return from_checkpoint(hf::read_llama3(dir)); },
      .from_hf_config = [](const std::filesystem::path& dir, const PartOf& part_of) -> std::shared_ptr<Module> {
        const LLaMA3Config config = LLaMA3Config::from_llmc(hf::read_llama3_config(dir));
        return std::make_shared<LLaMA3Impl>(config, nullptr, part_of(config.num_layers));
      },
      .save_hf = [](const Module& model, const std::filesystem::path& dir, const hf::WriteOptions& options) {
        hf::write_llama3(dir, to_checkpoint(model, "nn::save_pretrained"), options);
      },
      .load_llmc = [](const std::filesystem::path& file) { return from_checkpoint(llmc::read_llama3_checkpoint(file)); },
      .save_llmc = [](const Module& model, const std::filesystem::path& file) {
        llmc::write_llama3_checkpoint(file, to_checkpoint(model, "llmc::write_llama3_checkpoint"));
      },
      .rebuild = [](const Module& model, std::shared_ptr<TensorParallelLayers> tp,
                    const ModelPart& part) -> std::shared_ptr<Module> {
        return std::make_shared<LLaMA3Impl>(dynamic_cast<const LLaMA3Impl&>(model).config, std::move(tp), part);
      },
      .lora_sites = lora_sites,
      .default_lora_targets = {"q_proj", "v_proj"},  // PEFT's for LLaMA
  };
}

}  // namespace infini::nn
