// The backend choice for CUDA tensors and the exchange of the ranks' GPU identities.
module;
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
module infini.parallel;
import infini.std;

namespace infini::parallel {
namespace {

// One rank's record in the exchange: host, PCI bus id, device and INFINI_BACKEND as
// NUL-terminated fields.
constexpr std::int64_t kRecordBytes = 512;

std::string quoted_setting(const std::string& forced) { return forced.empty() ? "unset" : concat("'", forced, "'"); }

}  // namespace

std::string_view name(CudaBackend backend) { return backend == CudaBackend::Nccl ? "nccl" : "mpi"; }

BackendChoice choose_cuda_backend(const std::vector<GpuIdentity>& gpus) {
  constexpr std::string_view op = "choose_cuda_backend";
  if (gpus.empty()) throw Error(op, "expected the GPUs of at least one rank, got none");
  for (std::size_t r = 0; r < gpus.size(); ++r) {
    const std::string& forced = gpus[r].forced;
    if (!forced.empty() && forced != "nccl" && forced != "mpi")
      throw Error(op, concat("INFINI_BACKEND must be nccl or mpi, got '", forced, "' on rank ", r));
    if (forced != gpus[0].forced)
      throw Error(op, concat("INFINI_BACKEND differs between the ranks of a group: rank 0 has ",
                             quoted_setting(gpus[0].forced), ", rank ", r, " has ", quoted_setting(forced),
                             " (export it to every rank: mpirun -x INFINI_BACKEND)"));
  }
  std::string shared;  // the first two ranks on one physical GPU
  for (std::size_t a = 0; a < gpus.size() && shared.empty(); ++a)
    for (std::size_t b = a + 1; b < gpus.size() && shared.empty(); ++b)
      if (gpus[a].host == gpus[b].host && gpus[a].pci_bus_id == gpus[b].pci_bus_id)
        shared = concat("ranks ", a, " and ", b, " share GPU ", gpus[a].pci_bus_id, " on host ", gpus[a].host);
  const std::string& forced = gpus[0].forced;
  if (forced == "mpi") return {CudaBackend::Mpi, "INFINI_BACKEND=mpi: through host memory"};
  if (forced == "nccl") {
    if (!shared.empty())
      throw Error(op, concat("INFINI_BACKEND=nccl, but ", shared, ": NCCL allows one rank of a communicator per GPU ",
                             "(unset INFINI_BACKEND, or set it to mpi, to move CUDA tensors through host memory)"));
    return {CudaBackend::Nccl, "INFINI_BACKEND=nccl"};
  }
  if (!shared.empty())
    return {CudaBackend::Mpi, concat(shared, ": through host memory (NCCL allows one rank per GPU)")};
  if (gpus.size() == 1) return {CudaBackend::Nccl, "one rank"};
  return {CudaBackend::Nccl, concat("each of the ", gpus.size(), " ranks has its own GPU")};
}

GpuIdentity local_gpu_identity(Device device) {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0)
    throw Error("local_gpu_identity", concat("gethostname failed: ", std::strerror(errno)));
  const char* forced = std::getenv("INFINI_BACKEND");
  return {.host = host, .pci_bus_id = cuda_pci_bus_id(device), .device = device.index,
          .forced = forced ? forced : ""};
}

std::vector<GpuIdentity> gather_gpu_identities(ProcessGroup& group, const GpuIdentity& mine) {
  const std::string device = std::to_string(mine.device);
  const std::string fields[] = {mine.host, mine.pci_bus_id, device, mine.forced};
  std::int64_t length = 0;
  for (const std::string& f : fields) length += static_cast<std::int64_t>(f.size()) + 1;
  if (length > kRecordBytes)
    throw Error("gather_gpu_identities", concat("host '", mine.host, "', GPU '", mine.pci_bus_id,
                                                "' and INFINI_BACKEND '", mine.forced, "' take ", length,
                                                " bytes; at most ", kRecordBytes, " fit a record"));
  Tensor record = zeros({kRecordBytes}, TensorOptions{.dtype = kUInt8});
  char* out = reinterpret_cast<char*>(record.data_ptr());
  for (const std::string& f : fields) {
    std::memcpy(out, f.data(), f.size());
    out += f.size() + 1;
  }
  Tensor all = empty({group.size() * kRecordBytes}, TensorOptions{.dtype = kUInt8});
  group.all_gather(all, record).wait();
  std::vector<GpuIdentity> gpus;
  for (int r = 0; r < group.size(); ++r) {
    const char* field = reinterpret_cast<const char*>(all.data_ptr()) + r * kRecordBytes;
    std::string parts[4];
    for (std::string& part : parts) {
      part = field;
      field += part.size() + 1;
    }
    gpus.push_back({.host = parts[0], .pci_bus_id = parts[1], .device = std::atoi(parts[2].c_str()), .forced = parts[3]});
  }
  return gpus;
}

}  // namespace infini::parallel
