// The flight recorder's ring and its async-signal-safe writer.
module;
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
module infini.parallel;
import infini.std;

namespace infini::parallel {
namespace {

// Appends text to a fixed buffer; no allocation, no locale: usable in a signal handler.
struct LineBuffer {
  char data[512];
  std::size_t size = 0;

  void put(std::string_view s) {
    const std::size_t n = std::min(s.size(), sizeof(data) - size);
    std::memcpy(data + size, s.data(), n);
    size += n;
  }
  void put(const char* s) { put(std::string_view(s, ::strnlen(s, sizeof(data)))); }
  void put_uint(std::uint64_t v) {
    char digits[24];
    int n = 0;
    do digits[n++] = static_cast<char>('0' + v % 10); while ((v /= 10) != 0);
    while (n > 0 && size < sizeof(data)) data[size++] = digits[--n];
  }
  // Nanoseconds as seconds with 6 decimals: "1.234567s".
  void put_seconds(std::int64_t ns) {
    if (ns < 0) put("-"), ns = -ns;
    const auto us = static_cast<std::uint64_t>(ns / 1000);
    put_uint(us / 1000000);
    put(".");
    const std::uint64_t frac = us % 1000000;
    for (std::uint64_t scale = 100000; scale > 0; scale /= 10) put_uint(frac / scale % 10);
    put("s");
  }
};

void write_all(int fd, const char* data, std::size_t size) noexcept {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n <= 0) return;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

std::string_view state_name(OpState s) {
  switch (s) {
    case OpState::Scheduled: return "scheduled";
    case OpState::Completed: return "completed";
    case OpState::Failed: return "failed";
    case OpState::TimedOut: return "timed out";
  }
  return "?";
}

void copy_field(char* dst, std::size_t capacity, std::string_view s) {
  const std::size_t n = std::min(s.size(), capacity - 1);
  std::memcpy(dst, s.data(), n);
  dst[n] = '\0';
}

std::int64_t now_ns(std::chrono::steady_clock::time_point origin) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - origin).count();
}

void on_sigterm(int) {
  FlightRecorder::instance().dump("SIGTERM");
  ::signal(SIGTERM, SIG_DFL);
  ::raise(SIGTERM);
}

}  // namespace

FlightRecorder::FlightRecorder() : origin_(std::chrono::steady_clock::now()) {
  std::size_t size = 512;
  if (const char* env = std::getenv("INFINI_FLIGHT_RECORDER_SIZE")) size = std::max(1L, std::atol(env));
  ring_.resize(size);
}

FlightRecorder& FlightRecorder::instance() {
  static FlightRecorder recorder;
  return recorder;
}

void FlightRecorder::set_rank(int rank, int world_size) {
  rank_ = rank;
  world_size_ = world_size;
  file_[0] = '\0';
  if (const char* dir = std::getenv("INFINI_FLIGHT_RECORDER_DIR"); dir && *dir) {
    const std::string path = std::string(dir) + "/rank_" + std::to_string(rank) + ".txt";
    copy_field(file_, sizeof(file_), path);
  }
}

void FlightRecorder::install_sigterm_handler() {
  struct sigaction action {};
  action.sa_handler = on_sigterm;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGTERM, &action, nullptr);
}

std::uint64_t FlightRecorder::start(std::string_view op, std::string_view group, std::string_view peers,
                                    std::string_view tensor, std::uint64_t seq, std::int64_t bytes) {
  const std::uint64_t id = next_id_++;
  OpRecord& r = ring_[id % ring_.size()];
  r.id = 0;  // a half-written slot reads as empty
  r.seq = seq;
  r.start_ns = now_ns(origin_);
  r.end_ns = -1;
  r.bytes = bytes;
  r.state = OpState::Scheduled;
  copy_field(r.op, sizeof(r.op), op);
  copy_field(r.group, sizeof(r.group), group);
  copy_field(r.peers, sizeof(r.peers), peers);
  copy_field(r.tensor, sizeof(r.tensor), tensor);
  r.id = id;
  return id;
}

void FlightRecorder::finish(std::uint64_t id, OpState state) {
  OpRecord& r = ring_[id % ring_.size()];
  if (r.id != id) return;  // overwritten by newer operations
  r.end_ns = now_ns(origin_);
  r.state = state;
}

std::vector<OpRecord> FlightRecorder::snapshot() const {
  std::vector<OpRecord> out;
  for (std::uint64_t id = next_id_ > ring_.size() ? next_id_ - ring_.size() : 1; id < next_id_; ++id)
    if (const OpRecord& r = ring_[id % ring_.size()]; r.id == id) out.push_back(r);
  return out;
}

void FlightRecorder::write_to(int fd, std::string_view reason) const noexcept {
  const std::int64_t now = now_ns(origin_);
  const std::uint64_t first = next_id_ > ring_.size() ? next_id_ - ring_.size() : 1;
  LineBuffer head;
  head.put("[infini flight recorder] rank ");
  head.put_uint(static_cast<std::uint64_t>(rank_));
  head.put(" of ");
  head.put_uint(static_cast<std::uint64_t>(world_size_));
  head.put(" (pid ");
  head.put_uint(static_cast<std::uint64_t>(::getpid()));
  head.put("), ");
  head.put(reason);
  head.put(": last ");
  head.put_uint(next_id_ - first);
  head.put(" of ");
  head.put_uint(next_id_ - 1);
  head.put(" operations, oldest first\n");
  write_all(fd, head.data, head.size);
  for (std::uint64_t id = first; id < next_id_; ++id) {
    const OpRecord& r = ring_[id % ring_.size()];
    if (r.id != id) continue;
    LineBuffer line;
    line.put("  rank ");
    line.put_uint(static_cast<std::uint64_t>(rank_));
    line.put(" ");
    line.put(r.op);
    line.put(" #");
    line.put_uint(r.seq);
    line.put(" group=");
    line.put(r.group);
    line.put(" peers=");
    line.put(r.peers);
    line.put(" tensor=");
    line.put(r.tensor);
    line.put(" bytes=");
    line.put_uint(static_cast<std::uint64_t>(r.bytes));
    line.put(" state=");
    line.put(state_name(r.state));
    line.put(" start=+");
    line.put_seconds(r.start_ns);
    if (r.end_ns >= 0) {
      line.put(" took ");
      line.put_seconds(r.end_ns - r.start_ns);
    } else {
      line.put(" pending for ");
      line.put_seconds(now - r.start_ns);
    }
    line.put("\n");
    write_all(fd, line.data, line.size);
  }
}

void FlightRecorder::dump(std::string_view reason) noexcept {
  const bool sigterm = reason == "SIGTERM";
  if (dumped_ && !sigterm) return;
  dumped_ = true;
  write_to(STDERR_FILENO, reason);
  if (file_[0] != '\0') {
    const int fd = ::open(file_, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      write_to(fd, reason);
      ::close(fd);
    }
  }
}

}  // namespace infini::parallel
