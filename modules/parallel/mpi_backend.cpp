// The MPI backend: nonblocking MPI calls on a duplicate of MPI_COMM_WORLD (or a split of
// it), completed by one progress engine per process that polls every outstanding request
// with MPI_Testsome.
//
// Thread level: MPI_THREAD_MULTIPLE when the library provides it, else SERIALIZED. Every MPI
// call of Infini's operations is made by the thread that drives the rank (its io_context and
// its blocking waits); with MULTIPLE a transport thread also enters MPI while requests are
// outstanding, so that messages move while the rank computes (TransportThread below).
module;
#include <mpi.h>

#include <pthread.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
module infini.parallel;
import infini.std;

namespace infini::parallel {
namespace {

bool initialized_by_infini = false;

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return concat("MPI error ", code);
  return std::string(text, static_cast<std::size_t>(length));
}

void ensure_mpi() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  int provided = 0;
  if (const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided); rc != MPI_SUCCESS)
    throw CommError("init_process_group", concat("MPI_Init_thread failed: ", mpi_error_text(rc)));
  initialized_by_infini = true;
  if (provided < MPI_THREAD_SERIALIZED)
    throw CommError("init_process_group",
                    concat("MPI provides thread level ", provided, "; Infini needs MPI_THREAD_SERIALIZED"));
}

// float16 and bfloat16: two-byte MPI types with reductions computed in float.
template <class H, class Combine>
void reduce_16bit(void* in, void* inout, int* length, MPI_Datatype*) {
  const H* a = static_cast<const H*>(in);
  H* b = static_cast<H*>(inout);
  for (int i = 0; i < *length; ++i) b[i] = H(Combine{}(static_cast<float>(a[i]), static_cast<float>(b[i])));
}

struct Plus { float operator()(float a, float b) const { return a + b; } };
struct Times { float operator()(float a, float b) const { return a * b; } };
struct Larger {  // NaN wins, like torch.maximum
  float operator()(float a, float b) const { return std::isnan(a) || std::isnan(b) ? NAN : (a > b ? a : b); }
};
struct Smaller {
  float operator()(float a, float b) const { return std::isnan(a) || std::isnan(b) ? NAN : (a < b ? a : b); }
};

struct SixteenBitTypes {
  MPI_Datatype half = MPI_DATATYPE_NULL, bfloat16 = MPI_DATATYPE_NULL;
  MPI_Op half_ops[4] = {}, bfloat16_ops[4] = {};  // Sum, Max, Min, Product

  SixteenBitTypes() {
    MPI_Type_contiguous(2, MPI_BYTE, &half);
    MPI_Type_commit(&half);
    MPI_Type_contiguous(2, MPI_BYTE, &bfloat16);
    MPI_Type_commit(&bfloat16);
    create<Half>(half_ops);
    create<BFloat16>(bfloat16_ops);
  }
  template <class H>
  static void create(MPI_Op* ops) {
    MPI_Op_create(&reduce_16bit<H, Plus>, 1, &ops[0]);
    MPI_Op_create(&reduce_16bit<H, Larger>, 1, &ops[1]);
    MPI_Op_create(&reduce_16bit<H, Smaller>, 1, &ops[2]);
    MPI_Op_create(&reduce_16bit<H, Times>, 1, &ops[3]);
  }
  static SixteenBitTypes& get() {
    static SixteenBitTypes types;  // after MPI_Init; MPI_Finalize frees them
    return types;
  }
};

MPI_Datatype mpi_type(DataType t) {
  switch (t) {
    case kBool: return MPI_C_BOOL;
    case kUInt8: return MPI_UINT8_T;
    case kInt8: return MPI_INT8_T;
    case kInt16: return MPI_INT16_T;
    case kInt32: return MPI_INT32_T;
    case kInt64: return MPI_INT64_T;
    case kFloat16: return SixteenBitTypes::get().half;
    case kBFloat16: return SixteenBitTypes::get().bfloat16;
    case kFloat32: return MPI_FLOAT;
    case kFloat64: return MPI_DOUBLE;
  }
  throw DTypeError("mpi", concat("no MPI type for ", t));
}

