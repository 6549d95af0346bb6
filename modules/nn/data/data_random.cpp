// Philox permutations and per-batch generators (see data_random.cppm).
module;
#include <cstdint>
module infini.nn;
import infini.std;

namespace infini::data {
namespace {

// The batch generator of this thread, or null outside a loader's batch.
thread_local Generator* current_batch_generator = nullptr;

// Philox streams: permutations use stream `epoch`, batch seeds stream `epoch | kBatchStream`.
constexpr std::uint64_t kBatchStream = std::uint64_t{1} << 63;

std::uint64_t random_u64(std::uint64_t seed, std::uint64_t counter, std::uint64_t stream) {
  const auto words = philox4x32(seed, counter, stream);
  return (std::uint64_t{words[0]} << 32) | words[1];
}

}  // namespace

std::vector<std::int64_t> random_permutation(std::int64_t n, std::uint64_t seed, std::int64_t epoch) {
  if (n < 0) throw ShapeError("random_permutation", concat("size must be >= 0, got ", n));
  if (epoch < 0) throw IndexError("random_permutation", concat("epoch must be >= 0, got ", epoch));
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  for (std::int64_t i = n - 1; i >= 1; --i) {
    // j uniform in [0, i]: the high 64 bits of r * (i + 1) (bias below (i + 1) / 2^64).
    const auto r = random_u64(seed, static_cast<std::uint64_t>(i), static_cast<std::uint64_t>(epoch));
    const auto j = static_cast<std::int64_t>((static_cast<unsigned __int128>(r) * static_cast<std::uint64_t>(i + 1)) >> 64);
    std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(j)]);
  }
  return order;
}

std::uint64_t batch_seed(std::uint64_t seed, std::int64_t epoch, std::int64_t batch) {
  return random_u64(seed, static_cast<std::uint64_t>(batch), static_cast<std::uint64_t>(epoch) | kBatchStream);
}

Generator& batch_generator() {
  return current_batch_generator ? *current_batch_generator : default_generator();
}

BatchGeneratorScope::BatchGeneratorScope(std::uint64_t seed) : generator_(seed), previous_(current_batch_generator) {
  current_batch_generator = &generator_;
}

BatchGeneratorScope::~BatchGeneratorScope() { current_batch_generator = previous_; }

}  // namespace infini::data
