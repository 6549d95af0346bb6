// Distributed checkpoints: the collective save (plan, shard files, agreement, manifest) and
// the reader (see distributed_checkpoint.cppm).
module;
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include "../nn/checkpoint/json_text.h"
module infini.parallel;
import infini.std;

namespace infini::parallel {
namespace {

using infini::detail::json_text;

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kManifest = "checkpoint.json";
constexpr const char* kFormat = "infini.distributed_checkpoint";
constexpr std::int64_t kVersion = 1;
// A manifest lists a few entries per tensor; anything bigger is not one of ours.
constexpr std::uintmax_t kMaxManifestBytes = 256u << 20;

std::optional<DataType> dtype_named(std::string_view text) {
  for (int i = 0; i < kDataTypeCount; ++i)
    if (name(static_cast<DataType>(i)) == text) return static_cast<DataType>(i);
  return std::nullopt;
}

std::int64_t numel_of(const Shape& shape) {
  std::int64_t n = 1;
  for (const std::int64_t s : shape) n *= s;
  return n;
}

bool is_shard_file(const std::string& name) { return name.starts_with("shard-") && name.ends_with(".safetensors"); }

json chunk_json(const Chunk& c) {
  return {{"offsets", c.offsets}, {"sizes", c.sizes}, {"begin", c.begin}, {"end", c.end}};
}

// Every rank's `text`, in rank order (collective over group; just `text` without one).
std::vector<std::string> all_gather_text(const std::shared_ptr<ProcessGroup>& group, const std::string& text) {
  if (!group || group->size() == 1) return {text};
  const int n = group->size();
  Tensor lengths = zeros({n}, TensorOptions{.dtype = kInt64});
  group->all_gather(lengths, full({1}, static_cast<double>(text.size()), {.dtype = kInt64})).wait();
  const std::int64_t* length = lengths.data_ptr<std::int64_t>();
  const std::int64_t longest = std::max<std::int64_t>(1, *std::max_element(length, length + n));
  Tensor mine = zeros({longest}, TensorOptions{.dtype = kUInt8});
  std::memcpy(mine.data_ptr<std::uint8_t>(), text.data(), text.size());
  Tensor all = zeros({n * longest}, TensorOptions{.dtype = kUInt8});
  group->all_gather(all, mine).wait();
  std::vector<std::string> texts;
  for (int r = 0; r < n; ++r)
    texts.emplace_back(reinterpret_cast<const char*>(all.data_ptr<std::uint8_t>()) + r * longest,
                       static_cast<std::size_t>(length[r]));
  return texts;
}

// Every rank's `values` (the same count on each), rank after rank.
std::vector<std::int64_t> all_gather_integers(const std::shared_ptr<ProcessGroup>& group,
                                              const std::vector<std::int64_t>& values) {
  if (!group || group->size() == 1) return values;
  const auto n = static_cast<std::int64_t>(values.size());
  const Tensor mine = from_vector(values, {n}, {.dtype = kInt64});
  Tensor all = zeros({group->size() * n}, TensorOptions{.dtype = kInt64});
  group->all_gather(all, mine).wait();
  return {all.data_ptr<std::int64_t>(), all.data_ptr<std::int64_t>() + all.numel()};
}

// Whether the chunk lies inside `shape` and its range inside its box: an Error message otherwise.
std::string chunk_problem(const Chunk& c, const Shape& shape) {
  if (c.offsets.size() != shape.size() || c.sizes.size() != shape.size())
    return concat("a chunk of ", c.offsets.size(), " offsets and ", c.sizes.size(), " sizes for ", shape.size(),
                  " dims");
  for (std::size_t d = 0; d < shape.size(); ++d)
    if (c.offsets[d] < 0 || c.sizes[d] < 0 || c.offsets[d] > shape[d] || c.sizes[d] > shape[d] - c.offsets[d])
      return concat("a chunk at offsets ", c.offsets, " of sizes ", c.sizes, " outside shape ", shape);
  if (c.begin < 0 || c.begin > c.end || c.end > c.box_numel())
    return concat("chunk elements [", c.begin, ", ", c.end, ") outside its box of ", c.box_numel());
  return {};
}

// The whole tensor's row-major index of element `e` of the chunk's box.
std::int64_t global_index(const Chunk& c, const Shape& shape, std::int64_t e) {
  std::int64_t index = 0, rest = e, box_stride = c.box_numel(), stride = numel_of(shape);
  for (std::size_t d = 0; d < shape.size(); ++d) {
    box_stride /= std::max<std::int64_t>(c.sizes[d], 1);
    stride /= std::max<std::int64_t>(shape[d], 1);
    index += (c.offsets[d] + rest / std::max<std::int64_t>(box_stride, 1)) * stride;
    rest %= std::max<std::int64_t>(box_stride, 1);
  }
  return index;
}

// Whether chunks a and b can share an element: their elements' spans in the whole tensor's
// row-major order intersect.
bool may_overlap(const Chunk& a, const Chunk& b, const Shape& shape) {
  if (a.numel() == 0 || b.numel() == 0) return false;
  return global_index(a, shape, a.begin) <= global_index(b, shape, b.end - 1) &&
         global_index(b, shape, b.begin) <= global_index(a, shape, a.end - 1);
}

// Copies the elements `from` (its data at `source`) shares with `to` into `target` (to's data
// starts at element target_start of it), marking them in `written`; IOError naming `key` for
// an element written twice.
void copy_overlap(const std::string& key, const Chunk& from, const std::byte* source, const Chunk& to,
                  std::byte* target, std::int64_t target_start, std::size_t element_bytes,
                  std::vector<std::uint8_t>& written) {
  const std::size_t dims = from.sizes.size();
  // 0-d: one element. Otherwise the boxes' intersection, walked row by row along the last dim.
  std::vector<std::int64_t> lo(dims), hi(dims), from_stride(dims, 1), to_stride(dims, 1);
  for (std::size_t d = dims; d-- > 0;) {
    lo[d] = std::max(from.offsets[d], to.offsets[d]);
    hi[d] = std::min(from.offsets[d] + from.sizes[d], to.offsets[d] + to.sizes[d]);
    if (lo[d] >= hi[d]) return;
    if (d + 1 < dims) {
      from_stride[d] = from_stride[d + 1] * from.sizes[d + 1];
      to_stride[d] = to_stride[d + 1] * to.sizes[d + 1];
    }
  }
  const std::int64_t run = dims == 0 ? 1 : hi[dims - 1] - lo[dims - 1];
  std::vector<std::int64_t> at(lo.begin(), lo.end());  // the row's first element, whole-tensor coordinates
  for (;;) {
    std::int64_t fs = 0, ft = 0;  // its index in each box
    for (std::size_t d = 0; d < dims; ++d) {
      fs += (at[d] - from.offsets[d]) * from_stride[d];
      ft += (at[d] - to.offsets[d]) * to_stride[d];
    }
    if (fs >= from.end || ft >= to.end) return;  // later rows lie further on in both boxes
    const std::int64_t x_lo = std::max({std::int64_t{0}, from.begin - fs, to.begin - ft});
    const std::int64_t x_hi = std::min({run, from.end - fs, to.end - ft});
    if (x_lo < x_hi) {
      const std::int64_t dst = target_start + ft + x_lo - to.begin, n = x_hi - x_lo;
      for (std::int64_t i = dst; i < dst + n; ++i) {
        if (written[static_cast<std::size_t>(i)])
          throw IOError("DistributedCheckpoint.read", concat("'", key, "': two chunks of the checkpoint hold element ",
                                                             i, " of this rank's piece"));
        written[static_cast<std::size_t>(i)] = 1;
      }
      std::memcpy(target + dst * static_cast<std::int64_t>(element_bytes),
                  source + (fs + x_lo - from.begin) * static_cast<std::int64_t>(element_bytes),
                  static_cast<std::size_t>(n) * element_bytes);
    }
    // The next row: the odometer over every dim but the last.
    std::size_t d = dims < 2 ? 0 : dims - 1;
    while (d > 0 && ++at[d - 1] == hi[d - 1]) {
      at[d - 1] = lo[d - 1];
      --d;
    }
    if (d == 0) return;
  }
}

// One tensor of the plan: its dtype and shape, and every distinct chunk with the rank that
// writes it (the lowest holding it) and its name in that rank's file.
struct PlannedChunk {
  Chunk chunk;
  int rank = 0;
  std::string name;
};
struct PlannedTensor {
  DataType dtype = kFloat32;
  Shape shape;
  std::vector<PlannedChunk> chunks;
};

// What this rank holds, as the plan exchange sends it.
std::string holdings_text(const std::vector<ShardedTensor>& tensors, const std::string& stem) {
  json list = json::array();
  for (const ShardedTensor& t : tensors) {
    json chunks = json::array();
    for (const Chunk& c : t.chunks) chunks.push_back(chunk_json(c));
    list.push_back({{"key", t.key}, {"dtype", name(t.local.dtype())}, {"shape", t.global_shape}, {"chunks", chunks}});
  }
  return json_text(json{{"stem", stem}, {"tensors", list}});
}

// "shard-<step>-<k>" for the smallest k naming no file in dir (rank 0 decides).
std::string new_stem(const fs::path& dir, std::int64_t step) {
  std::set<std::string> taken;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) taken.insert(entry.path().filename().string());
  for (std::int64_t k = 0;; ++k) {
    const std::string stem = concat("shard-", step, "-", k);
    const auto used = std::find_if(taken.begin(), taken.end(), [&](const std::string& n) {
      return n.starts_with(stem + "-") || n.starts_with("." + stem + "-");
    });
    if (used == taken.end()) return stem;
  }
}

}  // namespace

