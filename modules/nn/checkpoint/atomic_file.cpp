// write_file_atomically with POSIX calls: open(O_EXCL) a temporary file next to the target,
// write, fsync, close, rename over the target, fsync the directory.
module;
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fcntl.h>
#include <unistd.h>
module infini.nn;
import infini.std;

namespace infini::io {
namespace {

constexpr std::string_view kOp = "write_file_atomically";

// IOError "write_file_atomically: <action> '<path>' failed: <system error text>".
[[noreturn]] void fail(std::string_view action, const std::string& path, int error) {
  throw IOError(kOp, concat(action, " '", path, "' failed: ", std::generic_category().message(error)));
}

// A new file ".<target name>.tmp-<pid>-<n>" in the target's directory, created with O_EXCL
// (never an existing file). Closed and removed on destruction unless release()d.
class TemporaryFile {
 public:
  explicit TemporaryFile(const std::filesystem::path& target) {
    static std::atomic<std::uint64_t> counter{0};
    const std::string prefix = "." + target.filename().string() + ".tmp-" + std::to_string(::getpid()) + "-";
    for (int attempt = 0;; ++attempt) {
      path_ = (target.parent_path() / (prefix + std::to_string(counter++))).string();
      fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd_ >= 0) return;
      if (errno != EEXIST || attempt == 99) fail("creating the temporary file", path_, errno);
    }
  }
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;
  ~TemporaryFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!released_) ::unlink(path_.c_str());
  }

  int fd() const noexcept { return fd_; }
  const std::string& path() const noexcept { return path_; }

  void sync_and_close() {
    if (::fsync(fd_) != 0) fail("fsync of the temporary file", path_, errno);
    // Linux releases the descriptor even when close fails, so it is never closed twice.
    if (::close(std::exchange(fd_, -1)) != 0) fail("closing the temporary file", path_, errno);
  }
  // The file now has another name: nothing to remove.
  void release() noexcept { released_ = true; }

 private:
  std::string path_;
  int fd_ = -1;
  bool released_ = false;
};

// Makes a rename in `dir` durable. File systems that cannot sync a directory (some FUSE and
// network mounts) answer EINVAL; the rename itself has happened there, so that is accepted.
void sync_directory(const std::filesystem::path& dir) {
  const std::string path = dir.empty() ? std::string(".") : dir.string();
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail("opening the directory", path, errno);
  const int result = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (result != 0 && error != EINVAL) fail("fsync of the directory", path, error);
}

}  // namespace

void FileSink::write(std::span<const std::byte> bytes) {
  while (!bytes.empty()) {
    const ssize_t written = ::write(fd_, bytes.data(), bytes.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      fail("writing to the temporary file", path_, errno);
    }
    bytes = bytes.subspan(static_cast<std::size_t>(written));
    bytes_written_ += static_cast<std::uint64_t>(written);
  }
}

void write_file_atomically(const std::filesystem::path& path, const std::function<void(FileSink&)>& write_contents) {
  if (!path.has_filename()) throw IOError(kOp, concat("'", path.string(), "' does not name a file"));
  TemporaryFile temporary(path);
  FileSink sink(temporary.fd(), temporary.path());
  write_contents(sink);
  temporary.sync_and_close();
  if (::rename(temporary.path().c_str(), path.c_str()) != 0) {
    const int error = errno;
    fail("renaming the temporary file to", path.string(), error);
  }
  temporary.release();
  sync_directory(path.parent_path());
}

}  // namespace infini::io
