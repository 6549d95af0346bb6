// safetensors: round trips of every dtype, the exact bytes written, files written by the
// reference implementation, and one test per kind of invalid file the reader rejects.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>
#include <unistd.h>

import infini.nn;

namespace infini::safetensors_test {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::byte>;

Bytes bytes_of(std::string_view text) {
  Bytes out(text.size());
  if (!text.empty()) std::memcpy(out.data(), text.data(), text.size());
  return out;
}

Bytes bytes_of(std::initializer_list<int> values) {
  Bytes out;
  for (int v : values) out.push_back(static_cast<std::byte>(v));
  return out;
}

Bytes concat_bytes(const Bytes& a, const Bytes& b) {
  Bytes out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

// A file: the little-endian header length, `header` padded with spaces to a multiple of 8
// (unless pad is false), then `data`.
Bytes make_file(std::string header, const Bytes& data = {}, bool pad = true) {
  if (pad) header.append((8 - header.size() % 8) % 8, ' ');
  Bytes out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::byte>(static_cast<std::uint64_t>(header.size()) >> (8 * i)));
  return concat_bytes(concat_bytes(out, bytes_of(header)), data);
}

// A contiguous CPU tensor holding exactly `raw` (little-endian element bytes).
Tensor from_raw(DataType dtype, const Shape& shape, const Bytes& raw) {
  Tensor t = empty(shape, {.dtype = dtype});
  EXPECT_EQ(static_cast<std::size_t>(t.nbytes()), raw.size());
  if (!raw.empty()) std::memcpy(t.data_ptr(), raw.data(), raw.size());
  return t;
}

Bytes raw_bytes(const Tensor& t) {
  const Tensor c = t.contiguous();
  Bytes out(static_cast<std::size_t>(c.nbytes()));
  if (!out.empty()) std::memcpy(out.data(), c.data_ptr(), out.size());
  return out;
}

Bytes read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return bytes_of(text);
}

void write_file(const fs::path& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// Runs fn, expecting an E whose message starts with "<op>: " and contains `needle`.
template <class E = IOError>
void expect_error(const std::function<void()>& fn, std::string_view op, std::string_view needle) {
  try {
    fn();
    ADD_FAILURE() << "expected an error containing '" << needle << "'";
  } catch (const E& e) {
    const std::string what = e.what();
    EXPECT_TRUE(what.starts_with(std::string(op) + ": ")) << what;
    EXPECT_NE(what.find(needle), std::string::npos) << "'" << needle << "' not in: " << what;
  }
}

// parse_safetensors on `file` must fail with an IOError mentioning `needle`.
void expect_rejected(const Bytes& file, std::string_view needle) {
  expect_error([&] { io::parse_safetensors(file); }, "parse_safetensors", needle);
}

// A header of one F32 tensor "t" of shape [2] at data_offsets [0, 8], with `entry` as its
// entry object, and 8 data bytes.
Bytes file_with_entry(const std::string& entry) { return make_file("{\"t\":" + entry + "}", Bytes(8)); }

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("infini_safetensors_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
};

// ---- writing and reading back ----

TEST_F(Safetensors, RoundTripsEveryDtype) {
  // Six elements per dtype, with the edge values of each (NaN payloads, -0, Inf, subnormals).
  const std::map<DataType, Bytes> raw = {
      {kBool, bytes_of({1, 0, 0, 1, 1, 0})},
      {kUInt8, bytes_of({0, 1, 127, 128, 200, 255})},
      {kInt8, bytes_of({0, 1, 0x7f, 0x80, 0xfe, 0xff})},
      {kInt16, bytes_of({0x00, 0x80, 0xff, 0x7f, 0xfe, 0xff, 0x01, 0x00, 0x34, 0x12, 0x00, 0x00})},
      {kInt32, bytes_of({0x04, 0x03, 0x02, 0x01, 0, 0, 0, 0x80, 0xff, 0xff, 0xff, 0x7f, 0xfe, 0xff, 0xff, 0xff,
                         1, 0, 0, 0, 0, 0, 0, 0})},
      {kFloat16, bytes_of({0x00, 0x3c, 0x00, 0x80, 0x00, 0x7c, 0x01, 0x7e, 0x01, 0x00, 0xff, 0x7b})},
      {kBFloat16, bytes_of({0x80, 0x3f, 0x00, 0x80, 0x80, 0x7f, 0xc1, 0x7f, 0x01, 0x00, 0x00, 0xc0})},
  };
  StateDict tensors;
  for (const auto& [dtype, bytes] : raw) tensors[std::string(name(dtype))] = from_raw(dtype, {2, 3}, bytes);
  // Wider types: from values, including -0, Inf, NaN and the integer limits.
  tensors["int64"] = from_vector<std::int64_t>({0, -1, std::numeric_limits<std::int64_t>::min(),
                                                std::numeric_limits<std::int64_t>::max(), 42, -42}, {3, 2});
  tensors["float32"] = from_vector<float>({1.5f, -0.0f, std::numeric_limits<float>::infinity(),
                                           std::numeric_limits<float>::quiet_NaN(), 1e-45f, -3.25f}, {6});
  tensors["float64"] = from_vector<double>({1.5, -0.0, -std::numeric_limits<double>::infinity(),
                                            std::numeric_limits<double>::quiet_NaN(), 5e-324, 1e300}, {1, 6});
  ASSERT_EQ(tensors.size(), static_cast<std::size_t>(kDataTypeCount));
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"step", "12"}};

  const fs::path path = dir_ / "all.safetensors";
  io::save_safetensors(path, tensors, metadata);
  const io::SafetensorsFile loaded = io::load_safetensors(path);

  EXPECT_EQ(loaded.metadata, metadata);
  ASSERT_EQ(loaded.tensors.size(), tensors.size());
  for (const auto& [key, expected] : tensors) {
    SCOPED_TRACE(key);
    ASSERT_TRUE(loaded.tensors.contains(key));
    const Tensor& got = loaded.tensors.at(key);
    EXPECT_EQ(got.dtype(), expected.dtype());
    EXPECT_EQ(got.shape(), expected.shape());
    EXPECT_TRUE(got.is_contiguous());
    EXPECT_TRUE(got.device().is_cpu());
    EXPECT_EQ(raw_bytes(got), raw_bytes(expected));
  }
}

