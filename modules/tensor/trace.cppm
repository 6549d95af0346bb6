// Tracing for --profile: events in the Chrome trace format (chrome://tracing and Perfetto open
// the JSON). While recording is on, the kernel registry records every kernel call ("op"),
// nn::Module every module's forward ("module"), the autograd engine every backward node
// ("backward"), infini.parallel every communication operation from launch to completion
// ("comm", with its bytes) and every blocking wait ("wait"), and the pipeline its schedule's
// passes ("pipeline": F, B, I and W of micro-batch m, chunk c). Off, each of those sites costs
// one relaxed atomic load. Times are the steady clock's microseconds: on one machine every
// process shares the timeline, so the ranks' files merge into one view. CUDA kernels are timed
// at launch (the host's view).
//
//   trace::set_recording(true);
//   ... a step ...
//   trace::set_recording(false);
//   trace::write_chrome_file(dir / "rank_0.json", trace::take_events(), 0, "rank 0");
export module infini.tensor:trace;
import infini.std;

export namespace infini::trace {

struct Event {
  std::string name, category;
  char phase = 'X';  // 'X': a complete slice on thread `track`; 'b' / 'e': an async slice `id`
                     // (written as "<pid>.<id>", apart over merged processes)
  std::int64_t ts_us = 0, duration_us = 0;
  int track = 0;
  std::uint64_t id = 0;
  std::string args;  // members of the event's "args" object, e.g. "\"bytes\": 4096"
};

namespace detail {
inline std::atomic<bool> recording{false};
}

inline bool recording() noexcept { return detail::recording.load(std::memory_order_relaxed); }
void set_recording(bool on) noexcept;
std::int64_t now_us() noexcept;
// This thread's track: 0 for the first thread that records, 1 for the next, ...
int thread_track();
void add(Event event);  // thread-safe
// The events recorded so far (oldest first); the buffer is emptied.
std::vector<Event> take_events();
// A new id for an async slice's 'b' and 'e' events.
std::uint64_t next_async_id() noexcept;

// A complete event from construction to destruction on this thread's track, when recording
// at construction; nothing otherwise.
class Span {
 public:
  Span(std::string_view name, std::string_view category);
  ~Span();
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  std::string name_;
  std::string_view category_;
  std::int64_t start_us_ = -1;
};

// JSON string contents of `text` (quotes, backslashes and control characters escaped).
std::string json_escape(std::string_view text);
// Writes `events` as a Chrome trace file (process `pid`, named `process_name`), through a
// temporary file renamed into place. IOError naming the path when it cannot be written.
void write_chrome_file(const std::filesystem::path& path, const std::vector<Event>& events, int pid,
                       std::string_view process_name);
// One file with every event of `inputs` (files write_chrome_file wrote: their processes keep
// their pids). IOError naming a file that is missing or not in that form.
void merge_chrome_files(const std::vector<std::filesystem::path>& inputs, const std::filesystem::path& output);

}  // namespace infini::trace
