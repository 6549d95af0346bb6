// Sliding-window kernels over (planes, *in) inputs with three (right-aligned) spatial dims:
// im2col (one thread per column element), col2im (one thread per input element, summing
// its column entries in the CPU's order) and max_pool_indices (one thread per window).
// Linear indices are unravelled in 32 bits when the iterated space allows; positions are
// computed in 64 bits.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <limits>
#include <type_traits>

#include "element_types.cuh"
#include "infini/cuda/conv.h"
#include "launch.cuh"
#include "strided.cuh"

namespace infini::cuda {
namespace {

using detail::compute_t;
using detail::convert;
using detail::widen;

std::int64_t product(const std::int64_t (&v)[3]) { return v[0] * v[1] * v[2]; }

// Calls f(I{}) with I = int32 when every linear index below n, plus one grid step, fits
// it, else int64.
template <class F>
void with_index_type(std::int64_t n, F&& f) {
  const std::int64_t largest_step = std::int64_t{detail::kMaxBlocks} * detail::kThreads;
  if (n <= std::numeric_limits<std::int32_t>::max() - largest_step) f(std::int32_t{});
  else f(std::int64_t{});
}

// Splits i into (rest, i % size), one dim at a time from the last.
template <class I>
__device__ std::int64_t take(I& i, std::int64_t size) {
  const I s = static_cast<I>(size);
  const I r = i % s;
  i /= s;
  return r;
}

// columns (planes, k0, k1, k2, o0, o1, o2) from x (planes, i0, i1, i2); T moves the
// element's bits (an unsigned integer of its size): 0 bits are every type's zero.
template <class T, class I>
__global__ void im2col_kernel(T* columns, const T* x, Windows3 w, I numel) {
  const std::int64_t in_plane = w.in[0] * w.in[1] * w.in[2];
  for (I i = static_cast<I>(detail::first_index()); i < numel; i += static_cast<I>(detail::grid_step())) {
    I rest = i;
    std::int64_t o[3], k[3];
    o[2] = take(rest, w.out[2]);
    o[1] = take(rest, w.out[1]);
    o[0] = take(rest, w.out[0]);
    k[2] = take(rest, w.kernel[2]);
    k[1] = take(rest, w.kernel[1]);
    k[0] = take(rest, w.kernel[0]);
    const std::int64_t plane = rest;
    std::int64_t offset = 0;
    bool inside = true;
#pragma unroll
    for (int d = 0; d < 3; ++d) {
      const std::int64_t at = o[d] * w.stride[d] - w.padding[d] + k[d] * w.dilation[d];
      inside = inside && at >= 0 && at < w.in[d];
      offset = offset * w.in[d] + at;
    }
    columns[i] = inside ? x[plane * in_plane + offset] : T{0};
  }
}

// acc + v as the CPU computes it: in compute_t, rounded back to T; integers wrap; bool ORs.
template <class T>
__device__ T accumulate(T acc, T v) {
  if constexpr (std::is_same_v<T, bool>) {
    return acc || v;
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(acc) + static_cast<U>(v)));
  } else {
    return convert<T>(static_cast<compute_t<T>>(widen(acc)) + static_cast<compute_t<T>>(widen(v)));
  }
}

// The output position along dim d whose tap k reads input position at, or -1 when none
// does; -2 once no larger k can (at + padding - k dilation < 0).
__device__ std::int64_t window_of(const Windows3& w, int d, std::int64_t at, std::int64_t k) {
  const std::int64_t t = at + w.padding[d] - k * w.dilation[d];
  if (t < 0) return -2;
  if (t % w.stride[d] != 0) return -1;
  const std::int64_t o = t / w.stride[d];
  return o < w.out[d] ? o : -1;
}

// x (planes, i0, i1, i2) = sum over taps (k0, k1, k2), in row-major order, of the column
// entry that tap's window took from this element (each tap matches at most one window).
template <class T, class I>
__global__ void col2im_kernel(T* x, const T* columns, Windows3 w, I numel) {
  const std::int64_t kernel_count = w.kernel[0] * w.kernel[1] * w.kernel[2];
  const std::int64_t out_count = w.out[0] * w.out[1] * w.out[2];
  for (I i = static_cast<I>(detail::first_index()); i < numel; i += static_cast<I>(detail::grid_step())) {
    I rest = i;
    const std::int64_t at2 = take(rest, w.in[2]);
    const std::int64_t at1 = take(rest, w.in[1]);
    const std::int64_t at0 = take(rest, w.in[0]);
    const T* cols = columns + static_cast<std::int64_t>(rest) * kernel_count * out_count;
    T acc{};
    for (std::int64_t k0 = 0; k0 < w.kernel[0]; ++k0) {
      const std::int64_t o0 = window_of(w, 0, at0, k0);
      if (o0 == -2) break;
      if (o0 < 0) continue;
      for (std::int64_t k1 = 0; k1 < w.kernel[1]; ++k1) {
        const std::int64_t o1 = window_of(w, 1, at1, k1);
        if (o1 == -2) break;
        if (o1 < 0) continue;
        for (std::int64_t k2 = 0; k2 < w.kernel[2]; ++k2) {
          const std::int64_t o2 = window_of(w, 2, at2, k2);
          if (o2 == -2) break;
          if (o2 < 0) continue;
          const std::int64_t tap = (k0 * w.kernel[1] + k1) * w.kernel[2] + k2;
          acc = accumulate(acc, cols[tap * out_count + (o0 * w.out[1] + o1) * w.out[2] + o2]);
        }
      }
    }
    x[i] = acc;
  }
}

