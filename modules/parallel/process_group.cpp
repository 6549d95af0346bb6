// ProcessGroup: validation, staging, sequence numbers and the debug-mode signature check
// around the backends; init_process_group and the world group.
module;
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
module infini.parallel;
import infini.std;

namespace infini::parallel {
namespace {

// "float32[4, 3]" (without a stream: every operation describes its tensor).
std::string tensor_str(const Tensor& t) {
  std::string s(name(t.dtype()));
  s += '[';
  for (std::int64_t d = 0; d < t.dim(); ++d) {
    if (d > 0) s += ", ";
    s += std::to_string(t.size(d));
  }
  return s + ']';
}

std::string ranks_str(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ",") + std::to_string(r);
  return s;
}

void check_defined(std::string_view op, const Tensor& t, std::string_view what) {
  if (!t.defined()) throw Error(op, concat("expected a defined tensor as ", what));
}

void check_same_dtype(std::string_view op, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype())
    throw DTypeError(op, concat("expected tensors of one dtype, got ", tensor_str(a), " and ", tensor_str(b)));
}

void check_root(std::string_view op, int root, int size) {
  if (root < 0 || root >= size) throw IndexError(op, concat("root ", root, " is not a rank of a group of ", size));
}

void check_peer(std::string_view op, int peer, int rank, int size) {
  if (peer < 0 || peer >= size) throw IndexError(op, concat("peer ", peer, " is not a rank of a group of ", size));
  if (peer == rank) throw IndexError(op, concat("rank ", rank, " cannot exchange with itself"));
}

void check_reduce(std::string_view op, const Tensor& t, const ReduceOptions& o) {
  if (o.op == ReduceOp::Avg && !is_floating_point(t.dtype()))
    throw DTypeError(op, concat("ReduceOp::Avg needs a floating-point tensor, got ", tensor_str(t)));
}

// `whole` holds `parts` blocks of `block`: [parts * n, ...] for block [n, ...], or [parts, ...block].
void check_blocks(std::string_view op, const Tensor& whole, const Tensor& block, int parts, std::string_view names) {
  Shape concatenated = block.shape(), stacked = block.shape();
  stacked.insert(stacked.begin(), parts);
  if (concatenated.empty()) concatenated = {parts};
  else concatenated[0] *= parts;
  if (whole.shape() != concatenated && whole.shape() != stacked)
    throw ShapeError(op, concat("expected ", names, " of ", parts, " ranks' blocks of ", block.shape(), ": shape ",
                                concatenated, " or ", stacked, ", got ", whole.shape()));
}

void check_list(std::string_view op, const std::vector<Tensor>& list, const Tensor& like, int size,
                std::string_view what) {
  if (static_cast<int>(list.size()) != size)
    throw ShapeError(op, concat("expected ", size, " tensors in ", what, " (one per rank), got ", list.size()));
  for (std::size_t i = 0; i < list.size(); ++i) {
    check_defined(op, list[i], what);
    if (list[i].shape() != like.shape() || list[i].dtype() != like.dtype() || list[i].device() != like.device())
      throw ShapeError(op, concat(what, "[", i, "] is ", tensor_str(list[i]), " on ", list[i].device(),
                                  "; expected ", tensor_str(like), " on ", like.device()));
  }
}

bool needs_staging(const Tensor& t, DataType dtype, Device device) {
  return !t.is_contiguous() || t.dtype() != dtype || t.device() != device;
}

// A contiguous tensor of `t`'s values in `dtype` on `device`: t itself when it already is one.
Tensor staged(const Tensor& t, DataType dtype, Device device) {
  if (!needs_staging(t, dtype, device)) return t;
  NoGradGuard no_grad;
  return t.to(device, dtype).contiguous();
}

// A contiguous buffer for an output `t` in `dtype` on `device` (values copied in when `load`).
Tensor output_buffer(const Tensor& t, DataType dtype, Device device, bool load) {
  if (!needs_staging(t, dtype, device)) return t;
  return load ? staged(t, dtype, device) : empty(t.shape(), TensorOptions{.dtype = dtype, .device = device});
}

