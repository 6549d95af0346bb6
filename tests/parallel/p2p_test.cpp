// Point-to-point operations: pairs, tags, batches issued in opposite orders on the two
// sides (no deadlock even for messages far beyond the eager limit), 64 MiB, any dtype.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "comm_test_util.h"

import infini.parallel;

namespace infini::parallel::test::p2p_test {
namespace {

double value(int r, std::int64_t i) { return static_cast<double>((3 * r + i) % 11); }

TEST(PointToPoint, RingOfEveryDtype) {
  auto pg = world();
  const int r = pg->rank(), n = pg->size();
  if (n < 2) GTEST_SKIP() << "needs 2 ranks";
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  for (DataType dtype : kNumericTypes)
    for (std::int64_t size : kSizes) {
      Tensor out = make(size, dtype, [&](std::int64_t i) { return value(r, i); });
      Tensor in = zeros({size}, TensorOptions{.dtype = dtype});
      pg->batch_isend_irecv({isend(out, next), irecv(in, prev)}).wait();
      expect_values(in, [&](std::int64_t i) { return value(prev, i); }, concat("ring of ", size));
    }
}

TEST(PointToPoint, TagsMatchWhateverTheOrder) {
  auto pg = world();
  const int r = pg->rank(), n = pg->size();
  if (n < 2) GTEST_SKIP() << "needs 2 ranks";
  if (r > 1) return;
  const int peer = 1 - r;
  Tensor a = make(3, kFloat32, [&](std::int64_t i) { return 10 + i; });
  Tensor b = make(3, kFloat32, [&](std::int64_t i) { return 20 + i; });
  if (r == 0) {
    Work wa = pg->send(a, peer, /*tag=*/1);
    Work wb = pg->send(b, peer, /*tag=*/2);
    wa.wait(), wb.wait();
  } else {
    Tensor got_b = zeros({3}), got_a = zeros({3});
    Work wb = pg->recv(got_b, peer, /*tag=*/2);  // posted first, matches the second send
    Work wa = pg->recv(got_a, peer, /*tag=*/1);
    wb.wait(), wa.wait();
    expect_values(got_a, [](std::int64_t i) { return 10 + i; }, "tag 1");
    expect_values(got_b, [](std::int64_t i) { return 20 + i; }, "tag 2");
  }
}

TEST(PointToPoint, BatchesInOppositeOrdersDoNotDeadlock) {
  auto pg = world();
  const int r = pg->rank(), n = pg->size();
  if (n < 2) GTEST_SKIP() << "needs 2 ranks";
  if (r > 1) return;
  const int peer = 1 - r;
  // 16 MiB each way: blocking sends of this size in this order would deadlock.
  constexpr std::int64_t kElements = 4 << 20;
  Tensor out = full({kElements}, static_cast<double>(r + 5), TensorOptions{.dtype = kFloat32});
  Tensor in = zeros({kElements});
  std::vector<P2POp> ops = {isend(out, peer), irecv(in, peer)};
  if (r == 1) std::swap(ops[0], ops[1]);  // rank 1 lists its receive first
  pg->batch_isend_irecv(ops).wait();
  expect_values(in, [&](std::int64_t) { return peer + 5; }, "opposite-order batch");
}

TEST(PointToPoint, SixtyFourMebibytesStrided) {
  auto pg = world();
  const int r = pg->rank(), n = pg->size();
  if (n < 2) GTEST_SKIP() << "needs 2 ranks";
  if (r > 1) return;
  constexpr std::int64_t kRows = 4096, kCols = 4096;  // float32: 64 MiB
  if (r == 0) {
    Tensor t = arange(static_cast<double>(kRows * kCols), TensorOptions{.dtype = kFloat32}).view({kRows, kCols});
    pg->send(t, 1).wait();
  } else {
    Tensor base = zeros({kCols, kRows});
    Tensor view = base.t();  // receive into a transposed view
    pg->recv(view, 0).wait();
    expect_values(view, [](std::int64_t k) { return static_cast<double>(k); }, "64 MiB into a transposed view");
  }
}

// Over TCP, Open MPI moves a message only while its ranks are inside MPI: without the
// transport thread, a receive waits for the sender's whole compute (parallel.transport_tcp
// runs this test over TCP; on shared memory the receiver pulls the bytes itself).
TEST(PointToPoint, MovesWhileTheSenderComputes) {
  auto pg = world();
  const int r = pg->rank(), n = pg->size();
  if (n < 2) GTEST_SKIP() << "needs 2 ranks";
  if (r > 1) return;
  using Clock = std::chrono::steady_clock;
  constexpr auto kCompute = std::chrono::milliseconds(1500);
  Tensor t = full({2 << 20}, 3.0, TensorOptions{.dtype = kFloat32});  // 8 MiB: far past the eager limit
  if (r == 0) {
    Work send = pg->send(t, 1);
    volatile double sink = 0;  // compute without calling into MPI
    for (const auto end = Clock::now() + kCompute; Clock::now() < end;)
      for (int i = 0; i < 1000; ++i) sink = sink + 1e-9 * i;
    send.wait();
  } else {
    Tensor in = zeros({2 << 20});
    const auto start = Clock::now();
    pg->recv(in, 0).wait();
    const auto waited = Clock::now() - start;
    EXPECT_LT(waited, kCompute / 2) << "the receive waited "
                                    << std::chrono::duration<double, std::milli>(waited).count()
                                    << " ms of the sender's " << kCompute.count() << " ms of compute";
    expect_values(in, [](std::int64_t) { return 3.0; }, "8 MiB received during the sender's compute");
  }
}

}  // namespace
}  // namespace infini::parallel::test::p2p_test
