// CUDA Graph capture of the work one host thread issues (plain C++ interface, like
// torch.cuda.CUDAGraph's capture_begin / capture_end / replay). Compiled by nvcc in
// cuda/src/graph.cu; wrapped by infini.tensor's CudaGraph, which also gives the capture its
// private memory pool.
//
// Between begin and end, the calling thread's kernels, copies and fills go to the graph's
// own stream, which is in capture mode: they are recorded, not run. That stream is a
// blocking one, so a replay is ordered after the work issued before it on the legacy
// default stream, and the work issued after it waits for it. Checks that ops make by
// reading results back (an index out of range, a target out of range, an integer division
// by zero) run after each replay instead; host data an op uploads (an arange, an index
// table) is a constant of the graph; ops that cannot be captured throw CudaError naming
// themselves.
#pragma once

#include <cstdint>

#include "infini/cuda/cuda.h"

namespace infini::cuda {

struct Graph;  // opaque: the stream, the captured and the instantiated graph, check slots

// Starts capturing the calling thread's work on `device` (it must capture nothing yet).
Graph* graph_begin_capture(int device);
// Ends the capture and instantiates the graph; on a capture error, throws (the thread no
// longer captures either way). Called from the thread that began it.
void graph_end_capture(Graph* graph);
// Runs the graph once, waits for it, and runs the deferred checks: the first that fails
// throws CudaError.
void graph_replay(Graph* graph);
// Ends a capture still in progress (discarding it) and frees everything.
void graph_destroy(Graph* graph) noexcept;

// The pool of the calling thread's capture (a nonzero id unique among live graphs), or 0
// when it captures nothing: memory allocated under capture must come from its own pool.
std::uintptr_t capture_pool() noexcept;

}  // namespace infini::cuda