// Where backend `b` reads and writes `t`'s values: on t's device, or in host memory (MPI
// moves a CUDA tensor through a host copy).
Device wire_device(const Backend& b, const Tensor& t) { return b.host_memory() ? Device::cpu() : t.device(); }

// On completion, copies `buf` into `t` when they are different tensors.
void copy_back(WorkState& work, const Tensor& t, const Tensor& buf) {
  if (buf.is_same(t)) return;
  work.then([t, buf] {
    NoGradGuard no_grad;
    Tensor(t).copy_(buf);
  });
}

// 64-bit FNV-1a.
std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::string_view(v) != "0";
}

std::shared_ptr<ProcessGroup>& world_slot() {
  static std::shared_ptr<ProcessGroup> group;
  return group;
}

}  // namespace

std::string_view name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
    case ReduceOp::Product: return "product";
  }
  return "?";
}

ProcessGroup::ProcessGroup(std::string name, std::unique_ptr<Backend> mpi)
    : name_(std::move(name)), mpi_(std::move(mpi)), health_(std::make_shared<GroupHealth>()),
      debug_(env_flag("INFINI_COMM_DEBUG")) {}

ProcessGroup::~ProcessGroup() = default;

int ProcessGroup::rank() const { return mpi_->rank(); }
int ProcessGroup::size() const { return mpi_->size(); }
const std::vector<int>& ProcessGroup::world_ranks() const { return mpi_->world_ranks(); }

std::shared_ptr<WorkState> ProcessGroup::begin(std::string_view op, std::string peers, std::string tensor,
                                         std::int64_t bytes, std::optional<Clock::duration> timeout,
                                         bool collective) {
  if (health_->broken())
    throw CommError(op, concat("group '", name_, "' cannot be used after an earlier failure: ", health_->broken_by));
  const Clock::duration limit = timeout ? *timeout : default_timeout();
  const std::uint64_t seq = collective ? ++collective_seq_ : ++p2p_seq_;
  if (debug_ && collective) check_signature(op, concat(op, " #", seq, " ", tensor, " ", peers), limit);
  OpInfo info{.op = std::string(op),
              .group = name_,
              .rank = rank(),
              .group_size = size(),
              .peers = std::move(peers),
              .tensor = std::move(tensor),
              .seq = seq,
              .bytes = bytes};
  if (!collective) info.op += " (point-to-point)";
  return std::make_shared<WorkState>(std::move(info), limit, health_);
}

Backend& ProcessGroup::backend_for(std::string_view op, const std::vector<const Tensor*>& tensors, bool collective) {
  std::optional<Device> device;
  for (const Tensor* t : tensors) {
    if (!t->defined()) continue;
    if (device && *device != t->device())
      throw DeviceError(op, concat("expected every tensor on one device, got ", *device, " and ", t->device()));
    device = t->device();
  }
  // Point-to-point operations on CUDA tensors go through MPI from host memory whatever the
  // group chose: MPI matches them by tag. NCCL matches a pair's messages in issue order on one
  // stream, and a pipeline's tagged receives, posted as each pass needs them, can leave two
  // ranks each waiting on the GPU for the other's later message (a 1F1B steady state).
  if (!device || device->is_cpu() || !collective) return *mpi_;
  if (!device_) set_device(*device);
  if (*device_ != *device)
    throw DeviceError(op, concat("group '", name_, "' is bound to ", *device_, ", got a tensor on ", *device));
  return cuda_backend_->backend == CudaBackend::Nccl ? *nccl_ : *mpi_;
}

void ProcessGroup::set_device(Device device, CommOptions o) {
  if (device_ == device) return;
  if (device_)
    throw DeviceError("set_device", concat("group '", name_, "' is already bound to ", *device_, ", not ", device));
  if (device.is_cuda()) {
    const BackendChoice choice = choose_cuda_backend(gather_gpu_identities(*this, local_gpu_identity(device)));
    if (choice.backend == CudaBackend::Nccl)
      nccl_ = make_nccl(*mpi_, device.index, o.timeout ? *o.timeout : default_timeout());
    cuda_backend_ = choice;
  }
  device_ = device;
}