// A save in progress: the plan every rank agreed on and this rank's file.
struct AsyncCheckpointSave::State {
  fs::path dir;
  std::int64_t step = 0;
  std::shared_ptr<ProcessGroup> group;
  DistributedSaveOptions options;
  int rank = 0, world = 1;
  std::string stem;
  std::map<std::string, PlannedTensor> plan;
  StateDict mine;  // this rank's chunks to write, by name in its file
  // Set by the writer (the thread, or the caller when synchronous).
  std::exception_ptr failure;
  std::int64_t bytes = 0;
  std::atomic<bool> written = false;  // set last (write_everywhere reads it while the thread runs)

  fs::path file_of(int r) const { return dir / concat(stem, "-", r, ".safetensors"); }
  // Takes the save's arguments; rank 0 picks the file names' stem.
  void begin(const fs::path& to, std::int64_t at_step, std::shared_ptr<ProcessGroup> by,
             DistributedSaveOptions with) {
    dir = to;
    step = at_step;
    group = std::move(by);
    options = std::move(with);
    rank = group ? group->rank() : 0;
    world = group ? group->size() : 1;
    std::error_code ec;
    fs::create_directories(dir, ec);  // a failure shows when the files are written
    if (rank == 0) stem = new_stem(dir, step);
  }
  void write();
  void publish();
};

