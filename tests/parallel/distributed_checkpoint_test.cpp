// Distributed checkpoints (parallel::save_distributed_checkpoint, DistributedCheckpoint):
// pieces saved under one split of the world are read back under another, element for element
// against closed forms; replicated tensors are written once; and a checkpoint whose shard is
// missing or truncated, or whose manifest disagrees with its shards, is refused with an error
// naming the file and the tensor. Runs in a world of 1, 2 and 4.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm_test_util.h"

import infini.parallel;

namespace infini::parallel::test::distributed_checkpoint_test {
namespace {

namespace fs = std::filesystem;

// The whole tensors: element i of "grid" (12 x 8) is i * 0.5, of "flat" (7 x 5) 1000 + i.
double grid_value(std::int64_t i) { return static_cast<double>(i) * 0.5; }
double flat_value(std::int64_t i) { return 1000.0 + static_cast<double>(i); }

Tensor whole_grid() {
  std::vector<double> v(96);
  for (std::int64_t i = 0; i < 96; ++i) v[static_cast<std::size_t>(i)] = grid_value(i);
  return from_vector(v, {12, 8}).to(kFloat32);
}
Tensor whole_flat() {
  std::vector<double> v(35);
  for (std::int64_t i = 0; i < 35; ++i) v[static_cast<std::size_t>(i)] = flat_value(i);
  return from_vector(v, {7, 5});
}

// Rank r's [begin, end) of n elements split over `ranks` unevenly (rank r takes its share
// from the end when `reversed`).
std::pair<std::int64_t, std::int64_t> flat_range(std::int64_t n, int r, int ranks, bool reversed) {
  const int k = reversed ? ranks - 1 - r : r;
  return {n * k / ranks + (k > 0 ? 1 : 0) * (k % 2), n * (k + 1) / ranks + (k + 1 < ranks ? 1 : 0) * ((k + 1) % 2)};
}

TEST(DistributedCheckpoint, PiecesSavedUnderOneSplitReadUnderAnother) {
  auto pg = world();
  const int r = pg->rank(), n = pg->size();
  const std::optional<fs::path> dir = shared_directory(*pg, "dcp_split");
  if (!dir) GTEST_SKIP() << "the ranks share no filesystem";
  // Saved: the grid split by rows as a column-parallel layer's q/k parts (4 and 8 rows), the
  // flat tensor as ZeRO pieces, a replicated step count and a replicated vector.
  const nn::ShardSpec rows{0, {4, 8}};
  const Tensor flat = whole_flat().reshape({-1});
  const auto [begin, end] = flat_range(35, r, n, false);
  const std::vector<ShardedTensor> saved = {
      tensor_parallel_shard("grid", rows.shard(whole_grid(), r, n).contiguous(), rows, r, n),
      flat_piece(replicated("flat", whole_flat()), "flat", flat.narrow(0, begin, end - begin), begin, end),
      replicated("step", full({}, 7, {.dtype = kInt64})),
      replicated("vector", from_vector(std::vector<double>{1, 2, 3}, {3}))};
  save_distributed_checkpoint(*dir, 5, saved, pg, {.metadata = {{"note", "test"}}});

  const DistributedCheckpoint checkpoint(*dir);
  EXPECT_EQ(checkpoint.step(), 5);
  EXPECT_EQ(checkpoint.world_size(), n);
  EXPECT_EQ(checkpoint.metadata().at("note"), "test");
  EXPECT_EQ(checkpoint.tensors().at("step").chunks.size(), 1u) << "a replicated tensor is written once";
  EXPECT_EQ(checkpoint.tensors().at("grid").chunks.size(), static_cast<std::size_t>(n == 1 ? 1 : 2 * n));
  EXPECT_EQ(checkpoint.files().size(), static_cast<std::size_t>(n));
  EXPECT_EQ(checkpoint.tensors().at("grid").shape, (Shape{12, 8}));

  // Read: the grid split by columns, whole, and a box of it; the flat tensor in the other
  // order of ranks; the replicated ones.
  const nn::ShardSpec columns{1, {8}};
  const auto [rbegin, rend] = flat_range(35, r, n, true);
  const std::vector<ShardedTensor> targets = {
      tensor_parallel_shard("grid", empty({12, 8 / n}), columns, r, n),
      replicated("grid", empty({12, 8})),
      flat_piece(replicated("flat", empty({7, 5})), "flat", empty({rend - rbegin}), rbegin, rend),
      replicated("step", empty({}, {.dtype = kInt64})),
      replicated("vector", empty({3}, {.dtype = kFloat64}))};
  const std::vector<Tensor> got = checkpoint.read(targets);
  ASSERT_EQ(got.size(), targets.size());
  EXPECT_EQ(got[0].dtype(), kFloat32);
  EXPECT_EQ(got[0].shape(), (Shape{12, 8 / n}));
  expect_values(got[0], [&](std::int64_t i) { return grid_value(i / (8 / n) * 8 + r * (8 / n) + i % (8 / n)); },
                "grid by columns");
  expect_values(got[1], grid_value, "grid whole");
  expect_values(got[2], [&](std::int64_t i) { return flat_value(rbegin + i); }, "flat, other ranks");
  expect_values(got[3], [](std::int64_t) { return 7.0; }, "step");
  expect_values(got[4], [](std::int64_t i) { return static_cast<double>(i + 1); }, "vector");
  const StateDict whole = checkpoint.read_whole("vec");
  ASSERT_EQ(whole.size(), 1u);
  expect_values(whole.at("tor"), [](std::int64_t i) { return static_cast<double>(i + 1); }, "read_whole");

  // A second save replaces the first: the new files only, the old ones removed.
  save_distributed_checkpoint(*dir, 6, saved, pg);
  const DistributedCheckpoint second(*dir);
  EXPECT_EQ(second.step(), 6);
  int shard_files = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(*dir))
    shard_files += entry.path().filename().string().starts_with("shard-") ? 1 : 0;
  EXPECT_EQ(shard_files, n);
  pg->barrier().wait();
  if (r == 0) fs::remove_all(*dir);
}

// An asynchronous save copies the state when it starts: the tensors change while its thread
// writes, and the checkpoint, published only by commit(), holds the values of the start.
TEST(DistributedCheckpoint, AsyncSaveWritesTheStateOfItsStart) {
  auto pg = world();
  const int r = pg->rank(), n = pg->size();
  const std::optional<fs::path> dir = shared_directory(*pg, "dcp_async");
  if (!dir) GTEST_SKIP() << "the ranks share no filesystem";
  const nn::ShardSpec rows{0, {12}};
  Tensor mine = rows.shard(whole_grid(), r, n).contiguous();
  AsyncCheckpointSave save(*dir, 4, {tensor_parallel_shard("grid", mine, rows, r, n)}, pg);
  mine.fill_(99.0);  // training goes on while the thread writes
  EXPECT_EQ(save.step(), 4);
  while (!save.written_everywhere()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_FALSE(is_distributed_checkpoint(*dir)) << "published before commit()";
  save.commit();
  const DistributedCheckpoint checkpoint(*dir);
  EXPECT_EQ(checkpoint.step(), 4);
  expect_values(checkpoint.read({replicated("grid", empty({12, 8}))})[0], grid_value, "the grid as it was");
  pg->barrier().wait();
  if (r == 0) fs::remove_all(*dir);
}

TEST(DistributedCheckpoint, RanksMustAgreeAndHoldEveryElement) {
  auto pg = world();
  const int r = pg->rank(), n = pg->size();
  const std::optional<fs::path> dir = shared_directory(*pg, "dcp_agree");
  if (!dir) GTEST_SKIP() << "the ranks share no filesystem";
  // Every rank holds rows [r, r + 1) of a tensor of n + 1 rows: the last row is nobody's.
  const ShardedTensor short_of_one{
      .key = "w", .local = zeros({1, 3}), .global_shape = {n + 1, 3},
      .chunks = {{.offsets = {r, 0}, .sizes = {1, 3}, .begin = 0, .end = 3}}};
  try {
    save_distributed_checkpoint(*dir, 1, {short_of_one}, pg);
    ADD_FAILURE() << "saved a tensor with a row no rank holds";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the ranks hold " + std::to_string(3 * n) + " elements of 'w'"),
              std::string::npos) << e.what();
  }
  if (n > 1) {  // another dtype on the last rank
    const ShardedTensor w = replicated("w", zeros({2}, {.dtype = r == n - 1 ? kFloat64 : kFloat32}));
    try {
      save_distributed_checkpoint(*dir, 1, {w}, pg);
      ADD_FAILURE() << "saved 'w' with two dtypes";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("'w' is float32 [2] on rank 0 but float64 [2] on rank " + std::to_string(n - 1)),
                std::string::npos) << e.what();
    }
  }
  EXPECT_FALSE(is_distributed_checkpoint(*dir)) << "a refused save writes no manifest";
  pg->barrier().wait();
  if (r == 0) fs::remove_all(*dir);
}

