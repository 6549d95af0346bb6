// Backend: what the MPI and NCCL implementations of a ProcessGroup provide. ProcessGroup
// validates and stages the operands, so a backend sees contiguous tensors whose dtype it
// supports (wire_dtype), reduce ops other than Avg, and ranks in range. Each call starts
// the operation and registers `work` with the backend's progress engine, or fails it.
export module infini.parallel:backend;
import infini.std;
import infini.tensor;
import :runtime;
import :work;
import :process_group;

namespace infini::parallel {

class Backend {
 public:
  using State = std::shared_ptr<WorkState>;
  virtual ~Backend() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const std::vector<int>& world_ranks() const = 0;
  // The dtype `t` travels as (e.g. NCCL has no int16: int32); t itself when supported.
  virtual DataType wire_dtype(DataType t) const { return t; }
  // Whether operands live in host memory (MPI: a CUDA tensor is staged through the host).
  virtual bool host_memory() const { return true; }

  virtual void all_reduce(const State& work, const Tensor& buf, ReduceOp op) = 0;
  virtual void all_gather(const State& work, const Tensor& out, const Tensor& in) = 0;
  virtual void reduce_scatter(const State& work, const Tensor& out, const Tensor& in, ReduceOp op) = 0;
  virtual void broadcast(const State& work, const Tensor& buf, int root) = 0;
  virtual void reduce(const State& work, const Tensor& buf, int root, ReduceOp op) = 0;
  // out: [size * in.numel()] on root, undefined elsewhere.
  virtual void gather(const State& work, const Tensor& out, const Tensor& in, int root) = 0;
  // in: [size * out.numel()] on root, undefined elsewhere.
  virtual void scatter(const State& work, const Tensor& out, const Tensor& in, int root) = 0;
  virtual void all_to_all(const State& work, const Tensor& out, const Tensor& in) = 0;
};

// The MPI world communicator (a duplicate of MPI_COMM_WORLD); initialises MPI if needed.
std::unique_ptr<Backend> make_mpi_world();
// MPI_Comm_split of `parent` (an MPI backend); nullptr for a negative color. Blocking,
// after a barrier that times out instead of hanging.
std::unique_ptr<Backend> split_mpi(Backend& parent, int color, int key, Clock::duration timeout);
// MPI_Ibarrier on the communicator of `mpi` (barriers always go through MPI).
void mpi_barrier(Backend& mpi, const std::shared_ptr<WorkState>& work);
// The sends and receives of a batch on the communicator of `mpi`, matched by tag (every
// point-to-point operation goes through MPI, CUDA tensors from host memory).
void mpi_p2p(Backend& mpi, const std::shared_ptr<WorkState>& work, const std::vector<P2POp>& ops);
// Whether every rank of the world reached this barrier (on a communicator of its own)
// within `timeout`; false leaves it pending (the caller aborts the job).
bool exit_barrier(Clock::duration timeout);
void finalize_mpi();
[[noreturn]] void abort_mpi(int exit_code);
// NCCL communicator of the group of `mpi` on CUDA device `device` (unique id broadcast over
// MPI). Throws DeviceError when Infini was built without CUDA.
std::unique_ptr<Backend> make_nccl(Backend& mpi, int device, Clock::duration timeout);

}  // namespace infini::parallel
