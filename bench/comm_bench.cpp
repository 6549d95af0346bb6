// comm_bench: all_reduce and send/recv through Infini (blocking wait and co_await) against
// the raw MPI calls on the same buffers in the same run. Run under mpirun (>= 2 ranks);
// rank 0 prints one JSON line per size, 4 B to 64 MiB, with the median microseconds per
// operation of each method (send/recv: half a ping-pong round trip between ranks 0 and 1).
// With --device cuda, the same operations on a CUDA tensor of each rank's GPU (cuda:(local
// rank mod GPUs)) too, "infini_cuda", through the backend the world chose for CUDA tensors
// (printed: nccl, or mpi through host memory when ranks share a GPU).
//   mpirun -np 2 build/release/bin/comm_bench [--min_bytes N] [--max_bytes N] [--rounds R] [--device cuda]
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <coroutine>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

import infini.parallel;

using namespace infini;
namespace asio = infini::parallel::asio;
using Clock = std::chrono::steady_clock;

namespace {

// Microseconds per call of `body(iterations)`, median over rounds interleaved with the
// other methods by the caller.
double time_us(int iterations, const std::function<void(int)>& body) {
  MPI_Barrier(MPI_COMM_WORLD);
  const auto start = Clock::now();
  body(iterations);
  const double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count() / iterations;
  double slowest = 0;  // the operation is done when the slowest rank is done
  MPI_Allreduce(&us, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Method {
  const char* name;
  std::function<void(int)> body;
  std::vector<double> samples;
};

std::string json_times(const std::vector<Method>& methods) {
  std::string out = "{";
  for (const Method& m : methods) {
    char field[96];
    std::snprintf(field, sizeof(field), "%s\"%s\": %.2f", out.size() > 1 ? ", " : "", m.name, median(m.samples));
    out += field;
  }
  return out + "}";
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t min_bytes = 4, max_bytes = 64 << 20;
  int rounds = 7;
  bool on_cuda = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--min_bytes") == 0) min_bytes = std::max(4LL, std::atoll(argv[i + 1]));
    if (std::strcmp(argv[i], "--max_bytes") == 0) max_bytes = std::atoll(argv[i + 1]);
    if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--device") == 0) on_cuda = std::strcmp(argv[i + 1], "cuda") == 0;
  }
  auto pg = parallel::init_process_group();
  const int rank = pg->rank(), size = pg->size();
  if (size < 2) {
    std::fprintf(stderr, "comm_bench: run under mpirun with at least 2 ranks\n");
    return 2;
  }
  if (on_cuda && cuda_device_count() == 0) {
    std::fprintf(stderr, "comm_bench: --device cuda: no CUDA device\n");
    return 2;
  }
  const Device gpu = on_cuda ? Device::cuda(parallel::local_rank() % cuda_device_count()) : Device::cpu();
  if (on_cuda) {
    pg->set_device(gpu);
    if (rank == 0)
      std::printf("{\"cuda_backend\": \"%s\", \"reason\": \"%s\"}\n", std::string(parallel::name(pg->cuda_backend()->backend)).c_str(),
                  pg->cuda_backend()->reason.c_str());
  }
  const bool in_pair = rank < 2;
  const int peer = 1 - rank;

  for (std::int64_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    Tensor t = zeros({bytes / 4}, TensorOptions{.dtype = kFloat32});  // zeros: sums stay finite
    const Tensor on_gpu = on_cuda ? zeros({bytes / 4}, TensorOptions{.dtype = kFloat32, .device = gpu}) : Tensor();
    float* data = t.data_ptr<float>();
    const int count = static_cast<int>(t.numel());
    const int iterations = static_cast<int>(std::clamp<std::int64_t>((std::int64_t{32} << 20) / bytes, 3, 2000));

    std::vector<Method> reduce = {
        {"mpi_allreduce", [&](int n) { for (int i = 0; i < n; ++i) MPI_Allreduce(MPI_IN_PLACE, data, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); }, {}},
        {"mpi_iallreduce_wait", [&](int n) {
           for (int i = 0; i < n; ++i) {
             MPI_Request r;
             MPI_Iallreduce(MPI_IN_PLACE, data, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r);
             MPI_Wait(&r, MPI_STATUS_IGNORE);
           }
         }, {}},
        {"infini_wait", [&](int n) { for (int i = 0; i < n; ++i) pg->all_reduce(t).wait(); }, {}},
        {"infini_await", [&](int n) {
           parallel::run([&]() -> asio::awaitable<void> {
             for (int i = 0; i < n; ++i) co_await pg->all_reduce(t);
           }());
         }, {}},
    };
    // Ping-pong between ranks 0 and 1 (the other ranks wait at the barrier).
    auto ping_pong = [&](auto&& exchange) {
      return [&, exchange](int n) {
        if (!in_pair) return;
        for (int i = 0; i < n; ++i) exchange(rank == i % 2);
      };
    };
    std::vector<Method> p2p = {
        {"mpi_send_recv", ping_pong([&](bool sending) {
           if (sending) MPI_Send(data, count, MPI_FLOAT, peer, 0, MPI_COMM_WORLD);
           else MPI_Recv(data, count, MPI_FLOAT, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
         }), {}},
        {"infini_wait", ping_pong([&](bool sending) {
           (sending ? pg->send(t, peer) : pg->recv(t, peer)).wait();
         }), {}},
        {"infini_await", [&](int n) {
           if (!in_pair) return;
           parallel::run([&]() -> asio::awaitable<void> {
             for (int i = 0; i < n; ++i) co_await (rank == i % 2 ? pg->send(t, peer) : pg->recv(t, peer));
           }());
         }, {}},
    };
    if (on_cuda) {  // Work::wait returns once the GPU has the result (NCCL's event, or the copy back)
      reduce.push_back({"infini_cuda", [&](int n) { for (int i = 0; i < n; ++i) pg->all_reduce(on_gpu).wait(); }, {}});
      p2p.push_back({"infini_cuda", ping_pong([&](bool sending) {
                       (sending ? pg->send(on_gpu, peer) : pg->recv(on_gpu, peer)).wait();
                     }), {}});
    }
    for (auto* methods : {&reduce, &p2p}) {
      for (Method& m : *methods) time_us(1, m.body);  // warm-up
      for (int round = 0; round < rounds; ++round)
        for (Method& m : *methods) m.samples.push_back(time_us(iterations, m.body));
    }
    if (rank == 0)
      std::printf("{\"bytes\": %lld, \"ranks\": %d, \"iterations\": %d, \"all_reduce_us\": %s, \"send_recv_us\": %s}\n",
                  static_cast<long long>(bytes), size, iterations, json_times(reduce).c_str(), json_times(p2p).c_str());
    std::fflush(stdout);
  }
  return 0;
}
