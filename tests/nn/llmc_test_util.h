// Shared by the llm.c file tests: hand-built little-endian bytes, files in a per-test
// temporary directory, and typed error expectations.
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <string>
#include <utility>
#include <vector>
#include <unistd.h>

#include "data_test_util.h"

import infini.nn;

namespace infini::llmc::test {

namespace fs = std::filesystem;
using Bytes = std::vector<std::byte>;

// Appends `value`'s `width` low bytes, least significant first.
inline void put_le(Bytes& out, std::uint64_t value, int width) {
  for (int i = 0; i < width; ++i) out.push_back(static_cast<std::byte>(value >> (8 * i)));
}
inline void put_i32(Bytes& out, std::int32_t v) { put_le(out, static_cast<std::uint32_t>(v), 4); }
inline void put_f32(Bytes& out, float v) { put_le(out, std::bit_cast<std::uint32_t>(v), 4); }

// A 1024-byte header: `slots` (index, value) set, every other int32 zero.
inline Bytes header(std::initializer_list<std::pair<int, std::int32_t>> slots) {
  std::vector<std::int32_t> ints(256, 0);
  for (const auto& [index, value] : slots) ints[index] = value;
  Bytes out;
  for (std::int32_t v : ints) put_i32(out, v);
  return out;
}

inline Bytes read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Bytes out(text.size());
  if (!text.empty()) std::memcpy(out.data(), text.data(), text.size());
  return out;
}

inline void write_file(const fs::path& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

using data::test::expect_error;

// A fresh directory per test, removed afterwards.
class LlmcFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("infini_llmc_" + std::string(info->test_suite_name()) + "_" + info->name() +
                                        "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes `bytes` to a file in the test's directory and returns its path.
  fs::path file_with(const Bytes& bytes, const std::string& name = "file.bin") const {
    const fs::path path = dir_ / name;
    write_file(path, bytes);
    return path;
  }

  fs::path dir_;
};

// The shared reference files (produced by llm.c's fp32 CPU reference), next to the checkout
// ("../shared/reference/" from the repository root) where that is present.
inline const fs::path kReferenceDir = fs::path(INFINI_TEST_DATA_DIR) / "../../../shared/reference/gpt2-tiny";

}  // namespace infini::llmc::test
