// Internal to the readers and writers of llm.c's files (infini.nn imports it without
// exporting it): IOErrors that name the file, read-only file mappings, the 256 x int32
// header every llm.c file starts with, and the checkpoints' tensor payload.
export module infini.nn:llmc_detail;
import infini.std;
import infini.tensor;
import :atomic_file;

export namespace infini::llmc::detail {

inline constexpr std::size_t kHeaderInts = 256;
inline constexpr std::size_t kHeaderBytes = kHeaderInts * 4;
using Header = std::array<std::int32_t, kHeaderInts>;

// Who reports an error (the op) about which file.
struct FileError {
  std::string_view op;
  std::string file;

  // Throws IOError "<op>: '<file>': <parts...>".
  template <class... Parts>
  [[noreturn]] void fail(const Parts&... parts) const {
    throw IOError(op, concat("'", file, "': ", parts...));
  }
};

// A whole file mapped read-only. `data` owns the mapping (unmapped when the last copy
// dies); null for an empty file.
struct MappedFile {
  std::shared_ptr<const std::byte> data;
  std::size_t size = 0;

  std::span<const std::byte> bytes() const { return data ? std::span(data.get(), size) : std::span<const std::byte>(); }
};

// Maps `path`; fail() when it cannot be opened, is not a regular file or cannot be mapped.
MappedFile map_file(const std::filesystem::path& path, const FileError& source);

// The first 1024 bytes as 256 little-endian int32s; fail() for a shorter file.
Header read_header(std::span<const std::byte> file, const FileError& source);

// fail() unless header[0] == magic; the message names the file kind `magic` stands for
// and, when the file has another llm.c magic, what that one stands for.
void check_magic(const Header& header, std::int32_t magic, const FileError& source);

void write_header(io::FileSink& out, const Header& header);

// One field of a model config held in a header slot: an integer (int32 in the file, at least
// `minimum`), a float32's bits, or a flag stored as 0 or 1. A format lists its fields once;
// reading, writing and the range checks follow the list.
template <class Config>
struct HeaderField {
  std::size_t slot;
  std::string_view name;
  std::variant<std::int64_t Config::*, std::int32_t Config::*, float Config::*, bool Config::*> member;
  std::int64_t minimum = 1;
};

// fail() naming the field unless every integer is in [minimum, 2^31 - 1].
template <class Config, std::size_t N>
void check_fields(const Config& config, const std::array<HeaderField<Config>, N>& fields, const FileError& source) {
  for (const HeaderField<Config>& f : fields) {
    std::int64_t value = 0;
    if (const auto* m = std::get_if<std::int64_t Config::*>(&f.member)) value = config.*(*m);
    else if (const auto* m32 = std::get_if<std::int32_t Config::*>(&f.member)) value = config.*(*m32);
    else continue;
    if (value < f.minimum)
      source.fail(f.name, " is ", value, f.minimum == 1 ? std::string(", expected a positive number")
                                                         : concat(", expected at least ", f.minimum));
    if (value > std::numeric_limits<std::int32_t>::max())
      source.fail(f.name, " is ", value, ", more than the header's int32 holds");
  }
}

// The fields' values in `header`, over `config`'s defaults; fail() for a flag other than 0 or
// 1 and an integer below its minimum.
template <class Config, std::size_t N>
Config read_fields(const Header& header, const std::array<HeaderField<Config>, N>& fields, const FileError& source) {
  Config config{};
  for (const HeaderField<Config>& f : fields) {
    const std::int32_t word = header[f.slot];
    std::visit(
        [&](auto member) {
          using Value = std::remove_cvref_t<decltype(config.*member)>;
          if constexpr (std::is_same_v<Value, float>) {
            config.*member = std::bit_cast<float>(word);
          } else if constexpr (std::is_same_v<Value, bool>) {
            if (word != 0 && word != 1) source.fail(f.name, " is ", word, ", expected 0 or 1");
            config.*member = word == 1;
          } else {
            config.*member = word;
          }
        },
        f.member);
  }
  check_fields(config, fields, source);
  return config;
}

// Writes the fields of `config` into their slots after check_fields.
template <class Config, std::size_t N>
void write_fields(const Config& config, const std::array<HeaderField<Config>, N>& fields, Header& header,
                  const FileError& source) {
  check_fields(config, fields, source);
  for (const HeaderField<Config>& f : fields)
    std::visit(
        [&](auto member) {
          using Value = std::remove_cvref_t<decltype(config.*member)>;
          if constexpr (std::is_same_v<Value, float>) header[f.slot] = std::bit_cast<std::int32_t>(config.*member);
          else header[f.slot] = static_cast<std::int32_t>(config.*member);
        },
        f.member);
}

// A checkpoint's tensors in file order: names and shapes.
using TensorLayout = std::vector<std::pair<std::string, Shape>>;

// Checkpoint versions: 3 = every tensor float32, 5 = every tensor bfloat16.
DataType checkpoint_dtype(std::int32_t version, const FileError& source);
std::int32_t checkpoint_version(std::string_view op, DataType dtype);  // DTypeError for other dtypes

// Bytes of the layout's tensors at `itemsize` bytes each; fail() when that exceeds 2^63 - 1.
std::uint64_t payload_bytes(const TensorLayout& layout, std::size_t itemsize, const FileError& source);

// The tensors after the header (`payload`, stored as `dtype`) as new float32 CPU tensors.
// The payload's size must equal payload_bytes exactly (checked before anything is allocated).
std::vector<std::pair<std::string, Tensor>> read_tensors(std::span<const std::byte> payload, const TensorLayout& layout,
                                                         DataType dtype, const FileError& source);

// Checks tensors against layout before a write: same count and names in the same order
// (Error), defined floating-point tensors (Error, DTypeError) of the layout's shapes (ShapeError).
void check_tensors(std::string_view op, const std::vector<std::pair<std::string, Tensor>>& tensors,
                   const TensorLayout& layout);

// Appends each tensor's values converted to `dtype` (float32 or bfloat16), C order.
void write_tensors(io::FileSink& out, const std::vector<std::pair<std::string, Tensor>>& tensors, DataType dtype);

// Writes a checkpoint atomically: `header` with header[1] set to dtype's version, then the
// tensors converted to `dtype`, after checking them against `layout` (check_tensors) and the
// payload's size (payload_bytes), so a refused write leaves the file as it was.
void write_checkpoint(const std::filesystem::path& path, Header header, const TensorLayout& layout,
                      const std::vector<std::pair<std::string, Tensor>>& tensors, DataType dtype, const FileError& source);

}  // namespace infini::llmc::detail