int op_index(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return 0;
    case ReduceOp::Max: return 1;
    case ReduceOp::Min: return 2;
    case ReduceOp::Product: return 3;
    case ReduceOp::Avg: break;
  }
  throw Error("mpi", "ReduceOp::Avg reaches the MPI backend as a sum");
}

MPI_Op mpi_op(ReduceOp op, DataType t) {
  const int i = op_index(op);
  if (t == kBool) return i == 0 || i == 1 ? MPI_LOR : MPI_LAND;
  if (t == kFloat16) return SixteenBitTypes::get().half_ops[i];
  if (t == kBFloat16) return SixteenBitTypes::get().bfloat16_ops[i];
  const MPI_Op ops[4] = {MPI_SUM, MPI_MAX, MPI_MIN, MPI_PROD};
  return ops[i];
}

// Open MPI has no progress thread: a message moves only while its ranks call into MPI, so a
// rank that computes for a second after MPI_Isend holds its peer's receive back that long.
// While the engine has requests outstanding, this thread enters MPI every interval (an
// MPI_Iprobe on its own duplicate of MPI_COMM_SELF, which runs Open MPI's progress loop),
// moving transfers during compute; it touches none of the engine's requests (the rank's own
// polls still find the completions) and sleeps on a condition variable otherwise. An interval
// in which the rank itself polled (it is waiting, not computing) is skipped: two threads in
// Open MPI's progress loop contend for its lock, which cost 5-13% of a 1-16 MiB all-reduce.
// Needs MPI_THREAD_MULTIPLE. INFINI_MPI_PROGRESS_US sets the interval (default 1000; 0: no
// thread).
class TransportThread {
 public:
  // The process's thread, started on first use; null when disabled or without MULTIPLE.
  static TransportThread* instance() {
    static TransportThread* thread = make();  // never destroyed: stop() joins it before MPI_Finalize
    return thread;
  }

  // Requests are outstanding (or not). One atomic store on the rank's path; the condition
  // variable only when the thread has parked after a long idle spell.
  void set_active(bool active) {
    active_.store(active);
    if (active && parked_.load()) {
      std::lock_guard lock(mutex_);
      wake_.notify_one();
    }
  }

  void stop() {
    {
      std::lock_guard lock(mutex_);
      stop_.store(true);
    }
    wake_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

  static bool started() { return started_; }

  // The rank's own engine polled (called on every poll; one relaxed increment).
  static void owner_polled() { owner_polls_.fetch_add(1, std::memory_order_relaxed); }

 private:
  explicit TransportThread(std::chrono::microseconds interval) : interval_(interval) {
    MPI_Comm_dup(MPI_COMM_SELF, &comm_);
    thread_ = std::thread([this] { run(); });
    pthread_setname_np(thread_.native_handle(), "infini-mpi");
    started_ = true;
  }

  static TransportThread* make() {
    int provided = 0;
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_MULTIPLE) return nullptr;
    long us = 1000;
    if (const char* text = std::getenv("INFINI_MPI_PROGRESS_US")) us = std::strtol(text, nullptr, 10);
    if (us <= 0) return nullptr;
    return new TransportThread(std::chrono::microseconds(us));
  }

  // Ticks every interval while the process has requests (and for kIdleTicks after, so that a
  // rank issuing operation after operation never waits on a condition variable), then parks.
  void run() {
    int idle_ticks = 0;
    while (!stop_.load()) {
      if (!active_.load() && ++idle_ticks > kIdleTicks) {
        std::unique_lock lock(mutex_);
        parked_.store(true);
        wake_.wait(lock, [this] { return active_.load() || stop_.load(); });
        parked_.store(false);
        continue;
      }
      std::this_thread::sleep_for(interval_);
      if (!active_.load()) continue;
      idle_ticks = 0;
      if (const std::uint64_t polls = owner_polls_.load(std::memory_order_relaxed); polls == seen_polls_) {
        int flag = 0;
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &flag, MPI_STATUS_IGNORE);
      } else {
        seen_polls_ = polls;  // the rank polled in this interval: it drives MPI itself
      }
    }
  }

  static constexpr int kIdleTicks = 100;
  static inline bool started_ = false;
  static inline std::atomic<std::uint64_t> owner_polls_{0};
  std::uint64_t seen_polls_ = 0;
  std::chrono::microseconds interval_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<bool> active_{false}, parked_{false}, stop_{false};
  std::thread thread_;
};

