// Collectives and point-to-point operations on CUDA tensors against closed forms, through
// the backend the group chooses: NCCL when every rank has a GPU of its own, MPI through
// host memory when ranks share one (mpirun -np 2 on a one-GPU machine). Skipped unless
// every rank sees a GPU; each rank uses cuda:(local_rank() mod its GPUs).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "comm_test_util.h"

import infini.parallel;

namespace infini::parallel::test::cuda_comm_test {
namespace {

double value(int r, std::int64_t i) { return static_cast<double>((r + 2 * i) % 5 + 1); }

// This rank's GPU when every rank of the world sees one; the CPU (skip) otherwise.
Device rank_gpu(ProcessGroup& pg) {
  const int gpus = cuda_device_count();
  Tensor enough = full({1}, gpus > 0 ? 1.0 : 0.0, TensorOptions{.dtype = kInt32});
  pg.all_reduce(enough, {.op = ReduceOp::Min}).wait();
  if (enough.item<int>() == 0) return Device::cpu();
  return Device::cuda(local_rank() % gpus);
}

// A group of the whole world of its own, bound to `gpu` (the tests do not bind the world).
std::shared_ptr<ProcessGroup> bound_group(Device gpu, std::string name) {
  auto pg = world()->split(0, world()->rank(), std::move(name));
  pg->set_device(gpu);
  return pg;
}

TEST(CudaComm, NcclUnlessRanksShareAGpu) {
  const Device gpu = rank_gpu(*world());
  if (gpu.is_cpu()) GTEST_SKIP() << "needs a CUDA device on every rank";
  auto pg = bound_group(gpu, "cuda_choice");
  ASSERT_TRUE(pg->cuda_backend().has_value());
  // One host: ranks share a GPU when there are more of them than GPUs.
  const char* forced = std::getenv("INFINI_BACKEND");
  const bool mpi = (forced && std::string(forced) == "mpi") || pg->size() > cuda_device_count();
  EXPECT_EQ(pg->cuda_backend()->backend, mpi ? CudaBackend::Mpi : CudaBackend::Nccl) << pg->cuda_backend()->reason;
  // Groups split from it choose again for their own ranks.
  auto alone = pg->split(pg->rank(), 0, "cuda_alone");
  ASSERT_TRUE(alone->cuda_backend().has_value());
  EXPECT_EQ(alone->cuda_backend()->backend, forced && std::string(forced) == "mpi" ? CudaBackend::Mpi
                                                                                   : CudaBackend::Nccl);
}

// Point-to-point operations on CUDA tensors go through MPI (tags) on any group and bind nothing.
TEST(CudaComm, PointToPointThroughMpiOnAnyGroup) {
  const Device gpu = rank_gpu(*world());
  if (gpu.is_cpu() || world()->size() < 2) GTEST_SKIP() << "needs 2 ranks with a CUDA device each";
  auto pg = world()->split(0, world()->rank(), "unbound");
  const int r = pg->rank(), n = pg->size();
  const TensorOptions on_gpu{.dtype = kBFloat16, .device = gpu};
  // Two messages with tags, received in the opposite order from the sends.
  Tensor first = full({6}, 1.0 + r, on_gpu), second = full({2, 3}, 10.0 + r, on_gpu).t();  // strided
  Tensor got_first = zeros({6}, on_gpu), got_second = zeros({3, 2}, on_gpu);
  Work received = pg->batch_isend_irecv({irecv(got_second, (r + n - 1) % n, 2), irecv(got_first, (r + n - 1) % n, 1)});
  Work sent = pg->batch_isend_irecv({isend(first, (r + 1) % n, 1), isend(second, (r + 1) % n, 2)});
  received.wait();
  sent.wait();
  const int from = (r + n - 1) % n;
  expect_values(got_first.to(Device::cpu()), [&](std::int64_t) { return 1.0 + from; }, "tag 1");
  expect_values(got_second.to(Device::cpu()), [&](std::int64_t) { return 10.0 + from; }, "tag 2");
  EXPECT_FALSE(pg->device().has_value());
}

TEST(CudaComm, CollectivesOnCudaTensors) {
  const Device gpu = rank_gpu(*world());
  if (gpu.is_cpu()) GTEST_SKIP() << "needs a CUDA device on every rank";
  auto pg = bound_group(gpu, "cuda_collectives");
  const int r = pg->rank(), n = pg->size();
  const TensorOptions on_gpu{.dtype = kFloat32, .device = gpu};
  for (DataType dtype : {kFloat32, kBFloat16, kFloat16, kInt32, kInt64, kUInt8, kInt16, kFloat64}) {
    Tensor t = make(37, dtype, [&](std::int64_t i) { return value(r, i); }).to(gpu);
    pg->all_reduce(t).wait();
    expect_values(t.to(Device::cpu()), [&](std::int64_t i) {
      double sum = 0;
      for (int q = 0; q < n; ++q) sum += value(q, i);
      return sum;
    }, concat("all_reduce of ", dtype));
  }
  Tensor avg = make(9, kFloat32, [&](std::int64_t i) { return value(r, i) * n; }).to(gpu);
  pg->all_reduce(avg, {.op = ReduceOp::Avg}).wait();
  expect_values(avg.to(Device::cpu()), [&](std::int64_t i) {
    double sum = 0;
    for (int q = 0; q < n; ++q) sum += value(q, i);
    return sum;
  }, "average");

  Tensor in = make(6, kFloat32, [&](std::int64_t i) { return value(r, i); }).to(gpu);
  Tensor gathered = zeros({n * 6}, on_gpu);
  pg->all_gather(gathered, in).wait();
  expect_values(gathered.to(Device::cpu()), [&](std::int64_t k) { return value(static_cast<int>(k / 6), k % 6); },
                "all_gather");

  Tensor blocks = make(n * 4, kFloat32, [&](std::int64_t k) { return value(r, k); }).to(gpu);
  Tensor mine = zeros({4}, on_gpu);
  pg->reduce_scatter(mine, blocks).wait();
  expect_values(mine.to(Device::cpu()), [&](std::int64_t i) {
    double sum = 0;
    for (int q = 0; q < n; ++q) sum += value(q, r * 4 + i);
    return sum;
  }, "reduce_scatter");

  Tensor b = make(5, kFloat32, [&](std::int64_t i) { return value(r, i); }).to(gpu);
  pg->broadcast(b, n - 1).wait();
  expect_values(b.to(Device::cpu()), [&](std::int64_t i) { return value(n - 1, i); }, "broadcast");

  // A strided CUDA tensor is staged and copied back.
  Tensor base = make(12, kFloat32, [&](std::int64_t i) { return value(r, i); }).view({3, 4}).to(gpu);
  pg->all_reduce(base.t()).wait();
  expect_values(base.to(Device::cpu()), [&](std::int64_t i) {
    double sum = 0;
    for (int q = 0; q < n; ++q) sum += value(q, i);
    return sum;
  }, "strided all_reduce");

  Tensor summed = make(5, kFloat32, [&](std::int64_t i) { return value(r, i); }).to(gpu);
  pg->reduce(summed, 0).wait();
  expect_values(summed.to(Device::cpu()), [&](std::int64_t i) {
    if (r != 0) return value(r, i);  // only the root's tensor changes
    double sum = 0;
    for (int q = 0; q < n; ++q) sum += value(q, i);
    return sum;
  }, "reduce");

  std::vector<Tensor> outs;
  if (r == n - 1)
    for (int q = 0; q < n; ++q) outs.push_back(zeros({3}, on_gpu));
  pg->gather(outs, make(3, kFloat32, [&](std::int64_t i) { return value(r, i); }).to(gpu), n - 1).wait();
  for (int q = 0; q < static_cast<int>(outs.size()); ++q)
    expect_values(outs[q].to(Device::cpu()), [&](std::int64_t i) { return value(q, i); }, concat("gather from ", q));

  std::vector<Tensor> ins;
  if (r == 0)
    for (int q = 0; q < n; ++q) ins.push_back(make(3, kFloat32, [&](std::int64_t i) { return value(q, i); }).to(gpu));
  Tensor scattered = zeros({3}, on_gpu);
  pg->scatter(scattered, ins, 0).wait();
  expect_values(scattered.to(Device::cpu()), [&](std::int64_t i) { return value(r, i); }, "scatter");

  // Block j of rank r's input holds value(r, j); rank r receives block r of every rank.
  Tensor sent = make(2 * n, kFloat32, [&](std::int64_t k) { return value(r, k / 2); }).to(gpu);
  Tensor received = zeros({2 * n}, on_gpu);
  pg->all_to_all(received, sent).wait();
  expect_values(received.to(Device::cpu()), [&](std::int64_t k) { return value(static_cast<int>(k / 2), r); },
                "all_to_all");

  if (n >= 2) {
    Tensor out = full({8}, static_cast<double>(r), on_gpu), got = zeros({8}, on_gpu);
    pg->batch_isend_irecv({irecv(got, (r + n - 1) % n), isend(out, (r + 1) % n)}).wait();
    expect_values(got.to(Device::cpu()), [&](std::int64_t) { return (r + n - 1) % n; }, "ring");
  }
}

TEST(CudaComm, MixedDevicesAreRejected) {
  const Device gpu = rank_gpu(*world());
  if (gpu.is_cpu()) GTEST_SKIP() << "needs a CUDA device on every rank";
  auto pg = bound_group(gpu, "cuda_mixed");
  Tensor cpu = zeros({4 * pg->size()}), cuda = zeros({4}, TensorOptions{.dtype = kFloat32, .device = gpu});
  EXPECT_THROW(pg->all_gather(cpu, cuda), DeviceError);
}

}  // namespace
}  // namespace infini::parallel::test::cuda_comm_test
