// Random numbers: Philox4x32-10, a counter-based generator. Element i of a random tensor
// is a pure function of (seed, offset + i), so results do not depend on how many threads
// (or which device) fill the tensor. A Generator hands out counter ranges.
export module infini.tensor:generator;
import infini.std;

export namespace infini {

// Four 32-bit random words for counter `counter` under key `seed` (Salmon et al., SC'11).
constexpr std::array<std::uint32_t, 4> philox4x32(std::uint64_t seed, std::uint64_t counter,
                                                  std::uint64_t stream = 0) noexcept {
  std::uint32_t c0 = static_cast<std::uint32_t>(counter), c1 = static_cast<std::uint32_t>(counter >> 32);
  std::uint32_t c2 = static_cast<std::uint32_t>(stream), c3 = static_cast<std::uint32_t>(stream >> 32);
  std::uint32_t k0 = static_cast<std::uint32_t>(seed), k1 = static_cast<std::uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = std::uint64_t{0xD2511F53u} * c0;
    const std::uint64_t p1 = std::uint64_t{0xCD9E8D57u} * c2;
    const std::uint32_t n0 = static_cast<std::uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const std::uint32_t n2 = static_cast<std::uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<std::uint32_t>(p1);
    c3 = static_cast<std::uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {c0, c1, c2, c3};
}

// The state a random op consumes: element i uses counter `offset + i`.
struct PhiloxState {
  std::uint64_t seed = 0;
  std::uint64_t offset = 0;
};

class Generator {
 public:
  explicit Generator(std::uint64_t seed = 67280421310721ull) : seed_(seed) {}

  // Reserves `count` counters and returns where they start. Thread-safe.
  PhiloxState reserve(std::uint64_t count) {
    std::lock_guard lock(mutex_);
    PhiloxState state{seed_, offset_};
    offset_ += count;
    return state;
  }

  void manual_seed(std::uint64_t seed) {
    std::lock_guard lock(mutex_);
    seed_ = seed;
    offset_ = 0;
  }
  PhiloxState state() {
    std::lock_guard lock(mutex_);
    return {seed_, offset_};
  }
  void set_state(PhiloxState state) {
    std::lock_guard lock(mutex_);
    seed_ = state.seed;
    offset_ = state.offset;
  }

 private:
  std::mutex mutex_;
  std::uint64_t seed_;
  std::uint64_t offset_ = 0;
};

// The generator random factories use when none is given.
Generator& default_generator();
// Seeds the default generator (like torch::manual_seed).
void manual_seed(std::uint64_t seed);

}  // namespace infini
