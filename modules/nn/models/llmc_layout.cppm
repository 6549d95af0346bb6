// A model's parameters in the order of an llm.c checkpoint: the model lists its whole
// tensors and its per-layer ones by name, and these functions turn that list into the
// checkpoint's tensors (per-layer ones stacked along a new dim 0) and back. GPT2 and
// LLaMA3's llmc_tensors / load_llmc_tensors are built on them.
export module infini.nn:llmc_layout;
import infini.std;
import infini.autograd;
import :tensor_parallel;

export namespace infini::nn {

struct LlmcLayout {
  struct Entry {
    std::string name;
    std::vector<Tensor> params;  // one whole tensor, or one per layer (stacked in the file)
    bool per_layer = false;
  };
  std::vector<Entry> entries;  // in the checkpoint's order

  void whole(std::string name, const Tensor& param) { entries.push_back({std::move(name), {param}, false}); }
  // pick(block) for every block, stacked in the file.
  template <class Block>
  void layers(std::string name, const std::vector<std::shared_ptr<Block>>& blocks, Tensor (*pick)(const Block&)) {
    std::vector<Tensor> per_layer;
    for (const auto& block : blocks) per_layer.push_back(pick(*block));
    entries.push_back({std::move(name), std::move(per_layer), true});
  }
};

// The layout's tensors, or with `gradients` its parameters' grads (Error from `op` naming a
// parameter without one), as new float32 CPU tensors; parameters `tp` made sharded are
// gathered whole (a collective over its ranks).
std::vector<std::pair<std::string, Tensor>> gather_llmc_tensors(std::string_view op, const LlmcLayout& layout,
                                                                TensorParallelLayers& tp, bool gradients);
// Copies `tensors` into the layout's parameters (this rank's shards of those `tp` made
// sharded) after checking that their names, order and whole shapes are exactly the layout's
// (Error / ShapeError from `op` naming the tensor).
void scatter_llmc_tensors(std::string_view op, const LlmcLayout& layout, const TensorParallelLayers& tp,
                          const std::vector<std::pair<std::string, Tensor>>& tensors);

}  // namespace infini::nn