namespace {

// The plan, from every rank's holdings (the same result and the same errors on every rank).
void make_plan(AsyncCheckpointSave::State& s, const std::vector<ShardedTensor>& tensors, bool copy_to_host) {
  const std::string op = "save_distributed_checkpoint";
  const std::vector<std::string> texts = all_gather_text(s.group, holdings_text(tensors, s.stem));
  s.stem = json::parse(texts[0]).at("stem").get<std::string>();  // rank 0's
  std::map<std::string, int> held_by;  // the first rank holding each key (for messages)
  for (int r = 0; r < s.world; ++r) {
    const json held = json::parse(texts[static_cast<std::size_t>(r)]);
    for (const json& t : held.at("tensors")) {
      const std::string key = t.at("key").get<std::string>();
      const DataType dtype = *dtype_named(t.at("dtype").get<std::string>());
      const Shape shape = t.at("shape").get<Shape>();
      auto [it, fresh] = s.plan.try_emplace(key, PlannedTensor{.dtype = dtype, .shape = shape, .chunks = {}});
      if (fresh) held_by[key] = r;
      if (it->second.dtype != dtype || it->second.shape != shape)
        throw Error(op, concat("'", key, "' is ", name(it->second.dtype), " ", it->second.shape, " on rank ",
                               held_by[key], " but ", name(dtype), " ", shape, " on rank ", r));
      std::size_t j = 0;
      for (const json& c : t.at("chunks")) {
        Chunk chunk{.offsets = c.at("offsets").get<std::vector<std::int64_t>>(),
                    .sizes = c.at("sizes").get<std::vector<std::int64_t>>(),
                    .begin = c.at("begin").get<std::int64_t>(),
                    .end = c.at("end").get<std::int64_t>()};
        if (const std::string problem = chunk_problem(chunk, shape); !problem.empty())
          throw Error(op, concat("'", key, "' on rank ", r, ": ", problem));
        const std::string chunk_name = concat(key, "#", j++);
        const auto same = std::find_if(it->second.chunks.begin(), it->second.chunks.end(),
                                       [&](const PlannedChunk& p) { return p.chunk == chunk; });
        if (same == it->second.chunks.end() && chunk.numel() > 0)
          it->second.chunks.push_back({.chunk = std::move(chunk), .rank = r, .name = chunk_name});
      }
    }
  }
  for (const auto& [key, t] : s.plan) {
    std::int64_t held = 0;
    for (const PlannedChunk& c : t.chunks) held += c.chunk.numel();
    if (held != numel_of(t.shape))
      throw Error(op, concat("the ranks hold ", held, " elements of '", key, "' ", t.shape, ", which has ",
                             numel_of(t.shape), ": every element must be held once"));
  }
  // This rank's chunks, as 1-d pieces of its tensors (host copies for a background write).
  for (const ShardedTensor& t : tensors) {
    const Tensor flat = t.local.reshape({-1});
    std::int64_t start = 0;
    for (std::size_t j = 0; j < t.chunks.size(); ++j) {
      const std::int64_t n = t.chunks[j].numel();
      const std::string chunk_name = concat(t.key, "#", j);
      for (const PlannedChunk& p : s.plan.at(t.key).chunks)
        if (p.rank == s.rank && p.name == chunk_name) {
          const Tensor piece = flat.narrow(0, start, n);
          s.mine[chunk_name] = copy_to_host ? (piece.device().is_cpu() ? piece.clone() : piece.to(Device::cpu())) : piece;
        }
      start += n;
    }
  }
}

}  // namespace

