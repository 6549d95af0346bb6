// Checkpoint directories: the manifest (JSON) and the tensors file it names.
module;
#include <cstdint>
#include <nlohmann/json.hpp>
#include "json_text.h"
module infini.nn;
import infini.std;

namespace infini::io {
namespace {

using infini::detail::json_text;

namespace fs = std::filesystem;
using detail::quote;

constexpr const char* kFormat = "infini.checkpoint";
constexpr std::int64_t kVersion = 1;
constexpr const char* kManifest = "manifest.json";
// A manifest is a few lines plus the metadata; anything bigger is not one of ours.
constexpr std::uintmax_t kMaxManifestBytes = 16u << 20;

void check_part_name(std::string_view op, const std::string& name) {
  if (name.empty() || name.find('/') != std::string::npos)
    throw Error(op, concat("part name ", quote(name), " must be non-empty and must not contain '/'"));
}

// "state-<step>-<k>.safetensors" for the smallest k naming no existing file, so that the
// file the current manifest names is never overwritten.
std::string new_tensors_name(const fs::path& dir, std::int64_t step) {
  for (std::int64_t k = 0;; ++k) {
    std::string name = concat("state-", step, "-", k, ".safetensors");
    std::error_code ec;
    if (!fs::exists(dir / name, ec)) return name;
  }
}

bool is_tensors_file(const std::string& name) {
  return name.starts_with("state-") && name.ends_with(".safetensors");
}

// Removes the tensors files of earlier saves. Best effort: a file left behind only costs space.
void remove_stale_tensors(const fs::path& dir, const std::string& keep) {
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name != keep && is_tensors_file(name)) fs::remove(entry.path(), ec);
  }
}

class ManifestReader {
 public:
  explicit ManifestReader(fs::path path) : path_(std::move(path)) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw IOError("load_checkpoint", concat(path_.string(), ": ", what));
  }

  nlohmann::json read() const {
    std::error_code ec;
    if (!fs::is_regular_file(path_, ec)) fail("no such file (not a checkpoint directory?)");
    const std::uintmax_t size = fs::file_size(path_, ec);
    if (ec) fail("cannot stat: " + ec.message());
    if (size > kMaxManifestBytes) fail(concat("is ", size, " bytes, more than a manifest can be (", kMaxManifestBytes, ")"));
    std::ifstream in(path_, std::ios::binary);
    std::string text(static_cast<std::size_t>(size), '\0');
    if (!in.read(text.data(), static_cast<std::streamsize>(size))) fail("cannot read");
    try {
      return nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
      fail(concat("is not valid JSON (", e.what(), ")"));
    }
  }

  const nlohmann::json& field(const nlohmann::json& manifest, const char* key, nlohmann::json::value_t type,
                              const char* expected) const {
    const auto it = manifest.find(key);
    if (it == manifest.end()) fail(concat("has no \"", key, "\""));
    const bool ok = it->type() == type ||
                    (type == nlohmann::json::value_t::number_integer && it->is_number_unsigned());
    if (!ok) fail(concat("\"", key, "\" must be ", expected, ", got ", json_text(*it)));
    return *it;
  }

 private:
  fs::path path_;
};

}  // namespace

