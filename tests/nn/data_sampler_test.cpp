// Samplers and random_permutation against orders written out by hand or rebuilt here from
// PyTorch's DistributedSampler algorithm (permute, pad by wrapping, take rank::num_replicas).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

import infini.nn;

#include "data_test_util.h"

namespace infini::data::data_sampler_test {
namespace {

using Indices = std::vector<std::int64_t>;

using test::expect_error;

// Fisher-Yates from the last position down, partner j = floor(r * (i + 1) / 2^64) with r
// the first two Philox words of counter i, stream epoch.
Indices reference_permutation(std::int64_t n, std::uint64_t seed, std::int64_t epoch) {
  Indices order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  for (std::int64_t i = n - 1; i >= 1; --i) {
    const auto w = philox4x32(seed, static_cast<std::uint64_t>(i), static_cast<std::uint64_t>(epoch));
    const std::uint64_t r = (std::uint64_t{w[0]} << 32) | w[1];
    const auto j = static_cast<std::int64_t>((static_cast<unsigned __int128>(r) * static_cast<std::uint64_t>(i + 1)) >> 64);
    std::swap(order[i], order[j]);
  }
  return order;
}

// torch.utils.data.DistributedSampler.__iter__ written out.
Indices reference_distributed(const Indices& order, std::int64_t replicas, std::int64_t rank, bool drop_last) {
  const auto n = static_cast<std::int64_t>(order.size());
  const std::int64_t num_samples =
      (drop_last && n % replicas != 0) ? (n - replicas + replicas - 1) / replicas : (n + replicas - 1) / replicas;
  const std::int64_t total = std::max<std::int64_t>(num_samples, 0) * replicas;
  Indices padded = order;
  if (!drop_last) {
    while (static_cast<std::int64_t>(padded.size()) < total) padded.insert(padded.end(), order.begin(), order.end());
  }
  padded.resize(static_cast<std::size_t>(total));
  Indices mine;
  for (std::int64_t k = rank; k < total; k += replicas) mine.push_back(padded[k]);
  return mine;
}

TEST(DataSampler, RandomPermutationIsPhiloxFisherYates) {
  for (std::int64_t n : {0, 1, 2, 7, 100}) {
    for (std::int64_t epoch : {0, 3}) EXPECT_EQ(random_permutation(n, 42, epoch), reference_permutation(n, 42, epoch));
  }
  const Indices a = random_permutation(1000, 1, 0);
  Indices sorted = a;
  std::sort(sorted.begin(), sorted.end());
  Indices iota(1000);
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_EQ(sorted, iota);
  EXPECT_NE(a, random_permutation(1000, 1, 1));  // another epoch
  EXPECT_NE(a, random_permutation(1000, 2, 0));  // another seed
  expect_error<ShapeError>([] { random_permutation(-1, 0, 0); }, "random_permutation", "-1");
  expect_error<IndexError>([] { random_permutation(3, 0, -2); }, "random_permutation", "-2");
}

TEST(DataSampler, SequentialAndRandom) {
  EXPECT_EQ(SequentialSampler(4).indices(5), (Indices{0, 1, 2, 3}));
  EXPECT_EQ(SequentialSampler(4).size(), 4);
  EXPECT_EQ(RandomSampler(9, 11).indices(2), reference_permutation(9, 11, 2));
  EXPECT_EQ(RandomSampler(9, 11).size(), 9);
  expect_error<ShapeError>([] { SequentialSampler(-1); }, "SequentialSampler", "-1");
  expect_error<ShapeError>([] { RandomSampler(-3, 0); }, "RandomSampler", "-3");
  expect_error<IndexError>([] { RandomSampler(3, 0).indices(-1); }, "RandomSampler.indices", "-1");
  expect_error<IndexError>([] { SequentialSampler(3).indices(-1); }, "SequentialSampler.indices", "-1");
}

TEST(DataSampler, DistributedPadsByWrapping) {
  // 10 samples over 3 ranks: 4 each; the order 0..9 is padded with 0, 1.
  const std::array<Indices, 3> expected = {Indices{0, 3, 6, 9}, Indices{1, 4, 7, 0}, Indices{2, 5, 8, 1}};
  for (std::int64_t rank = 0; rank < 3; ++rank) {
    DistributedSampler sampler(10, 3, rank, /*shuffle=*/false);
    EXPECT_EQ(sampler.size(), 4);
    EXPECT_EQ(sampler.indices(0), expected[rank]);
  }
  // Padding longer than the data: 2 samples over 5 ranks -> 0 1 0 1 0.
  for (std::int64_t rank = 0; rank < 5; ++rank)
    EXPECT_EQ(DistributedSampler(2, 5, rank, false).indices(0), (Indices{rank % 2}));
}

TEST(DataSampler, DistributedDropLastCuts) {
  const std::array<Indices, 3> expected = {Indices{0, 3, 6}, Indices{1, 4, 7}, Indices{2, 5, 8}};
  for (std::int64_t rank = 0; rank < 3; ++rank) {
    DistributedSampler sampler(10, 3, rank, false, 0, /*drop_last=*/true);
    EXPECT_EQ(sampler.size(), 3);
    EXPECT_EQ(sampler.indices(0), expected[rank]);
  }
  EXPECT_EQ(DistributedSampler(2, 5, 4, false, 0, true).size(), 0);
  EXPECT_TRUE(DistributedSampler(0, 2, 1).indices(0).empty());
}

TEST(DataSampler, DistributedShufflePartitionsEveryEpoch) {
  for (const bool drop_last : {false, true}) {
    for (const std::int64_t n : {1, 10, 17, 64}) {
      for (const std::int64_t replicas : {1, 3, 4}) {
        for (const std::int64_t epoch : {0, 1}) {
          const Indices order = reference_permutation(n, 5, epoch);
          std::vector<std::int64_t> seen(static_cast<std::size_t>(n), 0);
          std::int64_t count = -1;
          for (std::int64_t rank = 0; rank < replicas; ++rank) {
            DistributedSampler sampler(n, replicas, rank, true, 5, drop_last);
            const Indices mine = sampler.indices(epoch);
            EXPECT_EQ(mine, reference_distributed(order, replicas, rank, drop_last))
                << "n " << n << " replicas " << replicas << " rank " << rank << " epoch " << epoch;
            if (count < 0) count = static_cast<std::int64_t>(mine.size());
            EXPECT_EQ(static_cast<std::int64_t>(mine.size()), count);  // equal counts
            for (std::int64_t i : mine) ++seen[i];
          }
          const std::int64_t covered = std::count_if(seen.begin(), seen.end(), [](std::int64_t c) { return c > 0; });
          if (drop_last) {
            EXPECT_EQ(covered, (n / replicas) * replicas);  // no duplicates, the tail dropped
          } else {
            EXPECT_EQ(covered, n);  // every index; duplicates only from padding
            EXPECT_EQ(count * replicas - n, (replicas - n % replicas) % replicas);
          }
        }
      }
    }
  }
}

TEST(DataSampler, DistributedSetEpoch) {
  DistributedSampler sampler(20, 2, 1, true, 9);
  EXPECT_EQ(sampler.epoch(), 0);
  const Indices first = sampler.indices();
  sampler.set_epoch(3);
  EXPECT_EQ(sampler.epoch(), 3);
  EXPECT_EQ(sampler.indices(), sampler.indices(3));
  EXPECT_NE(sampler.indices(), first);
  EXPECT_EQ(sampler.indices(), reference_distributed(reference_permutation(20, 9, 3), 2, 1, false));
}

TEST(DataSampler, DistributedErrors) {
  expect_error<IndexError>([] { DistributedSampler(10, 2, 2); }, "DistributedSampler", "rank 2");
  expect_error<IndexError>([] { DistributedSampler(10, 2, -1); }, "DistributedSampler", "rank -1");
  expect_error<Error>([] { DistributedSampler(10, 0, 0); }, "DistributedSampler", "num_replicas");
  expect_error<ShapeError>([] { DistributedSampler(-4, 2, 0); }, "DistributedSampler", "-4");
  expect_error<IndexError>([] { DistributedSampler(4, 2, 0).set_epoch(-1); }, "DistributedSampler.set_epoch", "-1");
  expect_error<IndexError>([] { DistributedSampler(4, 2, 0).indices(-1); }, "DistributedSampler.indices", "-1");
}

}  // namespace
}  // namespace infini::data::data_sampler_test
