// GPT-2's model family (see model_family.cppm): transformers' GPT2LMHeadModel directories and
// llm.c's checkpoint through llm.c's layout, and PEFT's GPT-2 targets.
module infini.nn;
import infini.std;

namespace infini::nn {
namespace {

const GPT2Impl& whole_gpt2(const Module& model, const char* op) {
  const auto& gpt2 = dynamic_cast<const GPT2Impl&>(model);
  if (!gpt2.part.is_whole(gpt2.config.num_layers)) throw Error(op, "expected the whole model, got a part");
  return gpt2;
}

std::shared_ptr<Module> from_checkpoint(const llmc::GPT2Checkpoint& checkpoint) {
  auto model = std::make_shared<GPT2Impl>(GPT2Config::from_llmc(checkpoint.config));
  model->load_llmc_tensors(checkpoint.tensors);
  return model;
}

llmc::GPT2Checkpoint to_checkpoint(const Module& model, const char* op) {
  const GPT2Impl& gpt2 = whole_gpt2(model, op);
  return {.config = gpt2.config.to_llmc(), .tensors = gpt2.llmc_tensors()};
}

std::vector<LoraSite> lora_sites(Module& model) {
  const auto& gpt2 = dynamic_cast<const GPT2Impl&>(model);
  std::vector<LoraSite> sites;
  for (std::size_t l = 0; l < gpt2.h.size(); ++l) {
    const GPT2BlockImpl& b = *gpt2.h[l];
    const std::string block = concat("transformer.h.", l, ".");
    auto add = [&](const char* target, const std::shared_ptr<LinearImpl>& layer, const char* path) {
      sites.push_back({target, layer, block + path, 0, layer->out_features});
    };
    add("c_attn", b.attn->c_attn, "attn.c_attn");
    add("c_proj", b.attn->c_proj, "attn.c_proj");
    add("c_fc", b.mlp->c_fc, "mlp.c_fc");
    add("c_proj", b.mlp->c_proj, "mlp.c_proj");
  }
  return sites;
}

// A named size changed by the fields: the vocabulary padded to a multiple of 128 as llm.c's.
std::shared_ptr<Module> make(std::string_view size, ConfigFields fields, const PartOf& part_of) {
  GPT2Config c = GPT2Config::from_name(size.empty() ? "d12" : size);
  c.num_layers = fields.size("num_layers", c.num_layers);
  c.num_heads = fields.size("num_heads", c.num_heads);
  c.channels = fields.size("channels", c.channels);
  c.max_seq_len = fields.size("max_seq_len", c.max_seq_len);
  c.vocab_size = fields.size("vocab_size", c.vocab_size);
  c.padded_vocab_size = (c.vocab_size + 127) / 128 * 128;
  fields.finish("GPT2Config");
  return std::make_shared<GPT2Impl>(c, nullptr, part_of(c.num_layers));
}

}  // namespace

ModelFamily gpt2_family() {
  return {
      .name = "gpt2",
      .hf_model_types = {"gpt2"},
      .hf_architecture = "GPT2LMHeadModel",
      .holds = [](const Module& model) { return dynamic_cast<const GPT2Impl*>(&model) != nullptr; },
      .sizes = {"d12", "d24", "d36", "d48"},
      .make = make,
      .load_hf = [](const std::filesystem::path& dir) { return from_checkpoint(hf::read_gpt2(dir)); },
      .from_hf_config = [](const std::filesystem::path& dir, const PartOf& part_of) -> std::shared_ptr<Module> {
        const GPT2Config config = GPT2Config::from_llmc(hf::read_gpt2_config(dir));
        return std::make_shared<GPT2Impl>(config, nullptr, part_of(config.num_layers));
      },
      .save_hf = [](const Module& model, const std::filesystem::path& dir, const hf::WriteOptions& options) {
        hf::write_gpt2(dir, to_checkpoint(model, "nn::save_pretrained"), options);
      },
      .load_llmc = [](const std::filesystem::path& file) { return from_checkpoint(llmc::read_gpt2_checkpoint(file)); },
      .save_llmc = [](const Module& model, const std::filesystem::path& file) {
        llmc::write_gpt2_checkpoint(file, to_checkpoint(model, "llmc::write_gpt2_checkpoint"));
      },
      .rebuild = [](const Module& model, std::shared_ptr<TensorParallelLayers> tp,
                    const ModelPart& part) -> std::shared_ptr<Module> {
        return std::make_shared<GPT2Impl>(dynamic_cast<const GPT2Impl&>(model).config, std::move(tp), part);
      },
      .lora_sites = lora_sites,
      .default_lora_targets = {"c_attn"},
      .lora_fan_in_fan_out = true,  // transformers' GPT-2 layers are Conv1D
  };
}

}  // namespace infini::nn
