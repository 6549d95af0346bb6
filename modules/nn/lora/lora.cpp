// LoRA adapters (see lora.cppm): the sites come from the model's family; the forward
// hook that adds the adapters' updates to their layer's output, and the merge.
module;
#include <cmath>
#include <cstddef>
#include <cstdint>
module infini.nn;
import infini.std;

namespace infini::nn::lora {
namespace {

constexpr const char* kAdapterType = "LoRA";

using Site = LoraSite;

// The model's sites (its family's); Error for anything but a whole causal LM of a registered
// family on one process.
std::vector<Site> sites_of(Module& model) {
  const ModelFamily& family = model_family_of(model, "lora::apply");
  const CausalLM& lm = causal_lm(model);
  if (lm.tp && lm.tp->size() > 1)
    throw Error("lora::apply", concat("tensor-parallel models (tp = ", lm.tp->size(), ") are not supported"));
  if (!lm.part.is_whole(lm.sizes().num_layers)) throw Error("lora::apply", "expected the whole model, got a part");
  return family.lora_sites(model);
}

std::vector<std::shared_ptr<AdapterImpl>> adapters_of(const LinearImpl& layer) {
  std::vector<std::shared_ptr<AdapterImpl>> found;
  for (const auto& [name, child] : layer.named_children())
    if (auto adapter = std::dynamic_pointer_cast<AdapterImpl>(child)) found.push_back(std::move(adapter));
  return found;
}

// The layer's output plus its adapters' updates, each on its rows (zeros between them).
void add_updates(Module& module, const TensorList& inputs, Tensor& output) {
  const auto& layer = static_cast<const LinearImpl&>(module);
  std::vector<std::shared_ptr<AdapterImpl>> list = adapters_of(layer);
  std::ranges::sort(list, [](const auto& a, const auto& b) { return a->row_begin < b->row_begin; });
  if (list.size() == 1 && list[0]->row_begin == 0 && list[0]->row_end == layer.out_features) {
    output = output + list[0]->delta(inputs[0]);
    return;
  }
  std::vector<Tensor> pieces;
  std::int64_t at = 0;
  auto gap = [&](std::int64_t end) {
    if (end == at) return;
    std::vector<std::int64_t> shape = output.shape();
    shape.back() = end - at;
    pieces.push_back(zeros(shape, {.dtype = output.dtype(), .device = output.device()}));
  };
  for (const auto& adapter : list) {
    gap(adapter->row_begin);
    pieces.push_back(adapter->delta(inputs[0]).to(output.dtype()));
    at = adapter->row_end;
  }
  gap(layer.out_features);
  output = output + cat(pieces, -1);
}

}  // namespace

AdapterImpl::AdapterImpl(std::string target, std::string peft_name, std::int64_t in_features, std::int64_t row_begin,
                         std::int64_t row_end, std::int64_t rope_heads, const LoraConfig& config)
    : Module(kAdapterType),
      target(std::move(target)),
      peft_name(std::move(peft_name)),
      row_begin(row_begin),
      row_end(row_end),
      rope_heads(rope_heads),
      config(config),
      scaling(config.alpha / static_cast<double>(config.rank)) {
  A = register_parameter("A", empty({config.rank, in_features}));
  B = register_parameter("B", zeros({row_end - row_begin, config.rank}));
  // PEFT: kaiming_uniform_(a = sqrt(5)), torch.nn.Linear's init: U(-1/sqrt(in), 1/sqrt(in)).
  init::kaiming_uniform_(A, std::sqrt(5.0), init::FanMode::FanIn, init::Nonlinearity::LeakyReLU);
}

Tensor AdapterImpl::delta(const Tensor& x) {
  const Tensor input = config.dropout > 0 ? dropout(x, config.dropout, is_training()) : x;
  return matmul(matmul(input, A.transpose(0, 1)), B.transpose(0, 1)) * scaling;
}

std::string AdapterImpl::extra_repr() const {
  return concat("target=", target, ", rows=[", row_begin, ", ", row_end, "), r=", config.rank, ", alpha=", config.alpha,
                ", dropout=", config.dropout);
}

std::vector<std::shared_ptr<AdapterImpl>> apply(Module& model, const LoraConfig& config) {
  if (config.rank < 1) throw Error("lora::apply", concat("rank ", config.rank, ": expected >= 1"));
  if (!(config.dropout >= 0 && config.dropout < 1))
    throw Error("lora::apply", concat("dropout ", config.dropout, ": expected 0 <= p < 1"));
  if (config.targets.empty()) throw Error("lora::apply", "expected at least one target module");
  const std::vector<Site> sites = sites_of(model);
  for (const std::string& target : config.targets)
    if (std::ranges::none_of(sites, [&](const Site& s) { return s.target == target; })) {
      std::vector<std::string> names;
      std::string list;
      for (const Site& s : sites)
        if (std::ranges::find(names, s.target) == names.end()) {
          list += (names.empty() ? "" : ", ") + s.target;
          names.push_back(s.target);
        }
      throw Error("lora::apply",
                  concat("target \"", target, "\" names no layer of ", model.type_name(), "; its targets: ", list));
    }
  for (const Site& s : sites)
    if (std::ranges::find(config.targets, s.target) != config.targets.end())
      for (const auto& adapter : adapters_of(*s.layer))
        if (adapter->target == s.target)
          throw Error("lora::apply", concat(s.peft_name, " has a LoRA adapter already"));

  NoGradGuard no_grad;
  std::vector<Tensor> trained;  // adapters an earlier apply made stay trainable
  for (const auto& adapter : adapters(model))
    for (const Tensor& p : adapter->parameters()) trained.push_back(p);
  for (Tensor& p : model.parameters())
    if (std::ranges::none_of(trained, [&](const Tensor& t) { return t.is_same(p); })) p.requires_grad_(false);
  std::vector<std::shared_ptr<AdapterImpl>> made;
  for (const Site& s : sites) {
    if (std::ranges::find(config.targets, s.target) == config.targets.end()) continue;
    auto adapter = std::make_shared<AdapterImpl>(s.target, s.peft_name, s.layer->in_features, s.row_begin, s.row_end,
                                                 s.rope_heads, config);
    adapter->to(s.layer->weight.device());
    const auto others = adapters_of(*s.layer);
    adapter->hook_id = others.empty() ? s.layer->register_forward_hook(add_updates) : others.front()->hook_id;
    s.layer->register_module("lora_" + s.target, adapter);
    adapter->train(model.is_training());
    made.push_back(std::move(adapter));
  }
  return made;
}

std::vector<std::shared_ptr<AdapterImpl>> adapters(Module& model) {
  // Depth first in registration order, through named_children (the model need not be owned by
  // a shared_ptr, which named_modules needs).
  std::vector<std::shared_ptr<AdapterImpl>> found;
  const std::function<void(const Module&)> visit = [&](const Module& module) {
    for (const auto& [name, child] : module.named_children()) {
      if (auto adapter = std::dynamic_pointer_cast<AdapterImpl>(child)) found.push_back(std::move(adapter));
      else visit(*child);
    }
  };
  visit(model);
  return found;
}

bool adapted(const LinearImpl& layer) { return !adapters_of(layer).empty(); }

void merge(Module& model) {
  const std::vector<Site> sites = sites_of(model);
  bool any = false;
  NoGradGuard no_grad;
  for (const Site& s : sites) {
    LinearImpl& layer = *s.layer;
    const auto list = adapters_of(layer);
    for (const auto& adapter : list) {
      if (adapter->target != s.target || adapter->row_begin != s.row_begin) continue;
      const Tensor update = matmul(adapter->B.to(kFloat32), adapter->A.to(kFloat32)) * adapter->scaling;
      Tensor rows = layer.weight.narrow(0, s.row_begin, s.row_end - s.row_begin);
      rows.copy_((rows.to(kFloat32) + update).to(rows.dtype()));
      layer.unregister_module("lora_" + s.target);
      any = true;
    }
    if (!list.empty() && !adapted(layer)) layer.remove_hook(list.front()->hook_id);
  }
  if (!any) throw Error("lora::merge", concat(model.type_name(), " has no LoRA adapters"));
}

}  // namespace infini::nn::lora
