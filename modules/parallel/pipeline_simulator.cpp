// The discrete-event pipeline simulator (see pipeline_simulator.cppm). Each rank's schedule is
// a coroutine on a private io_context; a suspended coroutine waits either for a virtual time
// (compute, a message already sent) or for a message not yet sent. The loop runs everything
// runnable, then advances the clock to the earliest pending event.
module;
#include <cstdint>
module infini.parallel;
import infini.std;

// spawn.cpp: co_spawn(io, task, done) from a plain translation unit.
extern "C++" namespace infini::parallel::detail {
void spawn(asio::io_context& io, asio::awaitable<void> task, std::function<void(std::exception_ptr)> done);
}

namespace infini::parallel {
namespace {

using Resume = asio::any_completion_handler<void()>;

// An activation (to virtual stage `stage`, from stage - 1) or a gradient (to `stage`, from
// stage + 1) of one micro-batch.
struct MessageKey {
  bool gradient;
  int micro, stage;
  auto operator<=>(const MessageKey&) const = default;
};

class VirtualClock {
 public:
  VirtualClock(const PipelineShape& shape, const PipelineCosts& costs)
      : shape_(shape), costs_(costs), link_free_(static_cast<std::size_t>(shape.stages * shape.stages), 0.0) {}

  double now() const { return now_; }
  asio::io_context& io() { return io_; }

  // Resumes the caller at virtual time t.
  auto at(double t) {
    return asio::async_initiate<decltype(asio::use_awaitable), void()>(
        [this, t](auto handler) { events_.emplace(std::pair{t, sequence_++}, Resume(std::move(handler))); },
        asio::use_awaitable);
  }

  // Resumes `rank` when the message has arrived.
  auto receive(MessageKey key, int rank) {
    return asio::async_initiate<decltype(asio::use_awaitable), void()>(
        [this, key, rank](auto handler) {
          const auto sent = sent_.find(key);
          if (sent != sent_.end()) {
            events_.emplace(std::pair{std::max(now_, sent->second), sequence_++}, Resume(std::move(handler)));
            sent_.erase(sent);
          } else {
            waiting_.emplace(key, std::pair{rank, Resume(std::move(handler))});
          }
        },
        asio::use_awaitable);
  }

  // Starts a message from rank `from` to rank `to` now.
  void send(MessageKey key, int from, int to) {
    double& free = link_free_[static_cast<std::size_t>(from * shape_.stages + to)];
    const double start = std::max(now_, free);
    free = start + (costs_.bandwidth > 0 ? costs_.message_bytes / costs_.bandwidth : 0.0);
    const double arrival = free + costs_.latency;
    const auto waiter = waiting_.find(key);
    if (waiter != waiting_.end()) {
      events_.emplace(std::pair{arrival, sequence_++}, std::move(waiter->second.second));
      waiting_.erase(waiter);
    } else {
      sent_.emplace(key, arrival);
    }
  }

  // Runs until nothing is runnable and no event is pending, or `stop()` says so.
  template <class Stop>
  void run(Stop stop) {
    for (;;) {
      io_.restart();
      io_.poll();
      if (stop() || events_.empty()) return;
      auto next = events_.extract(events_.begin());
      now_ = next.key().first;
      asio::post(io_, [resume = std::move(next.mapped())]() mutable { std::move(resume)(); });
    }
  }

  // "rank 1 waits for the gradient of micro-batch 3 for virtual stage 1; ..." (empty if none).
  std::string waiting() const {
    std::string out;
    for (const auto& [key, waiter] : waiting_)
      out += concat(out.empty() ? "" : "; ", "rank ", waiter.first, " waits for the ", key.gradient ? "gradient" : "activation",
                    " of micro-batch ", key.micro, " for virtual stage ", key.stage);
    return out;
  }
  std::string undelivered() const {
    std::string out;
    for (const auto& [key, arrival] : sent_)
      out += concat(out.empty() ? "" : "; ", "the ", key.gradient ? "gradient" : "activation", " of micro-batch ", key.micro,
                    " for virtual stage ", key.stage);
    return out;
  }
  // Destroys the suspended coroutines (after an error) while what they reference still lives.
  void drop_suspended() {
    events_.clear();
    waiting_.clear();
  }

