// Models from and to Hugging Face model directories, as transformers' from_pretrained /
// save_pretrained (the file-level conversion is hf_model.cppm's):
//
//   std::shared_ptr<nn::Module> model = nn::load_pretrained("gpt2");  // GPT2Impl, LLaMA3Impl, Qwen3Impl
//   nn::CausalLM& lm = nn::causal_lm(*model);                          // forward, loss, generation
//   nn::save_pretrained(*model, "out", {.dtype = kBFloat16});
export module infini.nn:pretrained;
import infini.std;
import infini.tensor;
import :module_base;
import :hf_model;

export namespace infini::nn {

// The model config.json's model_type names (the model family that reads it: "gpt2" a GPT2Impl,
// "llama" a LLaMA3Impl, "qwen3" a Qwen3Impl), built on the CPU in float32 with the directory's
// weights. IOError naming the directory for another model_type and for everything the family's
// mapping refuses (each missing, unexpected, misshapen or mistyped tensor by name).
std::shared_ptr<Module> load_pretrained(const std::filesystem::path& dir);

// Writes a whole model of one process through its family's mapping. Error for a module of no
// family, a pipeline part, a tensor-parallel model or one with LoRA adapters (merge them
// first: nn::lora::merge).
void save_pretrained(Module& model, const std::filesystem::path& dir, hf::WriteOptions options = {});

}  // namespace infini::nn
