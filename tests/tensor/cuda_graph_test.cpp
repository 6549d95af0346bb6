// CudaGraph: capture, replay on new inputs, host uploads as constants, the private memory
// pool, and the ops refused inside a capture. Skipped without a CUDA device, except for the
// errors of a graph that cannot be captured.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>
import infini.tensor;

#include "values.h"

namespace cuda_graph_test {
using namespace infini;

namespace {

#define REQUIRE_CUDA() \
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device"

const Device kGpu = Device::cuda(0);

std::vector<float> host_floats(const Tensor& t) { return test::contiguous_values<float>(t.to(Device::cpu())); }
std::vector<std::int64_t> host_ints(const Tensor& t) {
  return test::contiguous_values<std::int64_t>(t.to(Device::cpu()));
}

TEST(CudaGraph, CaptureNeedsACudaDevice) {
  CudaGraph graph;
  EXPECT_THROW(graph.capture_begin(Device::cpu()), DeviceError);
  EXPECT_THROW(graph.capture_begin(Device::cuda(99)), DeviceError);
  EXPECT_THROW(graph.capture_end(), Error);
  EXPECT_THROW(graph.replay(), Error);
  EXPECT_FALSE(graph.is_captured());
  EXPECT_FALSE(is_capturing_cuda_graph());
}

TEST(CudaGraph, ReplaysTheRecordedWorkOnNewInputsWithUploadsAsConstants) {
  REQUIRE_CUDA();
  Tensor x = from_vector(std::vector<float>{1, 2, 3, 4}, {4}).to(kGpu);
  Tensor y = zeros({4}, {.dtype = kFloat32, .device = kGpu});
  CudaGraph graph;
  graph.capture_begin(kGpu);
  EXPECT_TRUE(is_capturing_cuda_graph());
  y.copy_(x);
  const Tensor range = arange(4, {.dtype = kInt64, .device = kGpu});  // uploaded from the host
  graph.capture_end();
  EXPECT_FALSE(is_capturing_cuda_graph());
  EXPECT_EQ(host_floats(y), (std::vector<float>{0, 0, 0, 0})) << "the capture ran nothing";
  graph.replay();
  EXPECT_EQ(host_floats(y), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(host_ints(range), (std::vector<std::int64_t>{0, 1, 2, 3}));
  x.copy_(from_vector(std::vector<float>{5, 6, 7, 8}, {4}));
  Tensor(range).fill_(9);  // a replay writes the constant again
  graph.replay();
  EXPECT_EQ(host_floats(y), (std::vector<float>{5, 6, 7, 8}));
  EXPECT_EQ(host_ints(range), (std::vector<std::int64_t>{0, 1, 2, 3}));
}

TEST(CudaGraph, MemoryTheCaptureFreedIsNotHandedOutWhileTheGraphLives) {
  REQUIRE_CUDA();
  const std::int64_t baseline = memory_stats(kGpu).live_allocations;
  Tensor y = zeros({256}, {.dtype = kFloat32, .device = kGpu});
  Tensor before = full({256}, 2.0, {.dtype = kFloat32, .device = kGpu});  // made before, freed by the capture
  const void* before_ptr = before.data_ptr();
  const void* temporary_ptr = nullptr;
  {
    CudaGraph graph;
    graph.capture_begin(kGpu);
    {
      const Tensor temporary = full({256}, 1.0, {.dtype = kFloat32, .device = kGpu});  // from the graph's pool
      temporary_ptr = temporary.data_ptr();
      y.copy_(temporary);
    }
    before = Tensor();
    graph.capture_end();
    for (int i = 0; i < 4; ++i) {
      const Tensor eager = empty({256}, {.dtype = kFloat32, .device = kGpu});
      EXPECT_NE(eager.data_ptr(), temporary_ptr);
      EXPECT_NE(eager.data_ptr(), before_ptr);
    }
    graph.replay();
    EXPECT_EQ(host_floats(y), std::vector<float>(256, 1.0f));
  }
  empty_cache(kGpu);  // the graph is gone: its pool can be given back
  EXPECT_EQ(memory_stats(kGpu).live_allocations, baseline + 1);
}

TEST(CudaGraph, OpsThatReadBackOrDrawRandomNumbersAreRefusedInsideACapture) {
  REQUIRE_CUDA();
  const Tensor x = full({4}, 3.0, {.dtype = kFloat32, .device = kGpu});
  const Tensor scalar = full({}, 3.0, {.dtype = kFloat32, .device = kGpu});
  {
    CudaGraph graph;
    graph.capture_begin(kGpu);
    EXPECT_THROW(scalar.item<float>(), DeviceError);
    EXPECT_THROW(x.to(Device::cpu()), DeviceError);
    EXPECT_THROW(synchronize(kGpu), DeviceError);
    EXPECT_THROW(randn({4}, {.dtype = kFloat32, .device = kGpu}), DeviceError);
  }  // abandoned: the destructor ends the capture
  EXPECT_FALSE(is_capturing_cuda_graph());
  EXPECT_EQ(scalar.item<float>(), 3.0f);
  CudaGraph again;  // a fresh capture works after an abandoned one
  again.capture_begin(kGpu);
  Tensor y = empty({4}, {.dtype = kFloat32, .device = kGpu});
  y.copy_(x);
  again.capture_end();
  again.replay();
  EXPECT_EQ(host_floats(y), std::vector<float>(4, 3.0f));
}

}  // namespace

}  // namespace cuda_graph_test