// The process's MPI progress engine: every outstanding request of every communicator.
class MpiProgress final : public Progress {
 public:
  static MpiProgress& instance() {
    static auto* engine = new MpiProgress;  // never destroyed: its timer outlives static teardown
    return *engine;
  }

  // Completes `work` when all of `requests` completed (at once when there are none). With
  // `next`, an operation of several steps: each time the requests complete, next(requests)
  // issues the following step's requests, or returns false after the last step.
  void track(const std::shared_ptr<WorkState>& work, const std::vector<MPI_Request>& requests,
             std::function<bool(std::vector<MPI_Request>&)> next = {}) {
    work->add_engine(this);
    if (requests.empty()) return work->complete();
    add(std::make_shared<Pending>(Pending{work, 0, std::move(next)}), requests);
  }

  bool poll() override {
    bool progressed = false;
    if (!requests_.empty()) {
      TransportThread::owner_polled();
      int count = 0;
      indices_.resize(requests_.size());
      const int rc = MPI_Testsome(static_cast<int>(requests_.size()), requests_.data(), &count, indices_.data(),
                                  MPI_STATUSES_IGNORE);
      if (rc != MPI_SUCCESS) {
        fail_all(concat("MPI_Testsome failed: ", mpi_error_text(rc)));
        return true;
      }
      if (count == MPI_UNDEFINED) count = 0;
      std::vector<std::shared_ptr<Pending>> finished;
      for (int k = 0; k < count; ++k)
        if (auto& p = owners_[static_cast<std::size_t>(indices_[static_cast<std::size_t>(k)])]; --p->remaining == 0)
          finished.push_back(p);
      if (count > 0) compact();
      for (auto& p : finished) advance(p);
      progressed = count > 0;
    }
    // Deadlines every kPollsPerDeadlineCheck polls: reading the clock costs as much as a poll.
    if (++polls_ % kPollsPerDeadlineCheck == 0) {
      const auto now = Clock::now();
      bool expired = false;
      for (auto& p : owners_) expired |= p->work->expire_if_late(now);
      if (expired) abandon_failed();
    }
    return progressed;
  }

  void watch() override {
    if (polling_ || requests_.empty()) return;
    polling_ = true;
    executor_ = io_context().get_executor();
    if (!timer_) timer_.emplace(io_context());
    backoff_.reset(outstanding_bytes());
    asio::post(executor_, [this] { step(); });
  }

 private:
  struct Pending {
    std::shared_ptr<WorkState> work;
    int remaining;
    std::function<bool(std::vector<MPI_Request>&)> next;
  };

  void add(const std::shared_ptr<Pending>& pending, const std::vector<MPI_Request>& requests) {
    pending->remaining = static_cast<int>(requests.size());
    for (MPI_Request r : requests) {
      requests_.push_back(r);
      owners_.push_back(pending);
    }
    update_transport_thread();
  }

  // The transport thread runs while requests are outstanding (told on changes only).
  void update_transport_thread() {
    const bool active = !requests_.empty();
    if (active == transport_active_) return;
    transport_active_ = active;
    if (TransportThread* thread = TransportThread::instance()) thread->set_active(active);
  }

  // The step of `p` completed: issue its next step or complete it.
  void advance(const std::shared_ptr<Pending>& p) {
    if (p->next) {
      std::vector<MPI_Request> requests;
      try {
        if (p->next(requests) && !requests.empty()) return add(p, requests);
      } catch (const Error& e) {
        if (!requests.empty()) add(p, requests);  // issued before the failure: keep them alive
        return p->work->fail(e.what());
      }
    }
    p->work->complete();
  }

