// WorkState: completion, failure, deadlines and waiters of one operation; blocking wait
// and when_all.
module;
#include <cstdlib>
module infini.parallel;
import infini.std;

namespace infini::parallel {
namespace {

std::string seconds_str(Clock::duration d) {
  // Milliseconds precision: "5 s", "0.25 s".
  const double s = static_cast<double>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) / 1000;
  std::string text = std::to_string(s);
  text.erase(text.find_last_not_of('0') + 1);
  if (text.back() == '.') text.pop_back();
  return text + " s";
}

}  // namespace

asio::io_context& io_context() {
  static asio::io_context context(1);  // concurrency hint 1: one thread runs it
  return context;
}

Clock::duration default_timeout() {
  if (const char* env = std::getenv("INFINI_COMM_TIMEOUT"); env && *env) {
    char* end = nullptr;
    const double seconds = std::strtod(env, &end);
    if (end == env || *end != '\0' || !(seconds > 0))
      throw Error("INFINI_COMM_TIMEOUT", concat("expected a positive number of seconds, got '", env, "'"));
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  }
  return std::chrono::seconds(600);
}

namespace {
bool any_broken = false;
}

void GroupHealth::break_by(std::string reason) {
  any_broken = true;
  if (broken_by.empty()) broken_by = std::move(reason);
}

bool any_group_broken() { return any_broken; }

std::string OpInfo::describe() const {
  return concat("operation #", seq, " of group '", group, "' (rank ", rank, " of ", group_size, "), peers ", peers,
                ", tensor ", tensor);
}

void PollBackoff::reset(std::int64_t outstanding_bytes) {
  const auto spin = std::chrono::microseconds(100) + std::chrono::nanoseconds(4 * std::max<std::int64_t>(outstanding_bytes, 0));
  spin_until_ = Clock::now() + std::min<Clock::duration>(spin, std::chrono::seconds(2));
  delay_ = kFirstSleep;
  polls_ = 0;
  sleeping_ = false;
}

PollBackoff::Pause PollBackoff::next() {
  // The clock is read once per kPollsPerYield polls (it costs as much as a poll in a VM).
  if (!sleeping_) {
    if (++polls_ % kPollsPerYield != 0) return Pause::None;
    if (Clock::now() < spin_until_) return Pause::Yield;
    sleeping_ = true;
  }
  sleep_ = delay_;
  delay_ = std::min<Clock::duration>(delay_ * 2, kMaxSleep);
  return Pause::Sleep;
}

void schedule_poll(PollBackoff& backoff, bool progressed, std::int64_t outstanding_bytes, asio::steady_timer& timer,
                   std::function<void()> poll_again) {
  if (progressed) backoff.reset(outstanding_bytes);
  const PollBackoff::Pause pause = progressed ? PollBackoff::Pause::None : backoff.next();
  if (pause == PollBackoff::Pause::Sleep) {
    timer.expires_after(backoff.sleep_time());
    timer.async_wait([poll_again = std::move(poll_again)](const auto&) { poll_again(); });
    return;
  }
  if (pause == PollBackoff::Pause::Yield) std::this_thread::yield();  // other ranks on this core first
  asio::post(timer.get_executor(), std::move(poll_again));
}

WorkState::WorkState(OpInfo info, Clock::duration timeout, std::shared_ptr<GroupHealth> health, bool record)
    : info_(std::move(info)), start_(Clock::now()), health_(std::move(health)) {
  deadline_ = timeout >= Clock::time_point::max() - start_ ? Clock::time_point::max() : start_ + timeout;
  if (record)
    record_id_ = FlightRecorder::instance().start(info_.op, info_.group, info_.peers, info_.tensor, info_.seq,
                                                  info_.bytes);
  if (trace::recording()) {  // an async slice from launch to completion
    trace_id_ = trace::next_async_id();
    trace::add({.name = info_.op, .category = "comm", .phase = 'b', .ts_us = trace::now_us(), .id = trace_id_,
                .args = concat("\"group\": \"", trace::json_escape(info_.group), "\", \"peers\": \"",
                               trace::json_escape(info_.peers), "\", \"tensor\": \"", trace::json_escape(info_.tensor),
                               "\", \"bytes\": ", info_.bytes)});
  }
}

void WorkState::add_engine(Progress* engine) {
  if (std::find(engines_.begin(), engines_.end(), engine) == engines_.end()) engines_.push_back(engine);
}

void WorkState::complete() {
  if (done_) return;
  try {
    for (auto& step : steps_) step();
  } catch (...) {
    return fail(std::current_exception());
  }
  if (record_id_) FlightRecorder::instance().finish(record_id_, OpState::Completed);
  finish(nullptr);
}

