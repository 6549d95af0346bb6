// Sequential, random and distributed samplers (see sampler.cppm).
module;
#include <cstdint>
module infini.nn;
import infini.std;

namespace infini::data {
namespace {

void check_size(std::string_view op, std::int64_t size) {
  if (size < 0) throw ShapeError(op, concat("dataset size must be >= 0, got ", size));
}

void check_epoch(std::string_view op, std::int64_t epoch) {
  if (epoch < 0) throw IndexError(op, concat("epoch must be >= 0, got ", epoch));
}

std::vector<std::int64_t> iota(std::int64_t n) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  return order;
}

}  // namespace

SequentialSampler::SequentialSampler(std::int64_t size) : size_(size) { check_size("SequentialSampler", size); }

std::vector<std::int64_t> SequentialSampler::indices(std::int64_t epoch) const {
  check_epoch("SequentialSampler.indices", epoch);
  return iota(size_);
}

RandomSampler::RandomSampler(std::int64_t size, std::uint64_t seed) : size_(size), seed_(seed) {
  check_size("RandomSampler", size);
}

std::vector<std::int64_t> RandomSampler::indices(std::int64_t epoch) const {
  check_epoch("RandomSampler.indices", epoch);
  return random_permutation(size_, seed_, epoch);
}

DistributedSampler::DistributedSampler(std::int64_t dataset_size, std::int64_t num_replicas, std::int64_t rank,
                                       bool shuffle, std::uint64_t seed, bool drop_last)
    : dataset_size_(dataset_size), num_replicas_(num_replicas), rank_(rank), shuffle_(shuffle), seed_(seed) {
  check_size("DistributedSampler", dataset_size);
  if (num_replicas < 1)
    throw Error("DistributedSampler", concat("num_replicas must be >= 1, got ", num_replicas));
  if (rank < 0 || rank >= num_replicas)
    throw IndexError("DistributedSampler", concat("rank ", rank, " is not in [0, ", num_replicas, ")"));
  num_samples_ = drop_last ? dataset_size / num_replicas : (dataset_size + num_replicas - 1) / num_replicas;
}

void DistributedSampler::set_epoch(std::int64_t epoch) {
  check_epoch("DistributedSampler.set_epoch", epoch);
  epoch_ = epoch;
}

std::vector<std::int64_t> DistributedSampler::indices(std::int64_t epoch) const {
  check_epoch("DistributedSampler.indices", epoch);
  const std::vector<std::int64_t> order = shuffle_ ? random_permutation(dataset_size_, seed_, epoch) : iota(dataset_size_);
  // Entry k of the padded (or cut) order is order[k mod n]; this rank takes k = rank + i * num_replicas.
  std::vector<std::int64_t> mine(static_cast<std::size_t>(num_samples_));
  for (std::int64_t i = 0; i < num_samples_; ++i)
    mine[static_cast<std::size_t>(i)] = order[static_cast<std::size_t>((rank_ + i * num_replicas_) % dataset_size_)];
  return mine;
}

}  // namespace infini::data
