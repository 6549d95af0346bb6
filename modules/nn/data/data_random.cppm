// Randomness in data loading, reproducible for any number of loader threads.
// - Shuffles are Philox permutations keyed by (seed, epoch): an epoch's order depends on
//   nothing else.
// - Random transforms draw from data::batch_generator(). While a DataLoader builds batch k
//   of epoch e on some thread, that is a Generator seeded from (loader seed, e, k), so an
//   augmented batch is the same whichever thread builds it; elsewhere it is
//   infini::default_generator() (seeded by manual_seed).
export module infini.nn:data_random;
import infini.std;
import infini.autograd;

export namespace infini::data {

// A permutation of 0 .. n-1 (Fisher-Yates; swap partner i from Philox counter i, stream
// `epoch`, key `seed`). ShapeError for n < 0, IndexError for epoch < 0.
std::vector<std::int64_t> random_permutation(std::int64_t n, std::uint64_t seed, std::int64_t epoch);

// The seed of batch `batch` of epoch `epoch` of a loader seeded with `seed`.
std::uint64_t batch_seed(std::uint64_t seed, std::int64_t epoch, std::int64_t batch);

// The generator random transforms use on this thread (see above).
Generator& batch_generator();

// Makes batch_generator() a Generator seeded with `seed` on this thread until destroyed.
class BatchGeneratorScope {
 public:
  explicit BatchGeneratorScope(std::uint64_t seed);
  ~BatchGeneratorScope();
  BatchGeneratorScope(const BatchGeneratorScope&) = delete;
  BatchGeneratorScope& operator=(const BatchGeneratorScope&) = delete;

 private:
  Generator generator_;
  Generator* previous_;
};

}  // namespace infini::data
