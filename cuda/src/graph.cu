// CUDA Graph capture (graph.h) and what the kernels use while a thread captures
// (capture.cuh): the thread's capture stream, deferred checks, uploads kept by the graph.
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "infini/cuda/graph.h"
#include "launch.cuh"

namespace infini::cuda::detail {
thread_local cudaStream_t capture_stream = nullptr;
}  // namespace infini::cuda::detail

namespace infini::cuda {

struct Graph {
  // A check deferred to after each replay: `bytes` at `offset` of the check slots.
  struct Check {
    std::size_t offset = 0, bytes = 0;
    std::function<void(const void*)> report;
  };

  int device = 0;
  cudaStream_t stream = nullptr;  // blocking: ordered with the legacy default stream
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  unsigned char* slots = nullptr;  // device memory for the deferred checks' values
  std::size_t used = 0;            // bytes of slots in use
  std::vector<Check> checks;
  std::vector<unsigned char> host_slots;
  std::vector<void*> pinned;  // host data the captured uploads copy from (cudaMallocHost)
};

namespace {

constexpr std::size_t kSlotBytes = std::size_t{64} << 10;

thread_local Graph* current = nullptr;  // the calling thread's capture

void stop_capturing() noexcept {
  current = nullptr;
  detail::capture_stream = nullptr;
}

}  // namespace

Graph* graph_begin_capture(int device) {
  if (current != nullptr) throw CudaError("CUDA graph capture: this thread is capturing a graph already");
  detail::use_device(device);
  auto graph = std::make_unique<Graph>();
  graph->device = device;
  detail::check(cudaStreamCreate(&graph->stream), "CUDA graph capture: cudaStreamCreate");
  try {
    detail::check(cudaMalloc(&graph->slots, kSlotBytes), "CUDA graph capture: cudaMalloc of the check slots");
    detail::check(cudaStreamBeginCapture(graph->stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  } catch (...) {
    graph_destroy(graph.release());
    throw;
  }
  current = graph.get();
  detail::capture_stream = graph->stream;
  return graph.release();
}

void graph_end_capture(Graph* graph) {
  if (current != graph) throw CudaError("CUDA graph capture: the calling thread is not capturing this graph");
  stop_capturing();
  detail::use_device(graph->device);
  cudaGraph_t captured = nullptr;
  if (cudaError_t err = cudaStreamEndCapture(graph->stream, &captured); err != cudaSuccess) {
    if (captured != nullptr) cudaGraphDestroy(captured);
    detail::fail(err, "cudaStreamEndCapture (an op issued work the capture does not allow)");
  }
  graph->graph = captured;
  detail::check(cudaGraphInstantiate(&graph->exec, captured, 0), "cudaGraphInstantiate");
  graph->host_slots.resize(graph->used);
}

void graph_replay(Graph* graph) {
  if (graph->exec == nullptr) throw CudaError("CUDA graph replay: the graph was not captured");
  if (current != nullptr) throw CudaError("CUDA graph replay: not allowed while this thread captures a graph");
  detail::use_device(graph->device);
  detail::check(cudaGraphLaunch(graph->exec, graph->stream), "cudaGraphLaunch");
  if (graph->used > 0)
    detail::check(cudaMemcpyAsync(graph->host_slots.data(), graph->slots, graph->used, cudaMemcpyDeviceToHost,
                                  graph->stream),
                  "CUDA graph replay: reading the deferred checks");
  detail::check(cudaStreamSynchronize(graph->stream), "CUDA graph replay");
  for (const Graph::Check& c : graph->checks) c.report(graph->host_slots.data() + c.offset);
}

void graph_destroy(Graph* graph) noexcept {
  if (graph == nullptr) return;
  if (cudaSetDevice(graph->device) == cudaSuccess) {
    if (current == graph) {  // a capture abandoned on an error: end it and drop what it recorded
      stop_capturing();
      cudaGraph_t partial = nullptr;
      if (cudaStreamEndCapture(graph->stream, &partial) == cudaSuccess && partial != nullptr) cudaGraphDestroy(partial);
    }
    if (graph->exec != nullptr) cudaGraphExecDestroy(graph->exec);
    if (graph->graph != nullptr) cudaGraphDestroy(graph->graph);
    if (graph->stream != nullptr) {
      cudaStreamSynchronize(graph->stream);
      cudaStreamDestroy(graph->stream);
    }
    if (graph->slots != nullptr) cudaFree(graph->slots);
    for (void* p : graph->pinned) cudaFreeHost(p);
  }
  cudaGetLastError();
  delete graph;
}

std::uintptr_t capture_pool() noexcept { return reinterpret_cast<std::uintptr_t>(current); }

}  // namespace infini::cuda

namespace infini::cuda::detail {

void refuse_capture(const char* what, const char* why) {
  if (capturing()) throw CudaError(std::string(what) + " cannot be recorded into a CUDA graph: " + why);
}

bool defer_check(const void* src, std::size_t bytes, std::function<void(const void* host)> report) {
  if (current == nullptr) return false;
  const std::size_t offset = (current->used + 7) / 8 * 8;
  if (offset + bytes > kSlotBytes)
    throw CudaError("CUDA graph capture: the captured ops defer more than 64 KiB of checks");
  check(cudaMemcpyAsync(current->slots + offset, src, bytes, cudaMemcpyDeviceToDevice, capture_stream),
        "CUDA graph capture: copying a check into its slot");
  current->checks.push_back({offset, bytes, std::move(report)});
  current->used = offset + bytes;
  return true;
}

void upload(void* dst, const void* host, std::size_t bytes, const char* what) {
  if (bytes == 0) return;
  if (current == nullptr) {
    check(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, stream()), what);
    return;
  }
  void* pinned = nullptr;
  {
    RelaxedCapture relaxed;
    check(cudaMallocHost(&pinned, bytes), what);
  }
  current->pinned.push_back(pinned);
  std::memcpy(pinned, host, bytes);
  check(cudaMemcpyAsync(dst, pinned, bytes, cudaMemcpyHostToDevice, capture_stream), what);
}

RelaxedCapture::RelaxedCapture() noexcept {
  swapped_ = cudaThreadExchangeStreamCaptureMode(&mode_) == cudaSuccess;
  if (!swapped_) cudaGetLastError();
}

RelaxedCapture::~RelaxedCapture() {
  if (swapped_ && cudaThreadExchangeStreamCaptureMode(&mode_) != cudaSuccess) cudaGetLastError();
}

}  // namespace infini::cuda::detail
