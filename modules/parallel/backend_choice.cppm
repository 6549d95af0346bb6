// Which backend moves a process group's CUDA tensors. NCCL allows one rank of a
// communicator per GPU, so a group uses NCCL when every rank has a GPU of its own and MPI,
// staged through host memory, when ranks share one (several ranks on one GPU: a one-GPU
// machine running a multi-rank layout). INFINI_BACKEND=nccl|mpi forces the choice; a
// forced NCCL over a shared GPU is refused instead of failing inside NCCL.
export module infini.parallel:backend_choice;
import infini.std;
import infini.tensor;

export namespace infini::parallel {

enum class CudaBackend : std::uint8_t { Nccl, Mpi };
std::string_view name(CudaBackend backend);  // "nccl", "mpi"

// One rank's GPU as its group sees it. host + pci_bus_id name one physical device, whatever
// index CUDA_VISIBLE_DEVICES gives it in the rank's process.
struct GpuIdentity {
  std::string host;
  std::string pci_bus_id;  // "0000:1b:00.0"
  int device = 0;          // cuda:N in that process
  std::string forced;      // the rank's INFINI_BACKEND, "" when unset
};

struct BackendChoice {
  CudaBackend backend = CudaBackend::Nccl;
  std::string reason;  // "each of the 2 ranks has its own GPU", "ranks 0 and 1 share GPU ..."
};

// Chooses for a group whose ranks have `gpus` (in group-rank order; non-empty). Throws
// infini::Error when a rank's INFINI_BACKEND is not nccl or mpi, when the ranks' settings
// differ, or when nccl is forced over a shared GPU.
BackendChoice choose_cuda_backend(const std::vector<GpuIdentity>& gpus);

// This process's identity for CUDA `device`: its host name, the device's PCI bus id and
// INFINI_BACKEND.
GpuIdentity local_gpu_identity(Device device);

class ProcessGroup;
// Collective over `group`: every rank's identity, in group-rank order (an all_gather over
// MPI of fixed-size records). Throws when a field does not fit its record.
std::vector<GpuIdentity> gather_gpu_identities(ProcessGroup& group, const GpuIdentity& mine);

}  // namespace infini::parallel