// Debug mode: every rank of the group gathers every rank's signature of the collective it
// is about to launch; any difference is an error naming both sides (instead of a hang).
void ProcessGroup::check_signature(std::string_view op, const std::string& signature, Clock::duration timeout) {
  constexpr std::int64_t kBytes = 256;
  Tensor mine = zeros({kBytes}, TensorOptions{.dtype = kUInt8});
  const std::uint64_t hash = fnv1a(signature);
  std::memcpy(mine.data_ptr(), &hash, sizeof(hash));
  std::memcpy(mine.data_ptr<std::uint8_t>() + 8, signature.data(), std::min<std::size_t>(signature.size(), kBytes - 9));
  Tensor all = empty({size() * kBytes}, TensorOptions{.dtype = kUInt8});
  OpInfo info{.op = "debug_check", .group = name_, .rank = rank(), .group_size = size(), .peers = "all",
              .tensor = signature, .seq = collective_seq_, .bytes = kBytes};
  auto work = std::make_shared<WorkState>(std::move(info), timeout, health_);
  mpi_->all_gather(work, all, mine);
  Work(work).wait();
  const auto* bytes = all.data_ptr<std::uint8_t>();
  for (int r = 0; r < size(); ++r) {
    std::uint64_t theirs = 0;
    std::memcpy(&theirs, bytes + r * kBytes, sizeof(theirs));
    if (theirs == hash) continue;
    const std::string other(reinterpret_cast<const char*>(bytes + r * kBytes + 8));
    health_->break_by(concat("collective mismatch with rank ", r));
    throw CommError(op, concat("ranks of group '", name_, "' launched different collectives: rank ", rank(),
                               " calls '", signature, "' but rank ", r, " calls '", other, "'"));
  }
}

Work ProcessGroup::all_reduce(const Tensor& t, ReduceOptions o) {
  constexpr std::string_view op = "all_reduce";
  check_defined(op, t, "tensor");
  check_reduce(op, t, o);
  Backend& b = backend_for(op, {&t}, true);
  auto work = begin(op, "all, " + std::string(parallel::name(o.op)), tensor_str(t), t.nbytes(), o.timeout, true);
  const bool widen = o.accumulate_in_float32 && (t.dtype() == kBFloat16 || t.dtype() == kFloat16);
  Tensor buf = output_buffer(t, b.wire_dtype(widen ? kFloat32 : t.dtype()), wire_device(b, t), true);
  work->keep_alive(t);
  work->keep_alive(buf);
  b.all_reduce(work, buf, o.op == ReduceOp::Avg ? ReduceOp::Sum : o.op);
  if (o.op == ReduceOp::Avg)
    work->then([buf, n = size()] {
      NoGradGuard no_grad;
      Tensor quotient = buf;
      div_(quotient, n);
    });
  copy_back(*work, t, buf);
  return Work(work);
}

Work ProcessGroup::all_gather(const Tensor& out, const Tensor& in, CommOptions o) {
  constexpr std::string_view op = "all_gather";
  check_defined(op, out, "output");
  check_defined(op, in, "input");
  check_same_dtype(op, out, in);
  check_blocks(op, out, in, size(), "an output");
  Backend& b = backend_for(op, {&out, &in}, true);
  auto work = begin(op, "all", tensor_str(in), in.nbytes(), o.timeout, true);
  const Device device = wire_device(b, in);
  Tensor src = staged(in, b.wire_dtype(in.dtype()), device);
  Tensor dst = output_buffer(out, b.wire_dtype(out.dtype()), device, false);
  for (const Tensor& t : {out, src, dst}) work->keep_alive(t);
  b.all_gather(work, dst, src);
  copy_back(*work, out, dst);
  return Work(work);
}

Work ProcessGroup::all_gather(const std::vector<Tensor>& outs, const Tensor& in, CommOptions o) {
  constexpr std::string_view op = "all_gather";
  check_defined(op, in, "input");
  check_list(op, outs, in, size(), "outputs");
  Shape stacked = in.shape();
  stacked.insert(stacked.begin(), size());
  Tensor flat = empty(stacked, TensorOptions{.dtype = in.dtype(), .device = in.device()});
  Work work = all_gather(flat, in, o);
  work.state()->then([outs, flat] {
    NoGradGuard no_grad;
    for (std::size_t r = 0; r < outs.size(); ++r) Tensor(outs[r]).copy_(flat.select(0, static_cast<std::int64_t>(r)));
  });
  return work;
}