void WorkState::fail(const std::string& message) {
  if (done_) return;
  if (health_) health_->break_by(concat(info_.op, " #", info_.seq, ": ", message));
  if (record_id_) FlightRecorder::instance().finish(record_id_, OpState::Failed);
  FlightRecorder::instance().dump(concat(info_.op, " failed"));
  finish(std::make_exception_ptr(CommError(info_.op, concat(message, "; ", info_.describe()))));
}

void WorkState::fail(std::exception_ptr error) {
  if (done_) return;
  if (record_id_) FlightRecorder::instance().finish(record_id_, OpState::Failed);
  finish(error);
}

bool WorkState::expire_if_late(Clock::time_point now) {
  if (done_ || now < deadline_) return false;
  time_out(deadline_ - start_);
  return true;
}

void WorkState::time_out(Clock::duration limit) {
  if (done_) return;
  const std::string what = concat("timed out after ", seconds_str(limit));
  if (health_) health_->break_by(concat(info_.op, " #", info_.seq, " ", what));
  if (record_id_) FlightRecorder::instance().finish(record_id_, OpState::TimedOut);
  FlightRecorder::instance().dump(concat(info_.op, " #", info_.seq, " in group '", info_.group, "' ", what));
  finish(std::make_exception_ptr(CommError(
      info_.op, concat(what, ": ", info_.describe(), "; the group cannot be used any more"), /*timed_out=*/true)));
}

void WorkState::finish(std::exception_ptr error) {
  done_ = true;
  if (trace_id_ != 0)
    trace::add({.name = info_.op, .category = "comm", .phase = 'e', .ts_us = trace::now_us(), .id = trace_id_,
                .args = error ? "\"failed\": true" : ""});
  error_ = error;
  if (!error) alive_.clear();  // a failed operation may still write into its buffers
  steps_.clear();
  auto callbacks = std::move(callbacks_);
  for (auto& callback : callbacks) callback(error);
  auto waiters = std::move(waiters_);
  for (auto& waiter : waiters)
    asio::post(io_context(), [h = std::move(waiter), error]() mutable { std::move(h)(error); });
}

void WorkState::on_done(std::function<void(std::exception_ptr)> callback) {
  if (done_) return callback(error_);
  callbacks_.push_back(std::move(callback));
}

void WorkState::add_waiter(asio::any_completion_handler<void(std::exception_ptr)> handler) {
  if (done_) {
    asio::post(io_context(), [h = std::move(handler), error = error_]() mutable { std::move(h)(error); });
    return;
  }
  waiters_.push_back(std::move(handler));
  for (Progress* engine : engines_) engine->watch();
}

void Work::wait(std::optional<Clock::duration> timeout) const {
  if (!state_) return;
  std::optional<trace::Span> span;  // --profile: a blocking wait
  if (trace::recording() && !state_->done()) span.emplace("wait " + state_->info().op, "wait");
  const auto start = Clock::now();
  PollBackoff backoff(state_->info().bytes);
  while (!state_->done()) {
    bool progressed = false;
    for (Progress* engine : state_->engines()) progressed |= engine->poll();
    if (state_->done()) break;
    if (progressed) {
      backoff.reset(state_->info().bytes);
      continue;
    }
    const PollBackoff::Pause pause = backoff.next();
    if (pause == PollBackoff::Pause::None) continue;
    // Every few polls: the deadlines, then yield or sleep.
    const auto now = Clock::now();
    if (timeout && now - start >= *timeout) state_->time_out(*timeout);
    else state_->expire_if_late(now);
    if (state_->done()) break;
    if (pause == PollBackoff::Pause::Yield) std::this_thread::yield();
    else std::this_thread::sleep_for(backoff.sleep_time());
  }
  if (state_->error()) std::rethrow_exception(state_->error());
}

Work when_all(const std::vector<Work>& works) {
  OpInfo info{.op = "when_all", .group = "-", .peers = "-", .tensor = concat(works.size(), " operations")};
  for (const Work& w : works)
    if (w.state()) info.bytes += w.state()->info().bytes;
  auto all = std::make_shared<WorkState>(std::move(info), Clock::duration::max(), nullptr, /*record=*/false);
  auto remaining = std::make_shared<std::size_t>(0);
  for (const Work& w : works)
    if (w.state() && !w.state()->done()) ++*remaining;
  for (const Work& w : works) {
    if (!w.state()) continue;
    for (Progress* engine : w.state()->engines()) all->add_engine(engine);
    if (w.state()->error()) {
      all->fail(w.state()->error());
      return Work(all);
    }
  }
  if (*remaining == 0) {
    all->complete();
    return Work(all);
  }
  for (const Work& w : works) {
    if (!w.state() || w.state()->done()) continue;
    // The children keep the aggregate alive until they are done.
    w.state()->on_done([all, remaining](std::exception_ptr error) {
      if (error) return all->fail(error);
      if (--*remaining == 0) all->complete();
    });
  }
  return Work(all);
}

}  // namespace infini::parallel
