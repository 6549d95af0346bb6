// The choice of backend for CUDA tensors (NCCL per GPU, MPI through host memory when ranks
// share one, INFINI_BACKEND), the exchange of the ranks' GPU identities over MPI, and binding
// a group to a device. Runs on CPU-only machines: identities are made up.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "comm_test_util.h"

import infini.parallel;

namespace infini::parallel::test::backend_choice_test {
namespace {

GpuIdentity gpu(std::string host, std::string pci, int device = 0, std::string forced = "") {
  return {.host = std::move(host), .pci_bus_id = std::move(pci), .device = device, .forced = std::move(forced)};
}

std::string refusal(const std::vector<GpuIdentity>& gpus) {
  try {
    choose_cuda_backend(gpus);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(CudaBackendChoice, RanksWithGpusOfTheirOwnUseNccl) {
  const BackendChoice two = choose_cuda_backend({gpu("h1", "0000:1b:00.0", 0), gpu("h1", "0000:43:00.0", 1)});
  EXPECT_EQ(two.backend, CudaBackend::Nccl);
  EXPECT_EQ(two.reason, "each of the 2 ranks has its own GPU");
  // The same bus id on two hosts is two GPUs.
  const BackendChoice hosts = choose_cuda_backend({gpu("h1", "0000:1b:00.0"), gpu("h2", "0000:1b:00.0")});
  EXPECT_EQ(hosts.backend, CudaBackend::Nccl);
  const BackendChoice one = choose_cuda_backend({gpu("h1", "0000:1b:00.0")});
  EXPECT_EQ(one.backend, CudaBackend::Nccl);
  EXPECT_EQ(one.reason, "one rank");
  EXPECT_EQ(name(CudaBackend::Nccl), "nccl");
  EXPECT_EQ(name(CudaBackend::Mpi), "mpi");
}

TEST(CudaBackendChoice, RanksSharingAGpuUseMpi) {
  // Ranks 1 and 3 name one GPU by different indices (CUDA_VISIBLE_DEVICES differs): the bus id decides.
  const BackendChoice shared = choose_cuda_backend({gpu("h1", "0000:1b:00.0", 0), gpu("h1", "0000:43:00.0", 1),
                                                    gpu("h2", "0000:1b:00.0", 0), gpu("h1", "0000:43:00.0", 0)});
  EXPECT_EQ(shared.backend, CudaBackend::Mpi);
  EXPECT_EQ(shared.reason, "ranks 1 and 3 share GPU 0000:43:00.0 on host h1: through host memory "
                           "(NCCL allows one rank per GPU)");
}

TEST(CudaBackendChoice, InfiniBackendForcesTheChoice) {
  const BackendChoice mpi = choose_cuda_backend({gpu("h1", "a", 0, "mpi"), gpu("h1", "b", 1, "mpi")});
  EXPECT_EQ(mpi.backend, CudaBackend::Mpi);
  EXPECT_EQ(mpi.reason, "INFINI_BACKEND=mpi: through host memory");
  const BackendChoice nccl = choose_cuda_backend({gpu("h1", "a", 0, "nccl"), gpu("h1", "b", 1, "nccl")});
  EXPECT_EQ(nccl.backend, CudaBackend::Nccl);
  EXPECT_EQ(nccl.reason, "INFINI_BACKEND=nccl");
  EXPECT_EQ(choose_cuda_backend({gpu("h1", "a", 0, "mpi"), gpu("h1", "a", 0, "mpi")}).backend, CudaBackend::Mpi);
}

TEST(CudaBackendChoice, RefusesWhatNcclOrTheSettingCannotDo) {
  EXPECT_EQ(refusal({gpu("h1", "0000:1b:00.0", 0, "nccl"), gpu("h1", "0000:1b:00.0", 0, "nccl")}),
            "choose_cuda_backend: INFINI_BACKEND=nccl, but ranks 0 and 1 share GPU 0000:1b:00.0 on host h1: NCCL "
            "allows one rank of a communicator per GPU (unset INFINI_BACKEND, or set it to mpi, to move CUDA tensors "
            "through host memory)");
  EXPECT_EQ(refusal({gpu("h1", "a", 0, "NCCL"), gpu("h1", "b", 1, "NCCL")}),
            "choose_cuda_backend: INFINI_BACKEND must be nccl or mpi, got 'NCCL' on rank 0");
  EXPECT_EQ(refusal({gpu("h1", "a", 0, "mpi"), gpu("h1", "b", 1, "")}),
            "choose_cuda_backend: INFINI_BACKEND differs between the ranks of a group: rank 0 has 'mpi', rank 1 has "
            "unset (export it to every rank: mpirun -x INFINI_BACKEND)");
  EXPECT_EQ(refusal({}), "choose_cuda_backend: expected the GPUs of at least one rank, got none");
}

TEST(CudaBackendChoice, IdentitiesAreExchangedInRankOrder) {
  auto pg = world();
  const int r = pg->rank();
  const std::vector<GpuIdentity> all = gather_gpu_identities(
      *pg, gpu(concat("host-", r / 2), concat("0000:", 10 + r, ":00.0"), r % 2, r == 0 ? "mpi" : ""));
  ASSERT_EQ(static_cast<int>(all.size()), pg->size());
  for (int q = 0; q < pg->size(); ++q) {
    EXPECT_EQ(all[q].host, concat("host-", q / 2)) << "rank " << q;
    EXPECT_EQ(all[q].pci_bus_id, concat("0000:", 10 + q, ":00.0")) << "rank " << q;
    EXPECT_EQ(all[q].device, q % 2) << "rank " << q;
    EXPECT_EQ(all[q].forced, q == 0 ? "mpi" : "") << "rank " << q;
  }
  // Every rank refuses the same oversized record before the exchange (no rank is left waiting).
  try {
    gather_gpu_identities(*pg, gpu(std::string(600, 'h'), "0000:1b:00.0"));
    ADD_FAILURE() << "an oversized host name was exchanged";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("take 617 bytes; at most 512 fit a record"), std::string::npos) << e.what();
  }
}

TEST(CudaBackendChoice, GroupsAreBoundToADeviceAndSplitsInheritIt) {
  auto pg = world()->split(0, world()->rank(), "bound");
  EXPECT_FALSE(pg->device().has_value());
  pg->set_device(Device::cpu());
  EXPECT_EQ(pg->device(), Device::cpu());
  EXPECT_FALSE(pg->cuda_backend().has_value());  // chosen for CUDA devices only
  pg->set_device(Device::cpu());                 // again: nothing to do
  auto half = pg->split(pg->rank() % 2, pg->rank(), "bound_half");
  EXPECT_EQ(half->device(), Device::cpu());
  try {
    pg->set_device(Device::cuda(0));
    ADD_FAILURE() << "a bound group was bound again";
  } catch (const DeviceError& e) {
    EXPECT_EQ(std::string(e.what()), "set_device: group 'bound' is already bound to cpu, not cuda:0");
  }
  // Binding to a GPU this machine does not have fails on every rank before any exchange.
  auto fresh = world()->split(0, world()->rank(), "fresh");
  EXPECT_THROW(fresh->set_device(Device::cuda(cuda_device_count())), DeviceError);
  EXPECT_FALSE(fresh->device().has_value());
  // The CPU tensors of a bound group still move, through MPI.
  Tensor t = full({3}, 1.0);
  pg->all_reduce(t).wait();
  expect_values(t, [&](std::int64_t) { return pg->size(); }, "all_reduce on a group bound to the CPU");
}

}  // namespace
}  // namespace infini::parallel::test::backend_choice_test