  // One round of the poller on the io_context: re-posted while completions arrive, then
  // backing off through a timer.
  void step() {
    // A few polls per round: each round of the io_context also checks its reactor (a system call).
    bool progressed = false;
    for (int k = 0; k < kPollsPerRound && !progressed && !requests_.empty(); ++k) progressed = poll();
    if (requests_.empty()) {
      polling_ = false;
      return;
    }
    schedule_poll(backoff_, progressed, outstanding_bytes(), *timer_, [this] { step(); });
  }

  std::int64_t outstanding_bytes() const {
    std::int64_t bytes = 0;
    for (const auto& p : owners_) bytes += p->work->info().bytes;
    return bytes;
  }

  void compact() {
    std::size_t kept = 0;
    for (std::size_t i = 0; i < requests_.size(); ++i) {
      if (requests_[i] == MPI_REQUEST_NULL) continue;
      requests_[kept] = requests_[i];
      owners_[kept] = std::move(owners_[i]);
      ++kept;
    }
    requests_.resize(kept);
    owners_.resize(kept);
    update_transport_thread();
  }

  // Requests of failed (timed-out) operations cannot be cancelled (collectives) and may
  // still write into their buffers: they are kept, with their buffers, but no longer polled.
  void abandon_failed() {
    std::size_t kept = 0;
    for (std::size_t i = 0; i < requests_.size(); ++i) {
      if (owners_[i]->work->done()) {
        abandoned_.push_back(owners_[i]);
        continue;
      }
      requests_[kept] = requests_[i];
      owners_[kept] = std::move(owners_[i]);
      ++kept;
    }
    requests_.resize(kept);
    owners_.resize(kept);
    update_transport_thread();
  }

  void fail_all(const std::string& message) {
    auto owners = owners_;
    for (auto& p : owners) p->work->fail(message);
    abandon_failed();
  }

  static constexpr std::uint64_t kPollsPerDeadlineCheck = 16;
  static constexpr int kPollsPerRound = 4;
  std::uint64_t polls_ = 0;
  std::vector<MPI_Request> requests_;
  std::vector<std::shared_ptr<Pending>> owners_;  // owners_[i] waits for requests_[i]
  std::vector<std::shared_ptr<Pending>> abandoned_;
  std::vector<int> indices_;
  bool polling_ = false;
  bool transport_active_ = false;
  asio::any_io_executor executor_;
  std::optional<asio::steady_timer> timer_;
  PollBackoff backoff_;
};

// The rings below: collectives of n - 1 or 2 (n - 1) steps of one send to the next rank and
// one receive from the previous, each a 1/n block, issued one step at a time by the progress
// engine (MpiProgress::track's `next`). Unlike one opaque MPI collective, every completed step
// counts as progress, so the engine's poll backoff never sleeps through a transfer that is
// moving. Each ring has a tag of its own on the ring communicator, so that rings in flight
// together never match each other's messages. Results are the same bits on every rank and
// run: each block is reduced in ring order on one rank and copied.
class Ring {
 protected:
  // `blocks` bytes-per-element-`itemsize` buffers split into `size` blocks (equal, or the first
  // numel % size one element longer).
  Ring(const char* op_name, MPI_Comm comm, int rank, int size, int tag, std::int64_t numel, DataType dtype)
      : op_name_(op_name), comm_(comm), rank_(rank), size_(size), tag_(tag), type_(mpi_type(dtype)),
        itemsize_(static_cast<std::int64_t>(itemsize(dtype))) {
    for (std::int64_t c = 0, start = 0; c < size; ++c) {
      const std::int64_t length = numel / size + (c < numel % size ? 1 : 0);
      offsets_.push_back(start);
      lengths_.push_back(length);
      start += length;
    }
  }

  int block(int c) const { return ((c % size_) + size_) % size_; }
  int count(int c) const { return static_cast<int>(lengths_[static_cast<std::size_t>(c)]); }
  void* at(const Tensor& t, int c) const {
    return static_cast<char*>(t.data_ptr()) + offsets_[static_cast<std::size_t>(c)] * itemsize_;
  }
  void check(int rc, const char* call) const {
    if (rc != MPI_SUCCESS) throw CommError(op_name_, concat(call, " in the ring failed: ", mpi_error_text(rc)));
  }
  // One step: receive `recv_count` elements into recv_to from the previous rank, send block
  // `send_block` of `from` to the next.
  void exchange(std::vector<MPI_Request>& requests, void* recv_to, int recv_count, const void* send_from,
                int send_count) {
    const int next_rank = (rank_ + 1) % size_, prev_rank = (rank_ + size_ - 1) % size_;
    requests.resize(2, MPI_REQUEST_NULL);
    check(MPI_Irecv(recv_to, recv_count, type_, prev_rank, tag_, comm_, &requests[0]), "MPI_Irecv");
    check(MPI_Isend(send_from, send_count, type_, next_rank, tag_, comm_, &requests[1]), "MPI_Isend");
    ++step_;
  }

