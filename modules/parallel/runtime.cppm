// The rank's asynchronous runtime: one single-threaded Boost.Asio io_context per process
// drives every schedule. Coroutines never resume on another thread, so grad mode and the
// other thread-locals stay valid across co_await. run() drives the io_context until one
// coroutine finishes; co_spawn more on io_context() to have several in flight.
export module infini.parallel:runtime;
import infini.std;
import :asio;

export namespace infini::parallel {

using Clock = std::chrono::steady_clock;

// The process's io_context (created on first use).
asio::io_context& io_context();

// Timeout of an operation that names none: $INFINI_COMM_TIMEOUT seconds (fractions
// allowed), 600 s when unset.
Clock::duration default_timeout();

// Runs `coroutine` on io_context() until it finishes and returns its result (rethrows its
// exception). Other coroutines on the io_context progress meanwhile.
template <class T>
T run(asio::awaitable<T> coroutine) {
  std::exception_ptr error;
  std::optional<T> result;
  bool finished = false;
  asio::co_spawn(io_context(), std::move(coroutine), [&](std::exception_ptr e, T value) {
    error = e;
    if (!e) result.emplace(std::move(value));
    finished = true;
  });
  io_context().restart();
  while (!finished) io_context().run_one();
  if (error) std::rethrow_exception(error);
  return std::move(*result);
}

inline void run(asio::awaitable<void> coroutine) {
  std::exception_ptr error;
  bool finished = false;
  asio::co_spawn(io_context(), std::move(coroutine), [&](std::exception_ptr e) {
    error = e;
    finished = true;
  });
  io_context().restart();
  while (!finished) io_context().run_one();
  if (error) std::rethrow_exception(error);
}

}  // namespace infini::parallel
