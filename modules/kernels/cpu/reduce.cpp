// CPU reductions. The input is split into kept ("outer") and reduced ("inner") dims; each
// output element folds its inner elements in a fixed order. Outputs are spread over
// threads; a reduction with few outputs splits its inner elements into fixed-size chunks
// whose partial results are combined in order, so results do not depend on thread count.
module;
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <omp.h>
#include <type_traits>
#include <vector>
module infini.kernels;

namespace infini::kernels {
namespace {

constexpr std::int64_t kChunk = 32768;

// The accumulator of op over storage type T: double for floating point sums and products
// (exact enough for gradients of float32), int64 for integer sums, T itself for max/min.
template <class T>
struct Fold {
  using C = compute_t<T>;
  using Acc = std::conditional_t<std::is_floating_point_v<C>, double, std::int64_t>;
  ReduceOp op;

  Acc identity() const {
    switch (op) {
      case ReduceOp::Sum: case ReduceOp::Any: return 0;
      case ReduceOp::Prod: case ReduceOp::All: return 1;
      case ReduceOp::Max:
        if constexpr (std::is_floating_point_v<Acc>) return -std::numeric_limits<Acc>::infinity();
        else return std::numeric_limits<Acc>::lowest();
      case ReduceOp::Min:
        if constexpr (std::is_floating_point_v<Acc>) return std::numeric_limits<Acc>::infinity();
        else return std::numeric_limits<Acc>::max();
    }
    return 0;
  }
  Acc step(Acc acc, Acc x) const {
    switch (op) {
      case ReduceOp::Sum: return acc + x;
      case ReduceOp::Prod: return acc * x;
      case ReduceOp::Max: return is_nan(acc) || is_nan(x) ? acc + x : std::max(acc, x);  // NaN propagates
      case ReduceOp::Min: return is_nan(acc) || is_nan(x) ? acc + x : std::min(acc, x);
      case ReduceOp::Any: return acc != 0 || x != 0;
      case ReduceOp::All: return acc != 0 && x != 0;
    }
    return acc;
  }
};

// Geometry of one reduction: inner dims (coalesced) and, per output, the input offset.
struct Split {
  Shape inner_shape;
  Strides inner_strides;
  Shape outer_shape;
  Strides outer_in_strides, outer_out_strides;
  std::int64_t inner_numel = 1, outer_numel = 1;
};

Split split_dims(const Tensor& out, const Tensor& in) {
  Split s;
  Shape inner_shape, outer_shape;
  Strides inner_strides, outer_in, outer_out;
  for (std::int64_t d = 0; d < in.dim(); ++d) {
    if (out.shape()[d] == 1 && in.shape()[d] != 1) {
      inner_shape.push_back(in.shape()[d]);
      inner_strides.push_back(in.strides()[d]);
    } else {
      outer_shape.push_back(in.shape()[d]);
      outer_in.push_back(in.strides()[d]);
      outer_out.push_back(out.strides()[d]);
    }
  }
  const StridedLayout<1> inner = coalesce<1>(inner_shape, {inner_strides});
  s.inner_shape = inner.shape;
  s.inner_strides = inner.strides[0];
  const StridedLayout<2> outer = coalesce<2>(outer_shape, {outer_in, outer_out});
  s.outer_shape = outer.shape;
  s.outer_in_strides = outer.strides[0];
  s.outer_out_strides = outer.strides[1];
  for (std::int64_t n : s.inner_shape) s.inner_numel *= n;
  for (std::int64_t n : s.outer_shape) s.outer_numel *= n;
  return s;
}

// Offset of linear index i in a (shape, strides) layout.
std::int64_t offset_of(std::int64_t i, const Shape& shape, const Strides& strides) {
  std::int64_t offset = 0;
  for (std::int64_t d = static_cast<std::int64_t>(shape.size()) - 1; d >= 0 && i > 0; --d) {
    offset += i % shape[d] * strides[d];
    i /= shape[d];
  }
  return offset;
}

// Folds inner elements [begin, end) starting at input pointer `base`.
template <class T>
typename Fold<T>::Acc fold_range(const Fold<T>& fold, const T* base, const Split& s, std::int64_t begin,
                                 std::int64_t end, typename Fold<T>::Acc acc) {
  using Acc = typename Fold<T>::Acc;
  const std::int64_t nd = static_cast<std::int64_t>(s.inner_shape.size());
  const std::int64_t row = nd ? s.inner_shape.back() : 1;
  const std::int64_t stride = nd ? s.inner_strides.back() : 0;
  for (std::int64_t i = begin; i < end;) {
    const std::int64_t j0 = i % row;
    const std::int64_t n = std::min(row - j0, end - i);
    const T* p = base + offset_of(i - j0, s.inner_shape, s.inner_strides) + j0 * stride;
    for (std::int64_t j = 0; j < n; ++j) acc = fold.step(acc, static_cast<Acc>(static_cast<compute_t<T>>(p[j * stride])));
    i += n;
  }
  return acc;
}

template <class T, class Out>
void reduce_typed(const Tensor& out, const Tensor& in, ReduceOp op) {
  using Acc = typename Fold<T>::Acc;
  const Fold<T> fold{op};
  const Split s = split_dims(out, in);
  const T* x = static_cast<const T*>(in.data_ptr());
  Out* o = static_cast<Out*>(out.data_ptr());
  auto store = [&](std::int64_t k, Acc acc) {
    o[offset_of(k, s.outer_shape, s.outer_out_strides)] = convert<Out>(acc);
  };
  const int threads = omp_get_max_threads();
  if (s.outer_numel >= threads || s.inner_numel <= kChunk) {
    auto run = [&](std::int64_t k) {
      store(k, fold_range(fold, x + offset_of(k, s.outer_shape, s.outer_in_strides), s, 0, s.inner_numel, fold.identity()));
    };
    if (s.outer_numel * s.inner_numel < kParallelGrain || s.outer_numel == 1) {
      for (std::int64_t k = 0; k < s.outer_numel; ++k) run(k);
    } else {
#pragma omp parallel for schedule(static)
      for (std::int64_t k = 0; k < s.outer_numel; ++k) run(k);
    }
    return;
  }
  // Few outputs, many inputs each: fixed chunks in parallel, partials combined in order.
  const std::int64_t chunks = (s.inner_numel + kChunk - 1) / kChunk;
  std::vector<Acc> partial(static_cast<std::size_t>(s.outer_numel * chunks));
#pragma omp parallel for schedule(static)
  for (std::int64_t t = 0; t < s.outer_numel * chunks; ++t) {
    const std::int64_t k = t / chunks, c = t % chunks;
    partial[t] = fold_range(fold, x + offset_of(k, s.outer_shape, s.outer_in_strides), s, c * kChunk,
                            std::min(s.inner_numel, (c + 1) * kChunk), fold.identity());
  }
  for (std::int64_t k = 0; k < s.outer_numel; ++k) {
    Acc acc = fold.identity();
    for (std::int64_t c = 0; c < chunks; ++c) acc = fold.step(acc, partial[k * chunks + c]);
    store(k, acc);
  }
}

void reduce_cpu(const Tensor& out, const Tensor& in, ReduceOp op) {
  dispatch(in.dtype(), [&]<class T>() {
    dispatch(out.dtype(), [&]<class Out>() {
      if constexpr (std::is_same_v<Out, T> || std::is_same_v<Out, bool> || std::is_same_v<Out, std::int64_t>)
        reduce_typed<T, Out>(out, in, op);
      else
        throw DTypeError("reduce", concat("cannot reduce ", in.dtype(), " into ", out.dtype()));
    });
  });
}

const bool registered = [] {
  KernelTable<ReduceKernel>::set(DeviceType::CPU, &reduce_cpu);
  return true;
}();

}  // namespace
}  // namespace infini::kernels