void AsyncCheckpointSave::State::write() {
  try {
    if (!mine.empty()) {
      io::save_safetensors(file_of(rank), mine, {{"format", kFormat}, {"step", std::to_string(step)}});
      bytes = static_cast<std::int64_t>(fs::file_size(file_of(rank)));
    }
    mine.clear();
  } catch (...) {
    failure = std::current_exception();
  }
  written = true;
}

void AsyncCheckpointSave::State::publish() {
  const std::string op = "save_distributed_checkpoint";
  if (!failure && options.after_shard_written) options.after_shard_written();
  const std::vector<std::int64_t> status = all_gather_integers(group, {failure ? 0 : 1, bytes});
  std::string failed;
  for (int r = 0; r < world; ++r)
    if (status[static_cast<std::size_t>(2 * r)] == 0) failed += concat(failed.empty() ? "" : ", ", r);
  if (!failed.empty()) {
    std::error_code ec;
    fs::remove(file_of(rank), ec);
    if (failure) std::rethrow_exception(failure);
    throw Error(op, concat("rank ", failed, " could not write its shard of step ", step, "; ", dir.string(),
                           " keeps its previous checkpoint"));
  }
  int published = 1;
  std::string problem;
  if (rank == 0) {
    try {
      json files = json::array();
      std::map<int, std::size_t> file_of_rank;
      for (int r = 0; r < world; ++r)
        if (status[static_cast<std::size_t>(2 * r + 1)] > 0) {
          file_of_rank[r] = files.size();
          files.push_back({{"name", file_of(r).filename().string()},
                           {"bytes", status[static_cast<std::size_t>(2 * r + 1)]},
                           {"rank", r}});
        }
      json entries = json::object();
      for (const auto& [key, t] : plan) {
        json chunks = json::array();
        for (const PlannedChunk& p : t.chunks) {
          json c = chunk_json(p.chunk);
          c["file"] = file_of_rank.at(p.rank);
          c["name"] = p.name;
          chunks.push_back(std::move(c));
        }
        entries[key] = {{"dtype", name(t.dtype)}, {"shape", t.shape}, {"chunks", chunks}};
      }
      json meta = json::object();
      for (const auto& [k, v] : options.metadata) meta[k] = v;
      const json manifest = {{"format", kFormat}, {"version", kVersion}, {"step", step}, {"world_size", world},
                             {"metadata", meta}, {"files", files}, {"tensors", entries}};
      const std::string text = json_text(manifest, 1) + "\n";
      io::write_file_atomically(dir / kManifest, [&](io::FileSink& out) { out.write(text); });
      // The files of earlier saves, and those a rank that died mid-write left behind.
      std::set<std::string> keep;
      for (const json& f : files) keep.insert(f.at("name").get<std::string>());
      std::error_code ec;
      for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
        const std::string n = entry.path().filename().string();
        if ((is_shard_file(n) && !keep.contains(n)) || (n.starts_with(".shard-") && n.find(".tmp-") != n.npos))
          fs::remove(entry.path(), ec);
      }
    } catch (const std::exception& e) {
      published = 0;
      problem = e.what();
    }
  }
  if (group && group->size() > 1) {
    Tensor ok = full({1}, published, {.dtype = kInt64});
    group->broadcast(ok, 0).wait();
    published = static_cast<int>(ok.item<std::int64_t>());
  }
  if (!published)
    throw IOError(op, rank == 0 ? problem : concat("rank 0 could not write the manifest of step ", step, " in ",
                                                   dir.string()));
}

