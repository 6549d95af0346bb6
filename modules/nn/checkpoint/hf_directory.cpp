// The directory machinery of the Hugging Face mappings (see hf_directory.cppm).
module;
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include "json_text.h"
module infini.nn;
import infini.std;

namespace infini::hf::detail {
namespace {

namespace fs = std::filesystem;
using infini::detail::json_text;
using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

Json read_json(const Source& source, const std::string& file) {
  std::ifstream in(source.dir / file, std::ios::binary);
  if (!in) source.fail("cannot open ", file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Json value;
  try {
    value = Json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    source.fail(file, " is not JSON: ", e.what());
  }
  if (!value.is_object()) source.fail(file, " is not a JSON object");
  return value;
}

bool stored_dtype(DataType t) { return t == kFloat32 || t == kBFloat16 || t == kFloat16; }

// Every tensor of the directory: model.safetensors, or the shards its index lists (each name
// in the file the index maps it to, and every file holding only what the index maps to it).
StateDict read_weights(const Source& source) {
  if (fs::exists(source.dir / kSingleFile)) return io::load_safetensors(source.dir / kSingleFile).tensors;
  if (!fs::exists(source.dir / kIndexFile)) source.fail("holds neither ", kSingleFile, " nor ", kIndexFile);
  const Json index = read_json(source, kIndexFile);
  const auto map = index.find("weight_map");
  if (map == index.end() || !map->is_object()) source.fail(kIndexFile, " has no \"weight_map\" object");
  std::map<std::string, std::vector<std::string>> names_in;  // shard file -> the names the index maps to it
  for (const auto& [name, file] : map->items()) {
    if (!file.is_string()) source.fail(kIndexFile, " maps '", name, "' to ", json_text(file), ", not a file name");
    const std::string f = file.get<std::string>();
    if (f.empty() || f == "." || f == ".." || f.find('/') != std::string::npos)
      source.fail(kIndexFile, " maps '", name, "' to \"", f, "\", not a file in the directory");
    names_in[f].push_back(name);
  }
  StateDict all;
  for (const auto& [file, names] : names_in) {
    StateDict shard = io::load_safetensors(source.dir / file).tensors;
    for (auto& [name, tensor] : shard) {
      const auto listed = map->find(name);
      if (listed == map->end()) source.fail(file, " holds '", name, "', which ", kIndexFile, " does not list");
      if (listed->get<std::string>() != file)
        source.fail(file, " holds '", name, "', which ", kIndexFile, " maps to ", json_text(*listed));
      all.emplace(name, std::move(tensor));
    }
    for (const std::string& name : names)
      if (!all.contains(name)) source.fail(kIndexFile, " maps '", name, "' to ", file, ", which does not hold it");
  }
  return all;
}

// transformers' shard names: model-00001-of-00003.safetensors.
std::string shard_name(std::size_t k, std::size_t n) {
  char name[64];
  std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", k, n);
  return name;
}

}  // namespace

std::string Source::config_text() const { return text::detail::read_text_file(op.c_str(), dir / "config.json"); }

Weights::Weights(const Source& source) : source_(source), all_(read_weights(source)) {}

Tensor Weights::take(const std::string& name, const Shape& shape) {
  const auto it = all_.find(name);
  if (it == all_.end()) {
    missing_.push_back(name);
    return {};
  }
  taken_.insert(name);
  if (!stored_dtype(it->second.dtype())) {
    bad_dtype_.push_back(concat(name, " (", it->second.dtype(), ")"));
    return {};
  }
  if (it->second.shape() != shape) {
    misshapen_.push_back(concat(name, " is ", it->second.shape(), ", expected ", shape));
    return {};
  }
  return it->second.to(kFloat32);
}

void Weights::finish(std::string_view model, const std::function<bool(const std::string&)>& skipped) const {
  std::vector<std::string> unexpected;
  for (const auto& [name, tensor] : all_)
    if (!taken_.contains(name) && !skipped(name)) unexpected.push_back(name);
  std::string report;
  const auto add = [&](const char* what, const std::vector<std::string>& items) {
    if (items.empty()) return;
    report += concat(report.empty() ? "" : "; ", what, " ");
    for (std::size_t i = 0; i < items.size(); ++i) report += concat(i ? ", " : "", items[i]);
  };
  add("missing", missing_);
  add("misshapen", misshapen_);
  add("not float32, bfloat16 or float16:", bad_dtype_);
  add("unexpected", unexpected);
  if (!report.empty()) source_.fail("the weights do not match config.json's ", model, ": ", report);
}


Tensor stacked(const TensorList& per_layer, std::int64_t layers) {
  for (const Tensor& t : per_layer)
    if (!t.defined()) return {};
  return static_cast<std::int64_t>(per_layer.size()) == layers ? stack(per_layer).contiguous() : Tensor();
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined() || a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor x = a.contiguous(), y = b.contiguous();
  return std::memcmp(x.data_ptr(), y.data_ptr(), static_cast<std::size_t>(x.nbytes())) == 0;
}

const char* dtype_name(DataType t) { return t == kFloat32 ? "float32" : t == kBFloat16 ? "bfloat16" : "float16"; }

double decimal(float x) {
  char text[32];
  for (int digits = 1; digits <= 9; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, static_cast<double>(x));
    if (static_cast<float>(std::strtod(text, nullptr)) == x) break;
  }
  return std::strtod(text, nullptr);
}

void check_options(const Source& source, const WriteOptions& options) {
  if (!stored_dtype(options.dtype))
    throw DTypeError(source.op, concat("stores float32, bfloat16 or float16, got ", options.dtype));
  if (options.max_shard_bytes < 1)
    throw Error(source.op, concat("max_shard_bytes ", options.max_shard_bytes, ": expected >= 1"));
}

void write_directory(const Source& source, const NamedTensors& tensors, const std::string& config_text,
                     const WriteOptions& options) {
  std::int64_t total = 0;
  std::vector<StateDict> shards(1);
  std::int64_t in_shard = 0;
  for (const auto& [name, t] : tensors) {
    total += t.nbytes();
    if (!shards.back().empty() && in_shard + t.nbytes() > options.max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().emplace(name, t);
    in_shard += t.nbytes();
  }
  std::error_code ec;
  fs::create_directories(source.dir, ec);
  if (ec) source.fail("cannot create the directory: ", ec.message());
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  const auto write_text = [&](const char* file, const std::string& text) {
    io::write_file_atomically(source.dir / file, [&](io::FileSink& out) { out.write(text); });
  };
  if (shards.size() == 1) {
    io::save_safetensors(source.dir / kSingleFile, shards.front(), metadata);
    fs::remove(source.dir / kIndexFile, ec);
  } else {
    OrderedJson weight_map = OrderedJson::object();
    for (std::size_t k = 0; k < shards.size(); ++k) {
      const std::string file = shard_name(k + 1, shards.size());
      io::save_safetensors(source.dir / file, shards[k], metadata);
      for (const auto& [name, t] : tensors)
        if (shards[k].contains(name)) weight_map[name] = file;
    }
    OrderedJson index;
    index["metadata"] = {{"total_size", total}};
    index["weight_map"] = std::move(weight_map);
    write_text(kIndexFile, json_text(index, 2) + "\n");
    fs::remove(source.dir / kSingleFile, ec);
  }
  write_text("config.json", config_text);
}

const Tensor& named(const NamedTensors& tensors, std::string_view name) {
  return std::find_if(tensors.begin(), tensors.end(), [&](const auto& entry) { return entry.first == name; })->second;
}

}  // namespace infini::hf::detail
