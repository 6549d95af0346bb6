// DataLoader: every sample once per epoch, seeded orders, workers, errors, shutdown and
// resuming from a state dict. Datasets here hold example i = (data i, target i), so a
// batch's targets spell out the order it was built in.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

import infini.nn;

#include "data_test_util.h"

namespace infini::data::data_loader_test {
namespace {

using Indices = std::vector<std::int64_t>;

using test::expect_error;

// Example i: data float32 (2) = {i, -i}, target int64 0-d = i. get(fail_at) throws
// IOError; every get() counts itself and sleeps `delay`.
class CountingDataset : public Dataset<Example> {
 public:
  explicit CountingDataset(std::int64_t n, std::int64_t fail_at = -1,
                           std::chrono::milliseconds delay = std::chrono::milliseconds(0))
      : n_(n), fail_at_(fail_at), delay_(delay) {}
  std::int64_t size() const override { return n_; }
  Example get(std::int64_t i) const override {
    ++calls;
    if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
    if (i == fail_at_) throw IOError("CountingDataset.get", "example " + std::to_string(i) + " is unreadable");
    return {from_vector<float>({static_cast<float>(i), -static_cast<float>(i)}), scalar_tensor(i)};
  }
  mutable std::atomic<std::int64_t> calls{0};

 private:
  std::int64_t n_, fail_at_;
  std::chrono::milliseconds delay_;
};

// The targets of every batch of one epoch (a range-for over the loader), checking that
// each batch's data matches its targets.
template <class Loader>
std::vector<Indices> run_epoch(Loader& loader) {
  std::vector<Indices> batches;
  for (Example& batch : loader) {
    Indices targets;
    const std::int64_t b = batch.target.size(0);
    EXPECT_EQ(batch.data.shape(), (Shape{b, 2}));
    for (std::int64_t j = 0; j < b; ++j) {
      targets.push_back(batch.target.select(0, j).template item<std::int64_t>());
      EXPECT_EQ(batch.data.select(0, j).select(0, 0).template item<float>(), static_cast<float>(targets.back()));
      EXPECT_EQ(batch.data.select(0, j).select(0, 1).template item<float>(), -static_cast<float>(targets.back()));
    }
    batches.push_back(targets);
  }
  return batches;
}

Indices flatten(const std::vector<Indices>& batches) {
  Indices all;
  for (const Indices& b : batches) all.insert(all.end(), b.begin(), b.end());
  return all;
}

Indices iota(std::int64_t n) {
  Indices v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

TEST(DataLoader, EverySampleOncePerEpoch) {
  auto dataset = std::make_shared<const CountingDataset>(10);
  for (const bool shuffle : {false, true}) {
    for (const std::int64_t workers : {0, 2}) {
      for (const bool drop_last : {false, true}) {
        DataLoader loader(dataset, {.batch_size = 3, .shuffle = shuffle, .drop_last = drop_last, .num_workers = workers,
                                    .seed = 1});
        EXPECT_EQ(loader.size(), drop_last ? 3 : 4);
        for (std::int64_t epoch = 0; epoch < 2; ++epoch) {
          EXPECT_EQ(loader.epoch(), epoch);
          const std::vector<Indices> batches = run_epoch(loader);
          ASSERT_EQ(static_cast<std::int64_t>(batches.size()), loader.size());
          for (std::size_t k = 0; k < batches.size(); ++k) EXPECT_EQ(batches[k].size(), k < 3 ? 3u : 1u);
          Indices all = flatten(batches);
          if (!shuffle) EXPECT_EQ(all, drop_last ? iota(9) : iota(10));
          std::sort(all.begin(), all.end());
          EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end()) << "a sample came twice";
          EXPECT_EQ(all.size(), drop_last ? 9u : 10u);
          EXPECT_TRUE(std::all_of(all.begin(), all.end(), [](std::int64_t i) { return i >= 0 && i < 10; }));
        }
        EXPECT_EQ(loader.epoch(), 2);
        EXPECT_EQ(loader.position(), 0);
      }
    }
  }
}

TEST(DataLoader, ShuffledOrderIsSeededAndChangesEachEpoch) {
  auto dataset = std::make_shared<const CountingDataset>(50);
  DataLoader a(dataset, {.batch_size = 7, .shuffle = true, .seed = 123});
  DataLoader b(dataset, {.batch_size = 7, .shuffle = true, .num_workers = 2, .seed = 123});
  DataLoader c(dataset, {.batch_size = 7, .shuffle = true, .seed = 124});
  const Indices a0 = flatten(run_epoch(a)), a1 = flatten(run_epoch(a));
  // The order is random_permutation(n, seed, epoch), whatever the number of workers.
  EXPECT_EQ(a0, random_permutation(50, 123, 0));
  EXPECT_EQ(a1, random_permutation(50, 123, 1));
  EXPECT_NE(a0, a1);
  EXPECT_EQ(flatten(run_epoch(b)), a0);
  EXPECT_EQ(flatten(run_epoch(b)), a1);
  EXPECT_NE(flatten(run_epoch(c)), a0);
  EXPECT_EQ(a.seed(), 123u);
}

TEST(DataLoader, UnsetSeedComesFromTheDefaultGenerator) {
  auto dataset = std::make_shared<const CountingDataset>(30);
  manual_seed(5);
  DataLoader a(dataset, {.batch_size = 4, .shuffle = true});
  manual_seed(5);
  DataLoader b(dataset, {.batch_size = 4, .shuffle = true});
  DataLoader c(dataset, {.batch_size = 4, .shuffle = true});
  EXPECT_EQ(a.seed(), b.seed());
  EXPECT_NE(b.seed(), c.seed());
  EXPECT_EQ(flatten(run_epoch(a)), flatten(run_epoch(b)));
}

// Data drawn from batch_generator(): the loader seeds it per (seed, epoch, batch).
class RandomDataset : public Dataset<Example> {
 public:
  std::int64_t size() const override { return 12; }
  Example get(std::int64_t i) const override {
    return {rand({2}, {}, &batch_generator()), scalar_tensor(i)};
  }
};

TEST(DataLoader, RandomDataDoesNotDependOnWorkers) {
  auto dataset = std::make_shared<const RandomDataset>();
  std::vector<std::vector<Tensor>> runs;
  for (const std::int64_t workers : {0, 1, 3}) {
    DataLoader loader(dataset, {.batch_size = 5, .shuffle = true, .num_workers = workers, .seed = 8});
    std::vector<Tensor> data;
    for (int epoch = 0; epoch < 2; ++epoch)
      for (Example& batch : loader) data.push_back(batch.data);
    runs.push_back(data);
  }
  ASSERT_EQ(runs[0].size(), 6u);
  // Batch k of epoch e holds rand() of a Generator seeded with batch_seed(8, e, k).
  for (std::size_t k = 0; k < 6; ++k) {
    Generator g(batch_seed(8, static_cast<std::int64_t>(k / 3), static_cast<std::int64_t>(k % 3)));
    const std::int64_t rows = runs[0][k].size(0);
    for (std::int64_t j = 0; j < rows; ++j) {
      const Tensor expected = rand({2}, {}, &g);
      for (const auto& run : runs)
        for (std::int64_t c = 0; c < 2; ++c)
          EXPECT_EQ(run[k].select(0, j).select(0, c).item<float>(), expected.select(0, c).item<float>());
    }
  }
}

TEST(DataLoader, WorkerExceptionReachesTheConsumerAtItsBatch) {
  for (const std::int64_t workers : {0, 2}) {
    auto dataset = std::make_shared<const CountingDataset>(10, /*fail_at=*/5);
    DataLoader loader(dataset, {.batch_size = 3, .num_workers = workers});
    auto it = loader.begin();  // batch 0: 0 1 2
    EXPECT_EQ(it->target.select(0, 0).item<std::int64_t>(), 0);
    expect_error<IOError>([&] { ++it; }, "CountingDataset.get", "example 5");  // batch 1: 3 4 5
    EXPECT_EQ(loader.position(), 2);
    // The loader goes on after the failed batch.
    EXPECT_EQ(run_epoch(loader), (std::vector<Indices>{{6, 7, 8}, {9}}));
    EXPECT_EQ(loader.epoch(), 1);
  }
}

// Threads of this process named "infini-loader" (the loaders' workers; OpenMP's pool, which
// a worker's parallel region may start, does not count).
std::int64_t loader_thread_count() {
  std::int64_t count = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    if (std::getline(comm, name) && name == "infini-loader") ++count;
  }
  return count;
}

TEST(DataLoader, DestroyedMidEpochStopsItsThreads) {
  ASSERT_EQ(loader_thread_count(), 0);
  for (int round = 0; round < 10; ++round) {
    auto dataset = std::make_shared<const CountingDataset>(100, -1, std::chrono::milliseconds(1));
    {
      DataLoader loader(dataset, {.batch_size = 2, .num_workers = 3, .prefetch_factor = 2});
      auto it = loader.begin();
      EXPECT_EQ(it->target.select(0, 1).item<std::int64_t>(), 1);
      for (int tries = 0; tries < 1000 && loader_thread_count() < 3; ++tries)  // names are set as threads start
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      EXPECT_EQ(loader_thread_count(), 3);
    }  // workers are busy or waiting for room here
    EXPECT_LT(dataset->calls.load(), 100);
  }
  // A joined thread can stay listed in /proc/self/task for a moment after join()
  // returns (the kernel clears its tid before it finishes exiting); a leaked one stays.
  for (int tries = 0; tries < 2000 && loader_thread_count() > 0; ++tries)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(loader_thread_count(), 0);
}

TEST(DataLoader, PrefetchIsBounded) {
  auto dataset = std::make_shared<const CountingDataset>(100);
  DataLoader loader(dataset, {.batch_size = 1, .num_workers = 2, .prefetch_factor = 2});
  auto it = loader.begin();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // Batch 0 was handed out; at most 2 workers x 2 batches are built beyond it.
  EXPECT_EQ(dataset->calls.load(), 5);
  ++it;
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(dataset->calls.load(), 6);
}

TEST(DataLoader, ResumesFromStateDictWithTheRemainingBatches) {
  auto dataset = std::make_shared<const CountingDataset>(10);
  for (const std::int64_t workers : {0, 2}) {
    DataLoader reference(dataset, {.batch_size = 3, .shuffle = true, .seed = 3});
    const std::vector<Indices> epoch0 = run_epoch(reference), epoch1 = run_epoch(reference),
                               epoch2 = run_epoch(reference);

    DataLoader loader(dataset, {.batch_size = 3, .shuffle = true, .num_workers = workers, .seed = 3});
    run_epoch(loader);
    StateDict state;
    std::int64_t taken = 0;
    for (Example& batch : loader) {
      (void)batch;
      if (++taken == 2) {
        state = loader.state_dict();  // saved while training on batch 1 of epoch 1
        break;
      }
    }
    EXPECT_EQ(state.at("epoch").item<std::int64_t>(), 1);
    EXPECT_EQ(state.at("position").item<std::int64_t>(), 2);
    EXPECT_EQ(state.at("seed").item<std::int64_t>(), 3);
    EXPECT_EQ(state.at("epoch").dtype(), kInt64);
    EXPECT_EQ(state.at("epoch").dim(), 0);

    DataLoader resumed(dataset, {.batch_size = 3, .shuffle = true, .num_workers = workers, .seed = 77});
    resumed.load_state_dict(state);
    EXPECT_EQ(resumed.seed(), 3u);
    EXPECT_EQ(run_epoch(resumed), (std::vector<Indices>{epoch1[2], epoch1[3]}));
    EXPECT_EQ(run_epoch(resumed), epoch2);
    // The original, broken out of its loop, continues the same way.
    EXPECT_EQ(run_epoch(loader), (std::vector<Indices>{epoch1[2], epoch1[3]}));
    EXPECT_NE(epoch0, epoch1);
  }
}

TEST(DataLoader, StateAfterTheLastBatchMovesToTheNextEpoch) {
  auto dataset = std::make_shared<const CountingDataset>(4);
  DataLoader loader(dataset, {.batch_size = 2});
  StateDict last;
  for (Example& batch : loader) {
    (void)batch;
    last = loader.state_dict();
  }
  EXPECT_EQ(last.at("position").item<std::int64_t>(), 2);
  EXPECT_EQ(loader.state_dict().at("epoch").item<std::int64_t>(), 1);
  DataLoader resumed(dataset, {.batch_size = 2});
  resumed.load_state_dict(last);
  EXPECT_EQ(run_epoch(resumed), (std::vector<Indices>{{0, 1}, {2, 3}}));
  EXPECT_EQ(resumed.epoch(), 2);
  resumed.set_epoch(7);
  EXPECT_EQ(resumed.epoch(), 7);
  EXPECT_EQ(resumed.position(), 0);
  // An empty epoch still counts as one.
  DataLoader empty(std::make_shared<const CountingDataset>(0), {.batch_size = 2, .num_workers = 1});
  EXPECT_EQ(empty.size(), 0);
  EXPECT_TRUE(run_epoch(empty).empty());
  EXPECT_EQ(empty.epoch(), 1);
}

TEST(DataLoader, LoadStateDictErrors) {
  auto dataset = std::make_shared<const CountingDataset>(10);
  DataLoader loader(dataset, {.batch_size = 3});
  const StateDict good = loader.state_dict();
  auto with = [&](const std::string& key, Tensor value) {
    StateDict s = good;
    s[key] = value;
    return s;
  };
  StateDict missing = good;
  missing.erase("seed");
  expect_error<Error>([&] { loader.load_state_dict(missing); }, "DataLoader.load_state_dict", "\"seed\"");
  expect_error<Error>([&] { loader.load_state_dict(with("epoch", scalar_tensor(1.0))); }, "DataLoader.load_state_dict",
                      "0-d int64");
  expect_error<Error>([&] { loader.load_state_dict(with("epoch", zeros({2}, {.dtype = kInt64}))); },
                      "DataLoader.load_state_dict", "[2]");
  expect_error<IndexError>([&] { loader.load_state_dict(with("position", scalar_tensor(std::int64_t{5}))); },
                           "DataLoader.load_state_dict", "position 5");
  expect_error<IndexError>([&] { loader.load_state_dict(with("epoch", scalar_tensor(std::int64_t{-1}))); },
                           "DataLoader.load_state_dict", "-1");
  expect_error<IndexError>([&] { loader.set_epoch(-3); }, "DataLoader.set_epoch", "-3");
}

TEST(DataLoader, OptionErrors) {
  auto dataset = std::make_shared<const CountingDataset>(10);
  expect_error<Error>([&] { DataLoader(dataset, {.batch_size = 0}); }, "DataLoader", "batch_size");
  expect_error<Error>([&] { DataLoader(dataset, {.num_workers = -1}); }, "DataLoader", "num_workers");
  expect_error<Error>([&] { DataLoader(dataset, {.prefetch_factor = 0}); }, "DataLoader", "prefetch_factor");
  expect_error<Error>(
      [&] { DataLoader(dataset, {.shuffle = true, .sampler = std::make_shared<SequentialSampler>(10)}); },
      "DataLoader", "mutually exclusive");
  expect_error<Error>([] { DataLoader<>(std::shared_ptr<const Dataset<Example>>{}); }, "DataLoader", "null");
  expect_error<Error>([&] { DataLoader<>(dataset, {}, Collate<Example, Example>{}); }, "DataLoader", "collate");
  // A sampler index outside the dataset is caught when the epoch starts.
  DataLoader loader(dataset, {.sampler = std::make_shared<SequentialSampler>(11)});
  expect_error<IndexError>([&] { loader.begin(); }, "DataLoader", "sampler index 10");
}

TEST(DataLoader, DistributedSamplerSplitsTheDataset) {
  auto dataset = std::make_shared<const CountingDataset>(11);
  Indices all;
  for (std::int64_t rank = 0; rank < 3; ++rank) {
    auto sampler = std::make_shared<DistributedSampler>(11, 3, rank, true, 4);
    DataLoader loader(dataset, {.batch_size = 2, .num_workers = 1, .sampler = sampler});
    EXPECT_EQ(loader.size(), 2);  // 4 samples per rank
    const Indices mine = flatten(run_epoch(loader));
    EXPECT_EQ(mine, sampler->indices(0));
    EXPECT_EQ(flatten(run_epoch(loader)), sampler->indices(1));  // the loader's epoch drives the sampler
    all.insert(all.end(), mine.begin(), mine.end());
  }
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  EXPECT_EQ(all, iota(11));
}

TEST(DataLoader, CustomCollate) {
  auto dataset = std::make_shared<const CountingDataset>(5);
  // Batches of target sums (a Tensor instead of an Example); the types are deduced.
  DataLoader loader(dataset, {.batch_size = 2}, [](std::vector<Example> examples) {
    std::int64_t sum = 0;
    for (const Example& e : examples) sum += e.target.item<std::int64_t>();
    return scalar_tensor(sum);
  });
  Indices sums;
  for (Tensor& t : loader) sums.push_back(t.item<std::int64_t>());
  EXPECT_EQ(sums, (Indices{1, 5, 4}));
}

TEST(DataLoader, Subset) {
  auto dataset = std::make_shared<TensorDataset>(arange(12, {.dtype = kFloat32}).view({6, 2}), arange(6));
  const Subset<> subset(dataset, {4, 1, 4});
  ASSERT_EQ(subset.size(), 3);
  const std::vector<std::int64_t> expected_targets = {4, 1, 4};
  for (std::int64_t i = 0; i < 3; ++i) {
    const Example e = subset.get(i);
    EXPECT_EQ(e.target.item<std::int64_t>(), expected_targets[static_cast<std::size_t>(i)]);
    EXPECT_EQ(e.data.select(0, 1).item<double>(), 2.0 * static_cast<double>(expected_targets[static_cast<std::size_t>(i)]) + 1);
  }
  EXPECT_EQ(Subset<>(dataset, {}).size(), 0);
  expect_error<IndexError>([&] { Subset<>(dataset, {0, 6}); }, "Subset", "indices[1] = 6 is out of range for a dataset of 6");
  expect_error<IndexError>([&] { Subset<>(dataset, {-1}); }, "Subset", "indices[0] = -1");
  expect_error<IndexError>([&] { (void)subset.get(3); }, "Subset.get", "index 3 is out of range for 3");
  expect_error<Error>([] { Subset<>(nullptr, {}); }, "Subset", "dataset is null");
}

TEST(DataLoader, TensorDataset) {
  auto dataset = std::make_shared<TensorDataset>(arange(12, {.dtype = kFloat32}).view({6, 2}), arange(6));
  DataLoader loader(dataset, {.batch_size = 4});
  std::vector<Example> batches;
  for (Example& b : loader) batches.push_back(b);
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[1].data.shape(), (Shape{2, 2}));
  EXPECT_EQ(batches[1].data.select(0, 1).select(0, 1).item<float>(), 11.0f);
  EXPECT_EQ(batches[1].target.select(0, 0).item<std::int64_t>(), 4);
  expect_error<ShapeError>([] { TensorDataset(zeros({3, 2}), zeros({4})); }, "TensorDataset", "[4]");
  expect_error<IndexError>([&] { dataset->get(6); }, "TensorDataset.get", "index 6");
  expect_error<ShapeError>([] { default_collate(std::vector<Tensor>{zeros({2}), zeros({3})}); }, "default_collate",
                           "[3]");
  expect_error<ShapeError>([] { default_collate(std::vector<Tensor>{}); }, "default_collate", "empty");
}

