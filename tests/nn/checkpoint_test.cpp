// Training checkpoints: the directory layout and manifest written, round trips, resuming a
// run bit for bit, the old checkpoint surviving a failed save, and each invalid directory
// the reader rejects.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>
#include <unistd.h>

#include "data_test_util.h"
#include "tiny_training_run.h"

import infini.nn;

namespace infini::checkpoint_test {
namespace {

namespace fs = std::filesystem;
using data::test::expect_error;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::set<std::string> file_names(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.insert(entry.path().filename().string());
  return names;
}

// Same keys, dtypes, shapes and bytes.
void expect_same_state(const StateDict& a, const StateDict& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [key, x] : a) {
    ASSERT_TRUE(b.contains(key)) << key;
    const Tensor y = b.at(key).contiguous();
    ASSERT_EQ(x.dtype(), y.dtype()) << key;
    ASSERT_EQ(x.shape(), y.shape()) << key;
    const Tensor xc = x.contiguous();
    EXPECT_EQ(std::memcmp(xc.data_ptr(), y.data_ptr(), static_cast<std::size_t>(x.nbytes())), 0) << key;
  }
}

Tensor int_scalar(std::int64_t value) { return full({}, value, {.dtype = kInt64}); }

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("infini_checkpoint_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A checkpoint with two parts of different dtypes and one empty part.
  static io::Checkpoint sample() {
    io::Checkpoint checkpoint;
    checkpoint.step = 42;
    checkpoint.parts["model"] = {{"fc.weight", arange(0, 6, 1, {.dtype = kFloat32}).reshape({2, 3})},
                                 {"fc.bias", full({2}, -0.5, {.dtype = kFloat64})}};
    checkpoint.parts["loader"] = {{"epoch", int_scalar(3)}, {"position", int_scalar(7)}};
    checkpoint.parts["empty"] = {};
    checkpoint.metadata = {{"model", "d12"}, {"note", "quote \" and \xc3\xa9"}};
    return checkpoint;
  }

  fs::path dir_;
};

TEST_F(CheckpointTest, WritesAManifestAndOneTensorsFile) {
  io::save_checkpoint(dir_, sample());
  EXPECT_EQ(file_names(dir_), (std::set<std::string>{"manifest.json", "state-42-0.safetensors"}));
  const std::string manifest = read_text(dir_ / "manifest.json");
  const std::uintmax_t bytes = fs::file_size(dir_ / "state-42-0.safetensors");
  EXPECT_EQ(manifest, "{\n"
                      "  \"format\": \"infini.checkpoint\",\n"
                      "  \"version\": 1,\n"
                      "  \"step\": 42,\n"
                      "  \"tensors\": \"state-42-0.safetensors\",\n"
                      "  \"tensors_bytes\": " + std::to_string(bytes) + ",\n"
                      "  \"parts\": [\n    \"empty\",\n    \"loader\",\n    \"model\"\n  ],\n"
                      "  \"metadata\": {\n    \"model\": \"d12\",\n    \"note\": \"quote \\\" and \xc3\xa9\"\n  }\n"
                      "}\n");
  // The tensors file is plain safetensors with "<part>/<key>" names.
  const io::SafetensorsFile file = io::load_safetensors(dir_ / "state-42-0.safetensors");
  std::vector<std::string> names;
  for (const auto& [name, tensor] : file.tensors) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"loader/epoch", "loader/position", "model/fc.bias", "model/fc.weight"}));
  EXPECT_EQ(file.tensors.at("model/fc.weight").select(0, 1).select(0, 2).item<double>(), 5.0);
}

TEST_F(CheckpointTest, RoundTripsEveryPartStepAndMetadata) {
  const io::Checkpoint saved = sample();
  io::save_checkpoint(dir_, saved);
  const io::Checkpoint loaded = io::load_checkpoint(dir_);
  EXPECT_EQ(loaded.step, 42);
  EXPECT_EQ(loaded.metadata, saved.metadata);
  ASSERT_EQ(loaded.parts.size(), 3u);
  for (const auto& [part, state] : saved.parts) expect_same_state(loaded.parts.at(part), state);
  EXPECT_TRUE(loaded.parts.at("empty").empty());
}

