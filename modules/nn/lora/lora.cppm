// LoRA (Hu et al. 2021; PEFT's LoraConfig and files): low-rank adapters on a GPT-2's or a
// LLaMA-3's linear layers, with the base weights frozen.
//
//   auto adapters = nn::lora::apply(*model, {.rank = 8, .alpha = 16, .targets = {"c_attn"}});
//   ... train: only the adapters require grad ...
//   nn::lora::save_adapters(*model, "out/adapter");   // adapter_model.safetensors, adapter_config.json
//   nn::lora::merge(*model);                          // W += (alpha / r) B A; adapters removed
//
// An adapted projection y = x W^T + b gains (alpha / r) * dropout(x) A^T B^T on its output
// rows [row_begin, row_end): A (r, in) starts as PyTorch's Linear init, B (rows, r) as zeros,
// so the model's outputs do not change until B does. Targets are PEFT's (transformers') module
// names: GPT-2 c_attn, c_proj (attention's and the MLP's), c_fc; LLaMA-3 q_proj, k_proj,
// v_proj (rows of Infini's fused c_attn), o_proj, gate_proj, up_proj, down_proj.
export module infini.nn:lora;
import infini.std;
import infini.autograd;
import :module_base;
import :linear;

export namespace infini::nn::lora {

struct LoraConfig {
  std::int64_t rank = 8;     // r > 0
  double alpha = 8;          // lora_alpha: the update is scaled by alpha / r
  double dropout = 0;        // lora_dropout on the adapter's input, 0 <= p < 1
  std::vector<std::string> targets;  // target_modules (see above), at least one
};

// One adapter (type name "LoRA"), a child "lora_<target>" of the linear layer it adapts.
class AdapterImpl : public Module {
 public:
  // rope_heads > 0: the adapted rows are LLaMA-3 q or k heads, in Infini's interleaved RoPE
  // order; PEFT files hold lora_B's rows in transformers' rotate-half order.
  AdapterImpl(std::string target, std::string peft_name, std::int64_t in_features, std::int64_t row_begin,
              std::int64_t row_end, std::int64_t rope_heads, const LoraConfig& config);
  // x (*, in_features) -> (*, row_end - row_begin): scaling * dropout(x) A^T B^T.
  Tensor delta(const Tensor& x);

  const std::string target;     // "c_attn", "q_proj", ...
  const std::string peft_name;  // the layer in transformers' model: "transformer.h.0.attn.c_attn"
  const std::int64_t row_begin, row_end, rope_heads;
  const LoraConfig config;
  const double scaling;  // alpha / r
  Tensor A;              // (r, in_features)
  Tensor B;              // (row_end - row_begin, r)
  int hook_id = -1;      // the layer's forward hook that adds its adapters' updates

 protected:
  std::string extra_repr() const override;
};

// Freezes every parameter of `model` (a whole GPT2Impl or LLaMA3Impl on one process) but
// those of adapters an earlier apply made, and adds an adapter to each layer a target names, in
// block order. Error naming the target for one
// that names no layer of this model (listing those that do), a rank < 1, a dropout outside
// [0, 1), a layer adapted already, a tensor-parallel model or a pipeline part.
std::vector<std::shared_ptr<AdapterImpl>> apply(Module& model, const LoraConfig& config);
// The adapters below `model`, in the model's order (depth first, registration order).
std::vector<std::shared_ptr<AdapterImpl>> adapters(Module& model);
// Whether `layer` has adapters (a model that fuses a layer's product with others must then run
// it through the layer).
bool adapted(const LinearImpl& layer);
// Folds each adapter into its layer (W[rows] += scaling B A, in the weight's dtype) and removes
// it (PEFT's merge_and_unload). The base parameters stay frozen. Error without adapters.
void merge(Module& model);

// PEFT's files in `dir`: adapter_model.safetensors (base_model.model.<peft_name>.lora_A.weight
// (r, in) and .lora_B.weight (rows, r), float32) and adapter_config.json (peft_type LORA, r,
// lora_alpha, lora_dropout, target_modules, fan_in_fan_out for GPT-2's Conv1D layers), each
// written atomically. Error without adapters.
void save_adapters(Module& model, const std::filesystem::path& dir);
// Applies adapter_config.json's LoraConfig to `model` (which has no adapters yet) and loads the
// adapters' weights (float32, bfloat16 or float16 on disk). IOError naming the file and key for
// a config Infini cannot honour (another peft_type, use_rslora, bias, modules_to_save,
// target_modules that is not a list), or missing, misshapen, mistyped or unexpected tensors.
std::vector<std::shared_ptr<AdapterImpl>> load_adapters(Module& model, const std::filesystem::path& dir);

}  // namespace infini::nn::lora
