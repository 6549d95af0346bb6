// INFINI_CUDA_PROFILE=1: GPU time per op, for finding where a training step spends its
// time on a machine without nsys. After each op's launches a timing event is recorded on
// the stream; the time between consecutive events is charged to the later op, so while
// the GPU is kept busy (the host runs ahead) each op is charged its own kernels' time,
// and an idle gap is charged to the op that ends it. Events are read back in batches
// (and at every synchronize); the table is printed to stderr at exit.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "launch.cuh"

namespace infini::cuda::detail {
namespace {

class OpProfile {
 public:
  ~OpProfile() { print(); }  // no CUDA calls here: the runtime may already be shut down

  void mark(std::string key) {
    cudaEvent_t event = take_event();
    check(cudaEventRecord(event, stream()), "cudaEventRecord (INFINI_CUDA_PROFILE)");
    pending_.emplace_back(std::move(key), event);
    if (pending_.size() >= kBatch) resolve();
  }

  // Waits for the pending events and charges each op the time since the event before it.
  void resolve() {
    if (pending_.empty()) return;
    check(cudaEventSynchronize(pending_.back().second), "cudaEventSynchronize (INFINI_CUDA_PROFILE)");
    for (auto& [key, event] : pending_) {
      Totals& totals = totals_[key];
      ++totals.count;
      if (anchor_ != nullptr) {
        float ms = 0;
        check(cudaEventElapsedTime(&ms, anchor_, event), "cudaEventElapsedTime (INFINI_CUDA_PROFILE)");
        totals.ms += ms;
        free_.push_back(anchor_);
      }
      anchor_ = event;
    }
    pending_.clear();
  }

 private:
  static constexpr std::size_t kBatch = 4096;
  struct Totals {
    long long count = 0;
    double ms = 0;
  };

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
    double total = 0;
    for (const auto& [key, totals] : totals_) {
      rows.emplace_back(totals.ms, key);
      total += totals.ms;
    }
    std::sort(rows.rbegin(), rows.rend());
    std::fprintf(stderr, "INFINI_CUDA_PROFILE: %.1f ms of GPU time in %zu op kinds\n", total, rows.size());
    std::fprintf(stderr, "%12s %6s %10s  %s\n", "ms", "%", "calls", "op(variant)");
    for (const auto& [ms, key] : rows)
      std::fprintf(stderr, "%12.2f %6.2f %10lld  %s\n", ms, total > 0 ? 100 * ms / total : 0.0,
                   totals_.at(key).count, key.c_str());
  }

  std::vector<std::pair<std::string, cudaEvent_t>> pending_;
  std::vector<cudaEvent_t> free_;
  cudaEvent_t anchor_ = nullptr;
  std::map<std::string, Totals> totals_;
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

void profile_resolve() {
  if (profiling_ops()) profile().resolve();
}

}  // namespace infini::cuda::detail
