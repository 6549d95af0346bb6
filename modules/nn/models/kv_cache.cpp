// The KV cache's length and the attention over cached positions (see kv_cache.cppm).
module;
#include <cstddef>
#include <cstdint>
module infini.nn;
import infini.std;

namespace infini::nn {

std::int64_t KVCache::length() const {
  return keys.empty() || !keys.front().defined() ? 0 : keys.front().size(2);
}

void KVCache::use_for(std::string_view model, std::size_t layers) {
  if (keys.empty() && values.empty()) {
    keys.resize(layers);
    values.resize(layers);
  }
  if (keys.size() != layers || values.size() != layers)
    throw Error(model, concat("the cache holds keys / values of ", keys.size(), " / ", values.size(),
                              " layers, the model has ", layers));
}

Tensor cached_causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& keys, Tensor& values) {
  if (!keys.defined()) {
    keys = k;
    values = v;
    return scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);
  }
  const std::int64_t past = keys.size(2), T = q.size(2);
  keys = cat({keys, k}, 2);  // (B, Hkv, past + T, hd)
  values = cat({values, v}, 2);
  if (T == 1) return scaled_dot_product_attention(q, keys, values);  // the newest position sees them all
  // (T, past + T): query i (position past + i) sees key j iff j <= past + i.
  const TensorOptions positions{.dtype = kInt64, .device = q.device()};
  const Tensor mask =
      le(arange(past + T, positions).view({1, past + T}), arange(past, past + T, 1, positions).view({T, 1}));
  return scaled_dot_product_attention(q, keys, values, mask);
}

}  // namespace infini::nn
