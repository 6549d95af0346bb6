// Prefetcher (see prefetcher.cppm): worker threads, a bounded window of ready batches
// keyed by batch number, and one condition variable for both directions.
module;
#include <pthread.h>

#include <cstdint>
module infini.nn;
import infini.std;

namespace infini::data {

struct Prefetcher::Shared {
  // One produced batch: a value, an exception, or (empty value, no exception) the end.
  struct Result {
    std::any batch;
    std::exception_ptr error;
  };

  Produce produce;
  std::int64_t end;           // no batch at or past this number (lowered when the data ends early)
  std::int64_t window;
  std::int64_t next_claim;    // the next batch number a worker takes
  std::int64_t next_deliver;  // the next batch number next() hands over
  bool stopping = false;
  std::map<std::int64_t, Result> ready;
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::thread> workers;

  void work() {
    std::unique_lock lock(mutex);
    for (;;) {
      changed.wait(lock, [&] { return stopping || next_claim >= end || next_claim < next_deliver + window; });
      if (stopping || next_claim >= end) return;
      const std::int64_t batch = next_claim++;
      lock.unlock();
      Result result;
      try {
        result.batch = produce(batch);
      } catch (...) {
        result.error = std::current_exception();
      }
      lock.lock();
      if (!result.batch.has_value() && !result.error) end = std::min(end, batch + 1);
      ready.emplace(batch, std::move(result));
      changed.notify_all();
    }
  }

  void stop_and_join() {
    {
      std::lock_guard lock(mutex);
      stopping = true;
    }
    changed.notify_all();
    for (std::thread& worker : workers) worker.join();
    workers.clear();
  }
};

Prefetcher::Prefetcher(Produce produce, std::int64_t first, std::int64_t end, std::int64_t num_workers,
                       std::int64_t window)
    : shared_(std::make_shared<Shared>()) {
  shared_->produce = std::move(produce);
  shared_->end = end;
  shared_->window = std::max<std::int64_t>(window, 1);
  shared_->next_claim = first;
  shared_->next_deliver = first;
  shared_->workers.reserve(static_cast<std::size_t>(std::max<std::int64_t>(num_workers, 0)));
  try {
    for (std::int64_t i = 0; i < num_workers; ++i)
      shared_->workers.emplace_back([s = shared_.get()] {
        pthread_setname_np(pthread_self(), "infini-loader");  // as top, gdb and /proc show it
        s->work();
      });
  } catch (...) {  // a thread could not start: stop those that did
    shared_->stop_and_join();
    throw;
  }
}

Prefetcher::~Prefetcher() { shared_->stop_and_join(); }

std::any Prefetcher::next() {
  Shared& s = *shared_;
  if (s.workers.empty()) {
    if (s.next_deliver >= s.end) return {};
    std::any batch = s.produce(s.next_deliver++);
    if (!batch.has_value()) s.end = s.next_deliver;
    return batch;
  }
  std::unique_lock lock(s.mutex);
  if (s.next_deliver >= s.end) return {};
  s.changed.wait(lock, [&] { return s.ready.contains(s.next_deliver); });
  auto node = s.ready.extract(s.next_deliver++);
  s.changed.notify_all();  // the window moved: a worker may claim another batch
  lock.unlock();
  if (node.mapped().error) std::rethrow_exception(node.mapped().error);
  return std::move(node.mapped().batch);
}

}  // namespace infini::data
