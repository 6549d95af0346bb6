// safetensors files (Hugging Face's format; PyTorch users know safetensors.torch.save_file
// and load_file): an 8-byte little-endian header length N, N bytes of JSON header, then the
// tensors' bytes. docs/formats.md describes exactly what is written and what is rejected.
//
//   io::save_safetensors("model.safetensors", model->state_dict(), {{"format", "pt"}});
//   auto [tensors, metadata] = io::load_safetensors("model.safetensors");
export module infini.nn:safetensors;
import infini.std;
import infini.tensor;
import :state_dict;

export namespace infini::io {

// What a safetensors file holds: tensors by name and the free-form "__metadata__" strings.
struct SafetensorsFile {
  StateDict tensors;
  std::map<std::string, std::string> metadata;
};

// Writes `tensors` (any of the 10 dtypes, any device and strides: copied to contiguous CPU
// memory one at a time) and `metadata` atomically (write_file_atomically). Tensors are laid
// out in name order; tensors that share storage are written as separate copies. IOError for
// names or metadata that are not valid UTF-8, the reserved tensor name "__metadata__" and
// failed writes; Error for an undefined tensor.
void save_safetensors(const std::filesystem::path& path, const StateDict& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Reads a safetensors file (memory-mapped) into new contiguous CPU tensors. IOError naming
// the file and what is wrong when it cannot be read or is not a valid safetensors file.
SafetensorsFile load_safetensors(const std::filesystem::path& path);

// Parses the bytes of a whole safetensors file. Validates everything before allocating:
// every allocation is bounded by bytes.size(). IOError saying what is wrong otherwise.
SafetensorsFile parse_safetensors(std::span<const std::byte> bytes);

}  // namespace infini::io
