// IDX reader and FashionMNIST on small files written here (plain, and gzip made of stored
// deflate blocks by the writer below), every rejection, and the real Fashion-MNIST files
// when the dataset-fashion-mnist package is installed.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

import infini.nn;

#include "data_test_util.h"

namespace infini::data::data_idx_test {
namespace {

using Bytes = std::vector<std::uint8_t>;
namespace fs = std::filesystem;

using test::expect_error;

void put32(Bytes& out, std::uint32_t v) {
  for (int shift : {24, 16, 8, 0}) out.push_back(static_cast<std::uint8_t>(v >> shift));
}

// An IDX file: magic, dims, values.
Bytes idx(std::uint32_t magic, const std::vector<std::uint32_t>& dims, const Bytes& values) {
  Bytes out;
  put32(out, magic);
  for (std::uint32_t d : dims) put32(out, d);
  out.insert(out.end(), values.begin(), values.end());
  return out;
}

Bytes counting(std::size_t n) {
  Bytes v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>(i * 7 + 3);
  return v;
}

std::uint32_t crc32(const Bytes& data) {
  std::uint32_t crc = 0xFFFFFFFFu;
  for (std::uint8_t byte : data) {
    crc ^= byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

void put32le(Bytes& out, std::uint32_t v) {
  for (int shift : {0, 8, 16, 24}) out.push_back(static_cast<std::uint8_t>(v >> shift));
}

// RFC 1952 member holding RFC 1951 stored blocks of at most 65535 bytes.
Bytes gzip(const Bytes& data) {
  Bytes out = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff};
  std::size_t done = 0;
  do {
    const std::size_t n = std::min<std::size_t>(65535, data.size() - done);
    const bool last = done + n == data.size();
    out.push_back(last ? 1 : 0);
    out.push_back(static_cast<std::uint8_t>(n));
    out.push_back(static_cast<std::uint8_t>(n >> 8));
    out.push_back(static_cast<std::uint8_t>(~n));
    out.push_back(static_cast<std::uint8_t>(~n >> 8));
    out.insert(out.end(), data.begin() + done, data.begin() + done + n);
    done += n;
  } while (done < data.size());
  put32le(out, crc32(data));
  put32le(out, static_cast<std::uint32_t>(data.size()));
  return out;
}

class DataIdx : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("infini_idx_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const Bytes& bytes) {
    const fs::path path = dir_ / name;
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    return path.string();
  }

  fs::path dir_;
};

constexpr std::uint32_t kImages = 0x00000803, kLabels = 0x00000801;

TEST_F(DataIdx, ReadsPlainAndGzipImages) {
  const Bytes values = counting(2 * 3 * 4);
  const Bytes file = idx(kImages, {2, 3, 4}, values);
  for (const std::string& path : {write("images", file), write("images.gz", gzip(file))}) {
    const Tensor images = read_idx_images(path);
    EXPECT_EQ(images.dtype(), kUInt8);
    ASSERT_EQ(images.shape(), (Shape{2, 3, 4}));
    const std::uint8_t* p = images.data_ptr<std::uint8_t>();
    EXPECT_EQ(Bytes(p, p + images.numel()), values) << path;
  }
  // Several stored blocks (values longer than 65535 bytes) and an empty set.
  const Bytes big = counting(100 * 28 * 28);
  const Tensor many = read_idx_images(write("many.gz", gzip(idx(kImages, {100, 28, 28}, big))));
  ASSERT_EQ(many.shape(), (Shape{100, 28, 28}));
  EXPECT_EQ(Bytes(many.data_ptr<std::uint8_t>(), many.data_ptr<std::uint8_t>() + many.numel()), big);
  EXPECT_EQ(read_idx_images(write("none", idx(kImages, {0, 28, 28}, {}))).shape(), (Shape{0, 28, 28}));
}

TEST_F(DataIdx, ReadsLabels) {
  const Bytes file = idx(kLabels, {4}, {9, 0, 3, 255});
  for (const std::string& path : {write("labels", file), write("labels.gz", gzip(file))}) {
    const Tensor labels = read_idx_labels(path);
    EXPECT_EQ(labels.dtype(), kInt64);
    ASSERT_EQ(labels.shape(), (Shape{4}));
    const std::int64_t* p = labels.data_ptr<std::int64_t>();
    EXPECT_EQ(std::vector<std::int64_t>(p, p + 4), (std::vector<std::int64_t>{9, 0, 3, 255}));
  }
}

TEST_F(DataIdx, RejectsBadHeaders) {
  const std::string labels = write("labels", idx(kLabels, {3}, {1, 2, 3}));
  expect_error<IOError>([&] { read_idx_images(labels); }, "read_idx_images",
                        {labels, "bad magic number 0x00000801", "expected 0x00000803"});
  const std::string images = write("images", idx(kImages, {1, 1, 1}, {7}));
  expect_error<IOError>([&] { read_idx_labels(images); }, "read_idx_labels",
                        {"0x00000803", "expected 0x00000801"});
  const std::string garbage = write("garbage.gz", gzip(idx(0x12345678, {1}, {1})));
  expect_error<IOError>([&] { read_idx_labels(garbage); }, "read_idx_labels", "0x12345678");
  const std::string zero_rows = write("zero_rows", idx(kImages, {2, 0, 28}, {}));
  expect_error<IOError>([&] { read_idx_images(zero_rows); }, "read_idx_images", "bad dims [2, 0, 28]");
  // 2^32-1 images of 2^32-1 x 2^32-1 values: rejected before anything is allocated.
  const std::string huge = write("huge", idx(kImages, {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu}, {}));
  expect_error<IOError>([&] { read_idx_images(huge); }, "read_idx_images", {"bad dims", "2^48"});
  const std::string short_header = write("short", Bytes{0, 0, 8, 3, 0, 0});
  expect_error<IOError>([&] { read_idx_images(short_header); }, "read_idx_images",
                        {"truncated header", "expected 16 bytes", "has 6"});
  const std::string missing = (dir_ / "missing").string();
  expect_error<IOError>([&] { read_idx_labels(missing); }, "read_idx_labels", {missing, "cannot open"});
}

TEST_F(DataIdx, RejectsWrongSizes) {
  // 2 x 2 x 2 images announce 16 + 8 = 24 bytes.
  const std::string truncated = write("truncated", idx(kImages, {2, 2, 2}, counting(7)));
  expect_error<IOError>([&] { read_idx_images(truncated); }, "read_idx_images",
                        {truncated, "expected 24 bytes", "file has 23 bytes"});
  const std::string trailing = write("trailing", idx(kImages, {2, 2, 2}, counting(9)));
  expect_error<IOError>([&] { read_idx_images(trailing); }, "read_idx_images", {"expected 24 bytes", "has 25 bytes"});
  // A gzip stream whose content is too short or too long (a huge claim is not allocated).
  const std::string gz_truncated = write("truncated.gz", gzip(idx(kLabels, {10}, counting(4))));
  expect_error<IOError>([&] { read_idx_labels(gz_truncated); }, "read_idx_labels",
                        {gz_truncated, "expected 18 bytes", "decompressed stream has 12 bytes"});
  const std::string gz_trailing = write("trailing.gz", gzip(idx(kLabels, {2}, counting(100000))));
  expect_error<IOError>([&] { read_idx_labels(gz_trailing); }, "read_idx_labels",
                        {"expected 10 bytes", "has 100008 bytes"});
  const std::string gz_claim = write("claim.gz", gzip(idx(kImages, {1000000, 1000, 1000}, counting(5))));
  expect_error<IOError>([&] { read_idx_images(gz_claim); }, "read_idx_images",
                        {"expected 1000000000016 bytes", "has 21 bytes"});
  // A gzip file cut off in the middle of its stream, and one with a wrong CRC.
  Bytes cut = gzip(idx(kLabels, {50}, counting(50)));
  cut.resize(cut.size() - 20);
  const std::string gz_cut = write("cut.gz", cut);
  expect_error<IOError>([&] { read_idx_labels(gz_cut); }, "read_idx_labels", {gz_cut, "cut off"});
  Bytes bad_crc = gzip(idx(kLabels, {3}, {1, 2, 3}));
  bad_crc[bad_crc.size() - 8] ^= 0xff;
  const std::string gz_crc = write("crc.gz", bad_crc);
  expect_error<IOError>([&] { read_idx_labels(gz_crc); }, "read_idx_labels", {gz_crc, "corrupt"});
}

TEST_F(DataIdx, FashionMNISTFromFiles) {
  write("train-images-idx3-ubyte.gz", gzip(idx(kImages, {3, 28, 28}, counting(3 * 784))));
  write("train-labels-idx1-ubyte.gz", gzip(idx(kLabels, {3}, {9, 0, 4})));
  write("t10k-images-idx3-ubyte", idx(kImages, {2, 28, 28}, counting(2 * 784)));
  write("t10k-labels-idx1-ubyte", idx(kLabels, {2}, {1, 2}));
  const FashionMNIST train(dir_.string(), true), test(dir_.string(), false);
  EXPECT_EQ(train.size(), 3);
  EXPECT_EQ(test.size(), 2);
  const Example e = train.get(1);
  EXPECT_EQ(e.data.shape(), (Shape{1, 28, 28}));
  EXPECT_EQ(e.data.dtype(), kFloat32);
  EXPECT_EQ(e.target.dim(), 0);
  EXPECT_EQ(e.target.item<std::int64_t>(), 0);
  const Bytes pixels = counting(3 * 784);
  const Tensor flat = e.data.contiguous().view({784});
  for (std::int64_t k : {0, 1, 100, 783})
    EXPECT_FLOAT_EQ(flat.select(0, k).item<float>(), static_cast<float>(pixels[784 + k]) / 255.0f) << k;
  EXPECT_EQ(test.get(1).target.item<std::int64_t>(), 2);
  // A transform sees the (1,28,28) float image.
  const FashionMNIST flipped(dir_.string(), true, RandomHorizontalFlip(1.0));
  EXPECT_FLOAT_EQ(flipped.get(1).data.contiguous().view({784}).select(0, 27).item<float>(),
                  static_cast<float>(pixels[784]) / 255.0f);
  expect_error<IndexError>([&] { train.get(3); }, "FashionMNIST.get", {"index 3", "3 examples"});
}

TEST_F(DataIdx, FashionMNISTRejects) {
  const std::string root = dir_.string();
  expect_error<IOError>([&] { FashionMNIST(root, true); }, "FashionMNIST", {"train-images-idx3-ubyte.gz", "exists"});
  write("train-images-idx3-ubyte", idx(kImages, {2, 28, 28}, counting(2 * 784)));
  write("train-labels-idx1-ubyte", idx(kLabels, {3}, {1, 2, 3}));
  expect_error<IOError>([&] { FashionMNIST(root, true); }, "FashionMNIST", "3 labels for 2 images");
  write("train-labels-idx1-ubyte", idx(kLabels, {2}, {1, 10}));
  expect_error<IOError>([&] { FashionMNIST(root, true); }, "FashionMNIST", "label 10 of example 1");
  write("train-images-idx3-ubyte", idx(kImages, {2, 14, 14}, counting(2 * 196)));
  expect_error<IOError>([&] { FashionMNIST(root, true); }, "FashionMNIST", {"28x28", "[2, 14, 14]"});
}

TEST(DataFashionMNIST, RealFiles) {
  const std::string root = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(fs::path(root) / "train-labels-idx1-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST is not installed (package dataset-fashion-mnist)";
  const FashionMNIST train(root, true), test(root, false);
  EXPECT_EQ(train.size(), 60000);
  EXPECT_EQ(test.size(), 10000);
  EXPECT_EQ(train.get(0).target.item<std::int64_t>(), 9);  // an ankle boot
  DataLoader loader(std::make_shared<const FashionMNIST>(root, false), {.batch_size = 256, .num_workers = 2});
  EXPECT_EQ(loader.size(), 40);
  auto batch = loader.begin();
  EXPECT_EQ(batch->data.shape(), (Shape{256, 1, 28, 28}));
  EXPECT_EQ(batch->target.shape(), (Shape{256}));
  EXPECT_GE(amin(batch->data).item<float>(), 0.0f);
  EXPECT_LE(amax(batch->data).item<float>(), 1.0f);
}

}  // namespace
}  // namespace infini::data::data_idx_test