  const char* op_name_;
  MPI_Comm comm_;
  int rank_, size_, tag_, step_ = 0;
  MPI_Datatype type_;
  std::int64_t itemsize_;
  std::vector<std::int64_t> offsets_, lengths_;
};

// Ring all-reduce for large tensors: reduce-scatter then all-gather around the ring, 2 (n - 1)
// steps, the reductions by MPI_Reduce_local. Each rank moves 2 (n - 1) / n of the tensor.
class RingAllReduce : Ring {
 public:
  RingAllReduce(MPI_Comm comm, int rank, int size, int tag, const Tensor& buf, ReduceOp op)
      : Ring("all_reduce", comm, rank, size, tag, buf.numel(), buf.dtype()), buf_(buf), op_(mpi_op(op, buf.dtype())) {
    scratch_ = empty({lengths_[0]}, TensorOptions{.dtype = buf.dtype()});
  }

  // Issues step `step_` (after reducing the block the previous step received); false when
  // every step is done.
  bool next(std::vector<MPI_Request>& requests) {
    const int n = size_;
    if (step_ > 0 && step_ <= n - 1) {  // a reduce-scatter step received a partial block
      const int c = block(rank_ - step_);
      check(MPI_Reduce_local(scratch_.data_ptr(), at(buf_, c), count(c), type_, op_), "MPI_Reduce_local");
    }
    if (step_ == 2 * (n - 1)) return false;
    if (step_ < n - 1) {  // reduce-scatter: pass block r - s on, receive block r - s - 1
      const int send = block(rank_ - step_), recv = block(rank_ - step_ - 1);
      exchange(requests, scratch_.data_ptr(), count(recv), at(buf_, send), count(send));
    } else {  // all-gather: pass on the complete block r + 1 - t, receive block r - t in place
      const int t = step_ - (n - 1), send = block(rank_ + 1 - t), recv = block(rank_ - t);
      exchange(requests, at(buf_, recv), count(recv), at(buf_, send), count(send));
    }
    return true;
  }

 private:
  Tensor buf_, scratch_;
  MPI_Op op_;
};

// Ring reduce-scatter: `in` (n equal blocks) is left as it is; rank r ends with the reduction
// of block r in `out`. Step s passes on the partial sum of block r - s - 1 and receives that of
// block r - s - 2, adding this rank's block to it. The partial sums alternate between `out` and
// one block of scratch, so that the last step's lands in `out`.
class RingReduceScatter : Ring {
 public:
  RingReduceScatter(MPI_Comm comm, int rank, int size, int tag, const Tensor& out, const Tensor& in, ReduceOp op)
      : Ring("reduce_scatter", comm, rank, size, tag, in.numel(), in.dtype()), out_(out), in_(in),
        op_(mpi_op(op, in.dtype())) {
    if (size > 2) scratch_ = empty({out.numel()}, TensorOptions{.dtype = in.dtype()});
  }

  bool next(std::vector<MPI_Request>& requests) {
    if (step_ > 0) {  // the previous step received the partial sum of block r - step - 1
      const int c = block(rank_ - step_ - 1);
      check(MPI_Reduce_local(at(in_, c), received_by(step_ - 1), count(c), type_, op_), "MPI_Reduce_local");
    }
    if (step_ == size_ - 1) return false;
    const int send = block(rank_ - step_ - 1), recv = block(rank_ - step_ - 2);
    const void* from = step_ == 0 ? at(in_, send) : received_by(step_ - 1);
    exchange(requests, received_by(step_), count(recv), from, count(send));
    return true;
  }

