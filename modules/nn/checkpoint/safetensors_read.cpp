// Reading safetensors: the 8-byte header length, the JSON header (safetensors_header.cpp),
// the layout of the byte buffer, then one new contiguous CPU tensor per entry. Tensors are
// allocated only after the whole layout was checked against the bytes present, so every
// allocation is bounded by the input's size.
module;
#include <cstddef>
#include <cstdint>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
module infini.nn;
import infini.std;

namespace infini::io {
namespace {

using detail::ErrorSource;
using detail::HeaderEntry;
using detail::quote;

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian and is copied as is");

// "[2, 3]" for messages; long shapes are cut after 8 dims.
std::string shape_text(const std::vector<std::uint64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size() && i < 8; ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() > 8) text += ", ... (" + std::to_string(shape.size()) + " dims)";
  return text + "]";
}

std::string offsets_text(const HeaderEntry& entry) {
  return "[" + std::to_string(entry.begin) + ", " + std::to_string(entry.end) + "]";
}

// Bytes of `entry`'s data according to its dtype and shape. A shape with a 0 holds no bytes
// even when the product of its other dims overflows (as for Infini's own tensors).
std::uint64_t expected_nbytes(const HeaderEntry& entry, const ErrorSource& source) {
  constexpr std::uint64_t kMaxDim = std::numeric_limits<std::int64_t>::max();
  std::int64_t numel = 1;
  bool overflow = false;
  bool empty = false;
  for (const std::uint64_t dim : entry.shape) {
    if (dim > kMaxDim) source.fail("tensor ", quote(entry.name), ": dimension ", dim, " is larger than 2^63 - 1");
    empty = empty || dim == 0;
    overflow = overflow || __builtin_mul_overflow(numel, static_cast<std::int64_t>(dim), &numel);
  }
  if (empty) return 0;
  std::int64_t nbytes = 0;
  if (overflow || __builtin_mul_overflow(numel, static_cast<std::int64_t>(itemsize(entry.dtype)), &nbytes))
    source.fail("tensor ", quote(entry.name), ": shape ", shape_text(entry.shape), " of ", detail::dtype_name(entry.dtype),
                " needs more than 2^63 - 1 bytes");
  return static_cast<std::uint64_t>(nbytes);
}

// The entries' data_offsets must tile the byte buffer [0, buffer_size) exactly: each range
// holds its tensor's bytes, and in offset order (any order in the header) the ranges neither
// overlap nor leave gaps, and the last one ends at the end of the file.
void check_layout(const std::vector<HeaderEntry>& entries, std::uint64_t buffer_size, const ErrorSource& source) {
  for (const HeaderEntry& entry : entries) {
    if (entry.end < entry.begin)
      source.fail("tensor ", quote(entry.name), ": data_offsets ", offsets_text(entry), " end before they begin");
    const std::uint64_t nbytes = expected_nbytes(entry, source);
    if (entry.end - entry.begin != nbytes)
      source.fail("tensor ", quote(entry.name), ": data_offsets ", offsets_text(entry), " span ", entry.end - entry.begin,
                  " bytes, but shape ", shape_text(entry.shape), " of ", detail::dtype_name(entry.dtype), " needs ",
                  nbytes);
  }
  std::vector<const HeaderEntry*> order;
  order.reserve(entries.size());
  for (const HeaderEntry& entry : entries) order.push_back(&entry);
  std::ranges::sort(order, {}, [](const HeaderEntry* e) { return std::tuple(e->begin, e->end); });
  std::uint64_t covered = 0;  // bytes [0, covered) belong to the tensors seen so far
  const HeaderEntry* previous = nullptr;
  for (const HeaderEntry* entry : order) {
    if (entry->begin < covered)
      source.fail("tensor ", quote(entry->name), ": data_offsets ", offsets_text(*entry), " overlap those of tensor ",
                  quote(previous->name), " ", offsets_text(*previous));
    if (entry->begin > covered)
      source.fail("bytes [", covered, ", ", entry->begin, ") of the data buffer belong to no tensor (a gap before tensor ",
                  quote(entry->name), ")");
    if (entry->end > buffer_size)
      source.fail("tensor ", quote(entry->name), ": data_offsets ", offsets_text(*entry),
                  " run past the end of the file (the data buffer has ", buffer_size, " bytes; truncated?)");
    covered = entry->end;
    previous = entry;
  }
  if (covered != buffer_size)
    source.fail("the file has ", buffer_size - covered, " bytes after the last tensor's data (the data buffer has ",
                buffer_size, " bytes, the tensors cover ", covered, ")");
}

// One new CPU tensor per entry, filled from the (checked) byte buffer.
SafetensorsFile make_tensors(detail::Header header, std::span<const std::byte> buffer, const ErrorSource& source) {
  SafetensorsFile file{.tensors = {}, .metadata = std::move(header.metadata)};
  for (HeaderEntry& entry : header.tensors) {
    const std::span<const std::byte> data = buffer.subspan(entry.begin, entry.end - entry.begin);
    if (entry.dtype == kBool) {
      // A C++ bool must hold 0 or 1; any other byte would be undefined behaviour later.
      const auto bad = std::ranges::find_if(data, [](std::byte b) { return std::to_integer<unsigned>(b) > 1; });
      if (bad != data.end())
        source.fail("tensor ", quote(entry.name), ": BOOL element ", bad - data.begin(), " is the byte ",
                    std::to_integer<unsigned>(*bad), ", expected 0 or 1");
    }
    Tensor tensor = empty(Shape(entry.shape.begin(), entry.shape.end()), {.dtype = entry.dtype});
    if (!data.empty()) std::memcpy(tensor.data_ptr(), data.data(), data.size());
    file.tensors.emplace(std::move(entry.name), std::move(tensor));
  }
  return file;
}

SafetensorsFile parse(std::span<const std::byte> bytes, const ErrorSource& source) {
  if (bytes.size() < 8) source.fail("the file has ", bytes.size(), " bytes, fewer than the 8-byte header length");
  std::uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | std::to_integer<std::uint64_t>(bytes[i]);
  if (header_size > detail::kMaxHeaderBytes)
    source.fail("the header length ", header_size, " is larger than the limit of ", detail::kMaxHeaderBytes, " bytes");
  if (header_size > bytes.size() - 8)
    source.fail("the header length ", header_size, " runs past the end of the file (", bytes.size() - 8,
                " bytes follow the length; truncated?)");
  const std::string_view json(reinterpret_cast<const char*>(bytes.data() + 8), header_size);
  if (json.empty() || json.front() != '{')
    source.fail("the header must start with '{', got ",
                json.empty() ? std::string("an empty header") : concat("the byte ", std::to_integer<unsigned>(bytes[8])));
  detail::Header header = detail::parse_header(json, source);
  const std::span<const std::byte> buffer = bytes.subspan(8 + header_size);
  check_layout(header.tensors, buffer.size(), source);
  return make_tensors(std::move(header), buffer, source);
}

[[noreturn]] void fail_system(const ErrorSource& source, std::string_view action, int error) {
  source.fail(action, ": ", std::generic_category().message(error));
}

// Closes a file descriptor (if open) on destruction.
struct ScopedFd {
  int fd;
  ~ScopedFd() {
    if (fd >= 0) ::close(fd);
  }
};

// A whole file mapped read-only (no bytes for an empty file); unmapped on destruction.
class MappedFile {
 public:
  MappedFile(const std::string& path, const ErrorSource& source) {
    const ScopedFd file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
    if (file.fd < 0) fail_system(source, "cannot open the file", errno);
    struct stat info {};
    if (::fstat(file.fd, &info) != 0) fail_system(source, "cannot stat the file", errno);
    if (!S_ISREG(info.st_mode)) source.fail("not a regular file");
    if (info.st_size == 0) return;
    void* data = ::mmap(nullptr, static_cast<std::size_t>(info.st_size), PROT_READ, MAP_PRIVATE, file.fd, 0);
    if (data == MAP_FAILED) fail_system(source, "cannot map the file", errno);
    data_ = data;  // the mapping outlives the descriptor
    size_ = static_cast<std::size_t>(info.st_size);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(data_, size_);
  }

  std::span<const std::byte> bytes() const {
    if (data_ == nullptr) return {};
    return {static_cast<const std::byte*>(data_), size_};
  }

 private:
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace

SafetensorsFile parse_safetensors(std::span<const std::byte> bytes) {
  return parse(bytes, {.op = "parse_safetensors", .file = {}});
}

SafetensorsFile load_safetensors(const std::filesystem::path& path) {
  const std::string file = path.string();
  const ErrorSource source{.op = "load_safetensors", .file = file};
  // Files written by save_safetensors are replaced by rename, never changed in place, so
  // the mapped bytes cannot shrink under the reader.
  const MappedFile mapped(file, source);
  return parse(mapped.bytes(), source);
}

}  // namespace infini::io
