// The NCCL backend on CUDA tensors against closed forms (skipped without a GPU; a world of
// 1 on one GPU, and every rank on GPU local_rank() when mpirun gives each rank one).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "comm_test_util.h"

import infini.parallel;

namespace infini::parallel::test::nccl_test {
namespace {

double value(int r, std::int64_t i) { return static_cast<double>((r + 2 * i) % 5 + 1); }

// Skips unless every rank of the world has a GPU of its own.
Device rank_gpu(ProcessGroup& pg) {
  const int gpus = cuda_device_count();
  Tensor enough = full({1}, gpus > local_rank() ? 1.0 : 0.0, TensorOptions{.dtype = kInt32});
  pg.all_reduce(enough, {.op = ReduceOp::Min}).wait();
  if (enough.item<int>() == 0) return Device::cpu();
  return Device::cuda(local_rank());
}

TEST(Nccl, CollectivesOnCudaTensors) {
  auto pg = world();
  const Device gpu = rank_gpu(*pg);
  if (gpu.is_cpu()) GTEST_SKIP() << "needs one CUDA device per rank";
  const int r = pg->rank(), n = pg->size();
  const TensorOptions on_gpu{.dtype = kFloat32, .device = gpu};
  for (DataType dtype : {kFloat32, kBFloat16, kFloat16, kInt32, kInt64, kUInt8, kInt16, kFloat64}) {
    Tensor t = make(37, dtype, [&](std::int64_t i) { return value(r, i); }).to(gpu);
    pg->all_reduce(t).wait();
    expect_values(t.to(Device::cpu()), [&](std::int64_t i) {
      double sum = 0;
      for (int q = 0; q < n; ++q) sum += value(q, i);
      return sum;
    }, concat("NCCL all_reduce of ", dtype));
  }
  Tensor avg = make(9, kFloat32, [&](std::int64_t i) { return value(r, i) * n; }).to(gpu);
  pg->all_reduce(avg, {.op = ReduceOp::Avg}).wait();
  expect_values(avg.to(Device::cpu()), [&](std::int64_t i) {
    double sum = 0;
    for (int q = 0; q < n; ++q) sum += value(q, i);
    return sum;
  }, "NCCL average");

  Tensor in = make(6, kFloat32, [&](std::int64_t i) { return value(r, i); }).to(gpu);
  Tensor gathered = zeros({n * 6}, on_gpu);
  pg->all_gather(gathered, in).wait();
  expect_values(gathered.to(Device::cpu()), [&](std::int64_t k) { return value(static_cast<int>(k / 6), k % 6); },
                "NCCL all_gather");

  Tensor blocks = make(n * 4, kFloat32, [&](std::int64_t k) { return value(r, k); }).to(gpu);
  Tensor mine = zeros({4}, on_gpu);
  pg->reduce_scatter(mine, blocks).wait();
  expect_values(mine.to(Device::cpu()), [&](std::int64_t i) {
    double sum = 0;
    for (int q = 0; q < n; ++q) sum += value(q, r * 4 + i);
    return sum;
  }, "NCCL reduce_scatter");

  Tensor b = make(5, kFloat32, [&](std::int64_t i) { return value(r, i); }).to(gpu);
  pg->broadcast(b, n - 1).wait();
  expect_values(b.to(Device::cpu()), [&](std::int64_t i) { return value(n - 1, i); }, "NCCL broadcast");

  // A strided CUDA tensor is staged and copied back.
  Tensor base = make(12, kFloat32, [&](std::int64_t i) { return value(r, i); }).view({3, 4}).to(gpu);
  pg->all_reduce(base.t()).wait();
  expect_values(base.to(Device::cpu()), [&](std::int64_t i) {
    double sum = 0;
    for (int q = 0; q < n; ++q) sum += value(q, i);
    return sum;
  }, "NCCL strided all_reduce");

  if (n >= 2) {
    Tensor out = full({8}, static_cast<double>(r), on_gpu), got = zeros({8}, on_gpu);
    pg->batch_isend_irecv({irecv(got, (r + n - 1) % n), isend(out, (r + 1) % n)}).wait();
    expect_values(got.to(Device::cpu()), [&](std::int64_t) { return (r + n - 1) % n; }, "NCCL ring");
  }
}

TEST(Nccl, MixedDevicesAreRejected) {
  auto pg = world();
  const Device gpu = rank_gpu(*pg);
  if (gpu.is_cpu()) GTEST_SKIP() << "needs one CUDA device per rank";
  Tensor cpu = zeros({4 * pg->size()}), cuda = zeros({4}, TensorOptions{.dtype = kFloat32, .device = gpu});
  EXPECT_THROW(pg->all_gather(cpu, cuda), DeviceError);
}

}  // namespace
}  // namespace infini::parallel::test::nccl_test