TEST_F(Safetensors, WritesEachDtypeNameAndLittleEndianBytes) {
  struct Case {
    DataType dtype;
    std::string_view name;
    Bytes element;  // one element, as the file must hold it
  };
  const std::vector<Case> cases = {
      {kBool, "BOOL", bytes_of({0x01})},
      {kUInt8, "U8", bytes_of({0xc8})},
      {kInt8, "I8", bytes_of({0xfe})},
      {kInt16, "I16", bytes_of({0xfe, 0xff})},
      {kInt32, "I32", bytes_of({0x04, 0x03, 0x02, 0x01})},
      {kInt64, "I64", bytes_of({0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01})},
      {kFloat16, "F16", bytes_of({0x00, 0x3c})},   // 1.0
      {kBFloat16, "BF16", bytes_of({0x00, 0xc0})}, // -2.0
      {kFloat32, "F32", bytes_of({0x00, 0x00, 0x80, 0x3f})},
      {kFloat64, "F64", bytes_of({0, 0, 0, 0, 0, 0, 0xf0, 0x3f})},
  };
  const std::vector<Tensor> values = {
      from_vector<bool>({true}), from_vector<std::uint8_t>({200}), from_vector<std::int8_t>({-2}),
      from_vector<std::int16_t>({-2}), from_vector<std::int32_t>({0x01020304}),
      from_vector<std::int64_t>({0x0102030405060708}), from_vector<float>({1.0f}, {1}, {.dtype = kFloat16}),
      from_vector<float>({-2.0f}, {1}, {.dtype = kBFloat16}), from_vector<float>({1.0f}), from_vector<double>({1.0})};
  for (std::size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].name);
    ASSERT_EQ(values[i].dtype(), cases[i].dtype);
    const fs::path path = dir_ / "one.safetensors";
    io::save_safetensors(path, {{"t", values[i]}});
    const std::string size = std::to_string(cases[i].element.size());
    const Bytes expected = make_file("{\"t\":{\"dtype\":\"" + std::string(cases[i].name) +
                                         "\",\"shape\":[1],\"data_offsets\":[0," + size + "]}}",
                                     cases[i].element);
    EXPECT_EQ(read_file(path), expected);
  }
}

