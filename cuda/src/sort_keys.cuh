// Internal to sort, top-k and unique: each value as an unsigned key whose integer order is
// the value order, with NaN above every number and -0 equal to +0 (the CPU's sort_key);
// f16/bf16 are compared as float.
#pragma once

#include <cstdint>
#include <type_traits>

#include "element_types.cuh"

namespace infini::cuda::detail {

template <class T>
using SortKey = std::conditional_t<sizeof(compute_t<T>) <= 4, std::uint32_t, std::uint64_t>;

template <class T>
__device__ SortKey<T> sort_key(T x) {
  using C = compute_t<T>;
  using K = SortKey<T>;
  constexpr K top = K(1) << (sizeof(K) * 8 - 1);
  const C v = widen(x);
  if constexpr (std::is_floating_point_v<C>) {
    if (v != v) return ~K(0);
    const C z = v == 0 ? C(0) : v;  // -0 -> +0
    K bits;
    if constexpr (sizeof(C) == 4) bits = __float_as_uint(z);
    else bits = static_cast<K>(__double_as_longlong(z));
    return bits & top ? static_cast<K>(~bits) : static_cast<K>(bits | top);
  } else if constexpr (std::is_signed_v<C>) {
    return static_cast<K>(static_cast<std::make_signed_t<K>>(v)) ^ top;
  } else {
    return static_cast<K>(v);
  }
}

}  // namespace infini::cuda::detail