 private:
  // Where step s receives: `out` for the last step (n - 2) and every second one before it.
  void* received_by(int s) const { return (size_ - 2 - s) % 2 == 0 ? out_.data_ptr() : scratch_.data_ptr(); }

  Tensor out_, in_, scratch_;
  MPI_Op op_;
};

// Ring all-gather: `in` goes to block r of `out`, then step t passes on block r - t and
// receives block r - t - 1, both in place in `out`.
class RingAllGather : Ring {
 public:
  RingAllGather(MPI_Comm comm, int rank, int size, int tag, const Tensor& out, const Tensor& in)
      : Ring("all_gather", comm, rank, size, tag, out.numel(), out.dtype()), out_(out) {
    std::memmove(at(out_, rank), in.data_ptr(), static_cast<std::size_t>(in.nbytes()));
  }

  bool next(std::vector<MPI_Request>& requests) {
    if (step_ == size_ - 1) return false;
    const int send = block(rank_ - step_), recv = block(rank_ - step_ - 1);
    exchange(requests, at(out_, recv), count(recv), at(out_, send), count(send));
    return true;
  }

 private:
  Tensor out_;
};

class MpiBackend final : public Backend {
 public:
  explicit MpiBackend(MPI_Comm comm) : comm_(comm) {
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_dup(comm_, &ring_comm_);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
    MPI_Comm_group(comm_, &group);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    std::vector<int> mine(static_cast<std::size_t>(size_));
    for (int r = 0; r < size_; ++r) mine[static_cast<std::size_t>(r)] = r;
    world_ranks_.resize(mine.size());
    MPI_Group_translate_ranks(group, size_, mine.data(), world, world_ranks_.data());
    MPI_Group_free(&group);
    MPI_Group_free(&world);
    int* tag_ub = nullptr;
    int found = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &found);
    tag_ub_ = found && tag_ub ? *tag_ub : 32767;
  }
  ~MpiBackend() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    MPI_Comm_free(&comm_);
    MPI_Comm_free(&ring_comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::vector<int>& world_ranks() const override { return world_ranks_; }
  MPI_Comm comm() const { return comm_; }

  void all_reduce(const State& work, const Tensor& buf, ReduceOp op) override {
    if (use_ring(buf))
      return run_ring(work, std::make_shared<RingAllReduce>(ring_comm_, rank_, size_, next_ring_tag(), buf, op));
    launch(work, "MPI_Iallreduce", [&](MPI_Request* r) {
      return MPI_Iallreduce(MPI_IN_PLACE, buf.data_ptr(), count(buf), mpi_type(buf.dtype()),
                            mpi_op(op, buf.dtype()), comm_, r);
    });
  }
  void all_gather(const State& work, const Tensor& out, const Tensor& in) override {
    if (use_ring(out))
      return run_ring(work, std::make_shared<RingAllGather>(ring_comm_, rank_, size_, next_ring_tag(), out, in));
    launch(work, "MPI_Iallgather", [&](MPI_Request* r) {
      const MPI_Datatype t = mpi_type(in.dtype());
      return MPI_Iallgather(in.data_ptr(), count(in), t, out.data_ptr(), count(in), t, comm_, r);
    });
  }
  void reduce_scatter(const State& work, const Tensor& out, const Tensor& in, ReduceOp op) override {
    if (use_ring(in))
      return run_ring(work,
                      std::make_shared<RingReduceScatter>(ring_comm_, rank_, size_, next_ring_tag(), out, in, op));
    launch(work, "MPI_Ireduce_scatter_block", [&](MPI_Request* r) {
      return MPI_Ireduce_scatter_block(in.data_ptr(), out.data_ptr(), count(out), mpi_type(out.dtype()),
                                       mpi_op(op, out.dtype()), comm_, r);
    });
  }
  void broadcast(const State& work, const Tensor& buf, int root) override {
    launch(work, "MPI_Ibcast", [&](MPI_Request* r) {
      return MPI_Ibcast(buf.data_ptr(), count(buf), mpi_type(buf.dtype()), root, comm_, r);
    });
  }
  void reduce(const State& work, const Tensor& buf, int root, ReduceOp op) override {
    launch(work, "MPI_Ireduce", [&](MPI_Request* r) {
      const bool at_root = rank_ == root;
      return MPI_Ireduce(at_root ? MPI_IN_PLACE : buf.data_ptr(), at_root ? buf.data_ptr() : nullptr, count(buf),
                         mpi_type(buf.dtype()), mpi_op(op, buf.dtype()), root, comm_, r);
    });
  }
  void gather(const State& work, const Tensor& out, const Tensor& in, int root) override {
    launch(work, "MPI_Igather", [&](MPI_Request* r) {
      const MPI_Datatype t = mpi_type(in.dtype());
      return MPI_Igather(in.data_ptr(), count(in), t, out.defined() ? out.data_ptr() : nullptr, count(in), t, root,
                         comm_, r);
    });
  }
  void scatter(const State& work, const Tensor& out, const Tensor& in, int root) override {
    launch(work, "MPI_Iscatter", [&](MPI_Request* r) {
      const MPI_Datatype t = mpi_type(out.dtype());
      return MPI_Iscatter(in.defined() ? in.data_ptr() : nullptr, count(out), t, out.data_ptr(), count(out), t, root,
                          comm_, r);
    });
  }
  void all_to_all(const State& work, const Tensor& out, const Tensor& in) override {
    launch(work, "MPI_Ialltoall", [&](MPI_Request* r) {
      const MPI_Datatype t = mpi_type(in.dtype());
      const int block = count(in) / size_;
      return MPI_Ialltoall(in.data_ptr(), block, t, out.data_ptr(), block, t, comm_, r);
    });
  }
  void p2p(const State& work, const std::vector<P2POp>& ops) {
    std::vector<MPI_Request> requests;
    for (const P2POp& p : ops) {
      if (p.tag > tag_ub_) return work->fail(concat("tag ", p.tag, " exceeds MPI_TAG_UB ", tag_ub_));
      MPI_Request r = MPI_REQUEST_NULL;
      const bool send = p.kind == P2POp::Kind::Send;
      const int n = count(p.tensor);
      const MPI_Datatype t = mpi_type(p.tensor.dtype());
      const int rc = send ? MPI_Isend(p.tensor.data_ptr(), n, t, p.peer, p.tag, comm_, &r)
                          : MPI_Irecv(p.tensor.data_ptr(), n, t, p.peer, p.tag, comm_, &r);
      if (rc != MPI_SUCCESS) {
        MpiProgress::instance().track(work, requests);  // keeps the issued ones alive
        return work->fail(concat(send ? "MPI_Isend" : "MPI_Irecv", " failed: ", mpi_error_text(rc)));
      }
      requests.push_back(r);
    }
    MpiProgress::instance().track(work, requests);
  }
  void barrier(const State& work) {
    launch(work, "MPI_Ibarrier", [&](MPI_Request* r) { return MPI_Ibarrier(comm_, r); });
  }

 private:
  // all_reduce of this many bytes and more runs as a ring (measured with comm_bench: below
  // it MPI's own algorithms win); so do all_gather and reduce_scatter of this many bytes in all.
  static constexpr std::int64_t kRingBytes = 64 << 10;
  bool use_ring(const Tensor& whole) const {
    return whole.nbytes() >= kRingBytes && size_ > 1 && whole.numel() >= size_;
  }

  // Issues the ring's first step and has the engine issue the others as each completes.
  template <class R>
  static void run_ring(const State& work, const std::shared_ptr<R>& ring) {
    std::vector<MPI_Request> first;
    try {
      ring->next(first);
    } catch (const Error& e) {
      return work->fail(e.what());
    }
    MpiProgress::instance().track(work, first, [ring](std::vector<MPI_Request>& r) { return ring->next(r); });
  }

  int next_ring_tag() {
    ring_tag_ = ring_tag_ == tag_ub_ ? 0 : ring_tag_ + 1;
    return ring_tag_;
  }

  static int count(const Tensor& t) {
    if (t.numel() > INT_MAX)
      throw ShapeError("mpi", concat("a tensor of ", t.numel(), " elements exceeds MPI's count limit ", INT_MAX));
    return static_cast<int>(t.numel());
  }

  template <class Call>
  void launch(const State& work, const char* call, Call&& issue) {
    MPI_Request request = MPI_REQUEST_NULL;
    int rc = MPI_SUCCESS;
    try {
      rc = issue(&request);
    } catch (const Error& e) {
      return work->fail(e.what());
    }
    if (rc != MPI_SUCCESS) return work->fail(concat(call, " failed: ", mpi_error_text(rc)));
    MpiProgress::instance().track(work, {request});
  }

  MPI_Comm comm_, ring_comm_ = MPI_COMM_NULL;  // ring_comm_: the ring all-reduce's messages
  int rank_ = 0, size_ = 1, tag_ub_ = 32767, ring_tag_ = 0;
  std::vector<int> world_ranks_;
};

