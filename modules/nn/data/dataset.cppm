// Datasets (torch.utils.data): a Dataset is indexed (size(), get(i)), an IterableDataset
// is read as a stream. Example is the default element: an input and its target; batches
// of Examples are made by collate (stacking along a new dim 0).
export module infini.nn:dataset;
import infini.std;
import infini.autograd;

export namespace infini::data {

// One sample: data (e.g. an image (C,H,W)) and its target (e.g. a 0-d int64 label).
struct Example {
  Tensor data;
  Tensor target;
};

// A map-style dataset. get() may be called from several loader threads at once.
template <class ExampleT = Example>
class Dataset {
 public:
  using ExampleType = ExampleT;
  virtual ~Dataset() = default;
  virtual std::int64_t size() const = 0;
  // Example `index`, 0 <= index < size().
  virtual ExampleT get(std::int64_t index) const = 0;
};

// The examples of `dataset` at `indices`, in that order (torch.utils.data.Subset).
template <class ExampleT = Example>
class Subset : public Dataset<ExampleT> {
 public:
  // Error for a null dataset; IndexError naming the first index outside [0, dataset->size()).
  Subset(std::shared_ptr<const Dataset<ExampleT>> dataset, std::vector<std::int64_t> indices)
      : dataset_(std::move(dataset)), indices_(std::move(indices)) {
    if (!dataset_) throw Error("Subset", "dataset is null");
    for (std::size_t i = 0; i < indices_.size(); ++i)
      if (indices_[i] < 0 || indices_[i] >= dataset_->size())
        throw IndexError("Subset", concat("indices[", i, "] = ", indices_[i], " is out of range for a dataset of ",
                                          dataset_->size(), " examples"));
  }
  std::int64_t size() const override { return static_cast<std::int64_t>(indices_.size()); }
  ExampleT get(std::int64_t index) const override {
    if (index < 0 || index >= size())
      throw IndexError("Subset.get", concat("index ", index, " is out of range for ", size(), " examples"));
    return dataset_->get(indices_[static_cast<std::size_t>(index)]);
  }

 private:
  std::shared_ptr<const Dataset<ExampleT>> dataset_;
  std::vector<std::int64_t> indices_;
};

// Yields the examples of one pass in order, then nullopt.
template <class ExampleT>
using ExampleStream = std::function<std::optional<ExampleT>()>;

// An iterable-style dataset: its examples come as a stream, one pass per epoch.
template <class ExampleT = Example>
class IterableDataset {
 public:
  using ExampleType = ExampleT;
  virtual ~IterableDataset() = default;
  // A new pass over the data for epoch `epoch` (the dataset may reorder by epoch).
  virtual ExampleStream<ExampleT> stream(std::int64_t epoch) const = 0;
};

// Examples (data[i], targets[i]) from two tensors of equal size(0) (torch TensorDataset).
class TensorDataset : public Dataset<Example> {
 public:
  // ShapeError unless both are defined, at least 1-d and agree in size(0).
  TensorDataset(Tensor data, Tensor targets);
  std::int64_t size() const override { return data_.size(0); }
  // IndexError unless 0 <= index < size().
  Example get(std::int64_t index) const override;

 private:
  Tensor data_;
  Tensor targets_;
};

// The default collate functions: B examples of data (d...) and targets (t...) become one
// Example of (B, d...) and (B, t...); B tensors (s...) become one (B, s...). ShapeError
// for an empty list or mismatched shapes.
Example default_collate(const std::vector<Example>& examples);
Tensor default_collate(const std::vector<Tensor>& tensors);

// Makes a batch of type BatchT from the examples of one batch, in order.
template <class ExampleT, class BatchT>
using Collate = std::function<BatchT(std::vector<ExampleT> examples)>;

}  // namespace infini::data
