// llm.c files in general: mapping a file, the 256 x int32 header and its magic numbers.
module;
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
module infini.nn;
import infini.std;

namespace infini::llmc::detail {
namespace {

// Every magic number llm.c writes, and what it stands for.
struct KnownMagic {
  std::int32_t magic;
  std::string_view kind;
};
constexpr KnownMagic kKnownMagics[] = {
    {20240326, "a GPT-2 checkpoint"},    {20240327, "a GPT-2 debug state"}, {20240328, "a tokenizer file"},
    {20240520, "a GPT-2 token file"},    {20240522, "an eval file"},        {20240801, "a LLaMA-3 token file"},
    {20240803, "a LLaMA-3 checkpoint"},
};

std::string_view kind_of(std::int32_t magic) {
  for (const KnownMagic& known : kKnownMagics)
    if (known.magic == magic) return known.kind;
  return {};
}

// Closes a file descriptor (if open) on destruction.
struct ScopedFd {
  int fd;
  ~ScopedFd() {
    if (fd >= 0) ::close(fd);
  }
};

[[noreturn]] void fail_system(const FileError& source, std::string_view action, int error) {
  source.fail(action, ": ", std::generic_category().message(error));
}

}  // namespace

MappedFile map_file(const std::filesystem::path& path, const FileError& source) {
  const ScopedFd file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) fail_system(source, "cannot open the file", errno);
  struct stat info {};
  if (::fstat(file.fd, &info) != 0) fail_system(source, "cannot stat the file", errno);
  if (!S_ISREG(info.st_mode)) source.fail("not a regular file");
  const auto size = static_cast<std::size_t>(info.st_size);
  if (size == 0) return {};
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, file.fd, 0);
  if (data == MAP_FAILED) fail_system(source, "cannot map the file", errno);
  // The mapping outlives the descriptor; the last owner unmaps it.
  const auto unmap = [size](const std::byte* p) { ::munmap(const_cast<std::byte*>(p), size); };
  return {.data = std::shared_ptr<const std::byte>(static_cast<const std::byte*>(data), unmap), .size = size};
}

Header read_header(std::span<const std::byte> file, const FileError& source) {
  if (file.size() < kHeaderBytes)
    source.fail("the file has ", file.size(), " bytes, fewer than the ", kHeaderBytes, "-byte header (256 x int32)");
  Header header{};
  for (std::size_t i = 0; i < kHeaderInts; ++i) {
    std::uint32_t value = 0;
    for (std::size_t b = 4; b-- > 0;) value = (value << 8) | std::to_integer<std::uint32_t>(file[4 * i + b]);
    header[i] = static_cast<std::int32_t>(value);
  }
  return header;
}

void check_magic(const Header& header, std::int32_t magic, const FileError& source) {
  if (header[0] == magic) return;
  const std::string_view found = kind_of(header[0]);
  source.fail("bad magic number ", header[0], ", expected ", magic, " (", kind_of(magic), ")",
              found.empty() ? std::string() : concat("; ", header[0], " is the magic of ", found));
}

void write_header(io::FileSink& out, const Header& header) {
  std::array<std::byte, kHeaderBytes> bytes{};
  for (std::size_t i = 0; i < kHeaderInts; ++i)
    for (std::size_t b = 0; b < 4; ++b)
      bytes[4 * i + b] = static_cast<std::byte>(static_cast<std::uint32_t>(header[i]) >> (8 * b));
  out.write(bytes);
}

}  // namespace infini::llmc::detail
