// Model families: what the library, the trainers and the file formats need to know of one
// architecture, in one table that the family's own files fill (Megatron Core's model specs,
// torchtitan's per-model state-dict adapters). Hugging Face directories (load_pretrained /
// save_pretrained), LoRA (which layers a PEFT target names) and the trainers dispatch through
// it: nothing outside a model's own files names its class.
//
//   const nn::ModelFamily& family = nn::model_family("qwen3");
//   std::shared_ptr<nn::Module> model = family.load_hf("Qwen3-0.6B");
//   nn::causal_lm(*model).forward_cached(idx, cache);
//   nn::model_family_of(*model).save_hf(*model, "out", {.dtype = kBFloat16});
//
// Adding a family: its model files, a file defining `ModelFamily <name>_family()` (the
// table), and one line in model_family.cpp's list.
export module infini.nn:model_family;
import infini.std;
import infini.tensor;
import :module_base;
import :linear;
import :tensor_parallel;
import :model_part;
import :causal_lm;
import :hf_model;

export namespace infini::nn {

// A layer LoRA can adapt: rows [row_begin, row_end) of `layer`'s output are the module that
// transformers (and PEFT's files) call `peft_name`, targeted by the short name `target`.
struct LoraSite {
  std::string target;                  // "q_proj", "c_attn", ...
  std::shared_ptr<LinearImpl> layer;
  std::string peft_name;               // "model.layers.0.self_attn.q_proj"
  std::int64_t row_begin, row_end;
  std::int64_t rope_heads = 0;         // > 0: q or k heads in Infini's interleaved RoPE order
};

// Which part of a model of `num_blocks` blocks to build (ModelPart::whole: all of it).
using PartOf = std::function<ModelPart(std::int64_t num_blocks)>;

// The LoRA sites of LLaMA-style blocks (LLaMA-3, Qwen3): attn->c_attn's fused q | k | v rows
// (q and k heads in interleaved RoPE order), attn->c_proj, and the SwiGLU mlp's c_fc2 (gate),
// c_fc (up) and c_proj (down), as transformers' q_proj ... down_proj under model.layers.<l>.
template <class Block>
std::vector<LoraSite> llama_style_lora_sites(const std::vector<std::shared_ptr<Block>>& blocks,
                                             std::int64_t num_heads, std::int64_t num_kv_heads,
                                             std::int64_t head_dim) {
  const std::int64_t q = num_heads * head_dim, kv = num_kv_heads * head_dim;
  std::vector<LoraSite> sites;
  for (std::size_t l = 0; l < blocks.size(); ++l) {
    const Block& b = *blocks[l];
    const std::string block = "model.layers." + std::to_string(l) + ".";
    auto add = [&](const char* target, const std::shared_ptr<LinearImpl>& layer, const char* path, std::int64_t begin,
                   std::int64_t end, std::int64_t rope_heads) {
      sites.push_back({target, layer, block + path, begin, end, rope_heads});
    };
    add("q_proj", b.attn->c_attn, "self_attn.q_proj", 0, q, num_heads);
    add("k_proj", b.attn->c_attn, "self_attn.k_proj", q, q + kv, num_kv_heads);
    add("v_proj", b.attn->c_attn, "self_attn.v_proj", q + kv, q + 2 * kv, 0);
    add("o_proj", b.attn->c_proj, "self_attn.o_proj", 0, b.attn->c_proj->out_features, 0);
    add("gate_proj", b.mlp->c_fc2, "mlp.gate_proj", 0, b.mlp->c_fc2->out_features, 0);
    add("up_proj", b.mlp->c_fc, "mlp.up_proj", 0, b.mlp->c_fc->out_features, 0);
    add("down_proj", b.mlp->c_proj, "mlp.down_proj", 0, b.mlp->c_proj->out_features, 0);
  }
  return sites;
}

// A config's fields changed by name ("num_layers" -> "4"), as the trainers' size flags give
// them: each family reads those it has, and finish() refuses any other, naming the flag.
class ConfigFields {
 public:
  ConfigFields() = default;
  explicit ConfigFields(std::map<std::string, std::string> values) : values_(std::move(values)) {}
  // `current`, or the field's value; Error naming --<field> for a value that is not a whole
  // number (size), a number (number) or 0/1/true/false (flag).
  std::int64_t size(const std::string& field, std::int64_t current);
  float number(const std::string& field, float current);
  bool flag(const std::string& field, bool current);
  // Error from `op` naming each field no read asked for (the model's fields listed).
  void finish(std::string_view op) const;
  bool empty() const { return values_.empty(); }

