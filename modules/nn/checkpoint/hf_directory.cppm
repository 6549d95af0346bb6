// Internal to the Hugging Face mappings (infini.nn imports it without exporting it): a model
// directory's weights taken tensor by tensor with every problem reported at once, and the
// writer of a directory (model.safetensors or shards with their index, then config.json). The
// families' files (gpt2 and llama3 in hf_model.cpp, qwen3_family.cpp) map their tensors
// through these; config.json's keys are read with hf_config.h.
export module infini.nn:hf_directory;
import infini.std;
import infini.tensor;
import :state_dict;
import :hf_model;

export namespace infini::hf::detail {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Errors name the operation and the directory.
struct Source {
  std::string op;
  std::filesystem::path dir;
  template <class... Parts>
  [[noreturn]] void fail(const Parts&... parts) const {
    throw IOError(op, concat("'", dir.string(), "': ", parts...));
  }
  // config.json's text; IOError when it cannot be read.
  std::string config_text() const;
};

// The directory's tensors, taken one by one by name and shape; what is missing, misshapen,
// of another dtype or left over is reported at once by finish().
class Weights {
 public:
  // Reads model.safetensors, or the shards its index lists (each name in the file the index
  // maps it to, and every file holding only what the index maps to it).
  explicit Weights(const Source& source);

  bool has(const std::string& name) const { return all_.contains(name); }
  // The tensor as float32, or undefined (the problem noted) when missing or unfit.
  Tensor take(const std::string& name, const Shape& shape);
  // Fails listing every problem and every tensor neither taken nor `skipped`.
  void finish(std::string_view model, const std::function<bool(const std::string&)>& skipped) const;

 private:
  const Source& source_;
  StateDict all_;
  std::set<std::string> taken_;
  std::vector<std::string> missing_, misshapen_, bad_dtype_;
};

// `per_layer` (one defined tensor per layer) stacked along a new dim 0; undefined when a
// layer's tensor was missing or unfit.
Tensor stacked(const TensorList& per_layer, std::int64_t layers);
bool same_bits(const Tensor& a, const Tensor& b);
// The shortest decimal that reads back as `x` (config.json's 1e-05, not 9.99999974737875e-06).
double decimal(float x);
const char* dtype_name(DataType t);  // "float32", "bfloat16", "float16": config.json's torch_dtype
// DTypeError / Error from source.op for a dtype that cannot be stored or a shard size < 1.
void check_options(const Source& source, const WriteOptions& options);
// Writes `tensors` (state-dict order, CPU, already in options.dtype) as model.safetensors or
// shards with their index, then config.json (`config_text`), each atomically; removes the
// other layout's file.
void write_directory(const Source& source, const NamedTensors& tensors, const std::string& config_text,
                     const WriteOptions& options);
// The tensor of `tensors` named `name` (which must be there).
const Tensor& named(const NamedTensors& tensors, std::string_view name);

}  // namespace infini::hf::detail