TEST_F(CheckpointTest, ANewSaveReplacesTheOldOneAndRemovesItsTensors) {
  io::Checkpoint checkpoint = sample();
  io::save_checkpoint(dir_, checkpoint);
  checkpoint.step = 43;
  checkpoint.parts["loader"]["position"] = int_scalar(8);
  io::save_checkpoint(dir_, checkpoint);
  EXPECT_EQ(file_names(dir_), (std::set<std::string>{"manifest.json", "state-43-0.safetensors"}));
  EXPECT_EQ(io::load_checkpoint(dir_).parts.at("loader").at("position").item<std::int64_t>(), 8);
  // Saving the same step again never overwrites the file the current manifest names.
  checkpoint.parts["loader"]["position"] = int_scalar(9);
  io::save_checkpoint(dir_, checkpoint);
  EXPECT_EQ(file_names(dir_), (std::set<std::string>{"manifest.json", "state-43-1.safetensors"}));
  EXPECT_EQ(io::load_checkpoint(dir_).parts.at("loader").at("position").item<std::int64_t>(), 9);
}

TEST_F(CheckpointTest, AFailedSaveLeavesTheOldCheckpoint) {
  io::save_checkpoint(dir_, sample());
  io::Checkpoint bad = sample();
  bad.step = 50;
  bad.metadata["note"] = "\xff not UTF-8";
  expect_error<IOError>([&] { io::save_checkpoint(dir_, bad); }, "save_checkpoint", "not valid UTF-8");
  EXPECT_EQ(file_names(dir_), (std::set<std::string>{"manifest.json", "state-42-0.safetensors"}));
  EXPECT_EQ(io::load_checkpoint(dir_).step, 42);
}

TEST_F(CheckpointTest, RejectsBadPartNames) {
  io::Checkpoint checkpoint = sample();
  checkpoint.parts["a/b"] = {};
  expect_error<Error>([&] { io::save_checkpoint(dir_, checkpoint); }, "save_checkpoint", "'a/b' must be non-empty");
  io::TrainingState state;
  Generator generator(1);
  state.add_generator("rng", generator);
  expect_error<Error>([&] { state.add_generator("rng", generator); }, "TrainingState.add", "'rng' is already registered");
  expect_error<Error>([&] { state.add_generator("", generator); }, "TrainingState.add", "must be non-empty");
}

TEST_F(CheckpointTest, GeneratorStateRoundTrips) {
  Generator generator(99);
  (void)rand({5}, {}, &generator);
  const StateDict state = io::generator_state_dict(generator);
  EXPECT_EQ(state.at("seed").item<std::int64_t>(), 99);
  EXPECT_GT(state.at("offset").item<std::int64_t>(), 0);
  const Tensor expected = rand({4}, {}, &generator);
  Generator other(7);
  io::load_generator_state_dict(other, state);
  const Tensor again = rand({4}, {}, &other);
  for (std::int64_t i = 0; i < 4; ++i) EXPECT_EQ(again.select(0, i).item<double>(), expected.select(0, i).item<double>());
  expect_error<Error>([&] { io::load_generator_state_dict(other, {{"seed", int_scalar(1)}}); },
                      "load_generator_state_dict", "offset");
}

// 6 steps, checkpoint, 8 more steps; a second run built with another initialisation seed
// that loads the checkpoint makes the same 8 steps bit for bit and ends in the same state.
TEST_F(CheckpointTest, ResumingATrainingRunIsBitIdentical) {
  test::TinyTrainingRun run(1);
  run.train(6);
  io::save_checkpoint(dir_, run.state());
  const std::vector<double> expected_losses = run.train(8);
  const io::Checkpoint expected_end = run.state().capture();
  EXPECT_EQ(expected_end.step, 14);

  test::TinyTrainingRun resumed(2);
  (void)rand({3});  // move the default generator away from where the checkpoint has it
  io::load_checkpoint(dir_, resumed.state());
  EXPECT_EQ(resumed.state().step, 6);
  EXPECT_EQ(resumed.train(8), expected_losses);
  const io::Checkpoint end = resumed.state().capture();
  ASSERT_EQ(end.parts.size(), 6u);
  for (const auto& [part, state] : expected_end.parts) {
    SCOPED_TRACE(part);
    expect_same_state(end.parts.at(part), state);
  }
}

TEST_F(CheckpointTest, RestoreRequiresExactlyTheRegisteredParts) {
  test::TinyTrainingRun run(1);
  io::Checkpoint checkpoint = run.state().capture();
  checkpoint.parts.erase("scaler");
  checkpoint.parts["ema"] = {};
  const StateDict before = run.model()->state_dict();
  expect_error<Error>([&] { run.state().restore(checkpoint); }, "TrainingState.restore",
                      {"missing 'scaler'", "not registered 'ema'"});
  expect_same_state(run.model()->state_dict(), before);  // nothing was loaded
}

