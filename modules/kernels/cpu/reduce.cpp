// CPU reductions: over any dims (ReduceKernel) and along one dim with the index of the
// max/min (ArgReduceKernel). The input is split into kept ("outer") and reduced ("inner")
// dims. Each output folds its inner elements in chunks of kChunk consecutive inner indices;
// chunks are spread over threads and their partial results are combined in order. The
// chunks depend only on the shape, so results do not depend on the thread count. Within a
// chunk, floating-point sums go to kLanes accumulators by inner index (element i to lane
// i % kLanes), which vectorises and keeps results independent of the input's strides.
module;
#include <cmath>
#include <cstdint>
#include <omp.h>

#include "vector_rows.h"
module infini.kernels;
import infini.std;

namespace infini::kernels {
namespace {

constexpr int kLanes = 8;
constexpr std::int64_t kChunk = 32768;  // inner elements per task; a multiple of kLanes
static_assert(kChunk % kLanes == 0);
constexpr std::int64_t kExpBlock = 256;  // logsumexp: exponentials computed per block
constexpr std::int64_t kOutputBlock = 256;  // column reductions: most outputs computed together

// Geometry of one reduction: inner dims (coalesced) and, per output, the input offset.
struct Split {
  Shape inner_shape;
  Strides inner_strides;
  Shape outer_shape;
  Strides outer_in_strides, outer_out_strides;
  std::int64_t inner_numel = 1, outer_numel = 1;
};

// out has in's rank; the dims where out has size 1 and in does not are reduced.
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
  for (std::int64_t n : inner_shape) s.inner_numel *= n;
  for (std::int64_t n : outer_shape) s.outer_numel *= n;
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

// Calls visit(p, n, stride, i) for the pieces of inner elements [begin, end) of the output
// whose first inner element is at `base`: inner element i + j is p[j * stride], j < n.
template <class T, class Visit>
void for_each_piece(const T* base, const Split& s, std::int64_t begin, std::int64_t end, Visit&& visit) {
  const bool any = !s.inner_shape.empty();
  const std::int64_t row = any ? s.inner_shape.back() : 1;
  const std::int64_t stride = any ? s.inner_strides.back() : 0;
  for (std::int64_t i = begin; i < end;) {
    const std::int64_t j0 = i % row;
    const std::int64_t n = std::min(row - j0, end - i);
    visit(base + offset_of(i - j0, s.inner_shape, s.inner_strides) + j0 * stride, n, stride, i);
    i += n;
  }
}

using Lanes = std::array<double, kLanes>;

// lanes[(i + j) % kLanes] += f(p[j * stride]) for j < n: each lane sums its elements in order.
template <class T, class F>
void add_to_lanes(Lanes& lanes, const T* p, std::int64_t n, std::int64_t stride, std::int64_t i, F f) {
  std::int64_t j = 0;
  for (; j < n && (i + j) % kLanes != 0; ++j) lanes[(i + j) % kLanes] += f(p[j * stride]);
  if (stride == 1) {
    for (; j + kLanes <= n; j += kLanes)
      for (int l = 0; l < kLanes; ++l) lanes[l] += f(p[j + l]);
  } else {
    for (; j + kLanes <= n; j += kLanes)
      for (int l = 0; l < kLanes; ++l) lanes[l] += f(p[(j + l) * stride]);
  }
  for (int l = 0; j < n; ++j, ++l) lanes[l] += f(p[j * stride]);
}

double total(const Lanes& l) { return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7])); }

template <class T>
double to_double(T v) {
  return static_cast<double>(static_cast<compute_t<T>>(v));
}

// Each fold has chunk(base, split, begin, end) -> Acc over inner elements [begin, end),
// combine(earlier, later) -> Acc and result(Acc) -> the output value.

// Integer sums and products are accumulated in uint64 so that they wrap around on overflow
// (as two's complement int64, like PyTorch) instead of being undefined.