TEST_F(Safetensors, RoundTripsZeroDimZeroSizeAndNonContiguousTensors) {
  const Tensor matrix = from_vector<float>({0, 1, 2, 3, 4, 5}, {2, 3});
  StateDict tensors = {
      {"scalar", scalar_tensor(3.5, {.dtype = kFloat64})},
      {"count", scalar_tensor(std::int64_t{7})},
      {"empty_rows", zeros({0, 3})},
      {"empty_middle", zeros({2, 0, 4}, {.dtype = kInt64})},
      {"empty_huge", empty({std::int64_t{1} << 62, std::int64_t{1} << 62, 0}, {.dtype = kFloat64})},
      {"transposed", matrix.t()},                                 // [[0, 3], [1, 4], [2, 5]]
      {"stepped", matrix.slice(1, 0, std::nullopt, 2)},           // [[0, 2], [3, 5]]
      {"expanded", from_vector<std::int32_t>({7, 8}).expand({3, 2})},  // stride 0
  };
  const fs::path path = dir_ / "shapes.safetensors";
  io::save_safetensors(path, tensors);
  const io::SafetensorsFile loaded = io::load_safetensors(path);
  EXPECT_TRUE(loaded.metadata.empty());

  EXPECT_EQ(loaded.tensors.at("scalar").dim(), 0);
  EXPECT_EQ(loaded.tensors.at("scalar").item<double>(), 3.5);
  EXPECT_EQ(loaded.tensors.at("count").dtype(), kInt64);
  EXPECT_EQ(loaded.tensors.at("count").item<std::int64_t>(), 7);
  EXPECT_EQ(loaded.tensors.at("empty_rows").shape(), (Shape{0, 3}));
  EXPECT_EQ(loaded.tensors.at("empty_middle").shape(), (Shape{2, 0, 4}));
  EXPECT_EQ(loaded.tensors.at("empty_middle").dtype(), kInt64);
  EXPECT_EQ(loaded.tensors.at("empty_huge").shape(), (Shape{std::int64_t{1} << 62, std::int64_t{1} << 62, 0}));

  const auto values = [&](const std::string& key) {
    const Tensor t = loaded.tensors.at(key);
    const Tensor flat = t.to(kFloat64);
    return std::vector<double>(flat.data_ptr<double>(), flat.data_ptr<double>() + flat.numel());
  };
  EXPECT_EQ(loaded.tensors.at("transposed").shape(), (Shape{3, 2}));
  EXPECT_EQ(values("transposed"), (std::vector<double>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(loaded.tensors.at("stepped").shape(), (Shape{2, 2}));
  EXPECT_EQ(values("stepped"), (std::vector<double>{0, 2, 3, 5}));
  EXPECT_EQ(loaded.tensors.at("expanded").shape(), (Shape{3, 2}));
  EXPECT_EQ(values("expanded"), (std::vector<double>{7, 8, 7, 8, 7, 8}));
}

TEST_F(Safetensors, RoundTripsNamesAndMetadataThatNeedEscaping) {
  const std::string odd = "quote\" backslash\\ newline\n tab\t ctrl\x01 e\xc3\xa9 \xf0\x9f\x98\x80";
  const StateDict tensors = {{odd, from_vector<float>({1})}, {"", from_vector<float>({2})}, {"a.b.c", zeros({1})}};
  const std::map<std::string, std::string> metadata = {{odd, odd}, {"", ""}};
  const fs::path path = dir_ / "names.safetensors";
  io::save_safetensors(path, tensors, metadata);
  const Bytes file = read_file(path);
  const std::string text(reinterpret_cast<const char*>(file.data()), file.size());
  // JSON escapes (lowercase \u00xx for other control characters); UTF-8 is written as is.
  EXPECT_NE(text.find(R"("quote\" backslash\\ newline\n tab\t ctrl\u0001 e)" "\xc3\xa9 \xf0\x9f\x98\x80\""),
            std::string::npos);

  const io::SafetensorsFile loaded = io::load_safetensors(path);
  EXPECT_EQ(loaded.metadata, metadata);
  ASSERT_EQ(loaded.tensors.size(), 3u);
  EXPECT_EQ(loaded.tensors.at(odd).item<float>(), 1.0f);
  EXPECT_EQ(loaded.tensors.at("").item<float>(), 2.0f);
}

// The exact bytes of a small file: header layout, key order, padding, name-ordered data.
TEST_F(Safetensors, WritesTheExactHeaderLayout) {
  const fs::path path = dir_ / "tiny.safetensors";
  io::save_safetensors(path, {{"a", from_vector<float>({1, 2, 3, 4}, {2, 2})}});
  const Bytes expected = concat_bytes(
      concat_bytes(bytes_of({64, 0, 0, 0, 0, 0, 0, 0}),
                   bytes_of(R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})"
                            "       ")),  // 57 bytes of JSON + 7 spaces
      bytes_of({0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x40, 0x40, 0x00, 0x00, 0x80, 0x40}));
  EXPECT_EQ(read_file(path), expected);

  // Metadata comes first; tensors (and their data) follow in name order, whatever their dtypes.
  io::save_safetensors(path, {{"x", scalar_tensor(std::int64_t{-2})}, {"w", from_vector<std::uint8_t>({1, 2, 3})}},
                       {{"format", "pt"}});
  const Bytes expected2 = concat_bytes(
      concat_bytes(bytes_of({144, 0, 0, 0, 0, 0, 0, 0}),
                   bytes_of(R"({"__metadata__":{"format":"pt"},)"
                            R"("w":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},)"
                            R"("x":{"dtype":"I64","shape":[],"data_offsets":[3,11]}})"
                            "       ")),  // 137 + 7 spaces
      bytes_of({1, 2, 3, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}));
  EXPECT_EQ(read_file(path), expected2);

  // No tensors: "{}" and 6 spaces, as the reference implementation writes it.
  io::save_safetensors(path, {});
  EXPECT_EQ(read_file(path), bytes_of({8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '}));
  EXPECT_TRUE(io::load_safetensors(path).tensors.empty());
}

// What safetensors.torch.save_file({"a": torch.tensor([[1., 2.], [3., 4.]])}, path) writes.
TEST_F(Safetensors, LoadsAFileWrittenByTheReferenceLibrary) {
  const Bytes file = concat_bytes(
      concat_bytes(bytes_of({0x40, 0, 0, 0, 0, 0, 0, 0}),
                   bytes_of("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}       ")),
      bytes_of({0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x40, 0x40, 0x00, 0x00, 0x80, 0x40}));
  const fs::path path = dir_ / "reference.safetensors";
  write_file(path, file);
  for (const io::SafetensorsFile& loaded : {io::load_safetensors(path), io::parse_safetensors(file)}) {
    ASSERT_EQ(loaded.tensors.size(), 1u);
    EXPECT_TRUE(loaded.metadata.empty());
    const Tensor& a = loaded.tensors.at("a");
    EXPECT_EQ(a.dtype(), kFloat32);
    EXPECT_EQ(a.shape(), (Shape{2, 2}));
    EXPECT_EQ(std::vector<float>(a.data_ptr<float>(), a.data_ptr<float>() + 4), (std::vector<float>{1, 2, 3, 4}));
  }
}

// The reference implementation's own serialization test: a 64-byte header that needs no
// padding, and the data of "attn.0" = [[[0, 1, 2], [3, 4, 5]]].
TEST_F(Safetensors, LoadsTheReferenceImplementationsTestVector) {
  const Bytes file = bytes_of(
      {64,  0,   0,   0,   0,   0,   0,   0,   123, 34,  97,  116, 116, 110, 46,  48,  34,  58,  123, 34,  100,
       116, 121, 112, 101, 34,  58,  34,  70,  51,  50,  34,  44,  34,  115, 104, 97,  112, 101, 34,  58,  91,
       49,  44,  50,  44,  51,  93,  44,  34,  100, 97,  116, 97,  95,  111, 102, 102, 115, 101, 116, 115, 34,
       58,  91,  48,  44,  50,  52,  93,  125, 125, 0,   0,   0,   0,   0,   0,   128, 63,  0,   0,   0,   64,
       0,   0,   64,  64,  0,   0,   128, 64,  0,   0,   160, 64});
  const io::SafetensorsFile loaded = io::parse_safetensors(file);
  const Tensor& t = loaded.tensors.at("attn.0");
  EXPECT_EQ(t.shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(std::vector<float>(t.data_ptr<float>(), t.data_ptr<float>() + 6), (std::vector<float>{0, 1, 2, 3, 4, 5}));
}

// Data may come in any order relative to the header; empty tensors may sit anywhere.
TEST(SafetensorsParse, AcceptsOffsetsInAnyOrderAndEmptyTensorsAtAnyOffset) {
  const Bytes file = make_file(R"({"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]},)"
                               R"("e":{"dtype":"F32","shape":[0,5],"data_offsets":[2,2]},)"
                               R"("a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                               R"("z":{"dtype":"I64","shape":[0],"data_offsets":[4,4]}})",
                               bytes_of({1, 2, 3, 4}));
  const io::SafetensorsFile loaded = io::parse_safetensors(file);
  ASSERT_EQ(loaded.tensors.size(), 4u);
  EXPECT_EQ(loaded.tensors.at("a").data_ptr<std::uint8_t>()[1], 2);
  EXPECT_EQ(loaded.tensors.at("b").data_ptr<std::uint8_t>()[0], 3);
  EXPECT_EQ(loaded.tensors.at("e").shape(), (Shape{0, 5}));
  EXPECT_EQ(loaded.tensors.at("z").numel(), 0);
}

// JSON whitespace (not only spaces) may pad the header; metadata may be empty.
TEST(SafetensorsParse, AcceptsJsonWhitespaceAndEmptyMetadata) {
  const Bytes file = make_file("{ \"__metadata__\" : { } ,\n\t\"t\": {\"shape\": [1], \"data_offsets\": [0, 1], \"dtype\": \"U8\"} }\r\n",
                               bytes_of({9}), /*pad=*/false);
  const io::SafetensorsFile loaded = io::parse_safetensors(file);
  EXPECT_TRUE(loaded.metadata.empty());
  EXPECT_EQ(loaded.tensors.at("t").data_ptr<std::uint8_t>()[0], 9);
}

// ---- files the reader rejects (one test per reason) ----

TEST(SafetensorsParse, RejectsFilesShorterThanTheLengthPrefix) {
  expect_rejected({}, "the file has 0 bytes, fewer than the 8-byte header length");
  expect_rejected(bytes_of({8, 0, 0, 0, 0, 0, 0}), "the file has 7 bytes");
}

TEST(SafetensorsParse, RejectsHeaderLengthsOver100MB) {
  Bytes file = make_file("{}");
  file[0] = std::byte{0x01};  // 100'000'001 = 0x05f5e101
  file[1] = std::byte{0xe1};
  file[2] = std::byte{0xf5};
  file[3] = std::byte{0x05};
  expect_rejected(file, "the header length 100000001 is larger than the limit of 100000000 bytes");
  for (int i = 0; i < 8; ++i) file[i] = std::byte{0xff};
  expect_rejected(file, "the header length 18446744073709551615 is larger than the limit");
}

TEST(SafetensorsParse, RejectsHeaderLengthsPastTheEndOfTheFile) {
  Bytes file = make_file("{}");
  file[0] = std::byte{9};
  expect_rejected(file, "the header length 9 runs past the end of the file (8 bytes follow the length");
}

TEST(SafetensorsParse, RejectsHeadersThatAreNotJsonObjects) {
  expect_rejected(make_file(""), "the header must start with '{', got an empty header");
  expect_rejected(make_file("[1, 2]"), "the header must start with '{', got the byte 91");
  expect_rejected(make_file(" {}"), "the header must start with '{', got the byte 32");
  expect_rejected(make_file("\xef\xbb\xbf{}"), "the header must start with '{', got the byte 239");  // a BOM
}

TEST(SafetensorsParse, RejectsInvalidJson) {
  expect_rejected(make_file("{\"t\": "), "the header is not valid JSON");
  expect_rejected(make_file("{,}"), "the header is not valid JSON");
  expect_rejected(make_file("{} {}"), "the header is not valid JSON");
  expect_rejected(make_file("{}x"), "the header is not valid JSON");
  expect_rejected(make_file("{'t':1}"), "the header is not valid JSON");
  expect_rejected(make_file("{/*c*/}"), "the header is not valid JSON");
  // nlohmann's lexer alone would stop at a NUL byte and accept what came before it.
  expect_rejected(make_file(std::string("{}\0hidden", 9)), "the header has a NUL byte at byte 2 (not valid JSON)");
  expect_rejected(make_file(std::string("{\"\0\":1}", 7)), "the header has a NUL byte at byte 2");
  expect_rejected(make_file("{\"t\":{\"dtype\":\"F32\"" + std::string(1000, ' ')), "the header is not valid JSON");
}

TEST(SafetensorsParse, RejectsInvalidUtf8) {
  expect_rejected(make_file("{\"\xff\":{}}"), "the header is not valid JSON");         // invalid byte
  expect_rejected(make_file("{\"\xc3\":{}}"), "the header is not valid JSON");         // truncated sequence
  expect_rejected(make_file("{\"\xc0\xaf\":{}}"), "the header is not valid JSON");     // overlong '/'
  expect_rejected(make_file("{\"\xed\xa0\x80\":{}}"), "the header is not valid JSON"); // UTF-16 surrogate
  expect_rejected(make_file("{\"\\ud800\":{}}"), "the header is not valid JSON");      // lone escaped surrogate
  expect_rejected(make_file("{\xe9}"), "the header is not valid JSON");                // outside a string
}

TEST(SafetensorsParse, RejectsDuplicateKeys) {
  const std::string entry = R"({"dtype":"U8","shape":[1],"data_offsets":[0,1]})";
  expect_rejected(make_file("{\"t\":" + entry + ",\"t\":" + entry + "}", bytes_of({1})),
                  "duplicate key 't' in the header");
  expect_rejected(make_file(R"({"__metadata__":{},"__metadata__":{}})"), "duplicate key '__metadata__' in the header");
  expect_rejected(make_file(R"({"__metadata__":{"k":"a","k":"b"}})"), "duplicate key 'k' in __metadata__");
  expect_rejected(file_with_entry(R"({"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]})"),
                  "tensor 't': duplicate key 'dtype'");
  expect_rejected(file_with_entry(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8],"shape":[2]})"),
                  "tensor 't': duplicate key 'shape'");
}

