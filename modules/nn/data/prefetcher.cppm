// Prefetcher: builds batches 0, 1, 2, ... of one pass ahead of the consumer on background
// threads and hands them over in order. Batch k is produce(k); an empty std::any means
// the data ended before k. Workers claim batch numbers in order and never run more than
// `window` batches ahead of the consumer, so memory stays bounded. An exception thrown by
// produce(k) is rethrown by the next() that reaches batch k. Destroying a Prefetcher
// stops its threads (each finishes the batch in hand) and joins them.
export module infini.nn:prefetcher;
import infini.std;

export namespace infini::data {

class Prefetcher {
 public:
  using Produce = std::function<std::any(std::int64_t batch)>;

  // Batches first .. end - 1 (fewer if produce returns an empty any). With num_workers = 0
  // next() calls produce itself; otherwise num_workers threads (which may run produce
  // concurrently) keep up to `window` (>= 1) batches ready.
  Prefetcher(Produce produce, std::int64_t first, std::int64_t end, std::int64_t num_workers, std::int64_t window);
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // The next batch in order, or an empty any at the end of the pass.
  std::any next();

 private:
  struct Shared;
  std::shared_ptr<Shared> shared_;
};

}  // namespace infini::data
