// The parts of the GPT-2 tokenizer (gpt2_tokenizer.cppm), internal to infini.nn: nothing here
// is exported. The vocabulary (gpt2_vocab.cpp), the pre-tokenizer regex (gpt2_pretokenizer.cpp,
// PCRE2 stays behind its Impl so this file needs no PCRE2 header) and the BPE merge loop with
// its cache (gpt2_bpe.cpp).
export module infini.nn:gpt2_bpe;
import infini.std;

namespace infini::text::detail {

// GPT-2's bytes_to_unicode: the character standing for each byte in encoder.json and
// vocab.bpe. The 188 printable bytes ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for themselves, the
// other 68 for U+0100 + n, n counting them in byte order (so ' ' is 'Ġ' U+0120).
std::array<char32_t, 256> byte_characters();

// A merge of vocab.bpe: its rank (0 for the first line after the version) and the merged token.
struct Merge {
  std::int32_t rank;
  std::int32_t token;
};

// Key of the adjacent token pair (left, right) in GPT2Vocab::merges.
constexpr std::uint64_t pair_key(std::int32_t left, std::int32_t right) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) | static_cast<std::uint32_t>(right);
}

struct GPT2Vocab {
  std::vector<std::string> tokens;                  // id -> the token's bytes
  std::array<std::int32_t, 256> byte_tokens{};      // byte -> id of its one-byte token
  std::unordered_map<std::uint64_t, Merge> merges;  // pair_key(left, right) -> the merge
  std::int32_t eot = 0;                             // id of "<|endoftext|>"
};

// Reads and validates encoder.json and vocab.bpe (see GPT2Tokenizer::from_files); IOError
// from `op` otherwise.
GPT2Vocab load_gpt2_vocab(const char* op, const std::filesystem::path& encoder_json,
                          const std::filesystem::path& vocab_bpe);

// GPT-2's pre-tokenizer: the regex
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// with \s as Unicode White_Space (as Python's regex module and tiktoken have it).
class Pretokenizer {
 public:
  Pretokenizer();  // compiles the pattern, JIT-compiled where PCRE2 has a JIT
  ~Pretokenizer();
  Pretokenizer(const Pretokenizer&) = delete;
  Pretokenizer& operator=(const Pretokenizer&) = delete;

  // Calls piece(p) for each piece of `text` in order: the regex's matches and, between them,
  // each maximal run of bytes that is not valid UTF-8. The pieces tile `text`. Error from `op`
  // when PCRE2 fails (e.g. runs out of memory).
  void split(const char* op, std::string_view text, const std::function<void(std::string_view)>& piece) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The BPE merge loop of encoder.py: starting from one token per byte, merge every occurrence
// (left to right) of the adjacent pair whose merge has the lowest rank, until no pair merges.
// Appends the ids of `piece` (>= 1 byte) to `out`.
void bpe_merge(const GPT2Vocab& vocab, std::string_view piece, std::vector<std::int64_t>& out);

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
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  mutable std::shared_mutex mutex_;
  std::unordered_map<std::string, std::vector<std::int32_t>, Hash, std::equal_to<>> entries_;
};

// What a GPT2Tokenizer handle shares.
struct GPT2State {
  explicit GPT2State(GPT2Vocab v) : vocab(std::move(v)) {}
  GPT2Vocab vocab;
  Pretokenizer pretokenizer;
  mutable BpeCache cache;
};

}  // namespace infini::text::detail
