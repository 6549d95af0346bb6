// The tokenizer file: header checks, the length-prefixed token entries, and the writer.
module;
#include <cstddef>
#include <cstdint>
module infini.nn;
import infini.std;

namespace infini::llmc {
namespace {

using detail::FileError;

constexpr std::int32_t kMagic = 20240328;
constexpr std::size_t kMaxTokenBytes = 255;  // the length is a uint8

}  // namespace

TokenizerFile read_tokenizer_file(const std::filesystem::path& path) {
  const FileError source{.op = "read_tokenizer_file", .file = path.string()};
  const detail::MappedFile file = detail::map_file(path, source);
  const detail::Header header = detail::read_header(file.bytes(), source);
  detail::check_magic(header, kMagic, source);
  const std::int32_t version = header[1];
  if (version != 1 && version != 2) source.fail("unknown version ", version, ", expected 1 or 2");
  const std::int64_t vocab_size = header[2];
  if (vocab_size <= 0) source.fail("the header announces ", vocab_size, " tokens, expected at least 1");
  TokenizerFile tokenizer;
  if (version == 2) {
    if (header[3] < 0 || header[3] >= vocab_size)
      source.fail("the EOT token id ", header[3], " is not a token id (the vocabulary has ", vocab_size, " tokens)");
    tokenizer.eot_token = header[3];
  }
  const std::span<const std::byte> entries = file.bytes().subspan(detail::kHeaderBytes);
  // Each entry takes at least 2 bytes: the allocation is bounded by the file's size.
  tokenizer.tokens.reserve(std::min<std::size_t>(static_cast<std::size_t>(vocab_size), entries.size() / 2));
  std::size_t pos = 0;
  for (std::int64_t i = 0; i < vocab_size; ++i) {
    if (pos == entries.size()) source.fail("the file ends before token ", i, " of ", vocab_size, " (truncated?)");
    const std::size_t length = std::to_integer<std::size_t>(entries[pos++]);
    if (length == 0) source.fail("token ", i, " has length 0, expected 1 .. 255 bytes");
    if (length > entries.size() - pos)
      source.fail("token ", i, " announces ", length, " bytes, the file has ", entries.size() - pos,
                  " left (truncated?)");
    tokenizer.tokens.emplace_back(reinterpret_cast<const char*>(entries.data() + pos), length);
    pos += length;
  }
  if (pos != entries.size())
    source.fail("the file has ", entries.size() - pos, " bytes after the last of its ", vocab_size, " tokens");
  return tokenizer;
}

void write_tokenizer_file(const std::filesystem::path& path, const TokenizerFile& tokenizer) {
  const FileError source{.op = "write_tokenizer_file", .file = path.string()};
  const std::vector<std::string>& tokens = tokenizer.tokens;
  if (tokens.empty()) source.fail("no tokens: the vocabulary must have at least one");
  if (tokens.size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
    source.fail(tokens.size(), " tokens, more than the header's int32 count holds (2^31 - 1)");
  for (std::size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i].empty() || tokens[i].size() > kMaxTokenBytes)
      source.fail("token ", i, " has ", tokens[i].size(), " bytes, expected 1 .. ", kMaxTokenBytes);
  const auto vocab_size = static_cast<std::int64_t>(tokens.size());
  if (tokenizer.eot_token && (*tokenizer.eot_token < 0 || *tokenizer.eot_token >= vocab_size))
    source.fail("the EOT token id ", *tokenizer.eot_token, " is not a token id (the vocabulary has ", vocab_size,
                " tokens)");
  detail::Header header{};
  header[0] = kMagic;
  header[1] = tokenizer.eot_token ? 2 : 1;
  header[2] = static_cast<std::int32_t>(vocab_size);
  header[3] = tokenizer.eot_token ? static_cast<std::int32_t>(*tokenizer.eot_token) : 0;
  std::string entries;
  for (const std::string& token : tokens) {
    entries.push_back(static_cast<char>(token.size()));
    entries += token;
  }
  io::write_file_atomically(path, [&](io::FileSink& out) {
    detail::write_header(out, header);
    out.write(entries);
  });
}

}  // namespace infini::llmc
