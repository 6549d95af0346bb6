// NCCL glue: nonblocking communicators with a stream each, collectives and point-to-point
// calls enqueued in program order, events for completion. See infini/cuda/nccl.h.
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "check.cuh"
#include "infini/cuda/nccl.h"

namespace infini::cuda::nccl {

struct Communicator {
  ncclComm_t comm = nullptr;
  int device = 0;
  cudaStream_t stream = nullptr;  // nonblocking: runs beside the kernels of the default stream
  cudaEvent_t compute = nullptr;  // re-recorded on the default stream before each call
};

struct Event {
  cudaEvent_t event = nullptr;
  int device = 0;
};

namespace {

using detail::check;
using detail::use_device;

[[noreturn]] void fail(ncclResult_t result, ncclComm_t comm, const std::string& what) {
  std::string text = what + ": " + ncclGetErrorString(result);
  if (const char* last = comm ? ncclGetLastError(comm) : nullptr; last && *last) text += " (" + std::string(last) + ")";
  throw CudaError(text);
}

// A nonblocking communicator answers ncclInProgress while a call is being enqueued (or the
// communicator initialised): poll its state, sleeping between polls, until it settles.
ncclResult_t settle(ncclComm_t comm, std::chrono::steady_clock::time_point deadline) {
  ncclResult_t state = ncclInProgress;
  while (true) {
    if (ncclResult_t r = ncclCommGetAsyncError(comm, &state); r != ncclSuccess) return r;
    if (state != ncclInProgress) return state;
    if (std::chrono::steady_clock::now() > deadline) return ncclInProgress;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

// The communicator's stream waits (on the GPU, the host goes on) for the kernels already
// issued on the legacy default stream, the ones that wrote the buffers the call reads.
void order_after_compute(Communicator* c) {
  use_device(c->device);
  check(cudaEventRecord(c->compute, cudaStreamLegacy), "cudaEventRecord on the default stream before an NCCL call");
  check(cudaStreamWaitEvent(c->stream, c->compute, 0), "cudaStreamWaitEvent of an NCCL stream");
}

// Frees what create() made of `c` (the communicator itself is the caller's).
void release_stream(Communicator* c) noexcept {
  if (c->compute) cudaEventDestroy(c->compute);
  if (c->stream) cudaStreamDestroy(c->stream);
  cudaGetLastError();
  delete c;
}

void finish_call(Communicator* c, ncclResult_t result, const char* what) {
  if (result == ncclInProgress)
    result = settle(c->comm, std::chrono::steady_clock::time_point::max());
  if (result != ncclSuccess) fail(result, c->comm, what);
}

ncclDataType_t nccl_type(ElementType type) {
  switch (type) {
    case ElementType::U8: return ncclUint8;
    case ElementType::I8: return ncclInt8;
    case ElementType::I32: return ncclInt32;
    case ElementType::I64: return ncclInt64;
    case ElementType::F16: return ncclFloat16;
    case ElementType::BF16: return ncclBfloat16;
    case ElementType::F32: return ncclFloat32;
    case ElementType::F64: return ncclFloat64;
    case ElementType::Bool:
    case ElementType::I16: break;
  }
  throw CudaError("NCCL has no element type for code " + std::to_string(static_cast<int>(type)) +
                  " (bool and int16 travel as uint8 and int32)");
}

ncclRedOp_t nccl_op(RedOp op) {
  switch (op) {
    case RedOp::Sum: return ncclSum;
    case RedOp::Avg: return ncclAvg;
    case RedOp::Max: return ncclMax;
    case RedOp::Min: return ncclMin;
    case RedOp::Product: return ncclProd;
  }
  throw CudaError("unknown NCCL reduction");
}

}  // namespace

bool supports(ElementType type) noexcept { return type != ElementType::Bool && type != ElementType::I16; }

UniqueId get_unique_id() {
  ncclUniqueId id;
  if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) fail(r, nullptr, "ncclGetUniqueId");
  static_assert(sizeof(id.internal) == kUniqueIdBytes);
  UniqueId out;
  std::memcpy(out.bytes, id.internal, kUniqueIdBytes);
  return out;
}

int version() noexcept {
  int v = 0;
  return ncclGetVersion(&v) == ncclSuccess ? v : 0;
}

Communicator* create(const UniqueId& id, int nranks, int rank, int device, std::chrono::milliseconds timeout) {
  use_device(device);
  auto* c = new Communicator{nullptr, device, nullptr, nullptr};
  if (cudaError_t err = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking); err != cudaSuccess) {
    release_stream(c);
    detail::fail(err, "cudaStreamCreateWithFlags for an NCCL communicator");
  }
  if (cudaError_t err = cudaEventCreateWithFlags(&c->compute, cudaEventDisableTiming); err != cudaSuccess) {
    release_stream(c);
    detail::fail(err, "cudaEventCreateWithFlags for an NCCL communicator");
  }
  ncclUniqueId unique;
  std::memcpy(unique.internal, id.bytes, kUniqueIdBytes);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclResult_t r = ncclCommInitRankConfig(&c->comm, nranks, unique, rank, &config);
  if (r == ncclInProgress || (r == ncclSuccess && c->comm))
    r = settle(c->comm, std::chrono::steady_clock::now() + timeout);
  if (r != ncclSuccess) {
    const std::string what = "ncclCommInitRankConfig (rank " + std::to_string(rank) + " of " + std::to_string(nranks) +
                             " on device " + std::to_string(device) + ")";
    if (c->comm) ncclCommAbort(c->comm);
    release_stream(c);
    if (r == ncclInProgress)
      throw CudaError(what + ": not ready after " + std::to_string(timeout.count()) + " ms; aborted");
    fail(r, nullptr, what);
  }
  return c;
}

void abort(Communicator* c) noexcept {
  if (!c) return;
  cudaSetDevice(c->device);
  if (c->comm) ncclCommAbort(c->comm);
  release_stream(c);
}

void destroy(Communicator* c) {
  if (!c) return;
  use_device(c->device);
  check(cudaStreamSynchronize(c->stream), "cudaStreamSynchronize before ncclCommDestroy");
  finish_call(c, ncclCommFinalize(c->comm), "ncclCommFinalize");
  if (ncclResult_t r = ncclCommDestroy(c->comm); r != ncclSuccess) fail(r, nullptr, "ncclCommDestroy");
  release_stream(c);
}

std::string async_error(Communicator* c) {
  ncclResult_t state = ncclSuccess;
  if (ncclResult_t r = ncclCommGetAsyncError(c->comm, &state); r != ncclSuccess) state = r;
  if (state == ncclSuccess || state == ncclInProgress) return {};
  std::string text = ncclGetErrorString(state);
  if (const char* last = ncclGetLastError(c->comm); last && *last) text += " (" + std::string(last) + ")";
  return text;
}

int device_of(const Communicator* c) noexcept { return c->device; }

void all_reduce(Communicator* c, const void* send, void* recv, std::size_t count, ElementType type, RedOp op) {
  order_after_compute(c);
  finish_call(c, ncclAllReduce(send, recv, count, nccl_type(type), nccl_op(op), c->comm, c->stream), "ncclAllReduce");
}

void broadcast(Communicator* c, const void* send, void* recv, std::size_t count, ElementType type, int root) {
  order_after_compute(c);
  finish_call(c, ncclBroadcast(send, recv, count, nccl_type(type), root, c->comm, c->stream), "ncclBroadcast");
}

void reduce(Communicator* c, const void* send, void* recv, std::size_t count, ElementType type, RedOp op, int root) {
  order_after_compute(c);
  finish_call(c, ncclReduce(send, recv, count, nccl_type(type), nccl_op(op), root, c->comm, c->stream), "ncclReduce");
}

void all_gather(Communicator* c, const void* send, void* recv, std::size_t count, ElementType type) {
  order_after_compute(c);
  finish_call(c, ncclAllGather(send, recv, count, nccl_type(type), c->comm, c->stream), "ncclAllGather");
}

void reduce_scatter(Communicator* c, const void* send, void* recv, std::size_t recv_count, ElementType type,
                    RedOp op) {
  order_after_compute(c);
  finish_call(c, ncclReduceScatter(send, recv, recv_count, nccl_type(type), nccl_op(op), c->comm, c->stream),
              "ncclReduceScatter");
}

void send(Communicator* c, const void* data, std::size_t count, ElementType type, int peer) {
  order_after_compute(c);
  finish_call(c, ncclSend(data, count, nccl_type(type), peer, c->comm, c->stream), "ncclSend");
}

void recv(Communicator* c, void* data, std::size_t count, ElementType type, int peer) {
  order_after_compute(c);
  finish_call(c, ncclRecv(data, count, nccl_type(type), peer, c->comm, c->stream), "ncclRecv");
}

void group_start() {
  if (ncclResult_t r = ncclGroupStart(); r != ncclSuccess) fail(r, nullptr, "ncclGroupStart");
}

void group_end(Communicator* c) { finish_call(c, ncclGroupEnd(), "ncclGroupEnd"); }

Event* record_event(Communicator* c) {
  use_device(c->device);
  auto* e = new Event{nullptr, c->device};
  if (cudaError_t err = cudaEventCreateWithFlags(&e->event, cudaEventDisableTiming); err != cudaSuccess) {
    delete e;
    detail::fail(err, "cudaEventCreateWithFlags");
  }
  if (cudaError_t err = cudaEventRecord(e->event, c->stream); err != cudaSuccess) {
    cudaEventDestroy(e->event);
    delete e;
    detail::fail(err, "cudaEventRecord on an NCCL stream");
  }
  return e;
}

bool event_done(Event* e) {
  const cudaError_t err = cudaEventQuery(e->event);
  if (err == cudaSuccess) return true;
  if (err == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  detail::fail(err, "cudaEventQuery after an NCCL call");
}

void destroy_event(Event* e) noexcept {
  if (!e) return;
  cudaSetDevice(e->device);
  cudaEventDestroy(e->event);
  cudaGetLastError();
  delete e;
}

}  // namespace infini::cuda::nccl