// Each way a checkpoint directory can be broken, with the words the error must contain.
class InvalidCheckpoint : public CheckpointTest {
 protected:
  void SetUp() override {
    CheckpointTest::SetUp();
    io::save_checkpoint(dir_, sample());
    manifest_ = read_text(dir_ / "manifest.json");
  }
  void replace_in_manifest(const std::string& from, const std::string& to) {
    const std::size_t at = manifest_.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    write_text(dir_ / "manifest.json", manifest_.replace(at, from.size(), to));
  }
  void expect_rejected(const std::vector<std::string>& parts) {
    expect_error<IOError>([&] { (void)io::load_checkpoint(dir_); }, "load_checkpoint", parts);
  }

  std::string manifest_;
};

TEST_F(InvalidCheckpoint, NoManifest) {
  fs::remove(dir_ / "manifest.json");
  expect_rejected({(dir_ / "manifest.json").string(), "no such file"});
}

TEST_F(InvalidCheckpoint, ManifestNotJson) {
  write_text(dir_ / "manifest.json", manifest_.substr(0, manifest_.size() / 2));
  expect_rejected({"is not valid JSON"});
}

TEST_F(InvalidCheckpoint, ManifestNotAnObject) {
  write_text(dir_ / "manifest.json", "[1, 2]");
  expect_rejected({"must hold a JSON object"});
}

TEST_F(InvalidCheckpoint, WrongFormat) {
  replace_in_manifest("infini.checkpoint", "something.else");
  expect_rejected({"\"format\" must be \"infini.checkpoint\", got \"something.else\""});
}

TEST_F(InvalidCheckpoint, UnknownVersion) {
  replace_in_manifest("\"version\": 1", "\"version\": 2");
  expect_rejected({"\"version\" 2 is not supported"});
}

TEST_F(InvalidCheckpoint, MissingField) {
  replace_in_manifest("\"step\": 42,", "");
  expect_rejected({"has no \"step\""});
}

TEST_F(InvalidCheckpoint, StepNotAnInteger) {
  replace_in_manifest("\"step\": 42", "\"step\": 4.5");
  expect_rejected({"\"step\" must be an integer, got 4.5"});
}

TEST_F(InvalidCheckpoint, TensorsOutsideTheDirectory) {
  replace_in_manifest("\"state-42-0.safetensors\"", "\"../state-42-0.safetensors\"");
  expect_rejected({"must name a state-*.safetensors file in the same directory"});
}

TEST_F(InvalidCheckpoint, TensorsFileMissing) {
  fs::remove(dir_ / "state-42-0.safetensors");
  expect_rejected({"state-42-0.safetensors (named by the manifest)"});
}

TEST_F(InvalidCheckpoint, TensorsFileTruncated) {
  const fs::path tensors = dir_ / "state-42-0.safetensors";
  const std::uintmax_t size = fs::file_size(tensors);
  fs::resize_file(tensors, size - 1);
  expect_rejected({"has " + std::to_string(size - 1) + " bytes, the manifest says " + std::to_string(size)});
}

TEST_F(InvalidCheckpoint, TensorsFileCorrupt) {
  const fs::path tensors = dir_ / "state-42-0.safetensors";
  std::string bytes = read_text(tensors);
  bytes[8] = '#';  // the header's opening brace
  write_text(tensors, bytes);
  expect_error<IOError>([&] { (void)io::load_checkpoint(dir_); }, "load_safetensors", "state-42-0.safetensors");
}

TEST_F(InvalidCheckpoint, TensorOfAnUnlistedPart) {
  replace_in_manifest("    \"loader\",\n", "");
  expect_rejected({"tensor 'loader/epoch' belongs to no part the manifest lists"});
}

TEST_F(InvalidCheckpoint, PartListedTwice) {
  replace_in_manifest("\"empty\",", "\"empty\", \"empty\",");
  expect_rejected({"part 'empty' is listed twice"});
}

TEST_F(InvalidCheckpoint, BadPartName) {
  replace_in_manifest("\"empty\",", "\"a/b\",");
  expect_rejected({"invalid part name 'a/b'"});
}

TEST_F(InvalidCheckpoint, MetadataNotAString) {
  replace_in_manifest("\"d12\"", "12");
  expect_rejected({"metadata 'model' must be a string, got 12"});
}

TEST_F(InvalidCheckpoint, HugeManifest) {
  write_text(dir_ / "manifest.json", std::string(17u << 20, ' '));
  expect_rejected({"more than a manifest can be"});
}

}  // namespace
}  // namespace infini::checkpoint_test