// Sum: float64 lanes for floating types, 64-bit integers for bool and integers.
template <class T>
struct SumFold {
  static constexpr bool kFloat = is_float_compute<T>;
  using Acc = std::conditional_t<kFloat, Lanes, std::uint64_t>;
  Acc chunk(const T* base, const Split& s, std::int64_t begin, std::int64_t end) const {
    Acc acc{};
    for_each_piece(base, s, begin, end, [&](const T* p, std::int64_t n, std::int64_t stride, std::int64_t i) {
      if constexpr (kFloat) add_to_lanes(acc, p, n, stride, i, [](T v) { return to_double(v); });
      else for (std::int64_t j = 0; j < n; ++j) acc += static_cast<std::uint64_t>(p[j * stride]);
    });
    return acc;
  }
  // chunk() of `width` (<= kOutputBlock) neighbouring outputs whose inputs are contiguous
  // across them: inner element i is a run of width values. The same additions in the same
  // order as chunk(), so results do not depend on which of the two computes them.
  void chunk_block(const T* base, const Split& s, std::int64_t begin, std::int64_t end, std::int64_t width,
                   Acc* out) const {
    if constexpr (kFloat) {
      std::array<std::array<double, kOutputBlock>, kLanes> acc{};  // [lane][output]
      for_each_piece(base, s, begin, end, [&](const T* p, std::int64_t n, std::int64_t stride, std::int64_t i) {
        for (std::int64_t j = 0; j < n; ++j) {
          double* a = acc[(i + j) % kLanes].data();
          const T* q = p + j * stride;
          for (std::int64_t b = 0; b < width; ++b) a[b] += to_double(q[b]);
        }
      });
      for (std::int64_t b = 0; b < width; ++b)
        for (int l = 0; l < kLanes; ++l) out[b][l] = acc[l][b];
    } else {
      std::array<Acc, kOutputBlock> acc{};
      for_each_piece(base, s, begin, end, [&](const T* p, std::int64_t n, std::int64_t stride, std::int64_t) {
        for (std::int64_t j = 0; j < n; ++j)
          for (std::int64_t b = 0; b < width; ++b) acc[b] += static_cast<std::uint64_t>(p[j * stride + b]);
      });
      std::copy_n(acc.begin(), width, out);
    }
  }
  Acc combine(Acc a, const Acc& b) const {
    if constexpr (kFloat) {
      for (int l = 0; l < kLanes; ++l) a[l] += b[l];
      return a;
    } else {
      return a + b;
    }
  }
  auto result(const Acc& a) const {
    if constexpr (kFloat) return total(a);
    else return a;
  }
};

// Product: float64 for floating types, 64-bit integers for bool and integers, in inner order.
template <class T>
struct ProdFold {
  using Acc = std::conditional_t<is_float_compute<T>, double, std::uint64_t>;
  Acc chunk(const T* base, const Split& s, std::int64_t begin, std::int64_t end) const {
    Acc acc = 1;
    for_each_piece(base, s, begin, end, [&](const T* p, std::int64_t n, std::int64_t stride, std::int64_t) {
      for (std::int64_t j = 0; j < n; ++j) acc *= static_cast<Acc>(static_cast<compute_t<T>>(p[j * stride]));
    });
    return acc;
  }
  Acc combine(Acc a, Acc b) const { return a * b; }
  Acc result(Acc a) const { return a; }
};

template <class C, bool kMax>
constexpr C extreme_identity() {
  if constexpr (std::is_floating_point_v<C>) return kMax ? -std::numeric_limits<C>::infinity() : std::numeric_limits<C>::infinity();
  else return kMax ? std::numeric_limits<C>::lowest() : std::numeric_limits<C>::max();
}

// b when b beats a or (with kNan) is NaN, else a. With kNan a NaN a stays, so NaN
// propagates; without, NaN elements are skipped (a plain max/min instruction).
template <bool kMax, bool kNan, class C>
C pick(C a, C b) {
  return (kMax ? b > a : b < a) || (kNan && b != b) ? b : a;
}

// The max (min) of inner elements [begin, end): NaN if any is NaN (kNan), or of the
// others. kLanes running values for contiguous pieces, so that the comparisons vectorise.
template <bool kMax, bool kNan, class T>
compute_t<T> chunk_extreme(const T* base, const Split& s, std::int64_t begin, std::int64_t end) {
  using C = compute_t<T>;
  std::array<C, kLanes> m;
  m.fill(extreme_identity<C, kMax>());
  for_each_piece(base, s, begin, end, [&](const T* p, std::int64_t n, std::int64_t stride, std::int64_t) {
    std::int64_t j = 0;
    if (stride == 1)
      for (; j + kLanes <= n; j += kLanes)
        for (int l = 0; l < kLanes; ++l) m[l] = pick<kMax, kNan>(m[l], static_cast<C>(p[j + l]));
    for (; j < n; ++j) m[0] = pick<kMax, kNan>(m[0], static_cast<C>(p[j * stride]));
  });
  C r = m[0];
  for (int l = 1; l < kLanes; ++l) r = pick<kMax, kNan>(r, m[l]);
  return r;
}

