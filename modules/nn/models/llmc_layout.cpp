// Gathering and scattering a model's parameters in llm.c's layout (see llmc_layout.cppm).
module;
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>
module infini.nn;

namespace infini::nn {
namespace {

// The entry's shape in the file: a whole tensor's own, or (layers, per-layer shape).
Shape file_shape(const LlmcLayout::Entry& entry) {
  Shape shape = entry.params.front().shape();
  if (entry.per_layer) shape.insert(shape.begin(), static_cast<std::int64_t>(entry.params.size()));
  return shape;
}

}  // namespace

std::vector<std::pair<std::string, Tensor>> gather_llmc_tensors(std::string_view op, const LlmcLayout& layout,
                                                                bool gradients) {
  NoGradGuard no_grad;
  std::vector<std::pair<std::string, Tensor>> out;
  for (const LlmcLayout::Entry& entry : layout.entries) {
    TensorList values;
    for (const Tensor& param : entry.params) {
      if (gradients && !param.grad().defined())
        throw Error(op, concat("a parameter of \"", entry.name, "\" has no gradient (run backward first)"));
      values.push_back(gradients ? param.grad() : param);
    }
    const Tensor value = entry.per_layer ? stack(values, 0) : values.front();
    out.emplace_back(entry.name, value.to(kFloat32).to(Device::cpu()).clone());
  }
  return out;
}

void scatter_llmc_tensors(std::string_view op, const LlmcLayout& layout,
                          const std::vector<std::pair<std::string, Tensor>>& tensors) {
  NoGradGuard no_grad;
  if (tensors.size() != layout.entries.size())
    throw Error(op, concat("expected ", layout.entries.size(), " tensors, got ", tensors.size()));
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, value] = tensors[i];
    const LlmcLayout::Entry& entry = layout.entries[i];
    if (name != entry.name) throw Error(op, concat("tensor ", i, " should be \"", entry.name, "\", got \"", name, "\""));
    if (value.shape() != file_shape(entry))
      throw ShapeError(op, concat("\"", name, "\" should have shape ", file_shape(entry), ", got ", value.shape()));
  }
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const LlmcLayout::Entry& entry = layout.entries[i];
    for (std::size_t l = 0; l < entry.params.size(); ++l) {
      Tensor param = entry.params[l];
      param.copy_(entry.per_layer ? tensors[i].second.select(0, static_cast<std::int64_t>(l)) : tensors[i].second);
    }
  }
}

}  // namespace infini::nn
