// Autograd and checked ops inside a CudaGraph: a captured backward writes the leaf's grad again
// on every replay, and the checks ops make on the GPU (an index out of range, a cross-entropy
// target out of range) raise after the replay that meets a bad value. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "op_info.h"

namespace infini::test::cuda_graph_ops_test {
namespace {

#define REQUIRE_CUDA() \
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device"

const Device kGpu = Device::cuda(0);

Tensor gpu_floats(const std::vector<double>& v, const Shape& shape) { return from_vector(v, shape).to(kGpu); }
Tensor host_ints(const std::vector<std::int64_t>& v) { return from_vector(v, {static_cast<std::int64_t>(v.size())}); }

// With `bad` copied into the graph's input, a replay raises a DeviceError that mentions
// `needle`; the input restored to `good`, a replay passes again (the check is not sticky).
void expect_replay_raises(CudaGraph& graph, Tensor& input, const Tensor& bad, const Tensor& good,
                          const std::string& needle) {
  input.copy_(bad);
  try {
    graph.replay();
    ADD_FAILURE() << "expected DeviceError";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
  input.copy_(good);
  graph.replay();
}

TEST(CudaGraphOps, ACapturedBackwardWritesTheGradOnEveryReplay) {
  REQUIRE_CUDA();
  const Tensor w = gpu_floats({1, 2, 3}, {3}).requires_grad_();
  Tensor x = gpu_floats({4, 5, 6}, {3});
  CudaGraph graph;
  graph.capture_begin(kGpu);
  const Tensor loss = sum(mul(mul(x, w), w));  // d/dw = 2 x w
  loss.backward();
  graph.capture_end();
  graph.replay();
  EXPECT_EQ(values(loss), (std::vector<double>{4 + 20 + 54}));
  EXPECT_EQ(values(w.grad()), (std::vector<double>{8, 20, 36}));
  x.copy_(from_vector(std::vector<double>{-1, 0, 1}, {3}));
  graph.replay();  // written again, not accumulated
  EXPECT_EQ(values(loss), (std::vector<double>{-1 + 0 + 9}));
  EXPECT_EQ(values(w.grad()), (std::vector<double>{-2, 0, 6}));
}

TEST(CudaGraphOps, AnIndexOutOfRangeRaisesAfterTheReplay) {
  REQUIRE_CUDA();
  const Tensor weight = gpu_floats({0, 1, 10, 11, 20, 21}, {3, 2});
  Tensor indices = host_ints({2, 0}).to(kGpu);
  CudaGraph graph;
  graph.capture_begin(kGpu);
  const Tensor rows = embedding(indices, weight);
  graph.capture_end();
  graph.replay();
  EXPECT_EQ(values(rows), (std::vector<double>{20, 21, 0, 1}));
  expect_replay_raises(graph, indices, host_ints({1, 7}), host_ints({1, 1}), "index 7");
  EXPECT_EQ(values(rows), (std::vector<double>{10, 11, 10, 11}));
}

TEST(CudaGraphOps, ACrossEntropyTargetOutOfRangeRaisesAfterTheReplay) {
  REQUIRE_CUDA();
  const Tensor logits = gpu_floats({0, 0, 0, 0, 0, 0}, {2, 3});
  Tensor target = host_ints({0, 2}).to(kGpu);
  CudaGraph graph;
  graph.capture_begin(kGpu);
  const Tensor loss = cross_entropy(logits, target);
  graph.capture_end();
  graph.replay();
  EXPECT_NEAR(values(loss)[0], std::log(3.0), 1e-6);
  expect_replay_raises(graph, target, host_ints({0, 3}), host_ints({1, 1}), "row 1");
  EXPECT_NEAR(values(loss)[0], std::log(3.0), 1e-6);
}

}  // namespace
}  // namespace infini::test::cuda_graph_ops_test