// Stream of n examples (i, i), counting how many streams were opened and for which epoch.
class CountingStream : public IterableDataset<Example> {
 public:
  explicit CountingStream(std::int64_t n) : n_(n) {}
  ExampleStream<Example> stream(std::int64_t epoch) const override {
    last_epoch = epoch;
    return [this, i = std::int64_t{0}]() mutable -> std::optional<Example> {
      if (i == n_) return std::nullopt;
      const std::int64_t k = i++;
      return Example{from_vector<float>({static_cast<float>(k), -static_cast<float>(k)}), scalar_tensor(k)};
    };
  }
  mutable std::atomic<std::int64_t> last_epoch{-1};

 private:
  std::int64_t n_;
};

TEST(DataLoader, IterableDatasetBatchesTheStream) {
  auto dataset = std::make_shared<const CountingStream>(10);
  for (const std::int64_t workers : {0, 2}) {
    DataLoader loader(dataset, {.batch_size = 4, .num_workers = workers});
    EXPECT_EQ(run_epoch(loader), (std::vector<Indices>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));
    EXPECT_EQ(loader.epoch(), 1);
    EXPECT_EQ(run_epoch(loader).size(), 3u);
    EXPECT_EQ(dataset->last_epoch.load(), 1);
    DataLoader dropping(dataset, {.batch_size = 4, .drop_last = true, .num_workers = workers});
    EXPECT_EQ(run_epoch(dropping), (std::vector<Indices>{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  }
  // Resuming skips the examples of the batches handed out before.
  DataLoader loader(dataset, {.batch_size = 4, .num_workers = 1});
  auto it = loader.begin();
  (void)it;
  const StateDict state = loader.state_dict();
  DataLoader resumed(dataset, {.batch_size = 4});
  resumed.load_state_dict(state);
  EXPECT_EQ(run_epoch(resumed), (std::vector<Indices>{{4, 5, 6, 7}, {8, 9}}));
  expect_error<Error>([&] { (void)loader.size(); }, "DataLoader.size", "IterableDataset");
  expect_error<Error>([&] { DataLoader(dataset, {.shuffle = true}); }, "DataLoader", "IterableDataset");
}

}  // namespace
}  // namespace infini::data::data_loader_test