AsyncCheckpointSave::AsyncCheckpointSave(const fs::path& dir, std::int64_t step, const std::vector<ShardedTensor>& tensors,
                                         std::shared_ptr<ProcessGroup> group, DistributedSaveOptions options)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.begin(dir, step, std::move(group), std::move(options));
  make_plan(s, tensors, /*copy_to_host=*/true);
  writer_ = std::thread([&s] {
    s.write();
  });
}

AsyncCheckpointSave::~AsyncCheckpointSave() {
  if (writer_.joinable()) writer_.join();
}

std::int64_t AsyncCheckpointSave::step() const { return state_->step; }

bool AsyncCheckpointSave::written_everywhere() {
  const bool done = state_->written;
  std::vector<std::int64_t> all = all_gather_integers(state_->group, {done ? 1 : 0});
  return std::all_of(all.begin(), all.end(), [](std::int64_t v) { return v == 1; });
}

void AsyncCheckpointSave::commit() {
  if (writer_.joinable()) writer_.join();
  state_->publish();
}

void save_distributed_checkpoint(const fs::path& dir, std::int64_t step, const std::vector<ShardedTensor>& tensors,
                                 const std::shared_ptr<ProcessGroup>& group, const DistributedSaveOptions& options) {
  AsyncCheckpointSave::State s;
  s.begin(dir, step, group, options);
  make_plan(s, tensors, /*copy_to_host=*/false);
  s.write();
  s.publish();
}

// The reader.

namespace {

// Reads checkpoint.json's fields, each checked for its JSON type; IOError naming the file.
class ManifestReader {
 public:
  explicit ManifestReader(fs::path path) : path_(std::move(path)) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw IOError("DistributedCheckpoint", concat("'", path_.string(), "': ", what));
  }
  json parse() const {
    std::error_code ec;
    const std::uintmax_t size = fs::file_size(path_, ec);
    if (ec) fail("cannot read it (" + ec.message() + "): not a distributed checkpoint, or not complete");
    if (size > kMaxManifestBytes) fail(concat("is ", size, " bytes, more than a manifest's ", kMaxManifestBytes));
    std::ifstream in(path_, std::ios::binary);
    std::string text(static_cast<std::size_t>(size), '\0');
    if (!in.read(text.data(), static_cast<std::streamsize>(size))) fail("cannot read it");
    json manifest = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (manifest.is_discarded() || !manifest.is_object()) fail("is not a JSON object");
    return manifest;
  }
  const json& field(const json& object, const char* key, json::value_t type, const std::string& where) const {
    const auto it = object.find(key);
    if (it == object.end()) fail(concat(where, "has no \"", key, "\""));
    const bool ok = it->type() == type || (type == json::value_t::number_integer && it->is_number_unsigned());
    if (!ok) fail(concat(where, "\"", key, "\" is ", it->type_name(), ", expected ", json(type).type_name()));
    return *it;
  }
  std::int64_t integer(const json& object, const char* key, const std::string& where) const {
    const json& v = field(object, key, json::value_t::number_integer, where);
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
      fail(concat(where, "\"", key, "\" is out of range"));
    return v.get<std::int64_t>();
  }
  std::vector<std::int64_t> integers(const json& object, const char* key, const std::string& where) const {
    std::vector<std::int64_t> values;
    for (const json& v : field(object, key, json::value_t::array, where)) {
      if (!v.is_number_integer()) fail(concat(where, "\"", key, "\" holds ", v.type_name(), ", expected integers"));
      if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
        fail(concat(where, "\"", key, "\" holds a value out of range"));
      values.push_back(v.get<std::int64_t>());
    }
    return values;
  }

