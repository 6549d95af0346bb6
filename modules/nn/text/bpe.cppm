// The parts of the byte-level BPE tokenizer (tokenizer.cppm), internal to infini.nn: nothing
// here is exported. The vocabulary and what both file formats share (bpe_vocab.cpp), OpenAI's
// GPT-2 files (gpt2_vocab.cpp), Hugging Face's tokenizer.json (tokenizer_json.cpp), the NFC
// normalizer (normalizer.cpp: utf8proc), the pre-tokenizer regex (pretokenizer.cpp: PCRE2
// stays behind its Impl so this file needs no PCRE2 header) and the BPE merge loop with its
// cache (bpe.cpp).
export module infini.nn:bpe;
import infini.std;

namespace infini::text::detail {

// GPT-2's bytes_to_unicode: the character standing for each byte in encoder.json, vocab.bpe
// and tokenizer.json's byte-level vocabularies. The 188 printable bytes ('!'..'~', '¡'..'¬',
// '®'..'ÿ') stand for themselves, the other 68 for U+0100 + n, n counting them in byte order
// (so ' ' is 'Ġ' U+0120).
std::array<char32_t, 256> byte_characters();

// The bytes a token string of a byte-level vocabulary stands for, or nullopt when it holds a
// character that is not one of byte_characters() (or is not UTF-8).
std::optional<std::string> token_to_bytes(std::string_view token);

// `text` for messages: quoted, control bytes as \xNN, cut after 40 bytes.
std::string quote(std::string_view text);

// The whole file; IOError from `op` naming it when it cannot be read.
std::string read_text_file(const char* op, const std::filesystem::path& path);

// A merge: its rank (0 for the first) and the merged token.
struct Merge {
  std::int32_t rank;
  std::int32_t token;
};

// Key of the adjacent token pair (left, right) in BpeVocab::merges.
constexpr std::uint64_t pair_key(std::int32_t left, std::int32_t right) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) | static_cast<std::uint32_t>(right);
}

// A token matched in the text before pre-tokenization (tokenizer.json's added_tokens,
// GPT-2's <|endoftext|>), by encode_with_special only.
struct AddedToken {
  std::string content;
  std::int32_t id;
};

// Hash of std::string keys that also takes string_views (heterogeneous lookup: no copy per
// lookup on the encoding path).
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <class Value>
using StringMap = std::unordered_map<std::string, Value, StringHash, std::equal_to<>>;

struct BpeVocab {
  std::vector<std::string> tokens;                  // id -> the token's bytes (added tokens: their content)
  std::array<std::int32_t, 256> byte_tokens{};      // byte -> id of its one-byte token
  std::unordered_map<std::uint64_t, Merge> merges;  // pair_key(left, right) -> the merge
  std::vector<AddedToken> added;                    // longest content first
  // tokenizer.json's ignore_merges (LLaMA-3, tiktoken): a piece that is a token of the BPE
  // vocabulary is that token, merged or not. whole_pieces maps those tokens' bytes to ids.
  bool ignore_merges = false;
  StringMap<std::int32_t> whole_pieces;
  std::optional<std::int32_t> bos, eos;  // begin / end of text, when the files name them
  std::string pattern;                   // the pre-tokenizer regex (Pretokenizer)
  // tokenizer.json's normalizer NFC (Qwen): text is NFC-normalized (nfc()) before it is split,
  // after added tokens are matched (they are matched in the text as given).
  bool normalize_nfc = false;
};

// Builds the BPE part of a vocabulary from token strings (byte_characters() spelling) -> ids:
// tokens, byte_tokens and, with vocab.ignore_merges, whole_pieces. `size` is the number of
// ids, which must be 0..size-1: those not in `ids` must be added tokens, filled by the caller
// (their slots are left empty). IOError from `op` naming `where` otherwise.
void set_bpe_tokens(const char* op, const std::string& where, const std::unordered_map<std::string, std::int64_t>& ids,
                    std::size_t size, BpeVocab& vocab);