TEST(SafetensorsParse, RejectsEntriesWithMissingKeys) {
  expect_rejected(file_with_entry(R"({"shape":[2],"data_offsets":[0,8]})"), "tensor 't': missing dtype");
  expect_rejected(file_with_entry(R"({"dtype":"F32","data_offsets":[0,8]})"), "tensor 't': missing shape");
  expect_rejected(file_with_entry(R"({"dtype":"F32","shape":[2]})"), "tensor 't': missing data_offsets");
  expect_rejected(file_with_entry("{}"), "tensor 't': missing dtype, shape, data_offsets");
}

TEST(SafetensorsParse, RejectsUnexpectedKeysInEntries) {
  expect_rejected(file_with_entry(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8],"offsets":[0,8]})"),
                  "tensor 't': unexpected key 'offsets'");
}

TEST(SafetensorsParse, RejectsEntriesOfWrongJsonTypes) {
  expect_rejected(make_file(R"({"t":[1]})"), "the value of 't' must be an object {dtype, shape, data_offsets}, got an array");
  expect_rejected(make_file(R"({"t":"F32"})"), "the value of 't' must be an object");
  expect_rejected(make_file(R"({"t":null})"), "got null");
  expect_rejected(file_with_entry(R"({"dtype":32,"shape":[2],"data_offsets":[0,8]})"),
                  "tensor 't': dtype must be a string, got the number 32");
  expect_rejected(file_with_entry(R"({"dtype":["F32"],"shape":[2],"data_offsets":[0,8]})"),
                  "tensor 't': dtype must be a string, got an array");
  expect_rejected(file_with_entry(R"({"dtype":"F32","shape":"2","data_offsets":[0,8]})"),
                  "tensor 't': shape must be an array of non-negative integers, got a string");
  expect_rejected(file_with_entry(R"({"dtype":"F32","shape":2,"data_offsets":[0,8]})"),
                  "tensor 't': shape must be an array of non-negative integers, got the number 2");
  expect_rejected(file_with_entry(R"({"dtype":"F32","shape":["2"],"data_offsets":[0,8]})"),
                  "tensor 't': shape must hold non-negative integers, got a string");
  expect_rejected(file_with_entry(R"({"dtype":"F32","shape":[[2]],"data_offsets":[0,8]})"),
                  "tensor 't': shape must hold non-negative integers, got an array");
  expect_rejected(file_with_entry(R"({"dtype":"F32","shape":[true],"data_offsets":[0,8]})"),
                  "tensor 't': shape must hold non-negative integers, got true");
  expect_rejected(file_with_entry(R"({"dtype":"F32","shape":[2],"data_offsets":{"begin":0}})"),
                  "tensor 't': data_offsets must be an array of non-negative integers, got an object");
  expect_rejected(file_with_entry(R"({"dtype":"F32","shape":[2],"data_offsets":[0,"8"]})"),
                  "tensor 't': data_offsets must hold non-negative integers, got a string");
}

