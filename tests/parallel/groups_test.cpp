// Subgroups (new_group, split) and the dp x tp x pp layout with its groups.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "comm_test_util.h"

import infini.parallel;

namespace infini::parallel::test::groups_test {
namespace {

TEST(Groups, NewGroupOfEvenRanks) {
  auto pg = world();
  const int r = pg->rank(), n = pg->size();
  std::vector<int> evens;
  for (int q = 0; q < n; q += 2) evens.push_back(q);
  auto group = pg->new_group(evens, "evens");
  if (r % 2 == 1) {
    EXPECT_EQ(group, nullptr);
    return;
  }
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(group->size(), static_cast<int>(evens.size()));
  EXPECT_EQ(group->rank(), r / 2);
  EXPECT_EQ(group->world_ranks(), evens);
  Tensor t = full({3}, static_cast<double>(r), TensorOptions{.dtype = kInt64});
  group->all_reduce(t).wait();
  double sum = 0;
  for (int q : evens) sum += q;
  expect_values(t, [&](std::int64_t) { return sum; }, "all_reduce over the even ranks");
  // Ranks are group ranks: broadcast from the group's last rank.
  Tensor b = full({2}, static_cast<double>(r), TensorOptions{.dtype = kInt32});
  group->broadcast(b, group->size() - 1).wait();
  expect_values(b, [&](std::int64_t) { return evens.back(); }, "broadcast in the subgroup");
}

TEST(Groups, NewGroupInReverseOrderAndBadRanks) {
  auto pg = world();
  const int n = pg->size();
  std::vector<int> reversed;
  for (int q = n - 1; q >= 0; --q) reversed.push_back(q);
  auto group = pg->new_group(reversed);
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(group->rank(), n - 1 - pg->rank());
  EXPECT_EQ(group->world_ranks(), reversed);
  EXPECT_THROW(pg->new_group({0, n}), IndexError);
  EXPECT_THROW(pg->new_group({0, 0}), Error);
}

TEST(Layout, CoordinatesInMegatronOrder) {
  const Layout layout(8, /*tp=*/2, /*pp=*/2);
  EXPECT_EQ(layout.dp(), 2);
  EXPECT_EQ(layout.str(), "DP=2 TP=2 PP=2");
  // rank = tp + TP * (dp + DP * pp)
  for (int rank = 0; rank < 8; ++rank) {
    const LayoutCoord c = layout.coord_of(rank);
    EXPECT_EQ(c.tp, rank % 2);
    EXPECT_EQ(c.dp, rank / 2 % 2);
    EXPECT_EQ(c.pp, rank / 4);
    EXPECT_EQ(layout.rank_of(c), rank);
  }
  EXPECT_EQ(Layout(12, 3, 1, 2).str(), "DP=4 TP=3 PP=1 VPP=2");
}

TEST(Layout, ErrorsNameTheSizes) {
  try {
    Layout(6, 4, 1);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "Layout: a world of 6 ranks does not split into tp=4 x pp=1 (4 ranks per data-parallel replica)");
  }
  EXPECT_THROW(Layout(4, 0), Error);
  EXPECT_THROW(Layout(4, 2).coord_of(4), IndexError);
  EXPECT_THROW(Layout(4, 2).rank_of({.dp = 2}), IndexError);
}

TEST(Layout, GroupsPerDimension) {
  auto pg = world();
  const int n = pg->size();
  const int tp = n % 2 == 0 ? 2 : 1;
  const Layout layout(n, tp);
  const ParallelGroups groups = make_parallel_groups(layout, pg);
  EXPECT_EQ(groups.coord, layout.coord_of(pg->rank()));
  EXPECT_EQ(groups.tp->size(), tp);
  EXPECT_EQ(groups.dp->size(), n / tp);
  EXPECT_EQ(groups.pp->size(), 1);
  EXPECT_EQ(groups.tp->rank(), groups.coord.tp);
  EXPECT_EQ(groups.dp->rank(), groups.coord.dp);
  // The sum of world ranks over each group is a closed form of the coordinates.
  Tensor in_tp = full({1}, static_cast<double>(pg->rank()), TensorOptions{.dtype = kInt64});
  Tensor in_dp = in_tp.clone();
  groups.tp->all_reduce(in_tp).wait();
  groups.dp->all_reduce(in_dp).wait();
  double tp_sum = 0, dp_sum = 0;
  for (int t = 0; t < tp; ++t) tp_sum += layout.rank_of({.dp = groups.coord.dp, .tp = t});
  for (int d = 0; d < layout.dp(); ++d) dp_sum += layout.rank_of({.dp = d, .tp = groups.coord.tp});
  expect_values(in_tp, [&](std::int64_t) { return tp_sum; }, "tp group sum");
  expect_values(in_dp, [&](std::int64_t) { return dp_sum; }, "dp group sum");
  EXPECT_EQ(groups.tp->name(), concat("tp[", groups.coord.dp, "]"));
}

}  // namespace
}  // namespace infini::parallel::test::groups_test