 private:
  fs::path path_;
};

}  // namespace

bool is_distributed_checkpoint(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / kManifest, ec);
}

DistributedCheckpoint::DistributedCheckpoint(fs::path dir) : dir_(std::move(dir)) {
  const ManifestReader r(dir_ / kManifest);
  const json manifest = r.parse();
  using T = json::value_t;
  if (r.field(manifest, "format", T::string, "").get<std::string>() != kFormat)
    r.fail(concat("\"format\" is not \"", kFormat, "\""));
  if (r.integer(manifest, "version", "") != kVersion) r.fail(concat("\"version\" is not ", kVersion));
  step_ = r.integer(manifest, "step", "");
  const std::int64_t world = r.integer(manifest, "world_size", "");
  if (step_ < 0 || world < 1 || world > (1 << 24)) r.fail(concat("step ", step_, " or world_size ", world, " is invalid"));
  world_size_ = static_cast<int>(world);
  for (const auto& [k, v] : r.field(manifest, "metadata", T::object, "").items()) {
    if (!v.is_string()) r.fail(concat("metadata \"", k, "\" is not a string"));
    metadata_[k] = v.get<std::string>();
  }
  std::set<std::string> names;
  for (const json& f : r.field(manifest, "files", T::array, "")) {
    if (!f.is_object()) r.fail("a \"files\" entry is not an object");
    ShardFile file{.name = r.field(f, "name", T::string, "a file ").get<std::string>(),
                   .bytes = static_cast<std::uint64_t>(r.integer(f, "bytes", "a file ")),
                   .rank = static_cast<int>(r.integer(f, "rank", "a file "))};
    if (!is_shard_file(file.name) || file.name.find('/') != std::string::npos || !names.insert(file.name).second)
      r.fail(concat("file name '", file.name, "' is not a shard-*.safetensors name in its directory, or is listed twice"));
    if (file.rank < 0 || file.rank >= world_size_) r.fail(concat("file ", file.name, " has rank ", file.rank));
    files_.push_back(std::move(file));
  }
  for (const auto& [key, t] : r.field(manifest, "tensors", T::object, "").items()) {
    const std::string where = concat("tensor '", key, "': ");
    if (!t.is_object()) r.fail(where + "is not an object");
    const std::optional<DataType> dtype = dtype_named(r.field(t, "dtype", T::string, where).get<std::string>());
    if (!dtype) r.fail(where + "unknown dtype");
    StoredTensor stored{.dtype = *dtype, .shape = r.integers(t, "shape", where), .chunks = {}};
    for (const std::int64_t s : stored.shape)
      if (s < 0) r.fail(concat(where, "shape ", stored.shape));
    std::int64_t held = 0;
    for (const json& c : r.field(t, "chunks", T::array, where)) {
      if (!c.is_object()) r.fail(where + "a chunk is not an object");
      StoredChunk chunk{.chunk = {.offsets = r.integers(c, "offsets", where),
                                  .sizes = r.integers(c, "sizes", where),
                                  .begin = r.integer(c, "begin", where),
                                  .end = r.integer(c, "end", where)},
                        .file = static_cast<std::size_t>(r.integer(c, "file", where)),
                        .name = r.field(c, "name", T::string, where).get<std::string>()};
      if (const std::string problem = chunk_problem(chunk.chunk, stored.shape); !problem.empty()) r.fail(where + problem);
      if (chunk.file >= files_.size()) r.fail(concat(where, "a chunk names file ", chunk.file, " of ", files_.size()));
      held += chunk.chunk.numel();
      stored.chunks.push_back(std::move(chunk));
    }
    if (held != numel_of(stored.shape))
      r.fail(concat(where, "its chunks hold ", held, " elements of ", numel_of(stored.shape)));
    tensors_.emplace(key, std::move(stored));
  }
}

