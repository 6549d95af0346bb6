// Samplers: the order in which a DataLoader visits dataset indices, epoch by epoch
// (torch.utils.data.Sampler). indices(epoch) is a pure function of the epoch, so a loader
// resumed from a state dict sees the same order again.
export module infini.nn:sampler;
import infini.std;
import infini.autograd;

export namespace infini::data {

class Sampler {
 public:
  virtual ~Sampler() = default;
  // How many indices each epoch has.
  virtual std::int64_t size() const = 0;
  // The indices of epoch `epoch` (>= 0), size() of them, in order.
  virtual std::vector<std::int64_t> indices(std::int64_t epoch) const = 0;
};

// 0, 1, ..., size - 1 every epoch.
class SequentialSampler : public Sampler {
 public:
  explicit SequentialSampler(std::int64_t size);
  std::int64_t size() const override { return size_; }
  std::vector<std::int64_t> indices(std::int64_t epoch) const override;

 private:
  std::int64_t size_;
};

// A new permutation of 0 .. size - 1 each epoch: random_permutation(size, seed, epoch).
class RandomSampler : public Sampler {
 public:
  RandomSampler(std::int64_t size, std::uint64_t seed);
  std::int64_t size() const override { return size_; }
  std::vector<std::int64_t> indices(std::int64_t epoch) const override;

 private:
  std::int64_t size_;
  std::uint64_t seed_;
};

// This rank's share of a dataset split over num_replicas ranks (PyTorch's algorithm): the
// epoch's order (random_permutation(dataset_size, seed, epoch) when shuffling, else
// 0 .. n-1) is padded by wrapping around to a multiple of num_replicas (or cut down to one
// when drop_last), and rank r takes entries r, r + num_replicas, ... So every rank gets
// size() indices: ceil(n / num_replicas), or floor with drop_last.
class DistributedSampler : public Sampler {
 public:
  // Error unless dataset_size >= 0, num_replicas >= 1 and 0 <= rank < num_replicas.
  DistributedSampler(std::int64_t dataset_size, std::int64_t num_replicas, std::int64_t rank, bool shuffle = true,
                     std::uint64_t seed = 0, bool drop_last = false);
  std::int64_t size() const override { return num_samples_; }
  std::vector<std::int64_t> indices(std::int64_t epoch) const override;

  // The epoch indices() without an argument uses (torch's set_epoch). A DataLoader passes
  // its own epoch to indices(epoch) instead.
  void set_epoch(std::int64_t epoch);
  std::int64_t epoch() const { return epoch_; }
  std::vector<std::int64_t> indices() const { return indices(epoch_); }

 private:
  std::int64_t dataset_size_, num_replicas_, rank_;
  bool shuffle_;
  std::uint64_t seed_;
  std::int64_t num_samples_;
  std::int64_t epoch_ = 0;
};

}  // namespace infini::data
