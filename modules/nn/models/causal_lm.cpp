// The decoder-only skeleton GPT2 and LLaMA3 share (see causal_lm.cppm).
module;
#include <cstddef>
#include <cstdint>
module infini.nn;
import infini.std;

namespace infini::nn {
namespace {
thread_local bool recompute_attention = false;
}

SelectiveRecompute::SelectiveRecompute(bool enabled) : previous_(recompute_attention) { recompute_attention = enabled; }
SelectiveRecompute::~SelectiveRecompute() { recompute_attention = previous_; }
bool SelectiveRecompute::enabled() { return recompute_attention; }

Tensor attention_core(const AttentionCore& core, const Tensor& qkv, Tensor& keys, Tensor& values) {
  if (!recompute_attention || keys.defined() || values.defined()) return core(qkv, keys, values);
  return autograd::checkpoint(
      [core](const Tensor& t) {
        Tensor no_keys, no_values;
        return core(t, no_keys, no_values);
      },
      qkv);
}

CausalLM::CausalLM(std::string name, const CausalLMSizes& sizes, std::optional<ModelPart> part,
                   std::shared_ptr<TensorParallelLayers> tp)
    : part(part ? std::move(*part) : ModelPart::whole(sizes.num_layers)),
      tp(or_single_process(std::move(tp))),
      name_(std::move(name)),
      sizes_(sizes) {
  this->part.validate(name_, sizes_.num_layers);
}

Tensor CausalLM::forward_cached(const Tensor& idx, KVCache& cache) {
  part.require(name_, "forward_cached", sizes_.num_layers);
  cache.use_for(name_, num_blocks_held());
  return forward_from(idx, cache.length(), &cache);
}

Tensor CausalLM::forward_from(const Tensor& idx, std::int64_t past, KVCache* cache) {
  part.require(name_, "forward", sizes_.num_layers);
  if (idx.dim() != 2 || idx.dtype() != kInt64)
    throw ShapeError(name_, concat("expected idx (B, T) int64, got ", idx.dtype(), " ", idx.shape()));
  const std::int64_t T = idx.size(1);
  if (past + T > sizes_.max_seq_len)
    throw ShapeError(name_, concat("sequence length ", past + T,
                                   past > 0 ? concat(" (", past, " cached + ", T, " new)") : std::string(),
                                   " exceeds max_seq_len ", sizes_.max_seq_len));
  // Generation runs every position on every rank: no sequence parallelism (and no
  // recomputation) while cached.
  const SequenceParallelPause pause(*tp, cache != nullptr);
  const SelectiveRecompute recompute(recompute_attention && cache == nullptr);
  Tensor x = embed_at(idx, past);
  for (std::size_t l = 0; l < num_blocks_held(); ++l) x = run_block(l, x, cache);
  const Tensor logits = head(x);
  return cache ? tp->gather_vocab(logits) : logits;
}

Tensor CausalLM::embed(const Tensor& idx) {
  part.require(name_, "embed", sizes_.num_layers);
  if (idx.dim() != 2 || idx.dtype() != kInt64 || idx.size(1) > sizes_.max_seq_len)
    throw ShapeError(name_ + ".embed", concat("expected idx (B, T) int64 with T <= ", sizes_.max_seq_len, ", got ",
                                              idx.dtype(), " ", idx.shape()));
  return embed_at(idx, 0);
}

Tensor CausalLM::loss(const Tensor& logits, const Tensor& targets) const {
  const std::int64_t Vl = sizes_.logit_columns / tp->size();
  if (logits.dim() != 3 || logits.size(2) != Vl || targets.dim() != 2 || targets.size(0) != logits.size(0) ||
      targets.size(1) != logits.size(1))
    throw ShapeError(name_ + ".loss", concat("expected logits (B, T, ", Vl, ") and targets (B, T), got ",
                                             logits.shape(), " and ", targets.shape()));
  return tp->vocab_cross_entropy(logits.reshape({-1, Vl}), targets.reshape({-1}), sizes_.vocab_size);
}

std::vector<std::pair<std::string, Tensor>> CausalLM::llmc_tensors(bool gradients) const {
  part.require(name_, "llmc_tensors", sizes_.num_layers);
  return gather_llmc_tensors(name_ + ".llmc_tensors", llmc_layout(), *tp, gradients);
}

void CausalLM::load_llmc_tensors(const std::vector<std::pair<std::string, Tensor>>& tensors) {
  part.require(name_, "load_llmc_tensors", sizes_.num_layers);
  scatter_llmc_tensors(name_ + ".load_llmc_tensors", llmc_layout(), *tp, tensors);
}

std::string CausalLM::part_repr() const {
  return part.is_whole(sizes_.num_layers) ? std::string() : concat(", part=", part.str());
}

}  // namespace infini::nn
