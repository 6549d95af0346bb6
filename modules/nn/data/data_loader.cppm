// DataLoader (torch.utils.data.DataLoader): batches of a dataset, epoch after epoch.
//
//   data::DataLoader loader(std::make_shared<data::FashionMNIST>(root, true),
//                           {.batch_size = 64, .shuffle = true, .num_workers = 2, .seed = 7});
//   for (data::Example& batch : loader) { ... }   // batch.data (64,1,28,28), batch.target (64)
//
// A range-for runs to the end of the current epoch, after which the loader is at the next
// one. Batch k of epoch e depends only on (dataset, options, seed, e, k): the order is
// random_permutation(n, seed, e) when shuffling, and random transforms draw from a generator
// seeded by (seed, e, k) (see data_random.cppm), so batches do not depend on num_workers.
// state_dict() holds (epoch, position, seed), position counting the batches handed out in
// this epoch, including the one in hand; a loader loaded from it continues with exactly the
// remaining batches.
export module infini.nn:data_loader;
import infini.std;
import infini.autograd;
import :state_dict;
import :dataset;
import :sampler;
import :prefetcher;

export namespace infini::data {

struct DataLoaderOptions {
  std::int64_t batch_size = 1;
  bool shuffle = false;    // a new random order every epoch (map-style datasets only)
  bool drop_last = false;  // drop a last batch smaller than batch_size
  // Background threads building batches (each builds whole batches; Dataset::get must be
  // safe to call concurrently). 0: batches are built by the loop that asks for them. An
  // IterableDataset's stream is read by one background thread whenever this is > 0.
  std::int64_t num_workers = 0;
  std::int64_t prefetch_factor = 2;   // batches kept ready per worker
  std::optional<std::uint64_t> seed = std::nullopt;  // unset: drawn from default_generator() at construction
  // Replaces the sequential or shuffled order (e.g. a DistributedSampler); not with shuffle.
  std::shared_ptr<const Sampler> sampler = nullptr;
};

// The part of a DataLoader that does not depend on its example and batch types: options,
// epoch and position, the state dict and the prefetching threads.
class LoaderCore {
 public:
  // Returns the function that builds batch k of epoch `epoch` for a loader seeded with
  // `seed`, or an empty std::any when the data has no batch k.
  using PassFactory = std::function<Prefetcher::Produce(std::int64_t epoch, std::uint64_t seed)>;

  // batches_per_epoch: nullopt when unknown until the data ends (an IterableDataset, whose
  // batches are then built in order by at most one thread). Options as check_options accepts.
  LoaderCore(PassFactory factory, std::optional<std::int64_t> batches_per_epoch, const DataLoaderOptions& options);
  ~LoaderCore();
  LoaderCore(const LoaderCore&) = delete;
  LoaderCore& operator=(const LoaderCore&) = delete;

  std::optional<std::int64_t> batches_per_epoch() const { return batches_per_epoch_; }
  std::int64_t epoch() const { return epoch_; }
  std::int64_t position() const { return position_; }
  std::uint64_t seed() const { return seed_; }

  // Starts handing out batches from the current position (from the next epoch if this
  // one is used up), dropping any batches prefetched before.
  void start();
  // The next batch of the epoch; at its end an empty std::any, and the loader moves to the
  // next epoch. Rethrows what building the batch threw (the batch then counts as handed out).
  std::any next();
  // Moves to the first batch of `epoch` (>= 0).
  void set_epoch(std::int64_t epoch);

  // {"epoch", "position", "seed"}: 0-d int64 tensors (the seed's 64 bits as int64).
  StateDict state_dict() const;
  // Error when a key is missing or not a 0-d int64 tensor, IndexError when the epoch is
  // negative or the position lies outside the epoch.
  void load_state_dict(const StateDict& state);

 private:
  void advance_epoch();

  PassFactory factory_;
  std::optional<std::int64_t> batches_per_epoch_;
  std::int64_t num_workers_, window_;
  std::uint64_t seed_;
  std::int64_t epoch_ = 0, position_ = 0;
  std::unique_ptr<Prefetcher> prefetcher_;
};

// Error naming DataLoader unless batch_size >= 1, num_workers >= 0, prefetch_factor >= 1,
// and not both shuffle and sampler (for an IterableDataset: neither).
void check_options(const DataLoaderOptions& options, bool iterable);

// The order of one epoch of a map-style dataset of `dataset_size` examples: the sampler's
// indices (IndexError unless each is in range), else a permutation when shuffling, else
// 0 .. n-1.
std::vector<std::int64_t> epoch_order(const Sampler* sampler, bool shuffle, std::int64_t dataset_size,
                                      std::int64_t epoch, std::uint64_t seed);

template <class ExampleT, class BatchT>
Collate<ExampleT, BatchT> stacking_collate() {
  return [](std::vector<ExampleT> examples) -> BatchT { return default_collate(examples); };
}

// Batches (made by `collate`, default: default_collate) of a Dataset or an IterableDataset.
// BatchT must be copyable (Tensors and structs of them are).
template <class ExampleT = Example, class BatchT = ExampleT>
class DataLoader {
 public:
  DataLoader(std::shared_ptr<const Dataset<ExampleT>> dataset, DataLoaderOptions options = {},
             Collate<ExampleT, BatchT> collate = stacking_collate<ExampleT, BatchT>()) {
    check_options(options, false);
    if (!dataset) throw Error("DataLoader", "dataset is null");
    if (!collate) throw Error("DataLoader", "collate is empty");
    const std::int64_t samples = options.sampler ? options.sampler->size() : dataset->size();
    const std::int64_t batches = options.drop_last ? samples / options.batch_size
                                                   : (samples + options.batch_size - 1) / options.batch_size;
    core_ = std::make_unique<LoaderCore>(map_style_pass(std::move(dataset), options, std::move(collate)), batches,
                                         options);
  }

