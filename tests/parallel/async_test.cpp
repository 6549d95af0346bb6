// The awaitable forms on the rank's io_context: co_await of one Work, of when_all, of
// Asio's awaitable operators, and many coroutines in flight at once.
#include <gtest/gtest.h>

#include <chrono>
#include <coroutine>
#include <cstdint>
#include <vector>

#include "comm_test_util.h"

import infini.parallel;

namespace infini::parallel::test::async_test {
namespace {

namespace asio = infini::parallel::asio;

TEST(Awaitable, CoAwaitOneOperation) {
  auto pg = world();
  const int r = pg->rank(), n = pg->size();
  const double sum = run([&]() -> asio::awaitable<double> {
    Tensor t = full({5}, static_cast<double>(r + 1), TensorOptions{.dtype = kFloat64});
    co_await pg->all_reduce(t);
    co_return t.select(0, 4).item<double>();
  }());
  EXPECT_EQ(sum, n * (n + 1) / 2.0);
}

TEST(Awaitable, WhenAllAndAwaitableOperators) {
  auto pg = world();
  const int r = pg->rank(), n = pg->size();
  Tensor a = full({3}, 1.0), b = full({3}, static_cast<double>(r)), c = full({3}, static_cast<double>(r));
  run([&]() -> asio::awaitable<void> {
    co_await when_all({pg->all_reduce(a), pg->all_reduce(b, {.op = ReduceOp::Max})});
    using namespace asio::experimental::awaitable_operators;
    co_await (pg->all_reduce(c).async_wait(asio::use_awaitable) && pg->barrier().async_wait(asio::use_awaitable));
  }());
  expect_values(a, [&](std::int64_t) { return n; }, "when_all sum");
  expect_values(b, [&](std::int64_t) { return n - 1; }, "when_all max");
  expect_values(c, [&](std::int64_t) { return n * (n - 1) / 2.0; }, "operator&&");
}

TEST(Awaitable, GradModeSurvivesSuspension) {
  auto pg = world();
  run([&]() -> asio::awaitable<void> {
    NoGradGuard no_grad;
    Tensor t = ones({2});
    co_await pg->all_reduce(t);
    EXPECT_FALSE(GradMode::is_enabled());
  }());
  EXPECT_TRUE(GradMode::is_enabled());
}

// 64 coroutines in flight: each first launches an all_reduce (in spawn order, the same on
// every rank), then exchanges tagged messages around the ring in whatever order they run.
TEST(Awaitable, ManyCoroutinesInFlight) {
  auto pg = world();
  const int r = pg->rank(), n = pg->size();
  constexpr int kCoroutines = 64, kRounds = 3;
  std::vector<Tensor> sums, received;
  for (int c = 0; c < kCoroutines; ++c) {
    sums.push_back(full({4}, static_cast<double>(c + r)));
    received.push_back(zeros({kRounds}));
  }
  int finished = 0;
  auto body = [&](int c) -> asio::awaitable<void> {
    co_await pg->all_reduce(sums[static_cast<std::size_t>(c)]);
    for (int round = 0; round < kRounds && n > 1; ++round) {
      Tensor out = full({1}, static_cast<double>(1000 * r + 10 * c + round));
      Tensor in = received[static_cast<std::size_t>(c)].narrow(0, round, 1);
      const int tag = c * kRounds + round;
      co_await pg->batch_isend_irecv({isend(out, (r + 1) % n, tag), irecv(in, (r + n - 1) % n, tag)});
    }
    ++finished;
  };
  run([&]() -> asio::awaitable<void> {
    for (int c = 0; c < kCoroutines; ++c) asio::co_spawn(io_context(), body(c), asio::detached);
    asio::steady_timer tick(io_context());
    while (finished < kCoroutines) {  // ranks may finish at different times: no collective here
      tick.expires_after(std::chrono::milliseconds(1));
      co_await tick.async_wait(asio::use_awaitable);
    }
  }());
  const int prev = (r + n - 1) % n;
  for (int c = 0; c < kCoroutines; ++c) {
    expect_values(sums[static_cast<std::size_t>(c)], [&](std::int64_t) { return n * c + n * (n - 1) / 2.0; },
                  concat("coroutine ", c, " all_reduce"));
    if (n > 1)
      expect_values(received[static_cast<std::size_t>(c)], [&](std::int64_t k) { return 1000.0 * prev + 10 * c + k; },
                    concat("coroutine ", c, " ring"));
  }
}

}  // namespace
}  // namespace infini::parallel::test::async_test
