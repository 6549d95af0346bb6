// Models from and to Hugging Face model directories, as transformers' from_pretrained /
// save_pretrained (the file-level conversion is hf_model.cppm's):
//
//   std::shared_ptr<nn::Module> model = nn::load_pretrained("gpt2");  // a GPT2Impl or LLaMA3Impl
//   auto& lm = dynamic_cast<nn::CausalLM&>(*model);                    // forward, loss, generation
//   nn::save_pretrained(*model, "out", {.dtype = kBFloat16});
export module infini.nn:pretrained;
import infini.std;
import infini.tensor;
import :module_base;
import :hf_model;

export namespace infini::nn {

// The model config.json's model_type names ("gpt2": a GPT2Impl, "llama": a LLaMA3Impl), built
// on the CPU in float32 with the directory's weights. IOError naming the directory for another
// model_type and for everything hf::read_gpt2 / hf::read_llama3 refuse (each missing,
// unexpected, misshapen or mistyped tensor by name).
std::shared_ptr<Module> load_pretrained(const std::filesystem::path& dir);

// Writes a whole GPT2Impl or LLaMA3Impl of one process (as hf::write_gpt2 / write_llama3).
// Error for another module, a pipeline part, a tensor-parallel model or one with LoRA adapters
// (merge them first: nn::lora::merge).
void save_pretrained(Module& model, const std::filesystem::path& dir, hf::WriteOptions options = {});

}  // namespace infini::nn
