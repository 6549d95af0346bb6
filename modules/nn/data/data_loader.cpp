// LoaderCore, option checks and epoch orders (see data_loader.cppm).
module;
#include <cstdint>
module infini.nn;
import infini.std;

namespace infini::data {
namespace {

std::int64_t read_count(const StateDict& state, const std::string& key) {
  if (!state.contains(key)) throw Error("DataLoader.load_state_dict", concat("missing key \"", key, "\""));
  const Tensor& value = state.at(key);
  if (!value.defined() || value.dim() != 0 || value.dtype() != kInt64)
    throw Error("DataLoader.load_state_dict",
                concat("\"", key, "\" must be a 0-d int64 tensor, got ",
                       value.defined() ? concat(value.dtype(), " ", value.shape()) : std::string("an undefined tensor")));
  return value.item<std::int64_t>();
}

}  // namespace

void check_options(const DataLoaderOptions& options, bool iterable) {
  if (options.batch_size < 1) throw Error("DataLoader", concat("batch_size must be >= 1, got ", options.batch_size));
  if (options.num_workers < 0) throw Error("DataLoader", concat("num_workers must be >= 0, got ", options.num_workers));
  if (options.prefetch_factor < 1)
    throw Error("DataLoader", concat("prefetch_factor must be >= 1, got ", options.prefetch_factor));
  if (iterable && (options.shuffle || options.sampler))
    throw Error("DataLoader", "shuffle and sampler do not apply to an IterableDataset (its stream has its own order)");
  if (options.shuffle && options.sampler) throw Error("DataLoader", "sampler is mutually exclusive with shuffle");
}

std::vector<std::int64_t> epoch_order(const Sampler* sampler, bool shuffle, std::int64_t dataset_size,
                                      std::int64_t epoch, std::uint64_t seed) {
  if (!sampler) {
    if (shuffle) return random_permutation(dataset_size, seed, epoch);
    std::vector<std::int64_t> order(static_cast<std::size_t>(dataset_size));
    std::iota(order.begin(), order.end(), std::int64_t{0});
    return order;
  }
  std::vector<std::int64_t> order = sampler->indices(epoch);
  if (static_cast<std::int64_t>(order.size()) != sampler->size())
    throw IndexError("DataLoader", concat("the sampler gave ", order.size(), " indices for epoch ", epoch,
                                          ", its size() is ", sampler->size()));
  for (std::int64_t index : order)
    if (index < 0 || index >= dataset_size)
      throw IndexError("DataLoader", concat("sampler index ", index, " is out of range for a dataset of ", dataset_size,
                                            " examples"));
  return order;
}

LoaderCore::LoaderCore(PassFactory factory, std::optional<std::int64_t> batches_per_epoch,
                       const DataLoaderOptions& options)
    : factory_(std::move(factory)),
      batches_per_epoch_(batches_per_epoch),
      num_workers_(batches_per_epoch ? options.num_workers : std::min<std::int64_t>(options.num_workers, 1)),
      window_(options.num_workers * options.prefetch_factor) {
  if (batches_per_epoch && *batches_per_epoch < 0)
    throw ShapeError("DataLoader", concat("the dataset reports a negative size (", *batches_per_epoch, " batches)"));
  if (options.seed) {
    seed_ = *options.seed;
  } else {
    const PhiloxState drawn = default_generator().reserve(1);
    const auto words = philox4x32(drawn.seed, drawn.offset);
    seed_ = (std::uint64_t{words[0]} << 32) | words[1];
  }
}

LoaderCore::~LoaderCore() = default;

void LoaderCore::start() {
  prefetcher_.reset();  // joins the threads of an earlier pass
  if (batches_per_epoch_ && position_ > 0 && position_ >= *batches_per_epoch_) advance_epoch();  // used up
  Prefetcher::Produce produce = factory_(epoch_, seed_);
  const std::int64_t epoch = epoch_;
  const std::uint64_t seed = seed_;
  Prefetcher::Produce in_batch_scope = [produce = std::move(produce), epoch, seed](std::int64_t batch) {
    NoGradGuard no_grad;
    BatchGeneratorScope generator(batch_seed(seed, epoch, batch));
    return produce(batch);
  };
  prefetcher_ = std::make_unique<Prefetcher>(std::move(in_batch_scope), position_,
                                             batches_per_epoch_.value_or(std::numeric_limits<std::int64_t>::max()),
                                             num_workers_, window_);
}

std::any LoaderCore::next() {
  if (!prefetcher_) start();
  ++position_;  // counted before building, so a batch that throws is passed over
  std::any batch = prefetcher_->next();
  if (!batch.has_value()) {
    prefetcher_.reset();
    advance_epoch();
  }
  return batch;
}

void LoaderCore::advance_epoch() {
  ++epoch_;
  position_ = 0;
}

void LoaderCore::set_epoch(std::int64_t epoch) {
  if (epoch < 0) throw IndexError("DataLoader.set_epoch", concat("epoch must be >= 0, got ", epoch));
  prefetcher_.reset();
  epoch_ = epoch;
  position_ = 0;
}

StateDict LoaderCore::state_dict() const {
  return {{"epoch", scalar_tensor(epoch_)},
          {"position", scalar_tensor(position_)},
          {"seed", scalar_tensor(static_cast<std::int64_t>(seed_))}};
}

void LoaderCore::load_state_dict(const StateDict& state) {
  const std::int64_t epoch = read_count(state, "epoch");
  const std::int64_t position = read_count(state, "position");
  const std::int64_t seed = read_count(state, "seed");
  if (epoch < 0) throw IndexError("DataLoader.load_state_dict", concat("epoch must be >= 0, got ", epoch));
  if (position < 0 || (batches_per_epoch_ && position > *batches_per_epoch_))
    throw IndexError("DataLoader.load_state_dict",
                     concat("position ", position, " is outside the epoch (",
                            batches_per_epoch_ ? std::to_string(*batches_per_epoch_) : std::string("unknown"),
                            " batches)"));
  prefetcher_.reset();
  epoch_ = epoch;
  position_ = position;
  seed_ = static_cast<std::uint64_t>(seed);
}

}  // namespace infini::data
