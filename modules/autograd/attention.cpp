module;
#include <cmath>
#include <cstdint>
module infini.autograd;
import infini.std;

namespace infini {

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const std::optional<Tensor>& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale, Generator* generator) {
  if (const AutocastRegion cast(CastPolicy::kLowerPrecision, q); cast)
    return scaled_dot_product_attention(cast(q), cast(k), cast(v), cast(attn_mask), dropout_p, is_causal, scale,
                                        generator);
  constexpr auto op = "scaled_dot_product_attention";
  if (attn_mask && is_causal) throw Error(op, "pass either attn_mask or is_causal, not both");
  if (dropout_p < 0 || dropout_p >= 1) throw Error(op, concat("dropout_p must be in [0, 1), got ", dropout_p));
  if (q.dim() != 4) throw ShapeError(op, concat("expected query (B, H, Tq, D), got shape ", q.shape()));
  AttentionParams params{.scale = scale.value_or(1.0 / std::sqrt(static_cast<double>(q.shape()[3]))),
                         .causal = is_causal,
                         .dropout_p = dropout_p,
                         .dropout_state = {}};
  if (dropout_p > 0) {
    const auto count = static_cast<std::uint64_t>(q.shape()[0] * q.shape()[1] * q.shape()[2] * k.shape()[2]);
    params.dropout_state = (generator ? *generator : default_generator()).reserve(count);
  }
  const Tensor mask = attn_mask ? *attn_mask : Tensor();
  auto [out, lse] = kernels::attention_forward(q, k, v, mask, params);
  record(op, {q, k, v}, {out}, {q, k, v, out, lse, mask}, [params](const TensorList& g, const TensorList& s) {
    if (!g[0].defined()) return TensorList{Tensor(), Tensor(), Tensor()};
    if (GradMode::is_enabled())
      throw Error("scaled_dot_product_attention", "double backward (create_graph) is not supported");
    auto [dq, dk, dv] = kernels::attention_backward(g[0], s[0], s[1], s[2], s[3], s[4], s[5], params);
    return TensorList{dq, dk, dv};
  });
  return out;
}

}  // namespace infini
