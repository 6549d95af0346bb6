// MultiheadAttention: option and input checks, PyTorch's initialisation, the masks merged
// into one for scaled_dot_product_attention, and the projections (see attention.cppm).
module;
#include <cstdint>
module infini.nn;
import infini.std;

namespace infini::nn {
namespace {

// `attend` (bool, true = attend) as an additive mask: 0 where attending, -inf elsewhere.
Tensor additive(const Tensor& attend, DataType dtype) {
  return masked_fill(zeros(attend.shape(), {.dtype = dtype, .device = attend.device()}), logical_not(attend),
                     -std::numeric_limits<double>::infinity());
}

// The conjunction of two masks in the attention's convention: bool and bool stay bool,
// otherwise both become additive and are summed.
Tensor combine(const Tensor& a, const Tensor& b, DataType dtype) {
  if (!a.defined()) return b;
  if (!b.defined()) return a;
  if (a.dtype() == kBool && b.dtype() == kBool) return logical_and(a, b);
  return add(a.dtype() == kBool ? additive(a, dtype) : a, b.dtype() == kBool ? additive(b, dtype) : b);
}

// A user mask in MultiheadAttention's convention (bool true = do NOT attend; float added)
// turned into the attention's (bool true = attend; float of dtype).
Tensor to_attention_convention(const std::string& layer, const char* what, const Tensor& mask, DataType dtype) {
  if (mask.dtype() == kBool) return logical_not(mask);
  if (!is_floating_point(mask.dtype()))
    throw DTypeError(layer, concat(what, " must be bool or floating point, got ", mask.dtype()));
  return mask.dtype() == dtype ? mask : mask.to(dtype);
}

// The sizes a mask is checked against: batch, heads, query and key lengths.
struct MaskSizes {
  std::int64_t b, heads, l, s;
  bool unbatched;
};

// attn_mask (L, S) or (B * H, L, S), key_padding_mask (B, S) and, when either is given, the
// causal mask merged into one mask broadcastable to (B, H, L, S) in the attention's
// convention; undefined when there is none (is_causal alone is left to the kernel).
Tensor merged_mask(const std::string& layer, const std::optional<Tensor>& attn_mask,
                   const std::optional<Tensor>& key_padding_mask, bool is_causal, const MaskSizes& n,
                   const Tensor& query) {
  const DataType dtype = query.dtype();
  Tensor mask;
  if (attn_mask) {
    const Tensor& m = *attn_mask;
    const std::int64_t stacked = n.unbatched ? n.heads : n.b * n.heads;
    if (m.dim() == 2 && m.size(0) == n.l && m.size(1) == n.s)
      mask = to_attention_convention(layer, "attn_mask", m, dtype).reshape({1, 1, n.l, n.s});
    else if (m.dim() == 3 && m.size(0) == stacked && m.size(1) == n.l && m.size(2) == n.s)
      mask = to_attention_convention(layer, "attn_mask", m, dtype).reshape({n.b, n.heads, n.l, n.s});
    else
      throw ShapeError(layer, concat("expected attn_mask of shape ", Shape{n.l, n.s}, " or ",
                                     Shape{stacked, n.l, n.s}, ", got ", m.shape()));
  }
  if (key_padding_mask) {
    const Tensor& m = *key_padding_mask;
    const Shape expected = n.unbatched ? Shape{n.s} : Shape{n.b, n.s};
    if (m.shape() != expected)
      throw ShapeError(layer, concat("expected key_padding_mask of shape ", expected, ", got ", m.shape()));
    mask = combine(mask, to_attention_convention(layer, "key_padding_mask", m, dtype).reshape({n.b, 1, 1, n.s}),
                   dtype);
  }
  if (is_causal && mask.defined()) {
    const TensorOptions index{.dtype = kInt64, .device = query.device()};
    const Tensor causal = le(arange(n.s, index).view({1, n.s}), arange(n.l, index).view({n.l, 1}));  // j <= i
    mask = combine(mask, causal.view({1, 1, n.l, n.s}), dtype);
  }
  return mask;
}

}  // namespace

MultiheadAttentionImpl::MultiheadAttentionImpl(std::int64_t embed_dim, std::int64_t num_heads,
                                               MultiheadAttentionOptions options)
    : Cloneable("MultiheadAttention"),
      embed_dim(embed_dim),
      num_heads(num_heads),
      head_dim(0),
      kdim(options.kdim.value_or(embed_dim)),
      vdim(options.vdim.value_or(embed_dim)),
      dropout(options.dropout),
      batch_first(options.batch_first),
      with_bias_(options.bias) {
  const std::string& layer = type_name();
  if (embed_dim < 1 || num_heads < 1)
    throw ShapeError(layer, concat("embed_dim and num_heads must be >= 1, got ", embed_dim, " and ", num_heads));
  if (embed_dim % num_heads != 0)
    throw ShapeError(layer, concat("embed_dim=", embed_dim, " must be divisible by num_heads=", num_heads));
  if (kdim < 1 || vdim < 1) throw ShapeError(layer, concat("kdim and vdim must be >= 1, got ", kdim, " and ", vdim));
  if (!(dropout >= 0 && dropout < 1)) throw Error(layer, concat("dropout must be in [0, 1), got ", dropout));
  head_dim = embed_dim / num_heads;
  reset();
}

void MultiheadAttentionImpl::reset() {
  const std::int64_t e = embed_dim;
  if (packed()) {
    in_proj_weight = register_parameter("in_proj_weight", empty({3 * e, e}));
  } else {
    q_proj_weight = register_parameter("q_proj_weight", empty({e, e}));
    k_proj_weight = register_parameter("k_proj_weight", empty({e, kdim}));
    v_proj_weight = register_parameter("v_proj_weight", empty({e, vdim}));
  }
  in_proj_bias = with_bias_ ? register_parameter("in_proj_bias", empty({3 * e})) : Tensor();
  out_proj = register_module("out_proj", std::make_shared<LinearImpl>(e, e, with_bias_));
  reset_parameters();
}

void MultiheadAttentionImpl::reset_parameters(Generator* generator) {
  for (const Tensor& w : {in_proj_weight, q_proj_weight, k_proj_weight, v_proj_weight})
    if (w.defined()) init::xavier_uniform_(w, 1.0, generator);
  out_proj->reset_parameters(generator);  // out_proj.weight as Linear draws it; the biases start at zero
  if (with_bias_) {
    init::zeros_(in_proj_bias);
    init::zeros_(out_proj->bias);
  }
}

Tensor MultiheadAttentionImpl::forward(const Tensor& x) { return forward(x, x, x); }

Tensor MultiheadAttentionImpl::operator()(const Tensor& query, const Tensor& key, const Tensor& value,
                                          const std::optional<Tensor>& attn_mask, bool is_causal, bool need_weights,
                                          const std::optional<Tensor>& key_padding_mask) {
  return call({query, key, value},
              [&] { return forward(query, key, value, attn_mask, is_causal, need_weights, key_padding_mask); });
}

Tensor MultiheadAttentionImpl::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                       const std::optional<Tensor>& attn_mask, bool is_causal, bool need_weights,
                                       const std::optional<Tensor>& key_padding_mask) {
  const std::string& layer = type_name();
  return with_layer_name(layer, [&] {
    if (need_weights)
      throw Error(layer, "need_weights=true is not supported: the fused attention never forms the attention weights");
    if (attn_mask && is_causal) throw Error(layer, "pass either attn_mask or is_causal=true, not both");

    // ---- shapes: query (B, L, E), key (B, S, kdim), value (B, S, vdim) after batching ----
    if (query.dim() != 2 && query.dim() != 3)
      throw ShapeError(layer, concat("expected a query ", batch_first ? "(B, T, features)" : "(T, B, features)",
                                     " or unbatched (T, features), got shape ", query.shape()));
    if (key.dim() != query.dim() || value.dim() != query.dim())
      throw ShapeError(layer, concat("query, key and value must all be batched or all unbatched, got shapes ",
                                     query.shape(), ", ", key.shape(), " and ", value.shape()));
    const bool unbatched = query.dim() == 2;
    const auto batched = [&](const Tensor& t) {
      return unbatched ? t.unsqueeze(0) : batch_first ? t : t.transpose(0, 1);
    };
    const Tensor qb = batched(query), kb = batched(key), vb = batched(value);
    const std::int64_t b = qb.size(0), l = qb.size(1), s = kb.size(1);
    if (qb.size(2) != embed_dim || kb.size(2) != kdim || vb.size(2) != vdim)
      throw ShapeError(layer, concat("expected query, key and value with ", embed_dim, ", ", kdim, " and ", vdim,
                                     " features, got shapes ", query.shape(), ", ", key.shape(), " and ",
                                     value.shape()));
    if (kb.size(0) != b || vb.size(0) != b || vb.size(1) != s)
      throw ShapeError(layer, concat("query, key and value must share the batch size and key and value the ",
                                     "sequence length, got shapes ", query.shape(), ", ", key.shape(), " and ",
                                     value.shape()));
    const Tensor mask = merged_mask(layer, attn_mask, key_padding_mask, is_causal,
                                    {.b = b, .heads = num_heads, .l = l, .s = s, .unbatched = unbatched}, query);

    // ---- projections into heads: (B, T, E) -> (B, H, T, head_dim) ----
    Tensor q, k, v;
    if (packed() && query.is_same(key) && key.is_same(value)) {  // self-attention: one product
      const std::vector<Tensor> qkv = linear(qb, in_proj_weight, in_proj_bias).chunk(3, -1);
      q = qkv[0];
      k = qkv[1];
      v = qkv[2];
    } else {
      const auto part = [&](const Tensor& t, std::int64_t i) {  // rows / entries of q, k or v
        return t.defined() ? t.narrow(0, i * embed_dim, embed_dim) : Tensor();
      };
      q = linear(qb, packed() ? part(in_proj_weight, 0) : q_proj_weight, part(in_proj_bias, 0));
      k = linear(kb, packed() ? part(in_proj_weight, 1) : k_proj_weight, part(in_proj_bias, 1));
      v = linear(vb, packed() ? part(in_proj_weight, 2) : v_proj_weight, part(in_proj_bias, 2));
    }
    const auto heads = [&](const Tensor& t, std::int64_t length) {
      return t.reshape({b, length, num_heads, head_dim}).transpose(1, 2);
    };
    const Tensor attended = scaled_dot_product_attention(
        heads(q, l), heads(k, s), heads(v, s), mask.defined() ? std::optional<Tensor>(mask) : std::nullopt,
        is_training() ? dropout : 0.0, is_causal && !mask.defined());  // (B, H, L, head_dim)

    // ---- heads concatenated and projected: (B, L, E), back to the input's layout ----
    const Tensor y = linear(attended.transpose(1, 2).reshape({b, l, embed_dim}), out_proj->weight, out_proj->bias);
    return unbatched ? y.squeeze(0) : batch_first ? y : y.transpose(0, 1);
  });
}

std::string MultiheadAttentionImpl::extra_repr() const {
  std::string out = concat("embed_dim=", embed_dim, ", num_heads=", num_heads);
  if (dropout != 0) out += concat(", dropout=", dropout);
  if (!with_bias_) out += ", bias=false";
  if (!packed()) out += concat(", kdim=", kdim, ", vdim=", vdim);
  if (batch_first) out += ", batch_first=true";
  return out;
}

}  // namespace infini::nn