  // Batches of consecutive examples of the stream (no shuffle or sampler).
  DataLoader(std::shared_ptr<const IterableDataset<ExampleT>> dataset, DataLoaderOptions options = {},
             Collate<ExampleT, BatchT> collate = stacking_collate<ExampleT, BatchT>()) {
    check_options(options, true);
    if (!dataset) throw Error("DataLoader", "dataset is null");
    if (!collate) throw Error("DataLoader", "collate is empty");
    core_ = std::make_unique<LoaderCore>(iterable_pass(std::move(dataset), options, std::move(collate)),
                                         std::nullopt, options);
  }

  // Input iterator over the rest of the current epoch; compares equal to end() after its last batch.
  class Iterator {
   public:
    using value_type = BatchT;
    using difference_type = std::ptrdiff_t;
    BatchT& operator*() const { return *batch_; }
    BatchT* operator->() const { return &*batch_; }
    Iterator& operator++() {
      batch_ = loader_->fetch();
      return *this;
    }
    void operator++(int) { ++*this; }
    bool operator==(std::default_sentinel_t) const { return !batch_.has_value(); }

   private:
    friend class DataLoader;
    Iterator(DataLoader* loader, std::optional<BatchT> batch) : loader_(loader), batch_(std::move(batch)) {}
    DataLoader* loader_;
    mutable std::optional<BatchT> batch_;
  };

  Iterator begin() {
    core_->start();
    return Iterator(this, fetch());
  }
  std::default_sentinel_t end() const { return {}; }

  // Batches per epoch; Error for an IterableDataset (unknown until its stream ends).
  std::int64_t size() const {
    if (!core_->batches_per_epoch()) throw Error("DataLoader.size", "a loader over an IterableDataset has no length");
    return *core_->batches_per_epoch();
  }
  std::int64_t epoch() const { return core_->epoch(); }
  std::int64_t position() const { return core_->position(); }
  std::uint64_t seed() const { return core_->seed(); }
  void set_epoch(std::int64_t epoch) { core_->set_epoch(epoch); }
  StateDict state_dict() const { return core_->state_dict(); }
  void load_state_dict(const StateDict& state) { core_->load_state_dict(state); }

 private:
  std::optional<BatchT> fetch() {
    std::any batch = core_->next();
    if (!batch.has_value()) return std::nullopt;
    return std::any_cast<BatchT>(std::move(batch));
  }

  // Batch k of an epoch: collate of the examples at order[k * batch_size, ...).
  static LoaderCore::PassFactory map_style_pass(std::shared_ptr<const Dataset<ExampleT>> dataset,
                                         const DataLoaderOptions& options, Collate<ExampleT, BatchT> collate) {
    return [dataset, collate = std::move(collate), sampler = options.sampler, shuffle = options.shuffle,
            batch_size = options.batch_size](std::int64_t epoch, std::uint64_t seed) -> Prefetcher::Produce {
      auto order = std::make_shared<const std::vector<std::int64_t>>(
          epoch_order(sampler.get(), shuffle, dataset->size(), epoch, seed));
      return [dataset, collate, order, batch_size](std::int64_t batch) -> std::any {
        const auto first = static_cast<std::size_t>(batch * batch_size);
        const auto last = std::min(first + static_cast<std::size_t>(batch_size), order->size());
        std::vector<ExampleT> examples;
        examples.reserve(last - first);
        for (std::size_t i = first; i < last; ++i) examples.push_back(dataset->get((*order)[i]));
        return collate(std::move(examples));
      };
    };
  }

  // Batch k: the next batch_size examples of the epoch's stream (examples of batches that
  // were handed out before a resume are read and skipped).
  static LoaderCore::PassFactory iterable_pass(std::shared_ptr<const IterableDataset<ExampleT>> dataset,
                                               const DataLoaderOptions& options, Collate<ExampleT, BatchT> collate) {
    struct Reader {
      ExampleStream<ExampleT> stream;
      std::int64_t next_batch = 0;
      bool ended = false;
      std::optional<ExampleT> read() {
        if (ended) return std::nullopt;
        std::optional<ExampleT> example = stream();
        ended = !example.has_value();
        return example;
      }
    };
    return [dataset, collate = std::move(collate), batch_size = options.batch_size,
            drop_last = options.drop_last](std::int64_t epoch, std::uint64_t) -> Prefetcher::Produce {
      auto reader = std::make_shared<Reader>(Reader{dataset->stream(epoch)});
      return [reader, collate, batch_size, drop_last](std::int64_t batch) -> std::any {
        for (; reader->next_batch < batch; ++reader->next_batch)
          for (std::int64_t i = 0; i < batch_size; ++i) reader->read();
        ++reader->next_batch;
        std::vector<ExampleT> examples;
        while (static_cast<std::int64_t>(examples.size()) < batch_size) {
          std::optional<ExampleT> example = reader->read();
          if (!example) break;
          examples.push_back(std::move(*example));
        }
        if (examples.empty() || (drop_last && static_cast<std::int64_t>(examples.size()) < batch_size)) return {};
        return collate(std::move(examples));
      };
    };
  }

  std::unique_ptr<LoaderCore> core_;
};

// DataLoader loader(std::make_shared<MyDataset>(...), options[, collate]) deduces the types.
template <class D>
DataLoader(std::shared_ptr<D>, DataLoaderOptions = {}) -> DataLoader<typename D::ExampleType>;
template <class D, class F>
DataLoader(std::shared_ptr<D>, DataLoaderOptions, F)
    -> DataLoader<typename D::ExampleType, std::invoke_result_t<F, std::vector<typename D::ExampleType>>>;

}  // namespace infini::data
