// ProcessGroup: collectives and point-to-point operations among a set of ranks, on CPU
// tensors through MPI and on CUDA tensors through NCCL, or through MPI from host memory
// when ranks of the group share a GPU (backend_choice.cppm). Every call validates its tensors
// (throwing an infini::Error that names them), launches the operation at once (launch
// order is program order on every rank) and returns a Work to wait for or co_await.
//
// Ranks and roots are ranks *in the group* (world_ranks() maps them to the world).
// Tensors may have any strides: non-contiguous ones are staged through a contiguous copy
// and copied back on completion. Zero-size tensors are valid operands.
export module infini.parallel:process_group;
import infini.std;
import infini.tensor;
import :runtime;
import :work;
import :backend_choice;

export namespace infini::parallel {

// Avg is Sum divided by the group size (floating-point dtypes only). On bool tensors Sum
// and Max are logical or, Min and Product logical and.
enum class ReduceOp : std::uint8_t { Sum, Avg, Max, Min, Product };
std::string_view name(ReduceOp op);

struct CommOptions {
  std::optional<Clock::duration> timeout = std::nullopt;  // default_timeout() when unset
};

struct ReduceOptions {
  ReduceOp op = ReduceOp::Sum;
  // float16/bfloat16 tensors are reduced in float32 and rounded once at the end.
  bool accumulate_in_float32 = false;
  std::optional<Clock::duration> timeout = std::nullopt;
};

// One send or receive of a batch (batch_isend_irecv); peer is a group rank.
struct P2POp {
  enum class Kind : std::uint8_t { Send, Recv };
  Kind kind;
  Tensor tensor;
  int peer;
  int tag = 0;
};
inline P2POp isend(const Tensor& t, int dst, int tag = 0) { return {P2POp::Kind::Send, t, dst, tag}; }
inline P2POp irecv(const Tensor& t, int src, int tag = 0) { return {P2POp::Kind::Recv, t, src, tag}; }

class Backend;

class ProcessGroup {
 public:
  ProcessGroup(std::string name, std::unique_ptr<Backend> mpi);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  const std::string& name() const { return name_; }
  int rank() const;
  int size() const;
  const std::vector<int>& world_ranks() const;  // group rank -> world rank
  // The first failure that broke the group, empty while it is healthy.
  const std::string& broken_by() const { return health_->broken_by; }

  // Collective: binds the group to this rank's `device` (each rank passes its own). For a
  // CUDA device the ranks exchange their GPUs and choose the backend of CUDA tensors
  // (choose_cuda_backend); NCCL's communicator is created now. Groups split from a bound
  // group are bound to the same device. Collectives on CUDA tensors bind an unbound group on
  // first use. Point-to-point operations on CUDA tensors always go through MPI from host
  // memory (matched by tags) and bind nothing.
  void set_device(Device device, CommOptions options = {});
  std::optional<Device> device() const { return device_; }
  // What set_device chose for CUDA tensors; nullopt before, and for a CPU device.
  const std::optional<BackendChoice>& cuda_backend() const { return cuda_backend_; }

  // t = op over ranks of t (in place).
  Work all_reduce(const Tensor& t, ReduceOptions options = {});
  // out = the ranks' `in` concatenated along dim 0 (out [size * n, ...] for in [n, ...]) or
  // stacked (out [size, ...in.shape]).
  Work all_gather(const Tensor& out, const Tensor& in, CommOptions options = {});
  Work all_gather(const std::vector<Tensor>& outs, const Tensor& in, CommOptions options = {});
  // out = op over ranks of block rank() of `in` (in [size * n, ...] or [size, ...out.shape]).
  Work reduce_scatter(const Tensor& out, const Tensor& in, ReduceOptions options = {});
  Work broadcast(const Tensor& t, int root, CommOptions options = {});
  // On root, t = op over ranks of t; other ranks' t is left as it was.
  Work reduce(const Tensor& t, int root, ReduceOptions options = {});
  // On root, outs[r] = rank r's `in` (outs is empty on the other ranks).
  Work gather(const std::vector<Tensor>& outs, const Tensor& in, int root, CommOptions options = {});
  // out = root's ins[rank()] (ins is empty on the other ranks).
  Work scatter(const Tensor& out, const std::vector<Tensor>& ins, int root, CommOptions options = {});
  // all_to_all_single with equal splits: block j of `in` (dim 0 split into size() blocks)
  // goes to rank j, whose block rank() of `out` receives it.
  Work all_to_all(const Tensor& out, const Tensor& in, CommOptions options = {});
  Work send(const Tensor& t, int dst, int tag = 0, CommOptions options = {});
  Work recv(const Tensor& t, int src, int tag = 0, CommOptions options = {});
  // Issues every send and receive together: no order of them on the ranks can deadlock.
  Work batch_isend_irecv(const std::vector<P2POp>& ops, CommOptions options = {});
  Work barrier(CommOptions options = {});

  // Collective over this group: the ranks with the same color form a new group, ordered by
  // (key, rank). A negative color leaves the caller out (it gets nullptr).
  std::shared_ptr<ProcessGroup> split(int color, int key, std::string name, CommOptions options = {});
  // Collective over this group: a group of `ranks` (group ranks, in that order);
  // nullptr on the ranks not in it.
  std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks, std::string name = {},
                                          CommOptions options = {});

 private:
  // Checks the group is healthy, numbers the operation (and in debug mode checks that every
  // rank launches the same collective) and makes its WorkState.
  std::shared_ptr<WorkState> begin(std::string_view op, std::string peers, std::string tensor, std::int64_t bytes,
               std::optional<Clock::duration> timeout, bool collective);
  Backend& backend_for(std::string_view op, const std::vector<const Tensor*>& tensors, bool collective);
  void check_signature(std::string_view op, const std::string& signature, Clock::duration timeout);

  std::string name_;
  std::unique_ptr<Backend> mpi_;
  std::unique_ptr<Backend> nccl_;  // created by set_device when the choice is NCCL
  std::optional<Device> device_;
  std::optional<BackendChoice> cuda_backend_;
  std::shared_ptr<GroupHealth> health_;
  std::uint64_t collective_seq_ = 0;  // numbers collectives (equal on every rank)
  std::uint64_t p2p_seq_ = 0;         // numbers point-to-point operations
  bool debug_ = false;  // INFINI_COMM_DEBUG=1: compare op signatures before each collective
};

// Initialises MPI when needed (MPI_THREAD_SERIALIZED) and returns the world group. Works
// under mpirun and without it (a world of 1). Calling it again returns the same group.
std::shared_ptr<ProcessGroup> init_process_group();
bool is_initialized();
// The world group; throws when init_process_group() was not called.
std::shared_ptr<ProcessGroup> world();
// Finalizes MPI; MPI_Abort instead when a group is broken (a peer may hang forever).
// Called at exit if the program did not.
void finalize_process_group();
// Aborts every rank of the job (after dumping the flight recorder).
[[noreturn]] void abort_job(int exit_code);

// This process's rank among the ranks on its host (the launcher's environment, else 0).
int local_rank();
// Whether a launcher (mpirun, srun) started this process as a rank of a job: its
// environment names a world (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK). Programs that
// should run plainly without one check this before init_process_group().
bool launched_by_mpirun();

}  // namespace infini::parallel
