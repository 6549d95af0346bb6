// Gathering and scattering a model's parameters in llm.c's layout (see llmc_layout.cppm).
module;
#include <cstddef>
#include <cstdint>
module infini.nn;
import infini.std;

namespace infini::nn {
namespace {

// The entry's shape in the file: a whole tensor's own, or (layers, per-layer shape).
Shape file_shape(const LlmcLayout::Entry& entry, const ShardSpec& spec) {
  Shape shape = entry.params.front().shape();
  if (spec.sharded()) shape[static_cast<std::size_t>(spec.dim)] = spec.whole_size();
  if (entry.per_layer) shape.insert(shape.begin(), static_cast<std::int64_t>(entry.params.size()));
  return shape;
}

}  // namespace

std::vector<std::pair<std::string, Tensor>> gather_llmc_tensors(std::string_view op, const LlmcLayout& layout,
                                                                TensorParallelLayers& tp, bool gradients) {
  NoGradGuard no_grad;
  std::vector<std::pair<std::string, Tensor>> out;
  for (const LlmcLayout::Entry& entry : layout.entries) {
    TensorList values;
    for (const Tensor& param : entry.params) {
      if (gradients && !param.grad().defined())
        throw Error(op, concat("a parameter of \"", entry.name, "\" has no gradient (run backward first)"));
      const ShardSpec spec = tp.shard_spec(param);
      const Tensor value = gradients ? param.grad() : param;
      values.push_back(spec.sharded() ? tp.gather_shards(value, spec) : value);
    }
    const Tensor value = entry.per_layer ? stack(values, 0) : values.front();
    out.emplace_back(entry.name, value.to(kFloat32).to(Device::cpu()).clone());
  }
  return out;
}

void scatter_llmc_tensors(std::string_view op, const LlmcLayout& layout, const TensorParallelLayers& tp,
                          const std::vector<std::pair<std::string, Tensor>>& tensors) {
  NoGradGuard no_grad;
  if (tensors.size() != layout.entries.size())
    throw Error(op, concat("expected ", layout.entries.size(), " tensors, got ", tensors.size()));
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, value] = tensors[i];
    const LlmcLayout::Entry& entry = layout.entries[i];
    if (name != entry.name) throw Error(op, concat("tensor ", i, " should be \"", entry.name, "\", got \"", name, "\""));
    const Shape shape = file_shape(entry, tp.shard_spec(entry.params.front()));
    if (value.shape() != shape)
      throw ShapeError(op, concat("\"", name, "\" should have shape ", shape, ", got ", value.shape()));
  }
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const LlmcLayout::Entry& entry = layout.entries[i];
    for (std::size_t l = 0; l < entry.params.size(); ++l) {
      Tensor param = entry.params[l];
      const Tensor whole = entry.per_layer ? tensors[i].second.select(0, static_cast<std::int64_t>(l)) : tensors[i].second;
      param.copy_(tp.shard_spec(param).shard(whole, tp.rank(), tp.size()));
    }
  }
}

}  // namespace infini::nn
