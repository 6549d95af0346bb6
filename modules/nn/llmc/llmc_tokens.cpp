// Token files: header validation against the mapped file, token access, and the writer.
module;
#include <cstddef>
#include <cstdint>
#include <cstring>
module infini.nn;
import infini.std;

namespace infini::llmc {
namespace {

using detail::FileError;
using detail::kHeaderBytes;

static_assert(std::endian::native == std::endian::little, "token data is little-endian and is read in place");

struct FormatInfo {
  std::int32_t magic;
  std::int32_t version;
  std::size_t width;  // bytes per token
  const char* type;
};

constexpr FormatInfo info(TokenFormat format) {
  return format == TokenFormat::kGPT2 ? FormatInfo{20240520, 1, 2, "uint16"} : FormatInfo{20240801, 7, 4, "uint32"};
}

template <class T>
void copy_tokens(const std::byte* tokens, std::int64_t first, std::int64_t count, std::int64_t* out) {
  for (std::int64_t k = 0; k < count; ++k) {
    T value;
    std::memcpy(&value, tokens + (first + k) * sizeof(T), sizeof(T));
    out[k] = value;
  }
}

}  // namespace

TokenFile::TokenFile(const std::filesystem::path& path) : path_(path) {
  const FileError source{.op = "TokenFile", .file = path.string()};
  const detail::MappedFile file = detail::map_file(path, source);
  const detail::Header header = detail::read_header(file.bytes(), source);
  if (header[0] == info(TokenFormat::kLLaMA3).magic) format_ = TokenFormat::kLLaMA3;
  else detail::check_magic(header, info(TokenFormat::kGPT2).magic, source);
  const FormatInfo format = info(format_);
  if (header[1] != format.version)
    source.fail("unknown version ", header[1], " for magic ", format.magic, ", expected ", format.version);
  if (header[2] <= 0) source.fail("the header announces ", header[2], " tokens, expected at least 1");
  size_ = header[2];
  // At most 2^31 - 1 tokens of 4 bytes: no overflow.
  const std::uint64_t expected = kHeaderBytes + static_cast<std::uint64_t>(size_) * format.width;
  if (file.size != expected)
    source.fail("expected ", expected, " bytes (", kHeaderBytes, "-byte header + ", size_, " ", format.type,
                " tokens), the file has ", file.size,
                file.size < expected ? " (truncated?)" : " (bytes after the last token)");
  data_ = file.data;
}

std::uint32_t TokenFile::token(std::int64_t i) const {
  if (i < 0 || i >= size_)
    throw IndexError("TokenFile::token", concat("index ", i, " is out of range for ", size_, " tokens in '",
                                                path_.string(), "'"));
  std::int64_t value = 0;
  read_window(i, 1, &value);
  return static_cast<std::uint32_t>(value);
}

void TokenFile::read_window(std::int64_t start, std::int64_t count, std::int64_t* out) const {
  if (start < 0 || start >= size_ || count < 0)
    throw IndexError("TokenFile::read_window", concat("start ", start, ", count ", count, " for ", size_,
                                                      " tokens in '", path_.string(),
                                                      "': expected 0 <= start < size and count >= 0"));
  const std::byte* tokens = data_.get() + kHeaderBytes;
  for (std::int64_t position = start; count > 0; position = 0) {  // wraps to token 0
    const std::int64_t n = std::min(count, size_ - position);
    if (format_ == TokenFormat::kGPT2) copy_tokens<std::uint16_t>(tokens, position, n, out);
    else copy_tokens<std::uint32_t>(tokens, position, n, out);
    out += n;
    count -= n;
  }
}

void write_token_file(const std::filesystem::path& path, std::span<const std::uint32_t> tokens,
                      std::optional<TokenFormat> format) {
  const FileError source{.op = "write_token_file", .file = path.string()};
  if (tokens.empty()) source.fail("no tokens: llm.c's token files hold at least one");
  if (tokens.size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
    source.fail(tokens.size(), " tokens, more than the header's int32 count holds (2^31 - 1)");
  const auto wide = std::ranges::find_if(tokens, [](std::uint32_t t) { return t > 0xffff; });
  if (format == TokenFormat::kGPT2 && wide != tokens.end())
    source.fail("token ", wide - tokens.begin(), " is ", *wide, ", which does not fit the GPT-2 format's uint16");
  const TokenFormat chosen = format.value_or(wide == tokens.end() ? TokenFormat::kGPT2 : TokenFormat::kLLaMA3);
  const FormatInfo fmt = info(chosen);
  detail::Header header{};
  header[0] = fmt.magic;
  header[1] = fmt.version;
  header[2] = static_cast<std::int32_t>(tokens.size());
  io::write_file_atomically(path, [&](io::FileSink& out) {
    detail::write_header(out, header);
    if (chosen == TokenFormat::kLLaMA3) {
      out.write(std::as_bytes(tokens));
      return;
    }
    constexpr std::size_t kChunk = 1 << 16;  // narrowed to uint16 a chunk at a time
    std::vector<std::uint16_t> narrow;
    for (std::size_t begin = 0; begin < tokens.size(); begin += kChunk) {
      const std::span<const std::uint32_t> part = tokens.subspan(begin, std::min(kChunk, tokens.size() - begin));
      narrow.assign(part.begin(), part.end());
      out.write(std::as_bytes(std::span(narrow)));
    }
  });
}

}  // namespace infini::llmc
