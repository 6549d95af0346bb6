// Internal to the reductions and scans: warp shuffles of accumulator values (arithmetic
// types, and small structs of them that shuffle member by member), and the (value, index)
// accumulator of the arg reductions and running max/min.
#pragma once

#include <cstdint>
#include <type_traits>

namespace infini::cuda::detail {

inline constexpr unsigned kFullWarp = 0xffffffffu;

// shfl(x) applied to v: directly for 32/64-bit arithmetic types, through int for narrower
// ones (bool, 8/16-bit integers), member by member for structs with a shuffled(shfl) member.
template <class A, class Shfl>
__device__ A shuffle_with(const A& v, Shfl shfl) {
  if constexpr (std::is_arithmetic_v<A>) {
    if constexpr (sizeof(A) < 4) return static_cast<A>(shfl(static_cast<int>(v)));
    else return shfl(v);
  } else {
    return v.shuffled(shfl);
  }
}

// The value of lane (this lane + delta); lanes past the warp's end get their own.
template <class A>
__device__ A shuffle_down(const A& v, unsigned delta) {
  return shuffle_with(v, [delta](auto x) { return __shfl_down_sync(kFullWarp, x, delta); });
}

// The value of lane (this lane - delta); lanes below delta get their own.
template <class A>
__device__ A shuffle_up(const A& v, unsigned delta) {
  return shuffle_with(v, [delta](auto x) { return __shfl_up_sync(kFullWarp, x, delta); });
}

// The value of lane `from`.
template <class A>
__device__ A shuffle_from(const A& v, int from) {
  return shuffle_with(v, [from](auto x) { return __shfl_sync(kFullWarp, x, from); });
}

// The sum over the warp's 32 lanes of a float or double, in a fixed xor butterfly: every
// lane gets the same bits (each step adds the same two values, in either order).
template <class T>
__device__ T warp_sum(T x) {
  for (int o = 16; o > 0; o /= 2) x += __shfl_xor_sync(kFullWarp, x, o);
  return x;
}

// A value and the index where it occurs (arg reductions, running max/min).
template <class C>
struct ValueIndex {
  C value;
  std::int64_t index;
  template <class Shfl>
  __device__ ValueIndex shuffled(Shfl shfl) const {
    return {shuffle_with(value, shfl), shuffle_with(index, shfl)};
  }
};

}  // namespace infini::cuda::detail
