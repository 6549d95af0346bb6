// Scaled dot-product attention (torch.nn.functional.scaled_dot_product_attention) on the
// fused online-softmax kernel: memory per query row is O(D), and backward recomputes the
// scores instead of keeping a (B, H, Tq, Tk) matrix.
export module infini.autograd:attention;
import infini.std;
import infini.kernels;

export namespace infini {

inline constexpr std::array<std::string_view, 1> kAttentionOps = {"scaled_dot_product_attention"};

// q (B, H, Tq, D), k (B, Hkv, Tk, D), v (B, Hkv, Tk, Dv) -> (B, H, Tq, Dv); H must be a
// multiple of Hkv (grouped-query attention). attn_mask broadcasts to (B, H, Tq, Tk): bool
// (true = attend) or an additive float mask (no gradient flows into it). is_causal masks
// j > i and excludes attn_mask. scale defaults to 1 / sqrt(D). Dropout on the attention
// weights uses `generator` (default: the global one). Differentiable once (create_graph
// through it is an error).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const std::optional<Tensor>& attn_mask = {}, double dropout_p = 0.0,
                                    bool is_causal = false, std::optional<double> scale = {},
                                    Generator* generator = nullptr);

}  // namespace infini
