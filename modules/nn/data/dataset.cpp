// TensorDataset and the default collate (see dataset.cppm).
module;
#include <cstdint>
module infini.nn;
import infini.std;

namespace infini::data {

TensorDataset::TensorDataset(Tensor data, Tensor targets) : data_(std::move(data)), targets_(std::move(targets)) {
  if (!data_.defined() || !targets_.defined())
    throw ShapeError("TensorDataset", "data and targets must be defined tensors");
  if (data_.dim() == 0 || targets_.dim() == 0 || data_.size(0) != targets_.size(0))
    throw ShapeError("TensorDataset", concat("data ", data_.shape(), " and targets ", targets_.shape(),
                                             " must be at least 1-d with the same size(0)"));
}

Example TensorDataset::get(std::int64_t index) const {
  if (index < 0 || index >= size())
    throw IndexError("TensorDataset.get", concat("index ", index, " is out of range for ", size(), " examples"));
  return {data_.select(0, index), targets_.select(0, index)};
}

Tensor default_collate(const std::vector<Tensor>& tensors) {
  if (tensors.empty()) throw ShapeError("default_collate", "cannot collate an empty batch");
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (!tensors[i].defined()) throw ShapeError("default_collate", concat("example ", i, " is an undefined tensor"));
    if (tensors[i].shape() != tensors[0].shape())
      throw ShapeError("default_collate", concat("example ", i, " has shape ", tensors[i].shape(),
                                                 ", example 0 has ", tensors[0].shape()));
  }
  return stack(tensors, 0);
}

Example default_collate(const std::vector<Example>& examples) {
  std::vector<Tensor> data, targets;
  data.reserve(examples.size());
  targets.reserve(examples.size());
  for (const Example& e : examples) {
    data.push_back(e.data);
    targets.push_back(e.target);
  }
  return {default_collate(data), default_collate(targets)};
}

}  // namespace infini::data
