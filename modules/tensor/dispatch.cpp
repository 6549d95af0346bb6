// The list of kernel tables behind kernel_tables(), filled as tables get their first entry
// (during static initialisation of the library, one thread).
module infini.tensor;
import infini.std;

namespace infini {
namespace {

struct Registry {
  std::mutex mutex;
  std::vector<KernelTableInfo> tables;
};

Registry& registry() {
  static Registry instance;
  return instance;
}

}  // namespace

void register_kernel_table(KernelTableInfo info) {
  std::lock_guard lock(registry().mutex);
  registry().tables.push_back(info);
}

std::vector<KernelTableInfo> kernel_tables() {
  std::lock_guard lock(registry().mutex);
  return registry().tables;
}

}  // namespace infini
