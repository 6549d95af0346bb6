// ddp_overlap_bench: how much of DistributedDataParallel's gradient communication is hidden
// behind backward. Run under mpirun with 2 ranks (or more):
//   mpirun -np 2 -x OMP_NUM_THREADS=1 build/release/bin/ddp_overlap_bench [--layers 24] [--width 512]
//       [--rows 64] [--link_mb_per_s 400] [--bucket_mb 25] [--steps 7]
//
// The injected delay, a knob of this benchmark only: every rank's incoming link is given a
// bandwidth of --link_mb_per_s. MPI_Irecv and MPI_Iallreduce are wrapped through MPI's
// profiling interface (PMPI) so that a receive completes no earlier than its bytes take over
// that link, transfers queued one after another; MPI_Testsome hides completions until then.
//
// Model: --layers Linear(width, width) layers with tanh, --rows rows of input per rank.
// Per step (medians over --steps), on every rank, without the link delay and with it:
//   compute  forward + backward of the model alone (no DDP)
//   comm     the all-reduce of every bucket, one after another (what a step pays without overlap)
//   ddp      forward + backward with DDP (buckets all-reduced as their gradients become ready;
//            backward returns once all are averaged)
// Rank 0 prints one JSON line with
//   hidden        = (compute + comm - ddp) / comm, with the delay: all communication hidden
//   delay_hidden  = 1 - (ddp - ddp without delay) / (comm - comm without delay): the injected
//                   link time hidden (moving the bytes through shared memory is CPU work that
//                   a one-thread rank cannot overlap with its own compute).
#include <mpi.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <vector>

import infini.parallel;

using namespace infini;
using Clock = std::chrono::steady_clock;

namespace {

// The simulated link: when each pending receive may complete.
struct Link {
  double bytes_per_ns = 0;  // 0: no delay
  Clock::time_point free_at;
  std::map<MPI_Request, Clock::time_point> release;

  void add(MPI_Request request, std::int64_t bytes) {
    if (bytes_per_ns <= 0) return;
    const auto now = Clock::now();
    free_at = std::max(free_at, now) + std::chrono::nanoseconds(static_cast<std::int64_t>(static_cast<double>(bytes) / bytes_per_ns));
    release[request] = free_at;
  }
  bool released(MPI_Request request, Clock::time_point now) const {
    const auto it = release.find(request);
    return it == release.end() || it->second <= now;
  }
};

Link slow_link;

std::int64_t type_bytes(MPI_Datatype type, int count) {
  int size = 0;
  PMPI_Type_size(type, &size);
  return static_cast<std::int64_t>(size) * count;
}

}  // namespace

// The PMPI wrappers (libinfini's calls resolve to these definitions in the executable).
extern "C" {

int MPI_Irecv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Request* request) {
  const int rc = PMPI_Irecv(buf, count, type, source, tag, comm, request);
  if (rc == MPI_SUCCESS) slow_link.add(*request, type_bytes(type, count));
  return rc;
}

int MPI_Iallreduce(const void* in, void* out, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                   MPI_Request* request) {
  const int rc = PMPI_Iallreduce(in, out, count, type, op, comm, request);
  if (rc == MPI_SUCCESS) slow_link.add(*request, type_bytes(type, count));
  return rc;
}

// Tests only the requests the link has released; the others read as still in flight.
int MPI_Testsome(int incount, MPI_Request requests[], int* outcount, int indices[], MPI_Status statuses[]) {
  const auto now = Clock::now();
  std::vector<MPI_Request> visible(requests, requests + incount);
  for (MPI_Request& r : visible)
    if (!slow_link.released(r, now)) r = MPI_REQUEST_NULL;
  std::vector<int> found(static_cast<std::size_t>(std::max(incount, 1)));
  const std::vector<MPI_Request> before = visible;
  const int rc = PMPI_Testsome(incount, visible.data(), outcount, found.data(), statuses);
  if (rc != MPI_SUCCESS) return rc;
  if (*outcount == MPI_UNDEFINED) {  // nothing released: still drive MPI's progress
    int flag = 0;
    PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    // Report "none completed" unless no request is active at all.
    bool any_active = false;
    for (int i = 0; i < incount; ++i) any_active |= requests[i] != MPI_REQUEST_NULL;
    *outcount = any_active ? 0 : MPI_UNDEFINED;
    return MPI_SUCCESS;
  }
  for (int k = 0; k < *outcount; ++k) {
    const int i = found[static_cast<std::size_t>(k)];
    slow_link.release.erase(before[static_cast<std::size_t>(i)]);
    requests[i] = MPI_REQUEST_NULL;
    indices[k] = i;
  }
  return rc;
}

}  // extern "C"

