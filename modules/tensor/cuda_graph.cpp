// CudaGraph over cuda/'s graph capture (infini/cuda/graph.h), with the caching allocator's
// private pool for the capture.
module;
#include <cstdint>
#if INFINI_HAS_CUDA
#include "infini/cuda/graph.h"
#endif
module infini.tensor;
import :cuda_graph;

namespace infini {

#if INFINI_HAS_CUDA
namespace {

cuda::Graph* as_graph(void* graph) { return static_cast<cuda::Graph*>(graph); }

}  // namespace

CudaGraph::~CudaGraph() { reset(); }

void CudaGraph::reset() noexcept {
  if (graph_ == nullptr) return;
  cuda::graph_destroy(as_graph(graph_));
  release_graph_pool(device_, pool_);
  graph_ = nullptr;
  pool_ = 0;
  captured_ = false;
}

void CudaGraph::capture_begin(Device device) {
  if (!device.is_cuda() || device.index < 0 || device.index >= cuda_device_count())
    throw DeviceError("CudaGraph.capture_begin", concat("cannot capture on ", device, ": ", cuda_device_count(),
                                                        " CUDA device(s) available"));
  if (graph_ != nullptr)
    throw Error("CudaGraph.capture_begin", "this graph has been captured already (or is being captured)");
  try {
    graph_ = cuda::graph_begin_capture(device.index);
  } catch (const cuda::CudaError& e) {
    throw DeviceError("CudaGraph.capture_begin", concat("on ", device, ": ", e.what()));
  }
  device_ = device;
  pool_ = cuda::capture_pool();
  retain_graph_pool(device_, pool_);
}

void CudaGraph::capture_end() {
  if (graph_ == nullptr || captured_) throw Error("CudaGraph.capture_end", "no capture in progress");
  try {
    cuda::graph_end_capture(as_graph(graph_));
  } catch (const cuda::CudaError& e) {
    reset();
    throw DeviceError("CudaGraph.capture_end", concat("on ", device_, ": ", e.what()));
  }
  captured_ = true;
}

void CudaGraph::replay() {
  if (!captured_) throw Error("CudaGraph.replay", "the graph has not been captured");
  try {
    cuda::graph_replay(as_graph(graph_));
  } catch (const cuda::CudaError& e) {
    throw DeviceError("CudaGraph.replay", concat("on ", device_, ": ", e.what()));
  }
}

bool is_capturing_cuda_graph() noexcept { return cuda::capture_pool() != 0; }

#else

CudaGraph::~CudaGraph() = default;
void CudaGraph::reset() noexcept {}

void CudaGraph::capture_begin(Device device) {
  throw DeviceError("CudaGraph.capture_begin",
                    concat("cannot capture on ", device, ": this build of Infini has no CUDA backend"));
}
void CudaGraph::capture_end() { throw Error("CudaGraph.capture_end", "no capture in progress"); }
void CudaGraph::replay() { throw Error("CudaGraph.replay", "the graph has not been captured"); }
bool is_capturing_cuda_graph() noexcept { return false; }

#endif

}  // namespace infini
