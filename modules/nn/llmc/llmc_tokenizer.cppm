// llm.c's tokenizer file (train_gpt2.py write_tokenizer, llmc/tokenizer.h): a 256 x int32
// little-endian header (magic 20240328, version 1 or 2, vocab size V, version 2 also the
// EOT token id), then V entries: a uint8 length L (1..255) and L bytes of the token.
//
//   llmc::TokenizerFile tok = llmc::read_tokenizer_file("gpt2_tokenizer.bin");
//   std::string text = tok.tokens[id];   // raw bytes (UTF-8 pieces, not always valid alone)
export module infini.nn:llmc_tokenizer;
import infini.std;
import infini.tensor;

export namespace infini::llmc {

struct TokenizerFile {
  std::vector<std::string> tokens;       // token id -> its bytes (1..255 bytes each)
  std::optional<std::int64_t> eot_token;  // set by version 2 files; version 1 files have none
};

// IOError naming the file and the problem for anything but a valid file.
TokenizerFile read_tokenizer_file(const std::filesystem::path& path);

// Writes version 2 when eot_token is set (it must be a token id), else version 1,
// atomically. IOError for no tokens, an empty token, or a token of more than 255 bytes.
void write_tokenizer_file(const std::filesystem::path& path, const TokenizerFile& tokenizer);

}  // namespace infini::llmc
