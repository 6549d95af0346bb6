// The BPE merge loop of OpenAI's encoder.py on token ids, and the cache of merged pieces.
// Each round scans the word for the adjacent pair with the lowest-ranked merge, then merges
// all its occurrences left to right; a piece of n bytes takes at most n - 1 rounds of O(n).
module;
#include <cstddef>
#include <cstdint>
module infini.nn;
import infini.std;

namespace infini::text::detail {

void bpe_merge(const BpeVocab& vocab, std::string_view piece, std::vector<std::int64_t>& out) {
  std::vector<std::int32_t> word(piece.size());  // token ids, one per byte to begin with
  for (std::size_t i = 0; i < piece.size(); ++i) word[i] = vocab.byte_tokens[static_cast<unsigned char>(piece[i])];
  while (word.size() > 1) {
    const Merge* best = nullptr;
    std::uint64_t best_pair = 0;
    for (std::size_t i = 0; i + 1 < word.size(); ++i) {
      const std::uint64_t pair = pair_key(word[i], word[i + 1]);
      const auto it = vocab.merges.find(pair);
      if (it != vocab.merges.end() && (!best || it->second.rank < best->rank)) {
        best = &it->second;
        best_pair = pair;
      }
    }
    if (!best) break;
    std::size_t kept = 0;
    for (std::size_t i = 0; i < word.size();) {
      if (i + 1 < word.size() && pair_key(word[i], word[i + 1]) == best_pair) {
        word[kept++] = best->token;
        i += 2;
      } else {
        word[kept++] = word[i++];
      }
    }
    word.resize(kept);
  }
  out.insert(out.end(), word.begin(), word.end());
}

bool BpeCache::find(std::string_view piece, std::vector<std::int64_t>& out) const {
  if (piece.size() > kMaxPieceBytes) return false;
  const std::shared_lock lock(mutex_);
  const auto it = entries_.find(piece);
  if (it == entries_.end()) return false;
  out.insert(out.end(), it->second.begin(), it->second.end());
  return true;
}

void BpeCache::insert(std::string_view piece, std::span<const std::int64_t> ids) {
  if (piece.size() > kMaxPieceBytes) return;
  const std::vector<std::int32_t> narrow(ids.begin(), ids.end());  // ids < 2^31 (checked on load)
  const std::unique_lock lock(mutex_);
  if (entries_.size() >= kMaxEntries) entries_.clear();
  entries_.emplace(std::string(piece), narrow);
}

}  // namespace infini::text::detail