 private:
  const std::string* take(const std::string& field);
  std::map<std::string, std::string> values_;
  std::vector<std::string> read_;
};

struct ModelFamily {
  std::string name;                         // "gpt2", "llama3", "qwen3" (the trainer's --model)
  std::vector<std::string> hf_model_types;  // config.json's model_type values it reads ("llama")
  std::string hf_architecture;              // the transformers class it writes ("LlamaForCausalLM")
  // Whether `model` is one of this family's models.
  std::function<bool(const Module& model)> holds;
  std::vector<std::string> sizes;  // named sizes ("d12", "llama3_1B", "qwen3_0.6B"), the first the default
  // A model of the named size (empty: the default) changed by `fields` (the config's field
  // names), holding the part `part_of` picks, initialised from the default generator (a part
  // draws what the whole model would). Error for another size or a field it does not have.
  std::function<std::shared_ptr<Module>(std::string_view size, ConfigFields fields, const PartOf& part_of)> make;
  // A whole model on the CPU in float32 with a Hugging Face directory's config and weights.
  // IOError naming the directory and key / tensors for what the family cannot run.
  std::function<std::shared_ptr<Module>(const std::filesystem::path& dir)> load_hf;
  // A model of the directory's config.json sizes only, as `make` initialises it.
  std::function<std::shared_ptr<Module>(const std::filesystem::path& dir, const PartOf& part_of)> from_hf_config;
  // Writes a whole model of one process as a Hugging Face directory.
  std::function<void(const Module& model, const std::filesystem::path& dir, const hf::WriteOptions& options)> save_hf;
  // llm.c's checkpoint file, where the family has one (else empty functions).
  std::function<std::shared_ptr<Module>(const std::filesystem::path& file)> load_llmc;
  std::function<void(const Module& model, const std::filesystem::path& file)> save_llmc;
  // A model of `model`'s config built with the layers of tp (null: one process) holding
  // `part`, initialised as the whole model would be from the default generator.
  std::function<std::shared_ptr<Module>(const Module& model, std::shared_ptr<TensorParallelLayers> tp,
                                        const ModelPart& part)>
      rebuild;
  // The layers LoRA can adapt in `model` (whole, one process), in block order.
  std::function<std::vector<LoraSite>(Module& model)> lora_sites;
  std::vector<std::string> default_lora_targets;  // PEFT's defaults for the architecture
  bool lora_fan_in_fan_out = false;               // PEFT's flag: the layers are Conv1D (GPT-2)
};

// Every registered family, in registration order.
const std::vector<ModelFamily>& model_families();
// The family named `name`; Error listing the names otherwise.
const ModelFamily& model_family(std::string_view name);
// The family of `model`; Error from `op` naming its type and the families for a model of none.
const ModelFamily& model_family_of(const Module& model, std::string_view op = "nn::model_family_of");
// The family reading config.json's model_type `type`, or null.
const ModelFamily* model_family_for_hf_type(std::string_view type);
// The family of the Hugging Face directory `dir` (its config.json's model_type); IOError from
// `op` naming the directory, the model_type and the supported ones otherwise.
const ModelFamily& model_family_of_hf(const std::filesystem::path& dir, std::string_view op);
// The family with the named size `size`, or null.
const ModelFamily* model_family_with_size(std::string_view size);
// `model` as a causal LM; Error naming its type otherwise.
CausalLM& causal_lm(Module& model);
const CausalLM& causal_lm(const Module& model);

// The tables, each in its family's files.
ModelFamily gpt2_family();
ModelFamily llama3_family();
ModelFamily qwen3_family();

}  // namespace infini::nn
