// Internal to the safetensors reader and writer (infini.nn imports it without exporting it):
// dtype names, the JSON header as parsed, and IOErrors that name the file being read.
export module infini.nn:safetensors_header;
import infini.std;
import infini.tensor;

export namespace infini::io::detail {

// The reference implementation's limit on the JSON header.
inline constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;

// safetensors' names of Infini's dtypes, indexed by DataType.
inline constexpr std::array<std::string_view, kDataTypeCount> kDtypeNames = {"BOOL", "U8",  "I8",   "I16", "I32",
                                                                            "I64",  "F16", "BF16", "F32", "F64"};
static_assert(kDtypeNames[static_cast<int>(kBool)] == "BOOL" && kDtypeNames[static_cast<int>(kFloat64)] == "F64");

constexpr std::string_view dtype_name(DataType t) noexcept { return kDtypeNames[static_cast<int>(t)]; }

constexpr std::optional<DataType> dtype_from_name(std::string_view name) noexcept {
  for (int i = 0; i < kDataTypeCount; ++i)
    if (kDtypeNames[i] == name) return static_cast<DataType>(i);
  return std::nullopt;
}

// 'text' for messages, cut after 64 bytes: names and values come from untrusted files.
inline std::string quote(std::string_view text) {
  constexpr std::size_t kShown = 64;
  if (text.size() <= kShown) return "'" + std::string(text) + "'";
  return "'" + std::string(text.substr(0, kShown)) + "...' (" + std::to_string(text.size()) + " bytes)";
}

// Who reports an error (the op) about what (a file's path; empty for bytes in memory).
struct ErrorSource {
  std::string_view op;
  std::string_view file;

  // Throws IOError "<op>: '<file>': <parts...>".
  template <class... Parts>
  [[noreturn]] void fail(const Parts&... parts) const {
    if (file.empty()) throw IOError(op, concat(parts...));
    throw IOError(op, concat("'", file, "': ", parts...));
  }
};

// One tensor entry of the header, checked for JSON types only (the layout is checked later).
struct HeaderEntry {
  std::string name;
  DataType dtype = kFloat32;
  std::vector<std::uint64_t> shape;
  std::uint64_t begin = 0;  // data_offsets, relative to the start of the byte buffer
  std::uint64_t end = 0;
};

struct Header {
  std::vector<HeaderEntry> tensors;  // in the order of the JSON text
  std::map<std::string, std::string> metadata;
};

// Parses the JSON header text: an object of tensor entries
// {"dtype": known name, "shape": [non-negative integers], "data_offsets": [begin, end]}
// (exactly these keys) and an optional "__metadata__" object of strings. Rejects invalid
// JSON or UTF-8, duplicate keys at any level and anything else, via source.fail, stopping
// at the first unexpected token (no document tree is built).
Header parse_header(std::string_view json, const ErrorSource& source);

}  // namespace infini::io::detail
