// Chrome trace events (see trace.cppm).
module;
#include <cstdio>

#include <nlohmann/json.hpp>
module infini.tensor;
import infini.std;

namespace infini::trace {

namespace {

std::mutex mutex;
std::vector<Event> events;
std::atomic<int> tracks{0};
std::atomic<std::uint64_t> async_ids{1};

void write_atomically(const std::filesystem::path& path, const std::string& text) {
  const std::filesystem::path temporary = path.string() + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) throw IOError("trace", "cannot write " + temporary.string());
    out << text;
    if (!out.flush()) throw IOError("trace", "cannot write " + temporary.string());
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) throw IOError("trace", concat("cannot rename ", temporary.string(), " to ", path.string(), ": ", error.message()));
}

constexpr std::string_view kHeader = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
constexpr std::string_view kFooter = "\n]}\n";

}  // namespace

void set_recording(bool on) noexcept { detail::recording.store(on, std::memory_order_relaxed); }

std::int64_t now_us() noexcept {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int thread_track() {
  thread_local const int track = tracks.fetch_add(1);
  return track;
}

void add(Event event) {
  const std::lock_guard lock(mutex);
  events.push_back(std::move(event));
}

std::vector<Event> take_events() {
  const std::lock_guard lock(mutex);
  return std::exchange(events, {});
}

std::uint64_t next_async_id() noexcept { return async_ids.fetch_add(1); }

Span::Span(std::string_view name, std::string_view category) {
  if (!recording()) return;
  name_ = name;
  category_ = category;
  start_us_ = now_us();
}

Span::~Span() {
  if (start_us_ < 0) return;
  const std::int64_t end = now_us();
  add({.name = std::move(name_), .category = std::string(category_), .ts_us = start_us_,
       .duration_us = end - start_us_, .track = thread_track(), .id = 0, .args = {}});
}

std::string json_escape(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char code[8];
      std::snprintf(code, sizeof code, "\\u%04x", static_cast<unsigned>(c));
      out += code;
    } else {
      out += c;
    }
  }
  return out;
}

void write_chrome_file(const std::filesystem::path& path, const std::vector<Event>& list, int pid,
                       std::string_view process_name) {
  std::ostringstream out;
  out << kHeader << "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": " << pid << ", \"args\": {\"name\": \""
      << json_escape(process_name) << "\"}}";
  for (const Event& e : list) {
    out << ",\n{\"ph\": \"" << e.phase << "\", \"name\": \"" << json_escape(e.name) << "\", \"cat\": \""
        << json_escape(e.category) << "\", \"pid\": " << pid << ", \"tid\": " << e.track << ", \"ts\": " << e.ts_us;
    if (e.phase == 'X') out << ", \"dur\": " << e.duration_us;
    else out << ", \"id\": \"" << pid << "." << e.id << "\"";  // unique over the merged processes
    out << ", \"args\": {" << e.args << "}}";
  }
  out << kFooter;
  write_atomically(path, out.str());
}

void merge_chrome_files(const std::vector<std::filesystem::path>& inputs, const std::filesystem::path& output) {
  std::string merged(kHeader);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    std::ifstream in(inputs[i], std::ios::binary);
    if (!in) throw IOError("trace", "cannot read " + inputs[i].string());
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // Header and footer apart (they share a newline) around at least one event (the process
    // name write_chrome_file always writes: no empty list to leave a stray comma) of JSON
    // values: the merged file is valid JSON whatever the inputs held. The JSON parser stops at
    // a NUL byte, which write_chrome_file never writes (json_escape), so one is refused first.
    const bool framed = text.size() >= kHeader.size() + kFooter.size() && text.starts_with(kHeader) &&
                        text.ends_with(kFooter);
    const std::string events = framed ? text.substr(kHeader.size(), text.size() - kHeader.size() - kFooter.size()) : "";
    if (!framed || events.find_first_not_of(" \t\r\n") == std::string::npos || events.find('\0') != std::string::npos ||
        !nlohmann::json::accept("[" + events + "]"))
      throw IOError("trace", inputs[i].string() + " is not a trace file written by write_chrome_file");
    if (i > 0) merged += ",\n";
    merged += events;
  }
  merged += kFooter;
  write_atomically(output, merged);
}

}  // namespace infini::trace