 private:
  PipelineShape shape_;
  PipelineCosts costs_;
  asio::io_context io_;
  double now_ = 0;
  std::uint64_t sequence_ = 0;
  std::map<std::pair<double, std::uint64_t>, Resume> events_;  // by (time, order of scheduling)
  std::map<MessageKey, double> sent_;                           // arrival time, not yet received
  std::map<MessageKey, std::pair<int, Resume>> waiting_;        // receiver's rank and continuation
  std::vector<double> link_free_;                               // [from * p + to]
};

class SimulatedStage final : public PipelineStage {
 public:
  SimulatedStage(VirtualClock& clock, int rank, const PipelineShape& shape, const PipelineCosts& costs)
      : clock_(clock), rank_(rank), shape_(shape), costs_(costs), checker_(rank, shape) {}

  int rank() const override { return rank_; }
  const PipelineShape& shape() const override { return shape_; }

  Task forward(int micro, int chunk) override {
    checker_.check(PipelineOp::Forward, micro, chunk);
    const int stage = shape_.virtual_stage(rank_, chunk);
    if (stage > 0) co_await clock_.receive({false, micro, stage}, rank_);
    co_await compute(PipelineOp::Forward, micro, chunk, costs_.forward);
    if (stage < shape_.last_virtual_stage()) clock_.send({false, micro, stage + 1}, rank_, (stage + 1) % shape_.stages);
  }
  Task backward(int micro, int chunk) override {
    return input_gradient(PipelineOp::Backward, micro, chunk, costs_.backward_input + costs_.backward_weight);
  }
  Task backward_input(int micro, int chunk) override {
    return input_gradient(PipelineOp::BackwardInput, micro, chunk, costs_.backward_input);
  }
  Task backward_weight(int micro, int chunk) override {
    checker_.check(PipelineOp::BackwardWeight, micro, chunk);
    co_await compute(PipelineOp::BackwardWeight, micro, chunk, costs_.backward_weight);
  }

  void finish() const { checker_.finish(); }
  std::vector<TimelineEvent> events;

 private:
  Task input_gradient(PipelineOp op, int micro, int chunk, double seconds) {
    checker_.check(op, micro, chunk);
    const int stage = shape_.virtual_stage(rank_, chunk);
    if (stage < shape_.last_virtual_stage()) co_await clock_.receive({true, micro, stage}, rank_);
    co_await compute(op, micro, chunk, seconds);
    if (stage > 0) clock_.send({true, micro, stage - 1}, rank_, (stage - 1) % shape_.stages);
  }
  // Busy for `seconds` of a whole stage (1 / v of it for a chunk).
  Task compute(PipelineOp op, int micro, int chunk, double seconds) {
    const double start = clock_.now(), end = start + seconds / shape_.virtual_stages;
    co_await clock_.at(end);
    events.push_back({op, micro, chunk, start, end});
  }

  VirtualClock& clock_;
  int rank_;
  PipelineShape shape_;
  PipelineCosts costs_;
  ScheduleChecker checker_;
};

Task run_rank(const Schedule& schedule, SimulatedStage& stage) {
  co_await schedule(stage);
  stage.finish();
}

}  // namespace

PipelineTimeline simulate_pipeline(const Schedule& schedule, const PipelineShape& shape, const PipelineCosts& costs) {
  shape.validate();
  if (costs.forward < 0 || costs.backward_input < 0 || costs.backward_weight < 0 || costs.message_bytes < 0 ||
      costs.latency < 0 || costs.bandwidth < 0)
    throw Error("simulate_pipeline", "costs must be >= 0");
  VirtualClock clock(shape, costs);
  std::vector<std::unique_ptr<SimulatedStage>> stages;
  for (int r = 0; r < shape.stages; ++r) stages.push_back(std::make_unique<SimulatedStage>(clock, r, shape, costs));
  int finished = 0;
  std::exception_ptr error;
  for (int r = 0; r < shape.stages; ++r)
    detail::spawn(clock.io(), run_rank(schedule, *stages[static_cast<std::size_t>(r)]), [&](std::exception_ptr e) {
      if (e && !error) error = e;
      ++finished;
    });
  clock.run([&] { return error != nullptr; });
  if (error || finished < shape.stages) {
    const std::string waiting = clock.waiting();
    const double now = clock.now();
    clock.drop_suspended();
    if (error) std::rethrow_exception(error);
    throw Error("pipeline schedule", concat("deadlock at virtual time ", now, " s: ", waiting));
  }
  if (const std::string lost = clock.undelivered(); !lost.empty())
    throw Error("pipeline schedule", concat("sent but never received: ", lost));
  PipelineTimeline timeline{.shape = shape, .ranks = {}};
  for (const auto& stage : stages) timeline.ranks.push_back(std::move(stage->events));
  return timeline;
}

}  // namespace infini::parallel
