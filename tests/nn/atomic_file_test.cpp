// write_file_atomically: the target holds either the old or the complete new contents, and
// no temporary file survives a failure.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>
#include <csignal>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

import infini.nn;

namespace infini::atomic_file_test {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<std::string> file_names(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  return names;
}

class AtomicFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("infini_atomic_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
};

TEST_F(AtomicFile, WritesTheContentsAndLeavesNoTemporaryFile) {
  const fs::path path = dir_ / "out.bin";
  std::uint64_t written = 0;
  io::write_file_atomically(path, [&](io::FileSink& out) {
    out.write("hello, ");
    const std::byte tail[] = {std::byte{'w'}, std::byte{'o'}, std::byte{'r'}, std::byte{'l'}, std::byte{'d'}};
    out.write(tail);
    out.write("");
    written = out.bytes_written();
  });
  EXPECT_EQ(written, 12u);
  EXPECT_EQ(read_text(path), "hello, world");
  EXPECT_EQ(file_names(dir_), std::vector<std::string>{"out.bin"});
}

TEST_F(AtomicFile, ReplacesAnExistingFile) {
  const fs::path path = dir_ / "out.bin";
  io::write_file_atomically(path, [](io::FileSink& out) { out.write(std::string(100000, 'a')); });
  io::write_file_atomically(path, [](io::FileSink& out) { out.write("new"); });
  EXPECT_EQ(read_text(path), "new");
  EXPECT_EQ(file_names(dir_), std::vector<std::string>{"out.bin"});
}

TEST_F(AtomicFile, AWriterThatThrowsLeavesTheOldFileAndNoTemporaryFile) {
  const fs::path path = dir_ / "out.bin";
  io::write_file_atomically(path, [](io::FileSink& out) { out.write("old contents"); });
  EXPECT_THROW(io::write_file_atomically(path,
                                         [](io::FileSink& out) {
                                           out.write("half of the new con");
                                           throw std::runtime_error("writer failed midway");
                                         }),
               std::runtime_error);
  EXPECT_EQ(read_text(path), "old contents");
  EXPECT_EQ(file_names(dir_), std::vector<std::string>{"out.bin"});

  // Without an old file, a failed write leaves nothing at all.
  const fs::path fresh = dir_ / "fresh.bin";
  EXPECT_THROW(io::write_file_atomically(fresh, [](io::FileSink&) { throw IOError("writer", "disk on fire"); }),
               IOError);
  EXPECT_FALSE(fs::exists(fresh));
  EXPECT_EQ(file_names(dir_), std::vector<std::string>{"out.bin"});
}

TEST_F(AtomicFile, NewFilesGetTheUsualPermissions) {
  const mode_t mask = ::umask(022);
  const fs::path path = dir_ / "out.bin";
  io::write_file_atomically(path, [](io::FileSink& out) { out.write("x"); });
  ::umask(mask);
  struct stat info {};
  ASSERT_EQ(::stat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0644u);
}

// Runs fn, expecting an IOError from write_file_atomically whose message contains `needle`.
template <class Fn>
void expect_io_error(Fn fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected an IOError containing '" << needle << "'";
  } catch (const IOError& e) {
    const std::string what = e.what();
    EXPECT_TRUE(what.starts_with("write_file_atomically: ")) << what;
    EXPECT_NE(what.find(needle), std::string::npos) << "'" << needle << "' not in: " << what;
  }
}

// A write that fails midway (here: the file size limit, after a partial write) raises
// IOError and leaves the old file.
TEST_F(AtomicFile, AFailedWriteLeavesTheOldFileAndNoTemporaryFile) {
  const fs::path path = dir_ / "out.bin";
  io::write_file_atomically(path, [](io::FileSink& out) { out.write("old contents"); });
  rlimit old_limit{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);  // EFBIG instead of the signal
  rlimit limit = old_limit;
  limit.rlim_cur = 1000;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limit), 0);
  std::string error;
  try {
    io::write_file_atomically(path, [](io::FileSink& out) { out.write(std::string(4000, 'x')); });
  } catch (const IOError& e) {
    error = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_TRUE(error.starts_with("write_file_atomically: writing to the temporary file '" + dir_.string() +
                                "/.out.bin.tmp-"))
      << error;
  EXPECT_TRUE(error.ends_with("' failed: File too large")) << error;
  EXPECT_EQ(read_text(path), "old contents");
  EXPECT_EQ(file_names(dir_), std::vector<std::string>{"out.bin"});
}

TEST_F(AtomicFile, ErrorsNameThePathAndTheSystemError) {
  const auto write_x = [](io::FileSink& out) { out.write("x"); };
  const fs::path missing_dir = dir_ / "missing" / "out.bin";
  expect_io_error([&] { io::write_file_atomically(missing_dir, write_x); },
                  "creating the temporary file '" + (dir_ / "missing").string() + "/.out.bin.tmp-");
  expect_io_error([&] { io::write_file_atomically(missing_dir, write_x); }, "' failed: No such file or directory");

  // rename() cannot replace a directory: the temporary file is removed again.
  const fs::path directory = dir_ / "sub";
  fs::create_directory(directory);
  expect_io_error([&] { io::write_file_atomically(directory, write_x); },
                  "renaming the temporary file to '" + directory.string() + "' failed: Is a directory");
  EXPECT_EQ(file_names(dir_), std::vector<std::string>{"sub"});
  EXPECT_TRUE(fs::is_empty(directory));

  expect_io_error([&] { io::write_file_atomically(dir_.string() + "/", write_x); }, "/' does not name a file");
}

}  // namespace
}  // namespace infini::atomic_file_test
