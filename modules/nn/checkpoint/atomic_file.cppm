// Atomic file replacement. The new contents go to a temporary file in the target's
// directory, which is fsynced and renamed over the target; then the directory is fsynced.
// A reader (or a restart after a crash) sees either the old file or the complete new one,
// never a partial write. On any error the temporary file is removed and the target is left
// as it was.
//
//   io::write_file_atomically("ckpt/model.safetensors", [&](io::FileSink& out) {
//     out.write(header);
//     out.write(std::as_bytes(std::span(data)));
//   });
export module infini.nn:atomic_file;
import infini.std;
import infini.tensor;

export namespace infini::io {

class FileSink;

// Runs write_contents on a sink backed by a new temporary file next to `path`, then makes
// that file `path` (fsync, rename, fsync of the directory). An exception from
// write_contents is rethrown unchanged after the temporary file was removed. IOError
// ("write_file_atomically: ...", naming the path and the system's error text) when a
// system call fails. The new file gets mode 0666 minus the umask, like a newly created file.
void write_file_atomically(const std::filesystem::path& path, const std::function<void(FileSink&)>& write_contents);

// The temporary file that write_file_atomically hands to its writer: appends bytes.
class FileSink {
 public:
  FileSink(const FileSink&) = delete;
  FileSink& operator=(const FileSink&) = delete;

  // Appends all of `bytes` (retrying partial and interrupted writes); IOError on failure.
  void write(std::span<const std::byte> bytes);
  void write(std::string_view text) { write(std::as_bytes(std::span(text.data(), text.size()))); }
  std::uint64_t bytes_written() const noexcept { return bytes_written_; }

 private:
  friend void write_file_atomically(const std::filesystem::path&, const std::function<void(FileSink&)>&);
  FileSink(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}

  int fd_;
  std::string path_;  // of the temporary file, for error messages
  std::uint64_t bytes_written_ = 0;
};

}  // namespace infini::io
