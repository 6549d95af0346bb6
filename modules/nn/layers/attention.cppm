// MultiheadAttention (torch.nn.MultiheadAttention): queries, keys and values projected by
// in_proj_weight (3E, E) and in_proj_bias (3E) into num_heads heads of E / num_heads
// features, attended by the fused scaled_dot_product_attention, the heads concatenated and
// projected by the child out_proj (a Linear(E, E)). State dict names are PyTorch's:
//   in_proj_weight, in_proj_bias, out_proj.weight, out_proj.bias
// or, when kdim / vdim differ from embed_dim, q_proj_weight (E, E), k_proj_weight
// (E, kdim) and v_proj_weight (E, vdim) in place of in_proj_weight. Initialised as PyTorch:
// projection weights xavier_uniform_, biases zero, out_proj.weight as Linear's.
//
// The attention weights are never formed (the fused kernel keeps O(head_dim) memory per
// query), so they are not returned: need_weights = true raises an error.
export module infini.nn:attention;
import infini.std;
import :module_base;
import :linear;

export namespace infini::nn {

struct MultiheadAttentionOptions {
  double dropout = 0.0;  // on the attention weights, in training mode; in [0, 1)
  bool bias = true;      // in_proj_bias and out_proj.bias
  std::optional<std::int64_t> kdim{};  // features of the key (default embed_dim)
  std::optional<std::int64_t> vdim{};  // features of the value (default embed_dim)
  bool batch_first = false;  // inputs and output (B, T, E) instead of (T, B, E)
};

// Shapes (L target length, S source length, B batch, E embed_dim):
//   query (L, B, E), key (S, B, kdim), value (S, B, vdim) -> (L, B, E); with batch_first
//   (B, L, E), (B, S, kdim), (B, S, vdim) -> (B, L, E); unbatched (L, E), (S, kdim), (S, vdim)
//   -> (L, E).
//   attn_mask (L, S), or (B * num_heads, L, S) ((num_heads, L, S) unbatched): bool, true
//   where a query may NOT attend to a key (PyTorch's MultiheadAttention convention, the
//   opposite of scaled_dot_product_attention's), or a float mask added to the scores.
//   key_padding_mask (B, S) ((S) unbatched): bool, true for keys to ignore, or float, added.
//   is_causal: query i attends to keys j <= i only (instead of an attn_mask).
// A query whose keys are all masked out gets NaN outputs, as in PyTorch.
class MultiheadAttentionImpl : public Cloneable<MultiheadAttentionImpl> {
 public:
  MultiheadAttentionImpl(std::int64_t embed_dim, std::int64_t num_heads, MultiheadAttentionOptions options = {});
  void reset() override;
  // Draws every parameter again as PyTorch initialises it (from `generator`, or the default one).
  void reset_parameters(Generator* generator = nullptr);

  Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value,
                 const std::optional<Tensor>& attn_mask = {}, bool is_causal = false, bool need_weights = false,
                 const std::optional<Tensor>& key_padding_mask = {});
  // Self-attention: forward(x, x, x).
  Tensor forward(const Tensor& x) override;
  // forward(query, key, value, ...) between the forward hooks, which see {query, key, value}.
  Tensor operator()(const Tensor& query, const Tensor& key, const Tensor& value,
                    const std::optional<Tensor>& attn_mask = {}, bool is_causal = false, bool need_weights = false,
                    const std::optional<Tensor>& key_padding_mask = {});
  using Module::operator();  // self-attention of one tensor

  std::int64_t embed_dim, num_heads, head_dim, kdim, vdim;
  double dropout;
  bool batch_first;
  Tensor in_proj_weight;                              // (3E, E); undefined when kdim or vdim != E
  Tensor q_proj_weight, k_proj_weight, v_proj_weight;  // defined only when kdim or vdim != E
  Tensor in_proj_bias;                                // (3E); undefined when built with bias = false
  std::shared_ptr<LinearImpl> out_proj;               // child "out_proj": (E) -> (E)

 protected:
  std::string extra_repr() const override;

 private:
  bool with_bias_;
  bool packed() const { return kdim == embed_dim && vdim == embed_dim; }  // in_proj_weight holds q, k, v
};
// The handle, with its constructor spelled out (ModuleHolder's forwarding one cannot take
// braced arguments) so that `MultiheadAttention(512, 8, {.batch_first = true})` works.
// Its call operator is spelled out too, so that `mha(q, k, v, {}, true)` works.
class MultiheadAttention : public ModuleHolder<MultiheadAttentionImpl> {
 public:
  using ModuleHolder::ModuleHolder;
  MultiheadAttention(std::int64_t embed_dim, std::int64_t num_heads, MultiheadAttentionOptions options = {})
      : ModuleHolder(embed_dim, num_heads, options) {}
  using ModuleHolder::operator();  // self-attention of one tensor
  Tensor operator()(const Tensor& query, const Tensor& key, const Tensor& value,
                    const std::optional<Tensor>& attn_mask = {}, bool is_causal = false, bool need_weights = false,
                    const std::optional<Tensor>& key_padding_mask = {}) const {
    return (**this)(query, key, value, attn_mask, is_causal, need_weights, key_padding_mask);
  }
};

}  // namespace infini::nn
