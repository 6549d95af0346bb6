// Internal to the readers and writers of llm.c's files (infini.nn imports it without
// exporting it): IOErrors that name the file, read-only file mappings, the 256 x int32
// header every llm.c file starts with, and the checkpoints' tensor payload.
module;
#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>
export module infini.nn:llmc_detail;
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