template <class T, bool kMax>
struct ExtremeFold {
  using Acc = compute_t<T>;
  Acc chunk(const T* base, const Split& s, std::int64_t begin, std::int64_t end) const {
    return chunk_extreme<kMax, true>(base, s, begin, end);
  }
  // chunk() of `width` neighbouring outputs whose inputs are contiguous across them.
  void chunk_block(const T* base, const Split& s, std::int64_t begin, std::int64_t end, std::int64_t width,
                   Acc* out) const {
    std::fill_n(out, width, extreme_identity<Acc, kMax>());
    for_each_piece(base, s, begin, end, [&](const T* p, std::int64_t n, std::int64_t stride, std::int64_t) {
      for (std::int64_t j = 0; j < n; ++j)
        for (std::int64_t b = 0; b < width; ++b) out[b] = pick<kMax, true>(out[b], static_cast<Acc>(p[j * stride + b]));
    });
  }
  Acc combine(Acc a, Acc b) const { return pick<kMax, true>(a, b); }
  Acc result(Acc a) const { return a; }
};

template <class T, bool kAny>
struct AnyAllFold {
  using Acc = bool;
  Acc chunk(const T* base, const Split& s, std::int64_t begin, std::int64_t end) const {
    bool acc = !kAny;
    for_each_piece(base, s, begin, end, [&](const T* p, std::int64_t n, std::int64_t stride, std::int64_t) {
      for (std::int64_t j = 0; j < n; ++j) {
        const bool v = convert<bool>(p[j * stride]);  // NaN counts as true
        acc = kAny ? acc || v : acc && v;
      }
    });
    return acc;
  }
  Acc combine(Acc a, Acc b) const { return kAny ? a || b : a && b; }
  Acc result(Acc a) const { return a; }
};

// log(sum(exp(x))) as (max, sum of exp(x - max)) per chunk, rescaled when combined. The
// exponentials are computed in the compute type (float for float32/16-bit types, by the
// vectorized scaled_exp_row) and summed in float64.
template <class T>
struct LogSumExpFold {
  using C = compute_t<T>;
  struct Acc {
    double max;
    double sum;  // of exp(x - max)
  };
  // The partial of a chunk whose max is not finite: NaN, +inf (sum +inf) or empty/-inf (sum 0).
  static Acc non_finite(double max) { return {max, max > 0 ? max : 0.0}; }
  Acc chunk(const T* base, const Split& s, std::int64_t begin, std::int64_t end) const {
    // The max of the non-NaN elements; NaN elements then make the sum NaN.
    const C max = chunk_extreme<true, false>(base, s, begin, end);
    if (!std::isfinite(max)) {
      const bool nan = is_nan(chunk_extreme<true, true>(base, s, begin, end));
      return non_finite(nan ? std::numeric_limits<double>::quiet_NaN() : max);
    }
    // exp(x - max) for a block of elements at a time, then summed. Float compute: the block
    // is gathered (and converted) unless it is a contiguous float32 run, and exponentiated
    // 16 lanes at a time by scaled_exp_row, so every layout gets the same values.
    Lanes lanes{};
    std::array<C, kExpBlock> e;
    for_each_piece(base, s, begin, end, [&](const T* p, std::int64_t n, std::int64_t stride, std::int64_t i) {
      for (std::int64_t j0 = 0; j0 < n; j0 += kExpBlock) {
        const std::int64_t m = std::min(kExpBlock, n - j0);
        const T* q = p + j0 * stride;
        if constexpr (std::is_same_v<C, float>) {
          const float* x = e.data();
          if constexpr (std::is_same_v<T, float>) {
            if (stride == 1) x = q;
          }
          if (x == e.data())
            for (std::int64_t j = 0; j < m; ++j) e[j] = static_cast<C>(q[j * stride]);
          cpu::scaled_exp_row(e.data(), x, max, 1.0f, m);
        } else {
          for (std::int64_t j = 0; j < m; ++j) e[j] = std::exp(static_cast<C>(q[j * stride]) - max);
        }
        add_to_lanes(lanes, e.data(), m, 1, i + j0, [](C v) { return static_cast<double>(v); });
      }
    });
    return {max, total(lanes)};
  }
  Acc combine(Acc a, Acc b) const {
    // A NaN max or sum (a NaN element) makes the result NaN.
    if (std::isnan(a.max + a.sum) || std::isnan(b.max + b.sum)) return non_finite(std::numeric_limits<double>::quiet_NaN());
    const double max = std::max(a.max, b.max);
    if (!std::isfinite(max)) return non_finite(max);
    return {max, a.sum * std::exp(a.max - max) + b.sum * std::exp(b.max - max)};
  }
  double result(Acc a) const { return std::isfinite(a.max) ? a.max + std::log(a.sum) : a.max; }
};