void save_checkpoint(const fs::path& dir, const Checkpoint& checkpoint) {
  StateDict tensors;
  nlohmann::ordered_json parts = nlohmann::ordered_json::array();
  for (const auto& [part, state] : checkpoint.parts) {
    check_part_name("save_checkpoint", part);
    parts.push_back(part);
    for (const auto& [key, tensor] : state) tensors.emplace(part + "/" + key, tensor);
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw IOError("save_checkpoint", concat("cannot create directory ", dir.string(), ": ", ec.message()));

  const std::string tensors_name = new_tensors_name(dir, checkpoint.step);
  save_safetensors(dir / tensors_name, tensors);
  const std::uintmax_t tensors_bytes = fs::file_size(dir / tensors_name, ec);
  if (ec) throw IOError("save_checkpoint", concat("cannot stat ", (dir / tensors_name).string(), ": ", ec.message()));

  nlohmann::ordered_json manifest;
  manifest["format"] = kFormat;
  manifest["version"] = kVersion;
  manifest["step"] = checkpoint.step;
  manifest["tensors"] = tensors_name;
  manifest["tensors_bytes"] = tensors_bytes;
  manifest["parts"] = parts;
  manifest["metadata"] = nlohmann::ordered_json::object();
  for (const auto& [key, value] : checkpoint.metadata) manifest["metadata"][key] = value;
  std::string text;
  try {
    text = json_text(manifest, 2) + "\n";
  } catch (const nlohmann::json::type_error&) {
    fs::remove(dir / tensors_name, ec);
    throw IOError("save_checkpoint", "a part name or metadata key or value is not valid UTF-8 (the manifest is JSON)");
  }
  try {
    write_file_atomically(dir / kManifest, [&](FileSink& out) { out.write(text); });
  } catch (...) {
    fs::remove(dir / tensors_name, ec);  // the old manifest and its tensors stay as they were
    throw;
  }
  remove_stale_tensors(dir, tensors_name);
}

Checkpoint load_checkpoint(const fs::path& dir) {
  using value_t = nlohmann::json::value_t;
  const ManifestReader reader(dir / kManifest);
  const nlohmann::json manifest = reader.read();
  if (!manifest.is_object()) reader.fail("must hold a JSON object");
  if (reader.field(manifest, "format", value_t::string, "a string") != kFormat)
    reader.fail(concat("\"format\" must be \"", kFormat, "\", got ", json_text(manifest["format"])));
  const nlohmann::json& version = reader.field(manifest, "version", value_t::number_integer, "an integer");
  if (version != kVersion)
    reader.fail(concat("\"version\" ", json_text(version), " is not supported (this reader knows version ", kVersion, ")"));
  const nlohmann::json& step = reader.field(manifest, "step", value_t::number_integer, "an integer");
  if (step.is_number_unsigned() && step.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
    reader.fail(concat("\"step\" ", json_text(step), " does not fit in int64"));
  const std::string tensors_name = reader.field(manifest, "tensors", value_t::string, "a string").get<std::string>();
  if (!is_tensors_file(tensors_name) || fs::path(tensors_name).filename() != tensors_name)
    reader.fail(concat("\"tensors\" must name a state-*.safetensors file in the same directory, got ", quote(tensors_name)));
  const nlohmann::json& bytes = reader.field(manifest, "tensors_bytes", value_t::number_unsigned, "a byte count");
  const nlohmann::json& part_list = reader.field(manifest, "parts", value_t::array, "an array of part names");
  const nlohmann::json& metadata = reader.field(manifest, "metadata", value_t::object, "an object of strings");

  Checkpoint checkpoint;
  checkpoint.step = step.get<std::int64_t>();
  for (const nlohmann::json& part : part_list) {
    if (!part.is_string()) reader.fail(concat("\"parts\" must hold strings, got ", json_text(part)));
    const std::string name = part.get<std::string>();
    if (name.empty() || name.find('/') != std::string::npos) reader.fail(concat("invalid part name ", quote(name)));
    if (!checkpoint.parts.emplace(name, StateDict{}).second) reader.fail(concat("part ", quote(name), " is listed twice"));
  }
  for (const auto& [key, value] : metadata.items()) {
    if (!value.is_string()) reader.fail(concat("metadata ", quote(key), " must be a string, got ", json_text(value)));
    checkpoint.metadata.emplace(key, value.get<std::string>());
  }

  const fs::path tensors_path = dir / tensors_name;
  std::error_code ec;
  const std::uintmax_t size = fs::file_size(tensors_path, ec);
  if (ec) throw IOError("load_checkpoint", concat(tensors_path.string(), " (named by the manifest): ", ec.message()));
  if (size != bytes.get<std::uint64_t>())
    throw IOError("load_checkpoint", concat(tensors_path.string(), " has ", size, " bytes, the manifest says ",
                                            bytes.get<std::uint64_t>()));
  for (auto& [name, tensor] : load_safetensors(tensors_path).tensors) {
    const std::size_t slash = name.find('/');
    const auto part = slash == std::string::npos ? checkpoint.parts.end() : checkpoint.parts.find(name.substr(0, slash));
    if (part == checkpoint.parts.end())
      throw IOError("load_checkpoint", concat(tensors_path.string(), ": tensor ", quote(name),
                                              " belongs to no part the manifest lists"));
    part->second.emplace(name.substr(slash + 1), std::move(tensor));
  }
  return checkpoint;
}

TrainingState& TrainingState::add_part(std::string name, std::function<StateDict()> save,
                                       std::function<void(const StateDict&)> load) {
  check_part_name("TrainingState.add", name);
  for (const Part& part : parts_)
    if (part.name == name) throw Error("TrainingState.add", concat("part ", quote(name), " is already registered"));
  parts_.push_back({std::move(name), std::move(save), std::move(load)});
  return *this;
}

TrainingState& TrainingState::add_generator(std::string name, Generator& generator) {
  return add_part(std::move(name), [&generator] { return generator_state_dict(generator); },
                  [&generator](const StateDict& state) { load_generator_state_dict(generator, state); });
}

Checkpoint TrainingState::capture() const {
  Checkpoint checkpoint{.step = step, .parts = {}, .metadata = metadata};
  for (const Part& part : parts_) checkpoint.parts.emplace(part.name, part.save());
  return checkpoint;
}

void TrainingState::restore(const Checkpoint& checkpoint) {
  std::vector<std::string> missing, unexpected;
  std::set<std::string> registered;
  for (const Part& part : parts_) {
    registered.insert(part.name);
    if (!checkpoint.parts.contains(part.name)) missing.push_back(part.name);
  }
  for (const auto& [name, state] : checkpoint.parts)
    if (!registered.contains(name)) unexpected.push_back(name);
  if (!missing.empty() || !unexpected.empty()) {
    auto list = [](const std::vector<std::string>& names) {
      std::string text;
      for (const std::string& name : names) text += (text.empty() ? "" : ", ") + quote(name);
      return text.empty() ? std::string("none") : text;
    };
    throw Error("TrainingState.restore", concat("the checkpoint does not match the registered parts: missing ",
                                                list(missing), "; not registered ", list(unexpected)));
  }
  for (const Part& part : parts_) part.load(checkpoint.parts.at(part.name));
  step = checkpoint.step;
  metadata = checkpoint.metadata;
}

void save_checkpoint(const fs::path& dir, const TrainingState& state) { save_checkpoint(dir, state.capture()); }

void load_checkpoint(const fs::path& dir, TrainingState& state) { state.restore(load_checkpoint(dir)); }

StateDict generator_state_dict(Generator& generator) {
  const PhiloxState state = generator.state();
  StateDict out;
  optim::StateWriter writer(out, "");
  writer.integer("seed", static_cast<std::int64_t>(state.seed));
  writer.integer("offset", static_cast<std::int64_t>(state.offset));
  return out;
}

void load_generator_state_dict(Generator& generator, const StateDict& state) {
  optim::StateReader reader("load_generator_state_dict", "", state);
  const PhiloxState philox{.seed = static_cast<std::uint64_t>(reader.integer("seed")),
                           .offset = static_cast<std::uint64_t>(reader.integer("offset"))};
  reader.finish();
  generator.set_state(philox);
}

}  // namespace infini::io