Work ProcessGroup::reduce_scatter(const Tensor& out, const Tensor& in, ReduceOptions o) {
  constexpr std::string_view op = "reduce_scatter";
  check_defined(op, out, "output");
  check_defined(op, in, "input");
  check_same_dtype(op, out, in);
  check_reduce(op, out, o);
  check_blocks(op, in, out, size(), "an input");
  Backend& b = backend_for(op, {&out, &in}, true);
  auto work = begin(op, "all, " + std::string(parallel::name(o.op)), tensor_str(in), in.nbytes(), o.timeout, true);
  const bool widen = o.accumulate_in_float32 && (in.dtype() == kBFloat16 || in.dtype() == kFloat16);
  const DataType wire = b.wire_dtype(widen ? kFloat32 : in.dtype());
  const Device device = wire_device(b, in);
  Tensor src = staged(in, wire, device), dst = output_buffer(out, wire, device, false);
  for (const Tensor& t : {out, src, dst}) work->keep_alive(t);
  b.reduce_scatter(work, dst, src, o.op == ReduceOp::Avg ? ReduceOp::Sum : o.op);
  if (o.op == ReduceOp::Avg)
    work->then([dst, n = size()] {
      NoGradGuard no_grad;
      Tensor quotient = dst;
      div_(quotient, n);
    });
  copy_back(*work, out, dst);
  return Work(work);
}

Work ProcessGroup::broadcast(const Tensor& t, int root, CommOptions o) {
  constexpr std::string_view op = "broadcast";
  check_defined(op, t, "tensor");
  check_root(op, root, size());
  Backend& b = backend_for(op, {&t}, true);
  auto work = begin(op, concat("root ", root), tensor_str(t), t.nbytes(), o.timeout, true);
  Tensor buf = output_buffer(t, b.wire_dtype(t.dtype()), wire_device(b, t), rank() == root);
  work->keep_alive(t);
  work->keep_alive(buf);
  b.broadcast(work, buf, root);
  if (rank() != root) copy_back(*work, t, buf);
  return Work(work);
}

Work ProcessGroup::reduce(const Tensor& t, int root, ReduceOptions o) {
  constexpr std::string_view op = "reduce";
  check_defined(op, t, "tensor");
  check_root(op, root, size());
  check_reduce(op, t, o);
  Backend& b = backend_for(op, {&t}, true);
  auto work = begin(op, concat("root ", root, ", ", parallel::name(o.op)), tensor_str(t), t.nbytes(), o.timeout, true);
  const bool widen = o.accumulate_in_float32 && (t.dtype() == kBFloat16 || t.dtype() == kFloat16);
  Tensor buf = staged(t, b.wire_dtype(widen ? kFloat32 : t.dtype()), wire_device(b, t));
  work->keep_alive(t);
  work->keep_alive(buf);
  b.reduce(work, buf, root, o.op == ReduceOp::Avg ? ReduceOp::Sum : o.op);
  if (rank() == root) {
    if (o.op == ReduceOp::Avg)
      work->then([buf, n = size()] {
        NoGradGuard no_grad;
        Tensor quotient = buf;
      div_(quotient, n);
      });
    copy_back(*work, t, buf);
  }
  return Work(work);
}

Work ProcessGroup::gather(const std::vector<Tensor>& outs, const Tensor& in, int root, CommOptions o) {
  constexpr std::string_view op = "gather";
  check_defined(op, in, "input");
  check_root(op, root, size());
  if (rank() == root) check_list(op, outs, in, size(), "outputs");
  else if (!outs.empty())
    throw ShapeError(op, concat("expected no outputs on rank ", rank(), " (root is ", root, "), got ", outs.size()));
  Backend& b = backend_for(op, {&in}, true);
  auto work = begin(op, concat("root ", root), tensor_str(in), in.nbytes(), o.timeout, true);
  const DataType wire = b.wire_dtype(in.dtype());
  const Device device = wire_device(b, in);
  Tensor src = staged(in, wire, device), flat;
  if (rank() == root) flat = empty({size() * in.numel()}, TensorOptions{.dtype = wire, .device = device});
  for (const Tensor& t : {src, flat}) work->keep_alive(t);
  b.gather(work, flat, src, root);
  if (rank() == root)
    work->then([outs, flat, n = in.numel()] {
      NoGradGuard no_grad;
      for (std::size_t r = 0; r < outs.size(); ++r)
        Tensor(outs[r]).copy_(flat.narrow(0, static_cast<std::int64_t>(r) * n, n).view(outs[r].shape()));
    });
  return Work(work);
}