// The first max (min) and its inner index; NaN beats everything, and the first NaN wins.
template <class T, bool kMax>
struct ArgFold {
  using C = compute_t<T>;
  struct Acc {
    C value;
    std::int64_t index;
  };
  static bool beats(C b, C a) { return a == a && (b != b || (kMax ? b > a : b < a)); }
  Acc chunk(const T* base, const Split& s, std::int64_t begin, std::int64_t end) const {
    // Element `begin` is at least as good as the identity, so it is the answer unless beaten.
    Acc acc{extreme_identity<C, kMax>(), begin};
    for_each_piece(base, s, begin, end, [&](const T* p, std::int64_t n, std::int64_t stride, std::int64_t i) {
      for (std::int64_t j = 0; j < n; ++j) {
        const C v = static_cast<C>(p[j * stride]);
        if (beats(v, acc.value)) acc = {v, i + j};
      }
    });
    return acc;
  }
  Acc combine(Acc a, Acc b) const { return beats(b.value, a.value) ? b : a; }
};

// Runs `fold` for every output k of the split and hands its final Acc to store(k, acc).
// Tasks are (block of outputs, chunk of inner elements). A block is one output, or up to
// kOutputBlock neighbouring outputs when the fold has chunk_block() and their inputs are
// contiguous across them (a column reduction, e.g. over the batch dim: each inner element
// is then a contiguous run of inputs, read in order). chunk_block() computes exactly what
// chunk() does, so the block size may follow the thread count (enough tasks for all).
template <class T, class Fold, class Store>
void run(const Fold& fold, const T* x, const Split& s, Store&& store) {
  if (s.outer_numel == 0) return;
  using Acc = decltype(fold.chunk(x, s, 0, 0));
  constexpr bool kBlocks = requires(Acc* out) { fold.chunk_block(x, s, 0, 0, 0, out); };
  const bool columns = kBlocks && !s.outer_shape.empty() && s.outer_in_strides.back() == 1 && s.inner_numel > 1;
  const std::int64_t width = columns ? s.outer_shape.back() : 1;  // outputs along the contiguous dim
  const std::int64_t rows = s.outer_numel / width;
  const std::int64_t chunks = std::max<std::int64_t>(1, (s.inner_numel + kChunk - 1) / kChunk);
  std::int64_t block = columns ? kOutputBlock : 1;
  while (block > 16 && rows * ((width + block - 1) / block) * chunks < 2 * omp_get_max_threads()) block /= 2;
  const std::int64_t blocks_per_row = (width + block - 1) / block;
  const std::int64_t blocks = rows * blocks_per_row;
  const bool parallel = s.outer_numel * s.inner_numel >= kParallelGrain && blocks * chunks > 1;
  // Block b holds outputs [first(b), first(b) + size(b)).
  auto first = [&](std::int64_t b) { return b / blocks_per_row * width + b % blocks_per_row * block; };
  auto size = [&](std::int64_t b) { return std::min(block, width - b % blocks_per_row * block); };
  // The partials of block b's outputs over chunk c.
  auto compute = [&](std::int64_t b, std::int64_t c, std::array<Acc, kOutputBlock>& acc) {
    // An empty reduction reads nothing (and x may be null): no offset arithmetic then.
    const T* base = s.inner_numel == 0 ? x : x + offset_of(first(b), s.outer_shape, s.outer_in_strides);
    const std::int64_t begin = c * kChunk, end = std::min(s.inner_numel, begin + kChunk);
    if constexpr (kBlocks) {
      if (columns) return fold.chunk_block(base, s, begin, end, size(b), acc.data());
    }
    acc[0] = fold.chunk(base, s, begin, end);
  };
  if (chunks == 1) {
#pragma omp parallel for schedule(static) if (parallel)
    for (std::int64_t b = 0; b < blocks; ++b) {
      std::array<Acc, kOutputBlock> acc;
      compute(b, 0, acc);
      for (std::int64_t j = 0; j < size(b); ++j) store(first(b) + j, acc[j]);
    }
    return;
  }
  std::vector<Acc> partial(static_cast<std::size_t>(s.outer_numel * chunks));  // [output][chunk]
#pragma omp parallel for schedule(static) if (parallel)
  for (std::int64_t t = 0; t < blocks * chunks; ++t) {
    const std::int64_t b = t / chunks, c = t % chunks;
    std::array<Acc, kOutputBlock> acc;
    compute(b, c, acc);
    for (std::int64_t j = 0; j < size(b); ++j) partial[(first(b) + j) * chunks + c] = acc[j];
  }
  for (std::int64_t k = 0; k < s.outer_numel; ++k) {
    Acc acc = partial[k * chunks];
    for (std::int64_t c = 1; c < chunks; ++c) acc = fold.combine(acc, partial[k * chunks + c]);
    store(k, acc);
  }
}