TEST(SafetensorsParse, RejectsUnknownDtypes) {
  for (const std::string dtype : {"F8_E4M3", "U16", "f32", "float32", ""}) {
    expect_rejected(file_with_entry(R"({"dtype":")" + dtype + R"(","shape":[2],"data_offsets":[0,8]})"),
                    "tensor 't': unknown dtype '" + dtype + "' (expected one of F64, F32, F16, BF16");
  }
}

TEST(SafetensorsParse, RejectsNegativeAndNonIntegerDims) {
  expect_rejected(file_with_entry(R"({"dtype":"F32","shape":[-2],"data_offsets":[0,8]})"),
                  "tensor 't': shape must hold non-negative integers, got the negative number -2");
  expect_rejected(file_with_entry(R"({"dtype":"F32","shape":[2.0],"data_offsets":[0,8]})"),
                  "tensor 't': shape must hold non-negative integers, got the number 2.0");
  expect_rejected(file_with_entry(R"({"dtype":"F32","shape":[2e0],"data_offsets":[0,8]})"), "got the number 2e0");
  expect_rejected(file_with_entry(R"({"dtype":"F32","shape":[18446744073709551616],"data_offsets":[0,8]})"),
                  "got the number 18446744073709551616");
  expect_rejected(file_with_entry(R"({"dtype":"F32","shape":[9223372036854775808],"data_offsets":[0,8]})"),
                  "tensor 't': dimension 9223372036854775808 is larger than 2^63 - 1");
  expect_rejected(file_with_entry(R"({"dtype":"F32","shape":[2],"data_offsets":[-1,8]})"),
                  "tensor 't': data_offsets must hold non-negative integers, got the negative number -1");
}

