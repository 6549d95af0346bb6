// IDX reader (see idx.cppm). zlib's gzread reads gzip and plain files alike; a plain file's
// size is checked before reading, a gzip stream is decompressed in chunks into a buffer
// that grows with the data actually there, up to one byte past the announced size.
module;
#include <zlib.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
module infini.nn;
import infini.std;

namespace infini::data {
namespace {

constexpr std::uint32_t kImagesMagic = 0x00000803;
constexpr std::uint32_t kLabelsMagic = 0x00000801;
constexpr std::size_t kChunk = std::size_t{1} << 20;
using u128 = unsigned __int128;

struct GzClose {
  void operator()(gzFile file) const { gzclose(file); }
};
using GzFile = std::unique_ptr<std::remove_pointer_t<gzFile>, GzClose>;

std::string hex32(std::uint32_t value) {
  char text[11];
  std::snprintf(text, sizeof text, "0x%08x", value);
  return text;
}

// An IDX file being read: its path, the op reading it and the open zlib handle.
class IdxReader {
 public:
  IdxReader(const char* op, std::string path) : op_(op), path_(std::move(path)) {
    errno = 0;
    file_.reset(gzopen(path_.c_str(), "rb"));
    if (!file_)
      throw IOError(op_, concat(path_, ": cannot open (", errno ? std::strerror(errno) : "out of memory", ")"));
  }

  // Reads the header; returns the dims after checking the magic and that the dims (all but
  // the first) are >= 1.
  std::vector<std::int64_t> read_header(std::uint32_t magic) {
    const std::size_t ndim = magic & 0xff;
    header_bytes_ = 4 * (1 + ndim);
    std::vector<std::uint8_t> header(header_bytes_);
    std::size_t got = read(header.data(), 4);
    const std::uint32_t found = got == 4 ? big_endian(header.data()) : 0;
    if (got == 4 && found != magic)
      throw IOError(op_, concat(path_, ": bad magic number ", hex32(found), ", expected ", hex32(magic)));
    if (got == 4) got += read(header.data() + 4, header_bytes_ - 4);
    if (got < header_bytes_)
      throw IOError(op_, concat(path_, ": truncated header: expected ", header_bytes_, " bytes, the ",
                                is_plain() ? "file" : "decompressed stream", " has ", got));
    std::vector<std::int64_t> dims(ndim);
    for (std::size_t d = 0; d < ndim; ++d) dims[d] = big_endian(header.data() + 4 * (d + 1));
    for (std::size_t d = 1; d < ndim; ++d)
      if (dims[d] < 1) throw IOError(op_, concat(path_, ": bad dims ", dims, ": every dim but the first must be >= 1"));
    return dims;
  }

  // The values after the header: exactly the product of dims bytes, else IOError.
  std::vector<std::uint8_t> read_values(const std::vector<std::int64_t>& dims) {
    // Each dim is below 2^32 and there are at most 3, so the product fits in 128 bits.
    u128 count = 1;
    for (std::int64_t d : dims) count *= static_cast<std::uint64_t>(d);
    if (count > (u128{1} << 48))
      throw IOError(op_, concat(path_, ": bad dims ", dims, ": more than 2^48 values"));
    const auto expected = static_cast<std::uint64_t>(count);
    const std::string announced = concat(header_bytes_ + expected, " bytes (header ", header_bytes_, " + ", dims, ")");
    if (is_plain()) {
      std::error_code error;
      const std::uintmax_t size = std::filesystem::file_size(path_, error);
      if (error) throw IOError(op_, concat(path_, ": cannot read its size (", error.message(), ")"));
      if (size != header_bytes_ + expected)
        throw IOError(op_, concat(path_, ": expected ", announced, ", the file has ", size, " bytes"));
    }
    std::vector<std::uint8_t> values;
    std::uint64_t total = 0;
    for (;;) {  // up to one byte past `expected`, so a longer stream is noticed
      const std::uint64_t want = std::min<std::uint64_t>(kChunk, expected + 1 - total);
      if (want == 0) break;
      values.resize(static_cast<std::size_t>(total + want));
      const std::size_t got = read(values.data() + total, static_cast<std::size_t>(want));
      total += got;
      if (got < want) break;
    }
    if (total > expected) {
      std::vector<std::uint8_t> scratch(kChunk);
      while (const std::size_t got = read(scratch.data(), scratch.size())) total += got;
    }
    if (total != expected)
      throw IOError(op_, concat(path_, ": expected ", announced, ", the ", is_plain() ? "file" : "decompressed stream",
                                " has ", header_bytes_ + total, " bytes"));
    values.resize(static_cast<std::size_t>(expected));
    return values;
  }

 private:
  bool is_plain() { return gzdirect(file_.get()) == 1; }

  static std::uint32_t big_endian(const std::uint8_t* bytes) {
    return (std::uint32_t{bytes[0]} << 24) | (std::uint32_t{bytes[1]} << 16) | (std::uint32_t{bytes[2]} << 8) | bytes[3];
  }

  // Reads up to `size` bytes; fewer only at the end of the data. IOError for a corrupt or
  // cut-off gzip stream.
  std::size_t read(std::uint8_t* out, std::size_t size) {
    std::size_t done = 0;
    while (done < size) {
      const int got = gzread(file_.get(), out + done, static_cast<unsigned>(std::min(size - done, kChunk)));
      if (got < 0) fail();
      if (got == 0) break;
      done += static_cast<std::size_t>(got);
    }
    int status = Z_OK;
    gzerror(file_.get(), &status);
    if (status != Z_OK) fail();  // Z_BUF_ERROR: the gzip stream ends early
    return done;
  }

  [[noreturn]] void fail() {
    int status = Z_OK;
    const char* message = gzerror(file_.get(), &status);
    throw IOError(op_, concat(path_, ": ", status == Z_BUF_ERROR ? "the gzip stream is cut off" : "corrupt data",
                              " (zlib: ", message, ")"));
  }

  const char* op_;
  std::string path_;
  GzFile file_;
  std::size_t header_bytes_ = 0;
};

}  // namespace

Tensor read_idx_images(const std::string& path) {
  IdxReader reader("read_idx_images", path);
  const std::vector<std::int64_t> dims = reader.read_header(kImagesMagic);
  const std::vector<std::uint8_t> values = reader.read_values(dims);
  Tensor images = empty(dims, {.dtype = kUInt8});
  if (!values.empty()) std::memcpy(images.data_ptr<std::uint8_t>(), values.data(), values.size());
  return images;
}

Tensor read_idx_labels(const std::string& path) {
  IdxReader reader("read_idx_labels", path);
  const std::vector<std::int64_t> dims = reader.read_header(kLabelsMagic);
  const std::vector<std::uint8_t> values = reader.read_values(dims);
  Tensor labels = empty(dims, {.dtype = kInt64});
  std::int64_t* out = labels.data_ptr<std::int64_t>();
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = values[i];
  return labels;
}

}  // namespace infini::data
