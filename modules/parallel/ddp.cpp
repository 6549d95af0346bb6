module infini.parallel;
import infini.std;

namespace infini::parallel {
namespace {

// Rank 0's parameters and buffers everywhere (before the reducer may shard them); returns the
// trained parameters, the ones the reducer takes.
std::vector<Tensor> broadcast_state(const nn::Module& module, ProcessGroup& group, const DDPOptions& options) {
  NoGradGuard no_grad;
  std::vector<Work> works;
  for (const auto& tensors : {module.parameters(), module.buffers()})
    for (const Tensor& t : tensors) works.push_back(group.broadcast(t, 0, {.timeout = options.timeout}));
  when_all(works).wait();
  return trained_parameters(module);
}

// The names of the trained parameters.
std::vector<std::string> trained_names(const nn::Named<Tensor>& named) {
  std::vector<std::string> names;
  for (const auto& [name, tensor] : named)
    if (tensor.requires_grad()) names.push_back(name);
  return names;
}

}  // namespace

std::vector<Tensor> trained_parameters(const nn::Module& module) {
  std::vector<Tensor> trained;
  for (const Tensor& p : module.parameters())
    if (p.requires_grad()) trained.push_back(p);
  return trained;
}

namespace {

const DDPOptions& checked(const DDPOptions& options) {
  if (options.finalize_explicitly)
    throw Error("DistributedDataParallel", "finalize_explicitly is for a caller that ends the step itself (a pipeline "
                                           "runner); DDP ends each synchronised backward");
  return options;
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module,
                                                 std::shared_ptr<ProcessGroup> group, DDPOptions options)
    : module_(module ? std::move(module) : throw Error("DistributedDataParallel", "expected a module, got nullptr")),
      group_(group ? std::move(group) : throw Error("DistributedDataParallel", "expected a process group, got nullptr")),
      reducer_(broadcast_state(*module_, *group_, options), trained_names(module_->named_parameters()), group_,
               checked(options)) {}

}  // namespace infini::parallel