// One process's checkpoint of two tensors in `dir`, and its manifest as JSON.
nlohmann::json save_two(const fs::path& dir) {
  fs::remove_all(dir);
  save_distributed_checkpoint(dir, 3, {replicated("a", whole_grid()), replicated("b", whole_flat())}, nullptr);
  std::ifstream in(dir / "checkpoint.json");
  return nlohmann::json::parse(in);
}
void write_manifest(const fs::path& dir, const nlohmann::json& manifest) {
  std::ofstream(dir / "checkpoint.json") << manifest.dump();
}
// The message of the Error that reading "a" and "b" whole raises.
std::string read_error(const fs::path& dir) {
  try {
    const DistributedCheckpoint checkpoint(dir);
    checkpoint.read({replicated("a", empty({12, 8})), replicated("b", empty({7, 5}, {.dtype = kFloat64}))});
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// Each rank damages a checkpoint of its own (no process group: a world of one).
TEST(DistributedCheckpoint, DamagedCheckpointsAreRefusedNamingFileAndTensor) {
  const fs::path dir = fs::temp_directory_path() / concat("infini_dcp_damaged_", ::getpid());
  nlohmann::json manifest = save_two(dir);
  const std::string shard = manifest["files"][0]["name"].get<std::string>();
  const fs::path shard_path = dir / shard;
  EXPECT_EQ(read_error(dir), "no error");

  fs::remove(shard_path);
  EXPECT_EQ(read_error(dir), concat("DistributedCheckpoint.read: '", shard_path.string(),
                                    "': cannot read it (No such file or directory) (it holds 'a')"));

  manifest = save_two(dir);
  fs::resize_file(dir / shard, fs::file_size(dir / shard) - 10);
  const std::uintmax_t bytes = manifest["files"][0]["bytes"].get<std::uintmax_t>();
  EXPECT_EQ(read_error(dir), concat("DistributedCheckpoint.read: '", (dir / shard).string(), "' has ", bytes - 10,
                                    " bytes; the manifest says ", bytes, " (it holds 'a')"));

  manifest = save_two(dir);  // the manifest names a tensor the shard lacks
  manifest["tensors"]["b"]["chunks"][0]["name"] = "c#9";
  write_manifest(dir, manifest);
  EXPECT_EQ(read_error(dir), concat("DistributedCheckpoint.read: '", (dir / shard).string(),
                                    "' has no tensor 'c#9', which the manifest names for 'b'"));

  manifest = save_two(dir);  // another dtype in the manifest than in the shard
  manifest["tensors"]["a"]["dtype"] = "float64";
  write_manifest(dir, manifest);
  EXPECT_EQ(read_error(dir), concat("DistributedCheckpoint.read: '", (dir / shard).string(),
                                    "': tensor 'a#0' is float32 [96]; the manifest says float64 of 96 elements for 'a'"));

  manifest = save_two(dir);  // a chunk that covers less than its tensor
  manifest["tensors"]["b"]["chunks"][0]["end"] = 30;
  write_manifest(dir, manifest);
  EXPECT_EQ(read_error(dir), concat("DistributedCheckpoint: '", (dir / "checkpoint.json").string(),
                                    "': tensor 'b': its chunks hold 30 elements of 35"));

  manifest = save_two(dir);  // a chunk outside its tensor
  manifest["tensors"]["a"]["chunks"][0]["offsets"] = {1, 0};
  write_manifest(dir, manifest);
  EXPECT_EQ(read_error(dir), concat("DistributedCheckpoint: '", (dir / "checkpoint.json").string(),
                                    "': tensor 'a': a chunk at offsets [1, 0] of sizes [12, 8] outside shape [12, 8]"));

  manifest = save_two(dir);  // a shape the reader does not expect
  try {
    DistributedCheckpoint(dir).read({replicated("a", empty({8, 12}))});
    ADD_FAILURE() << "read 'a' as [8, 12]";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), concat("DistributedCheckpoint.read: 'a' is [12, 8] in '", dir.string(),
                                            "'; this run's is [8, 12]"));
  }
  try {
    DistributedCheckpoint(dir).read({replicated("c", empty({1}))});
    ADD_FAILURE() << "read 'c'";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), concat("DistributedCheckpoint.read: '", dir.string(), "' has no tensor 'c'"));
  }

  fs::remove(dir / "checkpoint.json");
  try {
    DistributedCheckpoint checkpoint(dir);
    ADD_FAILURE() << "opened a directory without a manifest";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("not a distributed checkpoint, or not complete"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace infini::parallel::test::distributed_checkpoint_test
