// llm.c's token files (dev/data/data_common.py write_datafile, llmc/dataloader.h): a
// 256 x int32 little-endian header (magic, version, token count N), then N tokens.
//   GPT-2:   magic 20240520, version 1, uint16 tokens
//   LLaMA-3: magic 20240801, version 7, uint32 tokens
//
//   llmc::TokenFile tokens("tiny_shakespeare_train.bin");
//   std::vector<std::int64_t> window(B * T + 1);
//   tokens.read_window(g * T, window.size(), window.data());  // wraps to token 0 at the end
export module infini.nn:llmc_tokens;
import infini.std;
import infini.tensor;

export namespace infini::llmc {

enum class TokenFormat {
  kGPT2,    // uint16 tokens, magic 20240520 version 1
  kLLaMA3,  // uint32 tokens, magic 20240801 version 7
};

// A token file, memory-mapped read-only. Opening validates the header and that the file
// holds exactly the announced tokens (IOError naming the file otherwise). Copies share the
// mapping; it is unmapped when the last copy dies.
class TokenFile {
 public:
  explicit TokenFile(const std::filesystem::path& path);

  const std::filesystem::path& path() const noexcept { return path_; }
  TokenFormat format() const noexcept { return format_; }
  std::int64_t size() const noexcept { return size_; }  // N >= 1

  // Token i, 0 <= i < size() (IndexError otherwise).
  std::uint32_t token(std::int64_t i) const;

  // out[k] = token((start + k) % size()) for k in [0, count): llm.c's reading order, which
  // wraps to token 0 at the end of the file (count may exceed size()). Needs
  // 0 <= start < size() and count >= 0 (IndexError otherwise).
  void read_window(std::int64_t start, std::int64_t count, std::int64_t* out) const;

 private:
  std::filesystem::path path_;
  std::shared_ptr<const std::byte> data_;  // the whole mapped file; tokens follow the header
  std::int64_t size_ = 0;
  TokenFormat format_ = TokenFormat::kGPT2;
};

// Writes `tokens` atomically as a token file: without a format, the GPT-2 (uint16) one when
// every token is below 65536, else the LLaMA-3 (uint32) one. IOError when there are no
// tokens, 2^31 or more (the header's count is an int32), or a token does not fit kGPT2.
void write_token_file(const std::filesystem::path& path, std::span<const std::uint32_t> tokens,
                      std::optional<TokenFormat> format = std::nullopt);

}  // namespace infini::llmc
