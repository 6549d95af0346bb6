// Plain C++ interface to NCCL for infini.parallel's NCCL backend (no modules, no CUDA or
// NCCL headers). Compiled by nvcc in cuda/src/nccl.cu.
//
// A Communicator is nonblocking (ncclConfig_t.blocking = 0) and owns one nonblocking CUDA
// stream, so its transfers run beside the kernels of the legacy default stream (where
// Infini's kernels run). Before each call the stream waits, on the GPU, for an event
// recorded on the default stream: a call reads what the kernels issued before it wrote.
// Every call is enqueued on that stream in program order; completion is observed through
// events (record_event / event_done), and the caller keeps the buffers alive until then.
// Errors throw infini::cuda::CudaError with NCCL's or CUDA's error text.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "infini/cuda/cuda.h"

namespace infini::cuda::nccl {

inline constexpr std::size_t kUniqueIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES
struct UniqueId {
  char bytes[kUniqueIdBytes] = {};
};

// Same order as infini::parallel::ReduceOp. Avg is ncclAvg (floating types only).
enum class RedOp : std::uint8_t { Sum, Avg, Max, Min, Product };

// True when NCCL's element types hold `type` (every ElementType except Bool and I16;
// callers reinterpret Bool as U8 for max/min and copies).
bool supports(ElementType type) noexcept;

UniqueId get_unique_id();
int version() noexcept;  // e.g. 22809

struct Communicator;  // opaque: ncclComm_t, its device and its stream

// Creates the communicator of `rank` among `nranks` on CUDA device `device`, waiting
// (polling ncclCommGetAsyncError, sleeping between polls) at most `timeout` for the
// nonblocking initialisation to finish. Throws on error or timeout (after aborting it).
Communicator* create(const UniqueId& id, int nranks, int rank, int device, std::chrono::milliseconds timeout);
// ncclCommAbort (never blocks on peers) and frees the stream; nullptr is ignored.
void abort(Communicator* comm) noexcept;
// ncclCommFinalize + ncclCommDestroy after the stream's work finished.
void destroy(Communicator* comm);

// The communicator's asynchronous error: empty while healthy or still in progress,
// otherwise NCCL's error text (ncclCommGetAsyncError + ncclGetLastError).
std::string async_error(Communicator* comm);
int device_of(const Communicator* comm) noexcept;

// Collectives and point-to-point calls enqueued on the communicator's stream. Counts are
// elements of `type`. Each call returns once NCCL accepted it (a nonblocking
// communicator's ncclInProgress is polled until the call is enqueued).
void all_reduce(Communicator* comm, const void* send, void* recv, std::size_t count, ElementType type, RedOp op);
void broadcast(Communicator* comm, const void* send, void* recv, std::size_t count, ElementType type, int root);
void reduce(Communicator* comm, const void* send, void* recv, std::size_t count, ElementType type, RedOp op, int root);
// recv holds nranks * count elements, rank r's block at r * count.
void all_gather(Communicator* comm, const void* send, void* recv, std::size_t count, ElementType type);
// send holds nranks * recv_count elements; rank r receives the reduction of block r.
void reduce_scatter(Communicator* comm, const void* send, void* recv, std::size_t recv_count, ElementType type,
                    RedOp op);
void send(Communicator* comm, const void* data, std::size_t count, ElementType type, int peer);
void recv(Communicator* comm, void* data, std::size_t count, ElementType type, int peer);
// ncclGroupStart / ncclGroupEnd around several calls on one communicator (batched p2p,
// all_to_all, gather/scatter): they are issued together and cannot deadlock.
void group_start();
void group_end(Communicator* comm);

// An event recorded on the communicator's stream after the calls issued so far.
struct Event;
Event* record_event(Communicator* comm);
bool event_done(Event* event);  // cudaEventQuery; throws on a CUDA error
void destroy_event(Event* event) noexcept;

}  // namespace infini::cuda::nccl