// A second world communicator, made with the world group and used only by the barrier at
// exit (no other operation can be pending on it); never destroyed, since exit needs it.
MpiBackend* exit_backend = nullptr;

}  // namespace

std::unique_ptr<Backend> make_mpi_world() {
  ensure_mpi();
  MPI_Comm comm = MPI_COMM_NULL;
  if (const int rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm); rc != MPI_SUCCESS)
    throw CommError("init_process_group", concat("MPI_Comm_dup failed: ", mpi_error_text(rc)));
  if (!exit_backend) {
    MPI_Comm exit_comm = MPI_COMM_NULL;
    if (const int rc = MPI_Comm_dup(MPI_COMM_WORLD, &exit_comm); rc != MPI_SUCCESS)
      throw CommError("init_process_group", concat("MPI_Comm_dup failed: ", mpi_error_text(rc)));
    exit_backend = new MpiBackend(exit_comm);
  }
  return std::make_unique<MpiBackend>(comm);
}

bool exit_barrier(Clock::duration timeout) {
  if (!exit_backend) return true;
  OpInfo info{.op = "exit barrier", .group = "exit", .rank = exit_backend->rank(),
              .group_size = exit_backend->size(), .peers = "all", .tensor = "-"};
  auto work = std::make_shared<WorkState>(std::move(info), timeout, nullptr);
  exit_backend->barrier(work);
  try {
    Work(work).wait();
  } catch (const CommError&) {  // past the deadline (the request stays pending: the job is aborted)
    return false;
  }
  return true;
}