Work ProcessGroup::scatter(const Tensor& out, const std::vector<Tensor>& ins, int root, CommOptions o) {
  constexpr std::string_view op = "scatter";
  check_defined(op, out, "output");
  check_root(op, root, size());
  if (rank() == root) check_list(op, ins, out, size(), "inputs");
  else if (!ins.empty())
    throw ShapeError(op, concat("expected no inputs on rank ", rank(), " (root is ", root, "), got ", ins.size()));
  Backend& b = backend_for(op, {&out}, true);
  auto work = begin(op, concat("root ", root), tensor_str(out), out.nbytes(), o.timeout, true);
  const DataType wire = b.wire_dtype(out.dtype());
  const Device device = wire_device(b, out);
  Tensor flat, dst = output_buffer(out, wire, device, false);
  if (rank() == root) {
    NoGradGuard no_grad;
    flat = empty({size() * out.numel()}, TensorOptions{.dtype = wire, .device = device});
    for (int r = 0; r < size(); ++r)
      flat.narrow(0, r * out.numel(), out.numel()).view(out.shape()).copy_(ins[static_cast<std::size_t>(r)]);
  }
  for (const Tensor& t : {out, dst, flat}) work->keep_alive(t);
  b.scatter(work, dst, flat, root);
  copy_back(*work, out, dst);
  return Work(work);
}

Work ProcessGroup::all_to_all(const Tensor& out, const Tensor& in, CommOptions o) {
  constexpr std::string_view op = "all_to_all";
  check_defined(op, out, "output");
  check_defined(op, in, "input");
  check_same_dtype(op, out, in);
  if (out.shape() != in.shape() || in.dim() == 0 || in.size(0) % size() != 0)
    throw ShapeError(op, concat("expected input and output of one shape whose dim 0 splits into ", size(),
                                " blocks, got input ", in.shape(), " and output ", out.shape()));
  Backend& b = backend_for(op, {&out, &in}, true);
  auto work = begin(op, "all", tensor_str(in), in.nbytes(), o.timeout, true);
  const Device device = wire_device(b, in);
  Tensor src = staged(in, b.wire_dtype(in.dtype()), device);
  Tensor dst = output_buffer(out, b.wire_dtype(out.dtype()), device, false);
  for (const Tensor& t : {out, src, dst}) work->keep_alive(t);
  b.all_to_all(work, dst, src);
  copy_back(*work, out, dst);
  return Work(work);
}

Work ProcessGroup::send(const Tensor& t, int dst, int tag, CommOptions o) {
  return batch_isend_irecv({isend(t, dst, tag)}, o);
}

Work ProcessGroup::recv(const Tensor& t, int src, int tag, CommOptions o) {
  return batch_isend_irecv({irecv(t, src, tag)}, o);
}

Work ProcessGroup::batch_isend_irecv(const std::vector<P2POp>& ops, CommOptions o) {
  constexpr std::string_view op = "batch_isend_irecv";
  const std::string_view name = ops.size() == 1 ? (ops[0].kind == P2POp::Kind::Send ? "send" : "recv") : op;
  std::vector<const Tensor*> tensors;
  std::string peers, described;
  std::int64_t bytes = 0;
  for (const P2POp& p : ops) {
    check_defined(name, p.tensor, "tensor");
    check_peer(name, p.peer, rank(), size());
    if (p.tag < 0) throw Error(name, concat("tag must be >= 0, got ", p.tag));
    tensors.push_back(&p.tensor);
    const bool send = p.kind == P2POp::Kind::Send;
    peers += concat(peers.empty() ? "" : ",", send ? "to " : "from ", p.peer);
    described += concat(described.empty() ? "" : ", ", send ? "send " : "recv ", tensor_str(p.tensor), " tag ", p.tag);
    bytes += p.tensor.nbytes();
  }
  backend_for(name, tensors, false);  // checks the devices; MPI moves every point-to-point message
  auto work = begin(name, peers, described, bytes, o.timeout, false);
  std::vector<P2POp> wire;
  for (const P2POp& p : ops) {
    const bool send = p.kind == P2POp::Kind::Send;
    const DataType dtype = mpi_->wire_dtype(p.tensor.dtype());
    const Device host = Device::cpu();
    Tensor buf = send ? staged(p.tensor, dtype, host) : output_buffer(p.tensor, dtype, host, false);
    work->keep_alive(p.tensor);
    work->keep_alive(buf);
    if (!send) copy_back(*work, p.tensor, buf);
    wire.push_back({p.kind, buf, p.peer, p.tag});
  }
  mpi_p2p(*mpi_, work, wire);
  return Work(work);
}