template <class T, class Out, class Fold>
void reduce_into(const Tensor& out, const Tensor& in, const Fold& fold) {
  if (out.dtype() != data_type_of<Out>())
    throw DTypeError("reduce", concat("cannot reduce ", in.dtype(), " into ", out.dtype(), " (expected ",
                                      data_type_of<Out>(), ")"));
  const Split s = split_dims(out, in);
  Out* o = static_cast<Out*>(out.data_ptr());
  run(fold, static_cast<const T*>(in.data_ptr()), s, [&](std::int64_t k, const auto& acc) {
    o[offset_of(k, s.outer_shape, s.outer_out_strides)] = convert<Out>(fold.result(acc));
  });
}

void reduce_cpu(const Tensor& out, const Tensor& in, ReduceOp op) {
  dispatch(in.dtype(), [&]<class T>() {
    using Wide = std::conditional_t<is_float_compute<T>, T, std::int64_t>;  // Sum and Prod results
    switch (op) {
      case ReduceOp::Sum: return reduce_into<T, Wide>(out, in, SumFold<T>{});
      case ReduceOp::Prod: return reduce_into<T, Wide>(out, in, ProdFold<T>{});
      case ReduceOp::Max: return reduce_into<T, T>(out, in, ExtremeFold<T, true>{});
      case ReduceOp::Min: return reduce_into<T, T>(out, in, ExtremeFold<T, false>{});
      case ReduceOp::Any: return reduce_into<T, bool>(out, in, AnyAllFold<T, true>{});
      case ReduceOp::All: return reduce_into<T, bool>(out, in, AnyAllFold<T, false>{});
      case ReduceOp::LogSumExp:
        if constexpr (is_float_compute<T>) return reduce_into<T, T>(out, in, LogSumExpFold<T>{});
        break;
    }
    throw DTypeError("reduce", concat("op ", static_cast<int>(op), " is not defined for ", in.dtype()));
  });
}

// values and indices are contiguous (so they share the output strides).
void arg_reduce_cpu(const Tensor& values, const Tensor& indices, const Tensor& in, std::int64_t, ReduceOp op) {
  dispatch(in.dtype(), [&]<class T>() {
    const Split s = split_dims(values, in);
    T* v = values.data_ptr<T>();
    std::int64_t* index = indices.data_ptr<std::int64_t>();
    auto store = [&](std::int64_t k, const auto& acc) {
      const std::int64_t o = offset_of(k, s.outer_shape, s.outer_out_strides);
      v[o] = convert<T>(acc.value);
      index[o] = acc.index;
    };
    const T* x = static_cast<const T*>(in.data_ptr());
    if (op == ReduceOp::Max) run(ArgFold<T, true>{}, x, s, store);
    else run(ArgFold<T, false>{}, x, s, store);
  });
}

const bool registered = [] {
  KernelTable<ReduceKernel>::set(DeviceType::CPU, &reduce_cpu);
  KernelTable<ArgReduceKernel>::set(DeviceType::CPU, &arg_reduce_cpu);
  return true;
}();

}  // namespace
}  // namespace infini::kernels