// Adds the merge of the token strings left and right, of rank `rank`. IOError from `op` when
// a token (left, right or left + right) is not in `ids`, saying `line` and `vocab_name`. When
// the pair merges already, nothing is added and the rank of that merge is returned.
std::optional<std::int32_t> add_merge(const char* op, const std::string& line, std::string_view vocab_name,
                                      const std::unordered_map<std::string, std::int64_t>& ids, std::string_view left,
                                      std::string_view right, std::int32_t rank, BpeVocab& vocab);

// Reads and validates encoder.json and vocab.bpe (see Tokenizer::from_gpt2_files).
BpeVocab load_gpt2_vocab(const char* op, const std::filesystem::path& encoder_json,
                         const std::filesystem::path& vocab_bpe);

// Reads and validates tokenizer.json and, when given, tokenizer_config.json (see
// Tokenizer::from_pretrained).
BpeVocab load_tokenizer_json(const char* op, const std::filesystem::path& tokenizer_json,
                             const std::optional<std::filesystem::path>& tokenizer_config);

// Unicode NFC of `text` (utf8proc): "e" + U+0301 becomes U+00E9 ("é"). Any bytes are taken:
// those that are not valid UTF-8 are kept as they are, and the valid runs between them are
// normalized each on its own. ASCII text is returned unchanged. Error from `op` when utf8proc
// fails (out of memory).
std::string nfc(const char* op, std::string_view text);

// GPT-2's pre-tokenizer regex (tokenizers' ByteLevel pre-tokenizer with use_regex):
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
inline constexpr std::string_view kGPT2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// A pre-tokenizer regex, in the syntax of tokenizers' and tiktoken's patterns, with \s as
// Unicode White_Space (as Python's regex module, tiktoken and tokenizers match it).
class Pretokenizer {
 public:
  // Compiles `pattern` (JIT-compiled where PCRE2 has a JIT); Error from `op` when PCRE2
  // rejects it.
  Pretokenizer(const char* op, std::string_view pattern);
  ~Pretokenizer();
  Pretokenizer(const Pretokenizer&) = delete;
  Pretokenizer& operator=(const Pretokenizer&) = delete;

  // Calls piece(p) for each piece of `text` in order: the regex's matches and, between them,
  // each run of bytes no match covers (tokenizers' "Isolated" split; for GPT-2's and LLaMA-3's
  // patterns these runs are exactly the bytes that are not valid UTF-8). The pieces tile
  // `text`. Error from `op` when PCRE2 fails (e.g. runs out of memory).
  void split(const char* op, std::string_view text, const std::function<void(std::string_view)>& piece) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The pattern PCRE2 is given for a tokenizers / tiktoken pattern: each \s becomes Unicode's
// White_Space characters and each \S their complement (PCRE2's own \s differs on U+180E).
// Error from `op` for a \S inside a character class, which has no such spelling.
std::string pcre2_pattern(const char* op, std::string_view pattern);

// The BPE merge loop of encoder.py: starting from one token per byte, merge every occurrence
// (left to right) of the adjacent pair whose merge has the lowest rank, until no pair merges.
// Appends the ids of `piece` (>= 1 byte) to `out`.
void bpe_merge(const BpeVocab& vocab, std::string_view piece, std::vector<std::int64_t>& out);

// Pieces already merged -> their ids, shared by the threads that encode. Holds at most
// kMaxEntries pieces of at most kMaxPieceBytes each: it is emptied when full.
class BpeCache {
 public:
  static constexpr std::size_t kMaxEntries = std::size_t{1} << 18;
  static constexpr std::size_t kMaxPieceBytes = 64;

  // Appends the ids of `piece` to `out` and returns true when it is cached.
  bool find(std::string_view piece, std::vector<std::int64_t>& out) const;
  void insert(std::string_view piece, std::span<const std::int64_t> ids);

 private:
  mutable std::shared_mutex mutex_;
  StringMap<std::vector<std::int32_t>> entries_;
};

// What a Tokenizer handle shares.
struct TokenizerState {
  TokenizerState(const char* op, BpeVocab v) : vocab(std::move(v)), pretokenizer(op, vocab.pattern) {}
  BpeVocab vocab;
  Pretokenizer pretokenizer;
  mutable BpeCache cache;
};

}  // namespace infini::text::detail