Work ProcessGroup::barrier(CommOptions o) {
  auto work = begin("barrier", "all", "-", 0, o.timeout, true);
  mpi_barrier(*mpi_, work);
  return Work(work);
}

std::shared_ptr<ProcessGroup> ProcessGroup::split(int color, int key, std::string name, CommOptions o) {
  if (health_->broken())
    throw CommError("split", concat("group '", name_, "' cannot be used after an earlier failure: ", health_->broken_by));
  auto backend = split_mpi(*mpi_, color, key, o.timeout ? *o.timeout : default_timeout());
  if (!backend) return nullptr;
  auto group = std::make_shared<ProcessGroup>(std::move(name), std::move(backend));
  if (device_) group->set_device(*device_, o);  // collective over the new group's ranks
  return group;
}

std::shared_ptr<ProcessGroup> ProcessGroup::new_group(const std::vector<int>& ranks, std::string name, CommOptions o) {
  int key = -1;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    check_root("new_group", ranks[i], size());
    if (std::count(ranks.begin(), ranks.end(), ranks[i]) > 1)
      throw Error("new_group", concat("rank ", ranks[i], " is listed twice in [", ranks_str(ranks), "]"));
    if (ranks[i] == rank()) key = static_cast<int>(i);
  }
  if (name.empty()) name = concat(name_, "[", ranks_str(ranks), "]");
  return split(key >= 0 ? 0 : -1, key, std::move(name), o);
}

std::shared_ptr<ProcessGroup> init_process_group() {
  auto& group = world_slot();
  if (group) return group;
  group = std::make_shared<ProcessGroup>("world", make_mpi_world());
  FlightRecorder::instance().set_rank(group->rank(), group->size());
  FlightRecorder::instance().install_sigterm_handler();
  static const bool registered = [] { return std::atexit([] { finalize_process_group(); }) == 0; }();
  (void)registered;
  return group;
}

bool is_initialized() { return world_slot() != nullptr; }

std::shared_ptr<ProcessGroup> world() {
  if (!world_slot()) throw Error("world", "init_process_group() has not been called");
  return world_slot();
}

void finalize_process_group() {
  auto& group = world_slot();
  if (!group) return;
  const bool many = group->size() > 1;
  const int rank = group->rank();
  bool broken = many && any_group_broken();
  group.reset();
  // MPI_Finalize waits for every rank, so a rank that ends while another still waits in a
  // collective would wait too (and Open MPI's launcher can hang when the job is then
  // aborted around it): first a barrier with the default deadline; past it, abort the job.
  if (many && !broken && !exit_barrier(default_timeout())) {
    std::fprintf(stderr, "[infini] rank %d: not every rank reached the end within %g s; aborting the job\n", rank,
                 std::chrono::duration<double>(default_timeout()).count());
    broken = true;
  }
  if (broken) abort_job(1);
  finalize_mpi();
}

void abort_job(int exit_code) {
  FlightRecorder::instance().dump("abort");
  abort_mpi(exit_code);
}

int local_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "LOCAL_RANK"})
    if (const char* v = std::getenv(name); v && *v) return std::atoi(v);
  return 0;
}

bool launched_by_mpirun() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (const char* v = std::getenv(name); v && *v) return true;
  return false;
}

}  // namespace infini::parallel
