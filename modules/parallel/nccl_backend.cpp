// The NCCL backend (built with the CUDA backend): one nonblocking communicator and stream
// per group, its unique id broadcast over the group's MPI communicator (no files, works
// across hosts). Each call is followed by a CUDA event on the communicator's stream; the
// progress engine polls those events (cudaEventQuery) and ncclCommGetAsyncError, and
// aborts the communicator (ncclCommAbort) when an operation fails or passes its deadline.
// Point-to-point operations do not come here: they go through MPI (process_group.cpp).
module;
#if INFINI_HAS_CUDA
#include "infini/cuda/nccl.h"
#endif

#include <cstdint>
#include <cstring>
module infini.parallel;
import infini.std;

namespace infini::parallel {

#if INFINI_HAS_CUDA
namespace {

namespace nccl = infini::cuda::nccl;

cuda::ElementType element_type(DataType t) { return static_cast<cuda::ElementType>(t); }

nccl::RedOp red_op(ReduceOp op, DataType t) {
  if (t == kUInt8 && op == ReduceOp::Sum) return nccl::RedOp::Max;  // bool travels as uint8: or
  if (t == kUInt8 && op == ReduceOp::Product) return nccl::RedOp::Min;  // and
  return static_cast<nccl::RedOp>(op);
}

// A communicator shared by its backend and the engine's pending operations.
struct Comm {
  nccl::Communicator* handle = nullptr;
  bool aborted = false;
  ~Comm() {
    if (!handle) return;
    try {
      nccl::destroy(handle);
    } catch (...) {
      nccl::abort(handle);
    }
  }
  void abort() {
    if (handle) nccl::abort(handle);  // frees it
    handle = nullptr;
    aborted = true;
  }
};

class NcclProgress final : public Progress {
 public:
  static NcclProgress& instance() {
    static auto* engine = new NcclProgress;  // never destroyed: its timer outlives static teardown
    return *engine;
  }

  void track(const std::shared_ptr<WorkState>& work, const std::shared_ptr<Comm>& comm) {
    work->add_engine(this);
    pending_.push_back({work, comm, nccl::record_event(comm->handle)});
  }

  bool poll() override {
    bool progressed = false;
    const auto now = Clock::now();
    for (auto& p : pending_) {
      if (p.work->done()) continue;
      try {
        if (!p.comm->aborted) {
          if (const std::string error = nccl::async_error(p.comm->handle); !error.empty()) {
            fail_comm(p.comm, concat("NCCL error: ", error));
            progressed = true;
            continue;
          }
        }
        if (!p.comm->aborted && nccl::event_done(p.event)) {
          p.work->complete();
          progressed = true;
        } else if (p.work->expire_if_late(now)) {
          fail_comm(p.comm, "aborted after a timeout");
          progressed = true;
        }
      } catch (const std::exception& e) {
        fail_comm(p.comm, e.what());
        progressed = true;
      }
    }
    std::erase_if(pending_, [](const Pending& p) {
      if (!p.work->done()) return false;
      nccl::destroy_event(p.event);
      return true;
    });
    return progressed;
  }

  void watch() override {
    if (polling_ || pending_.empty()) return;
    polling_ = true;
    executor_ = io_context().get_executor();
    if (!timer_) timer_.emplace(io_context());
    backoff_.reset(0);  // the GPU moves the data: no need to spin long
    asio::post(executor_, [this] { step(); });
  }

 private:
  struct Pending {
    std::shared_ptr<WorkState> work;
    std::shared_ptr<Comm> comm;
    nccl::Event* event;
  };

  void step() {
    const bool progressed = poll();
    if (pending_.empty()) {
      polling_ = false;
      return;
    }
    schedule_poll(backoff_, progressed, 0, *timer_, [this] { step(); });  // the GPU moves the data
  }

  // Aborts the communicator and fails every operation pending on it.
  void fail_comm(const std::shared_ptr<Comm>& comm, const std::string& message) {
    comm->abort();
    for (auto& p : pending_)
      if (p.comm == comm) p.work->fail(message);
  }

  std::vector<Pending> pending_;
  bool polling_ = false;
  asio::any_io_executor executor_;
  std::optional<asio::steady_timer> timer_;
  PollBackoff backoff_;
};

class NcclBackend final : public Backend {
 public:
  NcclBackend(std::shared_ptr<Comm> comm, int rank, int size, std::vector<int> world_ranks)
      : comm_(std::move(comm)), rank_(rank), size_(size), world_ranks_(std::move(world_ranks)) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::vector<int>& world_ranks() const override { return world_ranks_; }
  DataType wire_dtype(DataType t) const override { return t == kInt16 ? kInt32 : t == kBool ? kUInt8 : t; }
  bool host_memory() const override { return false; }

