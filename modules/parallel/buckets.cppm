// Gradient buckets for data parallelism: which parameters share one flat all-reduce.
// PyTorch DDP's policy: parameters taken in reverse registration order (backward produces
// the last layers' gradients first), one open bucket per (dtype, device), closed once it
// holds at least its cap: the first bucket of each kind small (1 MiB) so communication
// starts early in backward, the rest 25 MiB.
export module infini.parallel:buckets;
import infini.std;
import infini.tensor;

export namespace infini::parallel {

struct BucketOptions {
  std::int64_t first_bucket_bytes = std::int64_t{1} << 20;
  std::int64_t bucket_bytes = std::int64_t{25} << 20;
};

// Buckets of parameter indices. `order` lists every index of `params` once, in the order
// the buckets fill (reverse registration order at first, the observed gradient-ready order
// when rebuilding). Within a bucket the parameters keep that order; buckets come in the
// order of their first parameter in `order`. Error when `order` is not a permutation.
std::vector<std::vector<std::size_t>> assign_buckets(const std::vector<Tensor>& params,
                                                     const std::vector<std::size_t>& order,
                                                     const BucketOptions& options = {});

// n - 1, ..., 1, 0: the order of the first buckets.
std::vector<std::size_t> reverse_order(std::size_t n);

}  // namespace infini::parallel