std::vector<Tensor> DistributedCheckpoint::read(const std::vector<ShardedTensor>& targets) const {
  const std::string op = "DistributedCheckpoint.read";
  struct Need {
    std::size_t target;
    const Chunk* to;
    std::int64_t target_start;
    const StoredChunk* from;
  };
  std::map<std::size_t, std::vector<Need>> needs;  // by file
  std::vector<Tensor> results;
  std::vector<std::vector<std::uint8_t>> written(targets.size());
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const ShardedTensor& target = targets[i];
    const auto found = tensors_.find(target.key);
    if (found == tensors_.end())
      throw Error(op, concat("'", dir_.string(), "' has no tensor '", target.key, "'"));
    const StoredTensor& stored = found->second;
    if (stored.shape != target.global_shape)
      throw Error(op, concat("'", target.key, "' is ", stored.shape, " in '", dir_.string(), "'; this run's is ",
                             target.global_shape));
    std::int64_t start = 0;
    for (const Chunk& to : target.chunks) {
      if (const std::string problem = chunk_problem(to, stored.shape); !problem.empty())
        throw Error(op, concat("'", target.key, "': ", problem));
      for (const StoredChunk& from : stored.chunks)
        if (may_overlap(from.chunk, to, stored.shape)) needs[from.file].push_back({i, &to, start, &from});
      start += to.numel();
    }
    if (start != target.local.numel())
      throw Error(op, concat("'", target.key, "': its chunks hold ", start, " elements, its tensor ",
                             target.local.numel()));
    results.push_back(empty({start}, TensorOptions{.dtype = stored.dtype}));
    written[i].assign(static_cast<std::size_t>(start), 0);
  }
  for (const auto& [index, file_needs] : needs) {
    const ShardFile& file = files_[index];
    const fs::path path = dir_ / file.name;
    const std::string holding = concat(" (it holds '", targets[file_needs.front().target].key, "')");
    std::error_code ec;
    const std::uintmax_t size = fs::file_size(path, ec);
    if (ec) throw IOError(op, concat("'", path.string(), "': cannot read it (", ec.message(), ")", holding));
    if (size != file.bytes)
      throw IOError(op, concat("'", path.string(), "' has ", size, " bytes; the manifest says ", file.bytes, holding));
    io::SafetensorsFile data;
    try {
      data = io::load_safetensors(path);
    } catch (const IOError& e) {
      throw IOError(op, concat(e.what(), holding));
    }
    for (const Need& need : file_needs) {
      const std::string& key = targets[need.target].key;
      const auto it = data.tensors.find(need.from->name);
      if (it == data.tensors.end())
        throw IOError(op, concat("'", path.string(), "' has no tensor '", need.from->name, "', which the manifest names ",
                                 "for '", key, "'"));
      const Tensor& chunk = it->second;
      if (chunk.dtype() != results[need.target].dtype() || chunk.numel() != need.from->chunk.numel())
        throw IOError(op, concat("'", path.string(), "': tensor '", need.from->name, "' is ", name(chunk.dtype()), " ",
                                 chunk.shape(), "; the manifest says ", name(results[need.target].dtype()), " of ",
                                 need.from->chunk.numel(), " elements for '", key, "'"));
      copy_overlap(key, need.from->chunk, static_cast<const std::byte*>(chunk.data_ptr()), *need.to,
                   static_cast<std::byte*>(results[need.target].data_ptr()), need.target_start,
                   itemsize(chunk.dtype()), written[need.target]);
    }
  }
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const auto missing = std::count(written[i].begin(), written[i].end(), std::uint8_t{0});
    if (missing > 0)
      throw IOError(op, concat("'", targets[i].key, "': ", missing, " of the ", written[i].size(),
                               " elements this rank needs are in no shard of '", dir_.string(), "'"));
    results[i] = results[i].reshape(targets[i].local.shape());
  }
  return results;
}

StateDict DistributedCheckpoint::read_whole(const std::string& prefix) const {
  std::vector<ShardedTensor> targets;
  for (const auto& [key, t] : tensors_)
    if (key.starts_with(prefix))
      targets.push_back(replicated(key, empty(t.shape, TensorOptions{.dtype = t.dtype})));
  const std::vector<Tensor> values = read(targets);
  StateDict state;
  for (std::size_t i = 0; i < targets.size(); ++i) state[targets[i].key.substr(prefix.size())] = values[i];
  return state;
}

}  // namespace infini::parallel
