// INFINI_CUDA_PROFILE=1: where a step's time goes, on a machine without nsys. Each op records
// a timing event when it makes its device current (use_device, before its launches) and one
// after its launches (after_launch); per op kind the table adds up
// - gpu ms: start to end of its own launches (a host stall inside the op, such as a read
//   back, counts here too);
// - idle ms: from the previous op's end to this op's start, the GPU waiting for the host;
// - host ms: the host time from the previous op's launches to this one's (rows of host-only
//   work, such as "matmul plan", count only their own time, which is also in the op's row).
// Events are read back in batches (and at every synchronize); the table is printed to
// stderr at exit. INFINI_CUDA_PROFILE_SKIP=N drops what was added up before the N-th
// synchronize: a trainer's first step, whose ops include loading each kernel and making each
// cuBLASLt plan.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "launch.cuh"

namespace infini::cuda::detail {
namespace {

using Clock = std::chrono::steady_clock;

class OpProfile {
 public:
  ~OpProfile() { print(); }  // no CUDA calls here: the runtime may already be shut down

  // Re-recording a start that no op has claimed yet just moves it.
  void start() {
    if (start_ == nullptr) start_ = take_event();
    check(cudaEventRecord(start_, stream()), "cudaEventRecord (INFINI_CUDA_PROFILE)");
  }

  void mark(std::string key) {
    cudaEvent_t end = take_event();
    check(cudaEventRecord(end, stream()), "cudaEventRecord (INFINI_CUDA_PROFILE)");
    const Clock::time_point now = Clock::now();
    if (last_mark_) totals_[key].host_ms += std::chrono::duration<double, std::milli>(now - *last_mark_).count();
    last_mark_ = now;
    pending_.push_back({std::move(key), start_, end});
    start_ = nullptr;
    if (pending_.size() >= kBatch) resolve();
  }

  void add_host(const std::string& key, double ms) {
    Totals& totals = totals_[key];
    ++totals.count;
    totals.host_ms += ms;
  }

  // Waits for the pending events and adds up their intervals.
  void resolve() {
    if (pending_.empty()) return;
    check(cudaEventSynchronize(pending_.back().end), "cudaEventSynchronize (INFINI_CUDA_PROFILE)");
    for (Mark& m : pending_) {
      Totals& totals = totals_[m.key];
      ++totals.count;
      const cudaEvent_t from = m.start != nullptr ? m.start : previous_end_;
      if (from != nullptr) totals.gpu_ms += elapsed(from, m.end);
      if (m.start != nullptr && previous_end_ != nullptr) totals.idle_ms += elapsed(previous_end_, m.start);
      if (m.start != nullptr) free_.push_back(m.start);
      if (previous_end_ != nullptr) free_.push_back(previous_end_);
      previous_end_ = m.end;
    }
    pending_.clear();
    last_mark_ = Clock::now();  // the wait above is not the next op's host time
  }

  // At a synchronize: the pending events are read back, and the totals so far dropped while
  // fewer than `skip` synchronizes have passed.
  void synchronized(long long skip) {
    resolve();
    if (++synchronizes_ <= skip) totals_.clear();
  }

 private:
  static constexpr std::size_t kBatch = 4096;
  struct Mark {
    std::string key;
    cudaEvent_t start, end;  // start: null when the op made no device current
  };
  struct Totals {
    long long count = 0;
    double gpu_ms = 0, idle_ms = 0, host_ms = 0;
  };

  static float elapsed(cudaEvent_t from, cudaEvent_t to) {
    float ms = 0;
    check(cudaEventElapsedTime(&ms, from, to), "cudaEventElapsedTime (INFINI_CUDA_PROFILE)");
    return ms;
  }

  cudaEvent_t take_event() {
    if (!free_.empty()) {
      cudaEvent_t event = free_.back();
      free_.pop_back();
      return event;
    }
    cudaEvent_t event = nullptr;
    check(cudaEventCreate(&event), "cudaEventCreate (INFINI_CUDA_PROFILE)");
    return event;
  }

  void print() const {
    std::vector<std::pair<double, std::string>> rows;
    Totals all;
    for (const auto& [key, totals] : totals_) {
      rows.emplace_back(totals.gpu_ms, key);
      all.gpu_ms += totals.gpu_ms;
      all.idle_ms += totals.idle_ms;
      all.host_ms += totals.host_ms;
    }
    std::sort(rows.rbegin(), rows.rend());
    std::fprintf(stderr, "INFINI_CUDA_PROFILE: %.1f ms of op GPU time, %.1f ms idle between ops, %.1f ms of host time\n",
                 all.gpu_ms, all.idle_ms, all.host_ms);
    std::fprintf(stderr, "%10s %6s %10s %10s %8s  %s\n", "gpu ms", "%", "idle ms", "host ms", "calls", "op(variant)");
    for (const auto& [ms, key] : rows) {
      const Totals& t = totals_.at(key);
      std::fprintf(stderr, "%10.2f %6.2f %10.2f %10.2f %8lld  %s\n", ms, all.gpu_ms > 0 ? 100 * ms / all.gpu_ms : 0.0,
                   t.idle_ms, t.host_ms, t.count, key.c_str());
    }
  }

  std::vector<Mark> pending_;
  std::vector<cudaEvent_t> free_;
  cudaEvent_t start_ = nullptr, previous_end_ = nullptr;
  std::optional<Clock::time_point> last_mark_;
  std::map<std::string, Totals> totals_;
  long long synchronizes_ = 0;
};

OpProfile& profile() {
  static OpProfile instance;
  return instance;
}

}  // namespace

bool profiling_ops() {
  static const bool on = [] {
    const char* value = std::getenv("INFINI_CUDA_PROFILE");
    return value != nullptr && std::string(value) == "1";
  }();
  return on;
}

void profile_start() { profile().start(); }

void profile_mark(const char* op, std::initializer_list<long long> variant) {
  std::string key = op;
  const char* separator = "(";
  for (long long v : variant) {
    key += separator + std::to_string(v);
    separator = ",";
  }
  if (variant.size() > 0) key += ")";
  profile().mark(std::move(key));
}

void profile_host(const char* what, double ms) { profile().add_host(what, ms); }

void profile_resolve() {
  static const long long skip = [] {
    const char* value = std::getenv("INFINI_CUDA_PROFILE_SKIP");
    if (value == nullptr) return 0LL;
    char* end = nullptr;
    const long long n = std::strtoll(value, &end, 10);
    return end != value && *end == '\0' && n > 0 ? n : 0LL;
  }();
  if (profiling_ops()) profile().synchronized(skip);
}

}  // namespace infini::cuda::detail
