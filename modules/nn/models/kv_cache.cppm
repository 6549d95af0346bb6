// A key/value cache for generating text one token at a time: the attention layers of
// nn::GPT2 and nn::LLaMA3 keep the keys and values of the positions already seen, so a new
// token costs one position of work instead of the whole sequence again.
//
//   nn::KVCache cache;
//   Tensor logits = model->forward_cached(prompt, cache);  // (1, T, Vp); cache.length() == T
//   logits = model->forward_cached(next_token, cache);     // (1, 1, Vp); cache.length() == T + 1
export module infini.nn:kv_cache;
import infini.std;
import infini.autograd;

export namespace infini::nn {

// Per layer l, keys[l] and values[l] are (B, Hkv, t, hd) after t positions (GPT-2: Hkv = NH;
// LLaMA-3: its KV heads, before grouped-query sharing). Empty, or undefined tensors: nothing
// seen yet. A cache belongs to one model and one batch of sequences; start a new one (or
// assign {}) for another.
struct KVCache {
  std::vector<Tensor> keys, values;
  // t, the positions held: 0 for an empty cache.
  std::int64_t length() const;
  // Sizes an empty cache for a model of `layers` layers; Error (from `model`) when the cache
  // holds another number of layers.
  void use_for(std::string_view model, std::size_t layers);
};

// Causal attention of T new positions past .. past + T - 1, past = keys.size(2) (0 when keys
// is undefined): appends k, v (B, Hkv, T, hd) to keys / values along dim 2, then q
// (B, H, T, hd) attends to them, query i seeing the keys of positions 0 .. past + i. With
// undefined keys / values this is scaled_dot_product_attention(q, k, v, is_causal) and they
// become k and v. -> (B, H, T, hd).
Tensor cached_causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& keys, Tensor& values);

}  // namespace infini::nn