std::unique_ptr<Backend> split_mpi(Backend& parent, int color, int key, Clock::duration timeout) {
  auto& mpi = dynamic_cast<MpiBackend&>(parent);
  // Every rank must reach the split: a barrier with a deadline first, so that a missing
  // rank is a CommError instead of a hang inside MPI_Comm_split.
  OpInfo info{.op = "split", .group = "-", .rank = mpi.rank(), .group_size = mpi.size(), .peers = "all",
              .tensor = concat("color ", color, ", key ", key)};
  auto work = std::make_shared<WorkState>(std::move(info), timeout, nullptr);
  mpi.barrier(work);
  Work(work).wait();
  MPI_Comm comm = MPI_COMM_NULL;
  if (const int rc = MPI_Comm_split(mpi.comm(), color < 0 ? MPI_UNDEFINED : color, key, &comm); rc != MPI_SUCCESS)
    throw CommError("split", concat("MPI_Comm_split failed: ", mpi_error_text(rc)));
  if (comm == MPI_COMM_NULL) return nullptr;
  return std::make_unique<MpiBackend>(comm);
}

void mpi_barrier(Backend& mpi, const std::shared_ptr<WorkState>& work) {
  dynamic_cast<MpiBackend&>(mpi).barrier(work);
}

void mpi_p2p(Backend& mpi, const std::shared_ptr<WorkState>& work, const std::vector<P2POp>& ops) {
  dynamic_cast<MpiBackend&>(mpi).p2p(work, ops);
}

void finalize_mpi() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (TransportThread::started()) TransportThread::instance()->stop();
  if (initialized && !finalized && initialized_by_infini) MPI_Finalize();
}

void abort_mpi(int exit_code) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);
}

}  // namespace infini::parallel