TEST(SafetensorsParse, RejectsShapesWhoseByteSizeOverflows) {
  expect_rejected(file_with_entry(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]})"),
                  "tensor 't': shape [4294967296, 4294967296] of F32 needs more than 2^63 - 1 bytes");
  // numel fits in int64, numel * itemsize does not.
  expect_rejected(file_with_entry(R"({"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,8]})"),
                  "tensor 't': shape [2305843009213693952] of F64 needs more than 2^63 - 1 bytes");
}

TEST(SafetensorsParse, RejectsDataOffsetsThatDoNotMatchTheTensor) {
  expect_rejected(file_with_entry(R"({"dtype":"F32","shape":[2],"data_offsets":[8,0]})"),
                  "tensor 't': data_offsets [8, 0] end before they begin");
  expect_rejected(file_with_entry(R"({"dtype":"F32","shape":[2],"data_offsets":[0,4]})"),
                  "tensor 't': data_offsets [0, 4] span 4 bytes, but shape [2] of F32 needs 8");
  expect_rejected(file_with_entry(R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})"), "needs 12");
  expect_rejected(file_with_entry(R"({"dtype":"F32","shape":[2],"data_offsets":[0]})"),
                  "tensor 't': data_offsets has 1 elements, expected 2");
  expect_rejected(file_with_entry(R"({"dtype":"F32","shape":[2],"data_offsets":[]})"), "data_offsets has 0 elements");
  expect_rejected(file_with_entry(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8,8]})"),
                  "tensor 't': data_offsets has more than 2 elements");
}

