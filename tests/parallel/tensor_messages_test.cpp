// send_tensor / TensorReceive around a ring of the world's ranks (2 or more): dtypes, shapes and strides the receiver does not know in advance, blocking and
// awaited, in any arrival order.
#include <gtest/gtest.h>

#include <coroutine>
#include <cstdint>
#include <memory>
#include <vector>

#include "comm_test_util.h"

import infini.parallel;

namespace infini::parallel::test::tensor_messages_test {
namespace {

// Message k of rank r: a different dtype and shape each, values from (r, k).
std::vector<Tensor> messages(int r) {
  const double seed = 10.0 * r;
  return {pattern({3, 5}, seed + 1).to(kBFloat16),
          zeros({0, 4}),
          mul(pattern({2, 2, 2}, seed + 2), 100.0).to(kInt64),
          pattern({}, seed + 3),
          pattern({4, 6}, seed + 4).to(kFloat32).transpose(0, 1),  // strided
          pattern({1, 1, 1, 1, 1, 1, 1, 2}, seed + 5).to(kFloat16)};
}

TEST(TensorMessages, CarryDtypeAndShape) {
  auto pg = world();
  if (pg->size() < 2) GTEST_SKIP() << "needs 2 ranks (a rank does not send to itself)";
  const int S = pg->size(), r = pg->rank(), next = (r + 1) % S, previous = (r + S - 1) % S;
  const std::vector<Tensor> mine = messages(r), expected = messages(previous);
  // Receives posted first (in reverse order of the sends), then the sends.
  std::vector<std::unique_ptr<TensorReceive>> incoming(mine.size());
  for (int k = static_cast<int>(mine.size()) - 1; k >= 0; --k)
    incoming[static_cast<std::size_t>(k)] = std::make_unique<TensorReceive>(*pg, previous, 100 + k);
  std::vector<Work> sent;
  for (std::size_t k = 0; k < mine.size(); ++k) sent.push_back(send_tensor(*pg, mine[k], next, 100 + static_cast<int>(k)));
  // Half blocking, half awaited.
  for (std::size_t k = 0; k < mine.size(); ++k) {
    const Tensor got = k % 2 == 0 ? incoming[k]->wait() : run(incoming[k]->tensor());
    EXPECT_EQ(got.dtype(), expected[k].dtype()) << "message " << k;
    EXPECT_EQ(got.shape(), expected[k].shape()) << "message " << k;
    expect_near(got, expected[k], 0.0, concat("message ", k));
  }
  when_all(sent).wait();
  EXPECT_THROW(send_tensor(*pg, zeros({1, 1, 1, 1, 1, 1, 1, 1, 1}), next, 1), ShapeError);
}

// What a receiver refuses before posting the data receive: a header that is not one, and a
// CUDA tensor (header field 1) for a group not bound to a GPU. Headers made by hand: int64
// [dtype, on CUDA, dims, 8 sizes].
TEST(TensorMessages, RefuseBadHeadersAndCudaTensorsOnUnboundGroups) {
  auto pg = world();
  if (pg->size() < 2) GTEST_SKIP() << "needs 2 ranks (a rank does not send to itself)";
  const int S = pg->size(), r = pg->rank(), next = (r + 1) % S, previous = (r + S - 1) % S;
  const auto header = [](std::int64_t on_cuda) {
    std::vector<std::int64_t> h(11, 0);
    h[0] = static_cast<std::int64_t>(kFloat32);
    h[1] = on_cuda;
    h[2] = 1;
    h[3] = 4;
    return from_vector(h, {11});
  };
  TensorReceive bad(*pg, previous, 7), cuda(*pg, previous, 8);
  Work sent = when_all({pg->send(header(2), next, 7), pg->send(header(1), next, 8)});
  try {
    bad.wait();
    ADD_FAILURE() << "a header with device kind 2 was read";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), concat("TensorReceive: a message header from rank ", previous, " with tag 7 names "
                                            "dtype ", static_cast<int>(kFloat32), ", device kind 2 and 1 dims: not a "
                                            "send_tensor message"));
  }
  try {
    cuda.wait();
    ADD_FAILURE() << "a CUDA tensor was received on a group without a GPU";
  } catch (const DeviceError& e) {
    EXPECT_EQ(std::string(e.what()), concat("TensorReceive: rank ", previous, " sent a CUDA tensor with tag 8, but group "
                                            "'world' is not bound to a CUDA device on this rank"));
  }
  sent.wait();
}

}  // namespace
}  // namespace infini::parallel::test::tensor_messages_test