// indices (planes, o0, o1, o2): over the window's taps inside x in row-major order, the
// first maximum wins and a NaN beats every number (and later NaNs); -1 when no tap is inside.
template <class T, class I>
__global__ void max_pool_indices_kernel(std::int64_t* indices, const T* x, Windows3 w, I numel) {
  using C = compute_t<T>;
  const std::int64_t in_plane = w.in[0] * w.in[1] * w.in[2];
  for (I i = static_cast<I>(detail::first_index()); i < numel; i += static_cast<I>(detail::grid_step())) {
    I rest = i;
    const std::int64_t o2 = take(rest, w.out[2]);
    const std::int64_t o1 = take(rest, w.out[1]);
    const std::int64_t o0 = take(rest, w.out[0]);
    const T* plane = x + static_cast<std::int64_t>(rest) * in_plane;
    std::int64_t best_at = -1;
    C best{};
    for (std::int64_t k0 = 0; k0 < w.kernel[0]; ++k0) {
      const std::int64_t at0 = o0 * w.stride[0] - w.padding[0] + k0 * w.dilation[0];
      if (at0 < 0) continue;
      if (at0 >= w.in[0]) break;
      for (std::int64_t k1 = 0; k1 < w.kernel[1]; ++k1) {
        const std::int64_t at1 = o1 * w.stride[1] - w.padding[1] + k1 * w.dilation[1];
        if (at1 < 0) continue;
        if (at1 >= w.in[1]) break;
        const std::int64_t row = (at0 * w.in[1] + at1) * w.in[2];
        for (std::int64_t k2 = 0; k2 < w.kernel[2]; ++k2) {
          const std::int64_t at2 = o2 * w.stride[2] - w.padding[2] + k2 * w.dilation[2];
          if (at2 < 0) continue;
          if (at2 >= w.in[2]) break;
          const C v = static_cast<C>(widen(plane[row + at2]));
          if (best_at < 0 || (!detail::is_nan(best) && !(v <= best))) {
            best = v;
            best_at = row + at2;
          }
        }
      }
    }
    indices[i] = best_at;
  }
}

// Calls f(Tag<U>{}) with U the unsigned integer of `type`'s size (im2col only moves bits).
template <class F>
void visit_bits(ElementType type, F&& f) {
  switch (type) {
    case ElementType::Bool:
    case ElementType::U8:
    case ElementType::I8: return f(detail::Tag<std::uint8_t>{});
    case ElementType::I16:
    case ElementType::F16:
    case ElementType::BF16: return f(detail::Tag<std::uint16_t>{});
    case ElementType::I32:
    case ElementType::F32: return f(detail::Tag<std::uint32_t>{});
    case ElementType::I64:
    case ElementType::F64: return f(detail::Tag<std::uint64_t>{});
  }
  throw CudaError("im2col: unknown element type");
}

}  // namespace

void im2col(void* columns, const void* x, ElementType type, const Windows3& w, int device) {
  const std::int64_t numel = w.planes * product(w.kernel) * product(w.out);
  if (numel == 0) return;
  detail::use_device(device);
  visit_bits(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    with_index_type(numel, [&](auto index) {
      using I = decltype(index);
      im2col_kernel<T, I><<<detail::blocks_for(numel), detail::kThreads, 0, detail::stream()>>>(
          static_cast<T*>(columns), static_cast<const T*>(x), w, static_cast<I>(numel));
    });
  });
  detail::after_launch("im2col");
}

void col2im(void* x, const void* columns, ElementType type, const Windows3& w, int device) {
  const std::int64_t numel = w.planes * product(w.in);
  if (numel == 0) return;
  detail::use_device(device);
  detail::visit(type, "col2im", [&](auto tag) {
    using T = typename decltype(tag)::type;
    with_index_type(numel, [&](auto index) {
      using I = decltype(index);
      col2im_kernel<T, I><<<detail::blocks_for(numel), detail::kThreads, 0, detail::stream()>>>(
          static_cast<T*>(x), static_cast<const T*>(columns), w, static_cast<I>(numel));
    });
  });
  detail::after_launch("col2im");
}

void max_pool_indices(std::int64_t* indices, const void* x, ElementType type, const Windows3& w, int device) {
  const std::int64_t numel = w.planes * product(w.out);
  if (numel == 0) return;
  detail::use_device(device);
  detail::visit(type, "max_pool_indices", [&](auto tag) {
    using T = typename decltype(tag)::type;
    with_index_type(numel, [&](auto index) {
      using I = decltype(index);
      max_pool_indices_kernel<T, I><<<detail::blocks_for(numel), detail::kThreads, 0, detail::stream()>>>(
          indices, static_cast<const T*>(x), w, static_cast<I>(numel));
    });
  });
  detail::after_launch("max_pool_indices");
}

}  // namespace infini::cuda
