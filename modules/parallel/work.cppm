// Work: a launched collective or point-to-point operation. Launch is eager and in program
// order; only completion is asynchronous. Wait for it blocking (`work.wait(timeout)`) or
// from a coroutine (`co_await work`, or `co_await when_all({...})`); both rethrow the
// operation's CommError. Every operation has a deadline (its own timeout or
// default_timeout()); past it the operation fails with a CommError that names it, the
// flight recorder is dumped and the group is broken (later operations on it fail at once).
export module infini.parallel:work;
import infini.std;
import infini.tensor;
import :runtime;
import :asio;

export namespace infini::parallel {

// What an operation is, for errors and the flight recorder.
struct OpInfo {
  std::string op;      // "all_reduce"
  std::string group;   // "world", "tp[1]"
  int rank = 0;        // this process's rank in the group
  int group_size = 1;
  std::string peers;   // "all", "rank 3", "ranks 1,3"
  std::string tensor;  // "float32[4, 3]"
  std::uint64_t seq = 0;
  std::int64_t bytes = 0;
  // "operation #3 of group 'world' (rank 0 of 2), peers all, tensor float32[4, 3]"
  std::string describe() const;
};

// A group's health: its first failure (timeout, MPI or NCCL error) breaks it for good.
struct GroupHealth {
  std::string broken_by;  // empty while healthy
  bool broken() const { return !broken_by.empty(); }
  void break_by(std::string reason);
};
// Whether any group of this process broke (then finalizing must abort, not wait).
bool any_group_broken();

// Drives one backend's outstanding operations forward.
class Progress {
 public:
  virtual ~Progress() = default;
  // Completes the operations that finished and fails those past their deadline; returns
  // whether any finished. Never blocks.
  virtual bool poll() = 0;
  // Keeps polling on io_context() while operations are outstanding (for awaiting waiters).
  virtual void watch() = 0;
};

// Waiting between polls. Open MPI has no progress thread: a message moves only while its
// ranks call into MPI, so a wait keeps polling for as long as its transfer may take, 100 us
// plus 4 ns per outstanding byte (250 MB/s), yielding the core every kPollsPerYield polls
// (a yield per poll costs a system call per fragment of a large message), and only then
// sleeps: 20 us doubling to 1 ms, so a rank waiting for a slow peer sleeps. reset() after a
// completion. Never a hot spin: polls yield or sleep.
class PollBackoff {
 public:
  enum class Pause : std::uint8_t { None, Yield, Sleep };

  explicit PollBackoff(std::int64_t outstanding_bytes = 0) { reset(outstanding_bytes); }
  void reset(std::int64_t outstanding_bytes);
  // What to do before the next poll: nothing, yield the core, or sleep for sleep_time().
  Pause next();
  Clock::duration sleep_time() const { return sleep_; }

 private:
  static constexpr std::chrono::microseconds kFirstSleep{20}, kMaxSleep{1000};
  static constexpr int kPollsPerYield = 8;
  Clock::time_point spin_until_;
  Clock::duration delay_ = kFirstSleep, sleep_ = kFirstSleep;
  int polls_ = 0;
  bool sleeping_ = false;
};

// A progress engine's poller on io_context(): runs `poll_again` next, at once (after a yield
// when `backoff` says so, and after the io_context's other ready handlers) or after a sleep
// on `timer`. `progressed`: the last poll completed something (resets the backoff).
void schedule_poll(PollBackoff& backoff, bool progressed, std::int64_t outstanding_bytes, asio::steady_timer& timer,
                   std::function<void()> poll_again);

class WorkState {
 public:
  WorkState(OpInfo info, Clock::duration timeout, std::shared_ptr<GroupHealth> health, bool record = true);

  const OpInfo& info() const { return info_; }
  bool done() const { return done_; }
  std::exception_ptr error() const { return error_; }
  const std::vector<Progress*>& engines() const { return engines_; }
  Clock::time_point deadline() const { return deadline_; }

  void add_engine(Progress* engine);
  // Keeps tensors (and staging buffers) alive until the operation is done.
  void keep_alive(const Tensor& t) { alive_.push_back(t); }
  // A step run on completion before waiters are told (copy staged results back).
  void then(std::function<void()> step) { steps_.push_back(std::move(step)); }

  // The backend's requests finished: run the steps, then complete (or fail if a step threw).
  void complete();
  void fail(const std::string& message);       // CommError(op, message) and breaks the group
  void fail(std::exception_ptr error);
  // Fails with a timeout CommError when `now` is past the deadline; returns whether it did.
  bool expire_if_late(Clock::time_point now);
  // Fails with a CommError "timed out after <limit>".
  void time_out(Clock::duration limit);

  // `callback(error)` once done (at once if it already is).
  void on_done(std::function<void(std::exception_ptr)> callback);
  // Posts `handler(error)` to io_context() once done (schedules run there).
  void add_waiter(asio::any_completion_handler<void(std::exception_ptr)> handler);

 private:
  void finish(std::exception_ptr error);

  OpInfo info_;
  Clock::time_point start_, deadline_;
  std::shared_ptr<GroupHealth> health_;
  std::uint64_t record_id_ = 0;
  std::uint64_t trace_id_ = 0;  // its async slice while tracing (0: none)
  bool done_ = false;
  std::exception_ptr error_;
  std::vector<Progress*> engines_;
  std::vector<Tensor> alive_;
  std::vector<std::function<void()>> steps_;
  std::vector<std::function<void(std::exception_ptr)>> callbacks_;
  std::vector<asio::any_completion_handler<void(std::exception_ptr)>> waiters_;
};

class Work {
 public:
  Work() = default;  // an empty Work is complete
  explicit Work(std::shared_ptr<WorkState> state) : state_(std::move(state)) {}

  bool is_completed() const { return !state_ || state_->done(); }
  // Blocks (polling, never spinning hot) until done, past the operation's deadline, or past
  // `timeout` if given; rethrows the operation's error. A timeout is a CommError.
  void wait(std::optional<Clock::duration> timeout = {}) const;

  // Asynchronous wait with any Asio completion token; the signature is
  // void(std::exception_ptr). `co_await work` in an asio::awaitable uses operator().
  template <class Token>
  auto async_wait(Token&& token) const {
    return asio::async_initiate<Token, void(std::exception_ptr)>(
        [state = state_](auto handler) {
          if (state) return state->add_waiter(std::move(handler));
          asio::post(io_context(), [h = std::move(handler)]() mutable { std::move(h)(std::exception_ptr()); });
        },
        token);
  }
  // (Not for pointers: Asio's awaitable frame probes await_transform candidates by calling
  // them with a frame pointer.)
  template <class Token>
    requires(!std::is_pointer_v<std::decay_t<Token>>)
  auto operator()(Token&& token) const {
    return async_wait(std::forward<Token>(token));
  }

  const std::shared_ptr<WorkState>& state() const { return state_; }

 private:
  std::shared_ptr<WorkState> state_;
};

// One Work that completes when all of `works` have; it fails with the first error.
Work when_all(const std::vector<Work>& works);

}  // namespace infini::parallel