  void all_reduce(const State& work, const Tensor& buf, ReduceOp op) override {
    launch(work, [&] {
      nccl::all_reduce(comm_->handle, buf.data_ptr(), buf.data_ptr(), n(buf), type(buf), red_op(op, buf.dtype()));
    });
  }
  void all_gather(const State& work, const Tensor& out, const Tensor& in) override {
    launch(work, [&] { nccl::all_gather(comm_->handle, in.data_ptr(), out.data_ptr(), n(in), type(in)); });
  }
  void reduce_scatter(const State& work, const Tensor& out, const Tensor& in, ReduceOp op) override {
    launch(work, [&] {
      nccl::reduce_scatter(comm_->handle, in.data_ptr(), out.data_ptr(), n(out), type(out), red_op(op, out.dtype()));
    });
  }
  void broadcast(const State& work, const Tensor& buf, int root) override {
    launch(work, [&] { nccl::broadcast(comm_->handle, buf.data_ptr(), buf.data_ptr(), n(buf), type(buf), root); });
  }
  void reduce(const State& work, const Tensor& buf, int root, ReduceOp op) override {
    // Non-root ranks keep their tensor: they receive into a scratch buffer.
    Tensor target = rank_ == root ? buf : empty_like(buf);
    work->keep_alive(target);
    launch(work, [&] {
      nccl::reduce(comm_->handle, buf.data_ptr(), target.data_ptr(), n(buf), type(buf), red_op(op, buf.dtype()), root);
    });
  }
  void gather(const State& work, const Tensor& out, const Tensor& in, int root) override {
    launch(work, [&] {
      nccl::group_start();
      if (rank_ == root)
        for (int r = 0; r < size_; ++r) nccl::recv(comm_->handle, block(out, r, in.numel()), n(in), type(in), r);
      nccl::send(comm_->handle, in.data_ptr(), n(in), type(in), root);
      nccl::group_end(comm_->handle);
    });
  }
  void scatter(const State& work, const Tensor& out, const Tensor& in, int root) override {
    launch(work, [&] {
      nccl::group_start();
      if (rank_ == root)
        for (int r = 0; r < size_; ++r) nccl::send(comm_->handle, block(in, r, out.numel()), n(out), type(out), r);
      nccl::recv(comm_->handle, out.data_ptr(), n(out), type(out), root);
      nccl::group_end(comm_->handle);
    });
  }
  void all_to_all(const State& work, const Tensor& out, const Tensor& in) override {
    const std::int64_t each = in.numel() / size_;
    launch(work, [&] {
      nccl::group_start();
      for (int r = 0; r < size_; ++r) {
        nccl::send(comm_->handle, block(in, r, each), static_cast<std::size_t>(each), type(in), r);
        nccl::recv(comm_->handle, block(out, r, each), static_cast<std::size_t>(each), type(out), r);
      }
      nccl::group_end(comm_->handle);
    });
  }
 private:
  static std::size_t n(const Tensor& t) { return static_cast<std::size_t>(t.numel()); }
  static cuda::ElementType type(const Tensor& t) { return element_type(t.dtype()); }
  static void* block(const Tensor& t, int r, std::int64_t count) {
    return static_cast<char*>(t.data_ptr()) + static_cast<std::int64_t>(r) * count * static_cast<std::int64_t>(t.itemsize());
  }

  template <class Issue>
  void launch(const State& work, Issue&& issue) {
    if (comm_->aborted) return work->fail("the NCCL communicator was aborted by an earlier failure");
    try {
      issue();
      NcclProgress::instance().track(work, comm_);
    } catch (const cuda::CudaError& e) {
      comm_->abort();
      work->fail(concat("NCCL: ", e.what()));
    }
  }

  std::shared_ptr<Comm> comm_;
  int rank_, size_;
  std::vector<int> world_ranks_;
};

}  // namespace

std::unique_ptr<Backend> make_nccl(Backend& mpi, int device, Clock::duration timeout) {
  if (device >= cuda::device_count())
    throw DeviceError("nccl", concat("cuda:", device, " does not exist (", cuda::device_count(), " devices)"));
  // Rank 0 makes the unique id; every rank of the group receives it over MPI.
  Tensor id = zeros({static_cast<std::int64_t>(nccl::kUniqueIdBytes)}, TensorOptions{.dtype = kUInt8});
  if (mpi.rank() == 0) {
    const nccl::UniqueId made = nccl::get_unique_id();
    std::memcpy(id.data_ptr(), made.bytes, nccl::kUniqueIdBytes);
  }
  OpInfo info{.op = "nccl_init", .group = "-", .rank = mpi.rank(), .group_size = mpi.size(), .peers = "root 0",
              .tensor = "uint8[128] unique id", .bytes = static_cast<std::int64_t>(nccl::kUniqueIdBytes)};
  auto work = std::make_shared<WorkState>(std::move(info), timeout, nullptr);
  mpi.broadcast(work, id, 0);
  Work(work).wait();
  nccl::UniqueId unique;
  std::memcpy(unique.bytes, id.data_ptr(), nccl::kUniqueIdBytes);
  auto comm = std::make_shared<Comm>();
  try {
    comm->handle = nccl::create(unique, mpi.size(), mpi.rank(), device,
                                std::chrono::duration_cast<std::chrono::milliseconds>(timeout));
  } catch (const cuda::CudaError& e) {
    throw CommError("nccl_init", concat("rank ", mpi.rank(), " of ", mpi.size(), " on cuda:", device, ": ", e.what()));
  }
  return std::make_unique<NcclBackend>(std::move(comm), mpi.rank(), mpi.size(), mpi.world_ranks());
}

#else

std::unique_ptr<Backend> make_nccl(Backend&, int device, Clock::duration) {
  throw DeviceError("nccl", concat("cuda:", device, " tensors need NCCL, but Infini was built without CUDA"));
}

#endif

}  // namespace infini::parallel
