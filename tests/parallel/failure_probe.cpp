// A job in which one rank fails in a chosen way while the others wait in an all_reduce
// (operation #2 of the world group). failure.sh runs it under mpirun and checks that every
// rank exits non-zero in time, with a message naming the operation, group and number.
//   failure_probe exit0|exit3|abort|sigkill|sigterm|hang|mismatch|call_timeout
// call_timeout: rank 1 hangs; rank 0 waits with wait(1 s), rank 2 co_awaits an operation
// launched with a 1 s timeout (whatever INFINI_COMM_TIMEOUT says).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <coroutine>
#include <cstdio>
#include <cstdlib>
#include <string_view>

import infini.parallel;

using namespace infini;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: failure_probe exit0|exit3|abort|sigkill|sigterm|hang|mismatch|call_timeout\n");
    return 2;
  }
  const std::string_view mode = argv[1];
  auto pg = parallel::init_process_group();
  Tensor t = ones({4});
  pg->all_reduce(t).wait();  // operation #1 succeeds everywhere
  if (pg->rank() == 1) {
    if (mode == "exit0") std::exit(0);
    if (mode == "exit3") std::exit(3);
    if (mode == "abort") std::abort();
    if (mode == "sigkill") ::raise(SIGKILL);
    if (mode == "sigterm") ::raise(SIGTERM);
    if (mode == "hang" || mode == "call_timeout") ::pause();  // never returns; killed by the launcher
    if (mode == "mismatch") {  // a different collective as operation #2
      pg->broadcast(t, 0).wait();
      return 0;
    }
  }
  if (mode == "call_timeout") {
    const auto second = std::chrono::seconds(1);
    if (pg->rank() == 0) pg->all_reduce(t).wait(second);
    parallel::run([&]() -> parallel::asio::awaitable<void> { co_await pg->all_reduce(t, {.timeout = second}); }());
  }
  pg->all_reduce(t).wait();  // operation #2: rank 1 is not there
  std::printf("rank %d: all_reduce #2 completed without rank 1\n", pg->rank());
  return 0;
}
