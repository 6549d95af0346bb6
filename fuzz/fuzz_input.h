// Shared by the fuzz targets whose readers take paths: the input's bytes become files in a
// private temporary directory, removed when the process exits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

namespace infini_fuzz {

class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "infini-fuzz-XXXXXX").string();
    if (!mkdtemp(pattern.data())) std::abort();
    dir_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return dir_; }

  // Writes `bytes` to <dir>/<name> (replacing it) and returns that path.
  std::filesystem::path write(const std::string& name, std::span<const std::uint8_t> bytes) const {
    const std::filesystem::path file = dir_ / name;
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out) std::abort();
    return file;
  }

 private:
  std::filesystem::path dir_;
};

// Splits an input into `count` pieces: each but the last is a 4-byte little-endian length and
// that many bytes (cut short at the end of the input), the last is the rest. The seed corpora
// are written in this form (fuzz/make_corpus.py).
inline std::vector<std::span<const std::uint8_t>> split(const std::uint8_t* data, std::size_t size, int count) {
  std::vector<std::span<const std::uint8_t>> pieces;
  std::span<const std::uint8_t> rest(data, size);
  for (int i = 0; i + 1 < count; ++i) {
    std::uint32_t length = 0;
    const std::size_t header = rest.size() < 4 ? rest.size() : 4;
    for (std::size_t b = 0; b < header; ++b) length |= static_cast<std::uint32_t>(rest[b]) << (8 * b);
    rest = rest.subspan(header);
    const std::size_t n = length < rest.size() ? length : rest.size();
    pieces.push_back(rest.first(n));
    rest = rest.subspan(n);
  }
  pieces.push_back(rest);
  return pieces;
}

}  // namespace infini_fuzz