TEST(SafetensorsParse, RejectsOverlappingOffsets) {
  expect_rejected(make_file(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                            R"("b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})",
                            Bytes(6)),
                  "tensor 'b': data_offsets [2, 6] overlap those of tensor 'a' [0, 4]");
  // The same bytes for two tensors (a polyglot file).
  expect_rejected(make_file(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                            R"("b":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}})",
                            Bytes(4)),
                  "overlap those of tensor");
  // An empty tensor inside another tensor's bytes.
  expect_rejected(make_file(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                            R"("e":{"dtype":"U8","shape":[0],"data_offsets":[2,2]}})",
                            Bytes(4)),
                  "tensor 'e': data_offsets [2, 2] overlap those of tensor 'a' [0, 4]");
}

TEST(SafetensorsParse, RejectsGapsInTheDataBuffer) {
  expect_rejected(make_file(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                            R"("b":{"dtype":"U8","shape":[2],"data_offsets":[4,6]}})",
                            Bytes(6)),
                  "bytes [2, 4) of the data buffer belong to no tensor (a gap before tensor 'b')");
  expect_rejected(make_file(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}})", Bytes(3)),
                  "bytes [0, 1) of the data buffer belong to no tensor");
}

TEST(SafetensorsParse, RejectsOffsetsPastTheEndOfTheFile) {
  expect_rejected(make_file(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", Bytes(3)),
                  "tensor 'a': data_offsets [0, 4] run past the end of the file (the data buffer has 3 bytes");
  expect_rejected(make_file(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[5,5]}})"),
                  "bytes [0, 5) of the data buffer belong to no tensor");
  expect_rejected(make_file(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[18446744073709551614,18446744073709551615]}})"),
                  "bytes [0, 18446744073709551614) of the data buffer belong to no tensor");
}

TEST(SafetensorsParse, RejectsTrailingBytesAfterTheData) {
  expect_rejected(make_file(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})", Bytes(3)),
                  "the file has 1 bytes after the last tensor's data (the data buffer has 3 bytes, the tensors cover 2)");
  expect_rejected(make_file("{}", Bytes(1)), "the file has 1 bytes after the last tensor's data");
}

TEST(SafetensorsParse, RejectsMetadataThatIsNotAStringMap) {
  expect_rejected(make_file(R"({"__metadata__":{"k":1}})"), "__metadata__ value of 'k' must be a string, got the number 1");
  expect_rejected(make_file(R"({"__metadata__":{"k":{"a":"b"}}})"), "__metadata__ value of 'k' must be a string, got an object");
  expect_rejected(make_file(R"({"__metadata__":{"k":["v"]}})"), "got an array");
  expect_rejected(make_file(R"({"__metadata__":{"k":null}})"), "got null");
  expect_rejected(make_file(R"({"__metadata__":"v"})"), "__metadata__ must be an object of strings, got a string");
  expect_rejected(make_file(R"({"__metadata__":["v"]})"), "__metadata__ must be an object of strings, got an array");
  expect_rejected(make_file(R"({"__metadata__":null})"), "__metadata__ must be an object of strings, got null");
}

TEST(SafetensorsParse, RejectsBoolBytesOtherThanZeroAndOne) {
  expect_rejected(make_file(R"({"b":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})", bytes_of({1, 0, 2})),
                  "tensor 'b': BOOL element 2 is the byte 2, expected 0 or 1");
}

TEST(SafetensorsParse, CutsLongNamesInMessages) {
  const std::string name(1000, 'n');
  expect_rejected(make_file("{\"" + name + "\":1}"),
                  "the value of '" + std::string(64, 'n') + "...' (1000 bytes) must be an object");
}

