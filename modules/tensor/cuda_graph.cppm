// CudaGraph: records the CUDA work one thread issues and replays it, like torch.cuda.CUDAGraph.
// Between capture_begin and capture_end nothing runs: every kernel, copy and fill the thread
// issues on the graph's device is recorded, and the memory those ops allocate comes from the
// graph's private pool, so each replay finds its tensors at the addresses it recorded.
// Tensors created during the capture and kept (a loss, a parameter's grad) are the graph's
// outputs: each replay writes them again. Inputs are tensors made before the capture: copy
// new values into them (copy_) before a replay.
// - Host values an op uploads during the capture (an arange, an index table) are constants of
//   the graph; checks that ops make on the GPU (an index or a target out of range, integer
//   division by zero) run after each replay and raise there.
// - Ops that read results back to the host (item(), copies to the CPU, nonzero, unique, the
//   gradient norm), random ops and synchronize raise a DeviceError naming themselves; the
//   capture is then abandoned (the graph can be captured again).
// In a build without CUDA, or for a device that is not CUDA, capture_begin raises DeviceError.
export module infini.tensor:cuda_graph;
import infini.std;
import :device;

export namespace infini {

class CudaGraph {
 public:
  CudaGraph() = default;
  ~CudaGraph();  // ends a capture in progress; the pool's memory returns to the cache
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  void capture_begin(Device device);
  // DeviceError when an op made the capture invalid; the graph is then empty again.
  void capture_end();
  // Runs the recorded work and waits for it; the first deferred check that fails raises.
  void replay();
  bool is_captured() const noexcept { return captured_; }

 private:
  void reset() noexcept;

  Device device_;
  void* graph_ = nullptr;  // cuda::Graph
  std::uintptr_t pool_ = 0;
  bool captured_ = false;
};

// True while the calling thread records a CUDA graph.
bool is_capturing_cuda_graph() noexcept;

}  // namespace infini

namespace infini {
// The caching allocator's side of a capture (caching_allocator.cpp): the graph's private pool
// is kept from the time the capture begins until the graph is destroyed.
void retain_graph_pool(Device device, std::uintptr_t pool);
void release_graph_pool(Device device, std::uintptr_t pool) noexcept;
}  // namespace infini