namespace {

// --layers Linear(width, width) + tanh.
class StackImpl : public nn::Module {
 public:
  StackImpl(int layers, std::int64_t width) : Module("Stack") {
    for (int l = 0; l < layers; ++l)
      linears.push_back(register_module(concat("linear", l), nn::Linear(width, width)));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = x;
    for (auto& linear : linears) h = tanh(linear(h));
    return h;
  }
  std::vector<nn::Linear> linears;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Milliseconds of `body`, the slowest rank's.
double timed_ms(parallel::ProcessGroup& world, const std::function<void()>& body) {
  world.barrier().wait();
  const auto start = Clock::now();
  body();
  Tensor ms = full({1}, std::chrono::duration<double, std::milli>(Clock::now() - start).count(),
                   TensorOptions{.dtype = kFloat64});
  world.all_reduce(ms, {.op = parallel::ReduceOp::Max}).wait();
  return ms.item<double>();
}

}  // namespace

int main(int argc, char** argv) {
  int layers = 24, steps = 7;
  std::int64_t width = 512, rows = 64;
  double link_mb_per_s = 400, bucket_mb = 25;
  for (int i = 1; i + 1 < argc; i += 2) {
    const char* value = argv[i + 1];
    if (!std::strcmp(argv[i], "--layers")) layers = std::atoi(value);
    else if (!std::strcmp(argv[i], "--width")) width = std::atoll(value);
    else if (!std::strcmp(argv[i], "--rows")) rows = std::atoll(value);
    else if (!std::strcmp(argv[i], "--link_mb_per_s")) link_mb_per_s = std::atof(value);
    else if (!std::strcmp(argv[i], "--bucket_mb")) bucket_mb = std::atof(value);
    else if (!std::strcmp(argv[i], "--steps")) steps = std::atoi(value);
    else {
      std::fprintf(stderr, "ddp_overlap_bench: unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  auto world = parallel::init_process_group();
  if (world->size() < 2) {
    std::fprintf(stderr, "ddp_overlap_bench: run under mpirun with at least 2 ranks\n");
    return 2;
  }
  manual_seed(1);
  auto plain = std::make_shared<StackImpl>(layers, width);
  auto replica = std::make_shared<StackImpl>(layers, width);
  const auto cap = static_cast<std::int64_t>(bucket_mb * (1 << 20));
  parallel::DistributedDataParallel ddp(
      replica, world, {.buckets = {.first_bucket_bytes = std::min<std::int64_t>(cap, 1 << 20), .bucket_bytes = cap}});
  const Tensor x = randn({rows, width});
  auto step = [&](nn::Module& model) {
    for (const Tensor& p : model.parameters()) p.set_grad(Tensor());
    const Tensor y = model.forward(x);
    mean(mul(y, y)).backward();
  };
  step(*replica);  // the first synchronised step rebuilds the buckets

  // The buckets' all-reduces one after another: what communication costs without overlap.
  std::vector<Tensor> buffers;
  for (const auto& bucket : ddp.reducer().buckets()) {
    std::int64_t numel = 0;
    for (std::size_t i : bucket) numel += replica->parameters()[i].numel();
    buffers.push_back(zeros({numel}));
  }
  // Medians of (compute, comm, ddp) over `steps` steps at the link's current speed.
  auto measure = [&] {
    std::vector<double> compute, comm, overlapped;
    for (int s = 0; s < steps; ++s) {
      compute.push_back(timed_ms(*world, [&] { step(*plain); }));
      comm.push_back(timed_ms(*world, [&] {
        for (const Tensor& b : buffers) world->all_reduce(b, {.op = parallel::ReduceOp::Avg}).wait();
      }));
      overlapped.push_back(timed_ms(*world, [&] { step(*replica); }));
    }
    return std::array<double, 3>{median(compute), median(comm), median(overlapped)};
  };
  const auto [c0, m0, d0] = measure();
  slow_link.bytes_per_ns = link_mb_per_s * (1 << 20) / 1e9;
  const auto [c, m, d] = measure();
  if (world->rank() == 0) {
    std::int64_t bytes = 0;
    for (const Tensor& b : buffers) bytes += b.nbytes();
    std::printf("{\"ranks\": %d, \"layers\": %d, \"width\": %lld, \"rows\": %lld, \"gradient_mb\": %.1f, \"buckets\": %zu, "
                "\"bucket_mb\": %.1f, \"link_mb_per_s\": %.0f, \"no_delay\": {\"compute_ms\": %.1f, \"comm_ms\": %.1f, "
                "\"ddp_ms\": %.1f}, \"compute_ms\": %.1f, \"comm_ms\": %.1f, \"ddp_ms\": %.1f, \"hidden\": %.3f, "
                "\"delay_hidden\": %.3f}\n",
                world->size(), layers, static_cast<long long>(width), static_cast<long long>(rows),
                static_cast<double>(bytes) / (1 << 20), buffers.size(), bucket_mb, link_mb_per_s, c0, m0, d0, c, m, d,
                (c + m - d) / m, 1 - (d - d0) / (m - m0));
  }
  return 0;
}