// Every proper prefix of a valid file is rejected.
TEST_F(Safetensors, RejectsTruncationAtEveryByte) {
  const fs::path path = dir_ / "full.safetensors";
  io::save_safetensors(path,
                       {{"w", from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3})},
                        {"b", from_vector<std::int64_t>({7})},
                        {"m", from_vector<bool>({true, false})},
                        {"e", zeros({0})}},
                       {{"format", "pt"}});
  const Bytes file = read_file(path);
  ASSERT_EQ(io::parse_safetensors(file).tensors.size(), 4u);
  for (std::size_t size = 0; size < file.size(); ++size) {
    SCOPED_TRACE(size);
    EXPECT_THROW(io::parse_safetensors(std::span(file).first(size)), IOError);
  }
}

// ---- load_safetensors and save_safetensors errors ----

TEST_F(Safetensors, LoadErrorsNameTheFile) {
  const std::string missing = (dir_ / "missing.safetensors").string();
  expect_error([&] { io::load_safetensors(missing); }, "load_safetensors",
               "'" + missing + "': cannot open the file: No such file or directory");
  expect_error([&] { io::load_safetensors(dir_); }, "load_safetensors", "'" + dir_.string() + "': not a regular file");
  const fs::path empty_file = dir_ / "empty.safetensors";
  write_file(empty_file, {});
  expect_error([&] { io::load_safetensors(empty_file); }, "load_safetensors",
               "'" + empty_file.string() + "': the file has 0 bytes");
  const fs::path bad = dir_ / "bad.safetensors";
  write_file(bad, make_file(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})", Bytes(1)));
  expect_error([&] { io::load_safetensors(bad); }, "load_safetensors",
               "'" + bad.string() + "': tensor 'a': data_offsets [0, 2] run past the end of the file");
}

TEST_F(Safetensors, SaveRejectsWhatTheFormatCannotHoldAndLeavesTheOldFile) {
  const fs::path path = dir_ / "keep.safetensors";
  io::save_safetensors(path, {{"old", zeros({2})}});
  const Bytes old = read_file(path);

  expect_error<Error>([&] { io::save_safetensors(path, {{"a", Tensor()}}); }, "save_safetensors",
                      "tensor 'a' is undefined");
  expect_error([&] { io::save_safetensors(path, {{"__metadata__", zeros({1})}}); }, "save_safetensors",
               "the name '__metadata__' is reserved");
  expect_error([&] { io::save_safetensors(path, {{"bad\xff", zeros({1})}}); }, "save_safetensors",
               "tensor name 'bad\xff' is not valid UTF-8");
  expect_error([&] { io::save_safetensors(path, {}, {{"k\xc3", "v"}}); }, "save_safetensors",
               "metadata key 'k\xc3' is not valid UTF-8");
  expect_error([&] { io::save_safetensors(path, {}, {{"k", "\xed\xa0\x80"}}); }, "save_safetensors",
               "the value of metadata key 'k' ");
  EXPECT_EQ(read_file(path), old);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

// Readers refuse headers over 100,000,000 bytes, so the writer does too.
TEST_F(Safetensors, SaveRejectsHeadersOverTheReadersLimit) {
  const fs::path path = dir_ / "long.safetensors";
  expect_error([&] { io::save_safetensors(path, {{std::string(100'000'000, 'n'), zeros({0})}}); }, "save_safetensors",
               "the header would have 100000056 bytes, more than readers accept (100000000)");
  EXPECT_FALSE(fs::exists(path));
}

TEST_F(Safetensors, SaveErrorsNameTheFunctionAndThePath) {
  const std::string target = (dir_ / "no_such_dir" / "m.safetensors").string();
  expect_error([&] { io::save_safetensors(target, {{"a", zeros({1})}}); }, "save_safetensors",
               "no_such_dir/.m.safetensors.tmp-");
  expect_error([&] { io::save_safetensors(target, {{"a", zeros({1})}}); }, "save_safetensors",
               "No such file or directory");
}

TEST_F(Safetensors, SaveReplacesAnExistingFile) {
  const fs::path path = dir_ / "model.safetensors";
  io::save_safetensors(path, {{"a", zeros({1000})}});
  io::save_safetensors(path, {{"b", ones({2})}});
  const io::SafetensorsFile loaded = io::load_safetensors(path);
  ASSERT_EQ(loaded.tensors.size(), 1u);
  EXPECT_EQ(loaded.tensors.at("b").shape(), (Shape{2}));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(Safetensors, SavesCudaTensorsFromHostCopies) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const Tensor host = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const fs::path path = dir_ / "cuda.safetensors";
  io::save_safetensors(path, {{"c", host.to(Device::cuda(0)).t()}});
  const Tensor loaded = io::load_safetensors(path).tensors.at("c");
  EXPECT_TRUE(loaded.device().is_cpu());
  EXPECT_EQ(raw_bytes(loaded), raw_bytes(host.t()));
}

}  // namespace
}  // namespace infini::safetensors_test
