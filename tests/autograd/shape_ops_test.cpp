// Op table entries for the shape family (cat, stack, split, chunk, repeat, tile,
// repeat_interleave, tril, triu, pad, flip, roll, movedim) with naive index references,
// plus errors, dtypes, aliasing and large (multi-threaded) inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "op_info.h"
#include "shape_reference.h"

namespace infini::test::shape_ops_test {
namespace {

// ---- references ----

bool legacy_empty(const Tensor& t) { return t.dim() == 1 && t.numel() == 0; }

Tensor cat_ref(const TensorList& in, std::int64_t dim) {
  std::vector<Values> parts;
  for (const Tensor& t : in)
    if (!legacy_empty(t)) parts.emplace_back(t);
  if (parts.empty()) return build({0}, [](const Index&) { return 0.0; });
  const std::int64_t d = dim < 0 ? dim + static_cast<std::int64_t>(parts[0].shape().size()) : dim;
  Shape shape = parts[0].shape();
  shape[d] = 0;
  for (const Values& p : parts) shape[d] += p.shape()[d];
  return build(shape, [&](const Index& j) {
    Index i = j;
    for (const Values& p : parts) {
      if (i[d] < p.shape()[d]) return p(i);
      i[d] -= p.shape()[d];
    }
    return std::nan("");
  });
}

Tensor stack_ref(const TensorList& in, std::int64_t dim) {
  const std::int64_t d = dim < 0 ? dim + in[0].dim() + 1 : dim;
  std::vector<Values> parts(in.begin(), in.end());
  Shape shape = in[0].shape();
  shape.insert(shape.begin() + d, static_cast<std::int64_t>(in.size()));
  return build(shape, [&](const Index& j) {
    Index i = j;
    i.erase(i.begin() + d);
    return parts[j[d]](i);
  });
}

// Entries [start, start + length) of x along dim d.
Tensor narrow_ref(const Tensor& x, std::int64_t d, std::int64_t start, std::int64_t length) {
  const Values v(x);
  Shape shape = x.shape();
  shape[d] = length;
  return build(shape, [&](const Index& j) {
    Index i = j;
    i[d] += start;
    return v(i);
  });
}

// Consecutive pieces of the given sizes along d.
TensorList pieces_ref(const Tensor& x, std::int64_t d, const std::vector<std::int64_t>& sizes) {
  TensorList out;
  std::int64_t start = 0;
  for (std::int64_t s : sizes) {
    out.push_back(narrow_ref(x, d, start, s));
    start += s;
  }
  return out;
}

// Sizes of split(n, split_size) and chunk(n, chunks), worked out directly.
std::vector<std::int64_t> split_sizes(std::int64_t n, std::int64_t size) {
  std::vector<std::int64_t> sizes;
  for (std::int64_t left = n; left > 0; left -= size) sizes.push_back(std::min(size, left));
  if (sizes.empty()) sizes.push_back(0);
  return sizes;
}
std::vector<std::int64_t> chunk_sizes(std::int64_t n, std::int64_t chunks) {
  if (n == 0) return std::vector<std::int64_t>(static_cast<std::size_t>(chunks), 0);
  return split_sizes(n, (n + chunks - 1) / chunks);
}

Tensor repeat_ref(const Tensor& x, const std::vector<std::int64_t>& repeats) {
  const Values v(x);
  const std::size_t lead = repeats.size() - x.shape().size();
  Shape shape;
  for (std::size_t k = 0; k < repeats.size(); ++k) shape.push_back(repeats[k] * (k < lead ? 1 : x.shape()[k - lead]));
  return build(shape, [&](const Index& j) {
    Index i;
    for (std::size_t k = lead; k < repeats.size(); ++k) i.push_back(j[k] % x.shape()[k - lead]);
    return v(i);
  });
}

// Entry i of x along d repeated counts[i] times.
Tensor interleave_ref(const Tensor& x, std::int64_t d, const std::vector<std::int64_t>& counts) {
  const Values v(x);
  std::vector<std::int64_t> source;
  for (std::size_t i = 0; i < counts.size(); ++i)
    for (std::int64_t r = 0; r < counts[i]; ++r) source.push_back(static_cast<std::int64_t>(i));
  Shape shape = x.shape();
  shape[d] = static_cast<std::int64_t>(source.size());
  return build(shape, [&](const Index& j) {
    Index i = j;
    i[d] = source[j[d]];
    return v(i);
  });
}

Tensor triangle_ref(const Tensor& x, std::int64_t diagonal, bool lower) {
  const Values v(x);
  return build(x.shape(), [&](const Index& j) {
    const std::int64_t offset = j[j.size() - 1] - j[j.size() - 2];
    return (lower ? offset <= diagonal : offset >= diagonal) ? v(j) : 0.0;
  });
}

Tensor pad_ref(const Tensor& x, const std::vector<std::int64_t>& pads, PadMode mode, double value = 0) {
  const Values v(x);
  Shape shape = x.shape();
  const std::size_t nd = shape.size();
  for (std::size_t k = 0; k < pads.size() / 2; ++k) shape[nd - 1 - k] += pads[2 * k] + pads[2 * k + 1];
  return build(shape, [&](const Index& j) {
    Index i = j;
    for (std::size_t k = 0; k < pads.size() / 2; ++k) {
      const std::size_t d = nd - 1 - k;
      const std::int64_t n = x.shape()[d];
      std::int64_t p = j[d] - pads[2 * k];
      if (mode == PadMode::Constant && (p < 0 || p >= n)) return value;
      if (mode == PadMode::Reflect) p = p < 0 ? -p : p >= n ? 2 * n - 2 - p : p;
      if (mode == PadMode::Replicate) p = p < 0 ? 0 : p >= n ? n - 1 : p;
      i[d] = p;
    }
    return v(i);
  });
}

Tensor flip_ref(const Tensor& x, const std::vector<std::int64_t>& dims) {
  const Values v(x);
  return build(x.shape(), [&](const Index& j) {
    Index i = j;
    for (std::int64_t d : dims) {
      const std::int64_t w = d < 0 ? d + x.dim() : d;
      i[w] = x.shape()[w] - 1 - j[w];
    }
    return v(i);
  });
}

Tensor roll_ref(const Tensor& x, const std::vector<std::int64_t>& shifts, const std::vector<std::int64_t>& dims) {
  const Values v(x);
  return build(x.shape(), [&](const Index& j) {
    Index i = j;
    for (std::size_t k = 0; k < dims.size(); ++k) {
      const std::int64_t d = dims[k] < 0 ? dims[k] + x.dim() : dims[k];
      const std::int64_t n = x.shape()[d];
      i[d] = ((i[d] - shifts[k]) % n + n) % n;
    }
    return v(i);
  });
}

// The flattened tensor rolled by `shift`, in x's shape.
Tensor roll_flat_ref(const Tensor& x, std::int64_t shift) {
  const Values v(x);
  const std::int64_t n = x.numel();
  return build(x.shape(), [&](const Index& j) {
    return v.flat(((flat_index(x.shape(), j) - shift) % n + n) % n);
  });
}

// y[j_0, ..., j_k] = x[i] with i[order[k]] = j[k].
Tensor permute_ref(const Tensor& x, const std::vector<std::int64_t>& order) {
  const Values v(x);
  Shape shape;
  for (std::int64_t o : order) shape.push_back(x.shape()[o]);
  return build(shape, [&](const Index& j) {
    Index i(order.size());
    for (std::size_t k = 0; k < order.size(); ++k) i[order[k]] = j[k];
    return v(i);
  });
}

// ---- samples ----

// A (rows, cols) operand: contiguous, transposed, sliced with step, expanded.
std::vector<OpSample> matrix_samples(std::int64_t rows, std::int64_t cols) {
  return {
      {"contiguous", {leaf({rows, cols}, 1)}},
      {"transposed", {leaf({cols, rows}, 2)}, [](const TensorList& l) { return TensorList{l[0].t()}; }},
      {"sliced with step", {leaf({rows, 2 * cols}, 3)},
       [](const TensorList& l) { return TensorList{l[0].slice(1, 0, std::nullopt, 2)}; }},
      {"expanded", {leaf({1, cols}, 4)},
       [rows, cols](const TensorList& l) { return TensorList{l[0].expand({rows, cols})}; }},
  };
}

// A (2, 3, 4)-like operand: contiguous, permuted, sliced with step, expanded.
std::vector<OpSample> cube_samples(std::int64_t a, std::int64_t b, std::int64_t c) {
  return {
      {"contiguous", {leaf({a, b, c}, 5)}},
      {"permuted", {leaf({c, b, a}, 6)}, [](const TensorList& l) { return TensorList{l[0].permute({2, 1, 0})}; }},
      {"sliced with step", {leaf({a, 2 * b, c}, 7)},
       [](const TensorList& l) { return TensorList{l[0].slice(1, 0, std::nullopt, 2)}; }},
      {"expanded", {leaf({1, b, c}, 8)}, [a, b, c](const TensorList& l) { return TensorList{l[0].expand({a, b, c})}; }},
  };
}

std::vector<OpSample> with(std::vector<OpSample> samples, std::vector<OpSample> more) {
  samples.insert(samples.end(), more.begin(), more.end());
  return samples;
}

void entry(const std::string& name, Fn fn, Fn reference, std::function<std::vector<OpSample>()> samples) {
  // Shape ops move values without arithmetic: forward results must match exactly.
  op_registry().push_back({.name = name, .fn = std::move(fn), .reference = std::move(reference),
                           .samples = std::move(samples), .gradgrad = true, .tolerance = 0});
}

TensorList concat_lists(TensorList a, const TensorList& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Tensor int64s(const std::vector<std::int64_t>& v) { return from_vector(v); }

// x's values as a 1-d float64 tensor (row-major).
Tensor flat_ref(const Tensor& x) { return from_vector(values(x)); }

bool same(const Tensor& a, const Tensor& b) { return a.shape() == b.shape() && values(a) == values(b); }

const bool registered = [] {
  entry("cat", [](const TensorList& in) { return TensorList{cat(in, 0)}; },
        [](const TensorList& in) { return TensorList{cat_ref(in, 0)}; },
        [] {
          return std::vector<OpSample>{
              {"three pieces", {leaf({2, 3}, 1), leaf({4, 3}, 2), leaf({1, 3}, 3)}},
              {"transposed, sliced, expanded", {leaf({3, 2}, 4), leaf({4, 6}, 5), leaf({1, 3}, 6)},
               [](const TensorList& l) {
                 return TensorList{l[0].t(), l[1].slice(1, 0, std::nullopt, 2), l[2].expand({2, 3})};
               }},
              {"zero-size piece", {leaf({0, 3}, 7), leaf({2, 3}, 8)}},
              {"1-d empty skipped", {leaf({0}, 9), leaf({2, 3}, 10)}},
              {"single", {leaf({2, 3}, 11)}},
          };
        });
  entry("cat", [](const TensorList& in) { return TensorList{cat(in, -1)}; },
        [](const TensorList& in) { return TensorList{cat_ref(in, -1)}; },
        [] {
          return std::vector<OpSample>{
              {"last dim", {leaf({2, 3, 1}, 1), leaf({2, 3, 4}, 2)}},
              {"permuted", {leaf({4, 3, 2}, 3), leaf({2, 3, 2}, 4)},
               [](const TensorList& l) { return TensorList{l[0].permute({2, 1, 0}), l[1]}; }},
              {"1-d", {leaf({3}, 5), leaf({2}, 6)}},
          };
        });
  entry("stack", [](const TensorList& in) { return TensorList{stack(in, 0), stack(in, -1)}; },
        [](const TensorList& in) { return TensorList{stack_ref(in, 0), stack_ref(in, -1)}; },
        [] {
          return std::vector<OpSample>{
              {"three (2,3)", {leaf({2, 3}, 1), leaf({2, 3}, 2), leaf({2, 3}, 3)}},
              {"transposed, sliced, expanded", {leaf({3, 2}, 4), leaf({2, 6}, 5), leaf({1, 3}, 6)},
               [](const TensorList& l) {
                 return TensorList{l[0].t(), l[1].slice(1, 0, std::nullopt, 2), l[2].expand({2, 3})};
               }},
              {"scalars", {leaf({}, 7), leaf({}, 8)}},
              {"zero-size", {leaf({0, 2}, 9), leaf({0, 2}, 10)}},
          };
        });
  entry("split",
        [](const TensorList& in) {
          return concat_lists(concat_lists(split(in[0], 3, 1), split(in[0], {1, 0, 3}, -1)), split(in[0], 2, 0));
        },
        [](const TensorList& in) {
          const Tensor& x = in[0];
          return concat_lists(concat_lists(pieces_ref(x, 1, split_sizes(4, 3)), pieces_ref(x, 1, {1, 0, 3})),
                              pieces_ref(x, 0, split_sizes(x.shape()[0], 2)));
        },
        [] { return with(matrix_samples(3, 4), {{"zero-size", {leaf({0, 4}, 9)}}}); });
  entry("chunk", [](const TensorList& in) { return concat_lists(chunk(in[0], 3, 0), chunk(in[0], 2, -1)); },
        [](const TensorList& in) {
          return concat_lists(pieces_ref(in[0], 0, chunk_sizes(in[0].shape()[0], 3)), pieces_ref(in[0], 1, {2, 2}));
        },
        [] { return with(matrix_samples(7, 4), {{"zero-size", {leaf({0, 4}, 9)}}}); });
  entry("repeat", [](const TensorList& in) { return TensorList{repeat(in[0], {2, 1, 3}), repeat(in[0], {1, 0})}; },
        [](const TensorList& in) { return TensorList{repeat_ref(in[0], {2, 1, 3}), repeat_ref(in[0], {1, 0})}; },
        [] {
          return with(matrix_samples(2, 3), {{"zero-size", {leaf({0, 3}, 9)}}, {"scalar", {leaf({}, 10)}}});
        });
  entry("tile", [](const TensorList& in) { return TensorList{tile(in[0], {2}), tile(in[0], {2, 1, 2}), tile(in[0], {})}; },
        [](const TensorList& in) {
          const std::vector<std::int64_t> ones(static_cast<std::size_t>(std::max<std::int64_t>(in[0].dim() - 1, 0)), 1);
          std::vector<std::int64_t> first = ones;
          first.push_back(2);
          return TensorList{repeat_ref(in[0], first), repeat_ref(in[0], {2, 1, 2}),
                            repeat_ref(in[0], std::vector<std::int64_t>(static_cast<std::size_t>(in[0].dim()), 1))};
        },
        [] { return with(matrix_samples(2, 3), {{"scalar", {leaf({}, 10)}}}); });
  entry("repeat_interleave",
        [](const TensorList& in) {
          const Tensor& x = in[0];
          return TensorList{repeat_interleave(x, 2, 1), repeat_interleave(x, 3), repeat_interleave(x, 0, 0),
                            repeat_interleave(x, 2, -2)};
        },
        [](const TensorList& in) {
          const Tensor& x = in[0];
          const std::int64_t rows = x.shape()[0], cols = x.shape()[1];
          return TensorList{interleave_ref(x, 1, std::vector<std::int64_t>(static_cast<std::size_t>(cols), 2)),
                            interleave_ref(flat_ref(x), 0, std::vector<std::int64_t>(static_cast<std::size_t>(x.numel()), 3)),
                            interleave_ref(x, 0, std::vector<std::int64_t>(static_cast<std::size_t>(rows), 0)),
                            interleave_ref(x, 0, std::vector<std::int64_t>(static_cast<std::size_t>(rows), 2))};
        },
        [] { return with(matrix_samples(3, 4), {{"zero-size", {leaf({0, 4}, 9)}}}); });
  entry("repeat_interleave",
        [](const TensorList& in) { return TensorList{repeat_interleave(in[0], 3), repeat_interleave(in[0], 2, 0)}; },
        [](const TensorList& in) {
          const Tensor x = flat_ref(in[0]);
          return TensorList{interleave_ref(x, 0, {3}), interleave_ref(x, 0, {2})};
        },
        [] { return std::vector<OpSample>{{"scalar", {leaf({}, 1)}}}; });
  entry("repeat_interleave",  // counts as a tensor
        [](const TensorList& in) {
          const Tensor& x = in[0];
          return TensorList{repeat_interleave(x, int64s({1, 0, 2}), 0), repeat_interleave(x, int64s({2}), 1),
                            repeat_interleave(x, int64s({0, 3, 1, 0}), 1),
                            repeat_interleave(x, from_vector<std::int32_t>({2, 1, 1}), -x.dim())};
        },
        [](const TensorList& in) {
          const Tensor& x = in[0];
          return TensorList{interleave_ref(x, 0, {1, 0, 2}),
                            interleave_ref(x, 1, std::vector<std::int64_t>(static_cast<std::size_t>(x.shape()[1]), 2)),
                            interleave_ref(x, 1, {0, 3, 1, 0}), interleave_ref(x, 0, {2, 1, 1})};
        },
        [] { return with(matrix_samples(3, 4), {{"zero-size", {leaf({3, 4, 0}, 9)}}}); });
  for (bool lower : {true, false}) {
    entry(lower ? "tril" : "triu",
          [lower](const TensorList& in) {
            Tensor (*op)(const Tensor&, std::int64_t) = lower ? &tril : &triu;
            return TensorList{op(in[0], 0), op(in[0], 1), op(in[0], -2), op(in[0], 5)};
          },
          [lower](const TensorList& in) {
            return TensorList{triangle_ref(in[0], 0, lower), triangle_ref(in[0], 1, lower),
                              triangle_ref(in[0], -2, lower), triangle_ref(in[0], 5, lower)};
          },
          [] {
            return with(matrix_samples(3, 4), {{"tall", {leaf({4, 2}, 9)}},
                                               {"batched, permuted", {leaf({4, 3, 2}, 10)},
                                                [](const TensorList& l) { return TensorList{l[0].permute({2, 1, 0})}; }},
                                               {"zero-size", {leaf({0, 3}, 11)}}});
          });
  }
  entry("pad",
        [](const TensorList& in) {
          return TensorList{pad(in[0], {1, 2}), pad(in[0], {1, 0, 2, 1}, PadMode::Constant, 1.5),
                            pad(in[0], {-1, 2, 0, -1})};
        },
        [](const TensorList& in) {
          return TensorList{pad_ref(in[0], {1, 2}, PadMode::Constant), pad_ref(in[0], {1, 0, 2, 1}, PadMode::Constant, 1.5),
                            pad_ref(in[0], {-1, 2, 0, -1}, PadMode::Constant)};
        },
        [] {
          return with(matrix_samples(3, 4), {{"3-d", {leaf({2, 3, 4}, 9)}}, {"zero-size", {leaf({2, 0}, 10)}}});
        });
  entry("pad",
        [](const TensorList& in) {
          return TensorList{pad(in[0], {1, 2}, PadMode::Reflect), pad(in[0], {2, 0, 1, 1}, PadMode::Reflect),
                            pad(in[0], {3, 3}, PadMode::Reflect), pad(in[0], {}, PadMode::Reflect)};
        },
        [](const TensorList& in) {
          return TensorList{pad_ref(in[0], {1, 2}, PadMode::Reflect), pad_ref(in[0], {2, 0, 1, 1}, PadMode::Reflect),
                            pad_ref(in[0], {3, 3}, PadMode::Reflect), pad_ref(in[0], {}, PadMode::Reflect)};
        },
        [] {
          return with(matrix_samples(3, 4), {{"3-d, sliced", {leaf({2, 6, 4}, 9)},
                                              [](const TensorList& l) { return TensorList{l[0].slice(1, 0, std::nullopt, 2)}; }},
                                             {"zero-size batch", {leaf({0, 3, 4}, 10)}}});
        });
  entry("pad",
        [](const TensorList& in) {
          return TensorList{pad(in[0], {1, 1, 2, 1, 1, 0}, PadMode::Reflect),
                            pad(in[0], {2, 3, 0, 0, 1, 1}, PadMode::Replicate), pad(in[0], {0, 1}, PadMode::Replicate)};
        },
        [](const TensorList& in) {
          return TensorList{pad_ref(in[0], {1, 1, 2, 1, 1, 0}, PadMode::Reflect),
                            pad_ref(in[0], {2, 3, 0, 0, 1, 1}, PadMode::Replicate),
                            pad_ref(in[0], {0, 1}, PadMode::Replicate)};
        },
        [] { return cube_samples(2, 3, 4); });
  entry("flip", [](const TensorList& in) { return TensorList{flip(in[0], {0}), flip(in[0], {-1, 0}), flip(in[0], {})}; },
        [](const TensorList& in) {
          return TensorList{flip_ref(in[0], {0}), flip_ref(in[0], {-1, 0}), flip_ref(in[0], {})};
        },
        [] {
          return with(matrix_samples(3, 4), {{"zero-size", {leaf({0, 3}, 9)}},
                                             {"3-d, permuted", {leaf({4, 3, 2}, 10)},
                                              [](const TensorList& l) { return TensorList{l[0].permute({2, 1, 0})}; }}});
        });
  entry("roll",
        [](const TensorList& in) {
          const Tensor& x = in[0];
          const std::vector<std::int64_t> one{1};
          return TensorList{roll(x, one, {0}), roll(x, {-5, 2}, {1, 0}), roll(x, 3), roll(x, {1, 1}, {0, 0}),
                            roll(x, -7)};
        },
        [](const TensorList& in) {
          const Tensor& x = in[0];
          if (x.numel() == 0) return TensorList{x, x, x, x, x};
          return TensorList{roll_ref(x, {1}, {0}), roll_ref(x, {-5, 2}, {1, 0}), roll_flat_ref(x, 3),
                            roll_ref(x, {2}, {0}), roll_flat_ref(x, -7)};
        },
        [] { return with(matrix_samples(3, 4), {{"zero-size", {leaf({0, 4}, 9)}}}); });
  entry("movedim",
        [](const TensorList& in) {
          const Tensor& x = in[0];
          return TensorList{movedim(x, 0, -1), movedim(x, {0, 2}, {2, 0}), movedim(x, std::vector<std::int64_t>{1}, {0}),
                            movedim(x, {2, 0}, {0, 1}), movedim(x, std::vector<std::int64_t>{}, {})};
        },
        [](const TensorList& in) {
          const Tensor& x = in[0];
          return TensorList{permute_ref(x, {1, 2, 0}), permute_ref(x, {2, 1, 0}), permute_ref(x, {1, 0, 2}),
                            permute_ref(x, {2, 0, 1}), permute_ref(x, {0, 1, 2})};
        },
        [] { return with(cube_samples(2, 3, 4), {{"zero-size", {leaf({2, 0, 3}, 9)}}}); });
  return true;
}();

// ---- errors ----

template <class E>
void expect_error(const std::function<void()>& call, const std::string& op, const std::string& part) {
  try {
    call();
    ADD_FAILURE() << "expected an error from " << op;
  } catch (const E& e) {
    EXPECT_EQ(e.op(), op) << e.what();
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong error type from " << op << ": " << e.what();
  }
}

TEST(ShapeOps, CatAndStackErrors) {
  const Tensor a = zeros({2, 3});
  expect_error<ShapeError>([] { cat({}); }, "cat", "non-empty");
  expect_error<ShapeError>([&] { cat({a, zeros({2, 4})}, 0); }, "cat", "[2, 4]");
  expect_error<ShapeError>([&] { cat({a, zeros({2, 3, 1})}); }, "cat", "number of dims");
  expect_error<DTypeError>([&] { cat({a, zeros({2, 3}, {.dtype = kInt64})}); }, "cat", "int64 at position 1");
  expect_error<IndexError>([&] { cat({a, a}, 2); }, "cat", "2");
  expect_error<IndexError>([&] { cat({a, a}, -3); }, "cat", "-3");
  expect_error<ShapeError>([] { cat({scalar_tensor(1.0), scalar_tensor(2.0)}); }, "cat", "0-d");
  expect_error<Error>([&] { cat({a, Tensor()}); }, "cat", "position 1 is undefined");
  expect_error<ShapeError>([] { stack({}); }, "stack", "non-empty");
  expect_error<ShapeError>([&] { stack({a, zeros({3, 2})}); }, "stack", "[3, 2] at position 1");
  expect_error<IndexError>([&] { stack({a, a}, 3); }, "stack", "3");
  expect_error<DTypeError>([&] { stack({a, zeros({2, 3}, {.dtype = kFloat64})}); }, "stack", "float64");
  if (cuda_device_count() > 0) {
    const Tensor g = zeros({2, 3}, {.dtype = kFloat32, .device = Device::cuda(0)});
    expect_error<DeviceError>([&] { cat({a, g}); }, "cat", "cuda:0");
    expect_error<DeviceError>([&] { stack({a, g}); }, "stack", "cuda:0");
  }
}

TEST(ShapeOps, RepeatAndSplitErrors) {
  const Tensor a = zeros({2, 3});
  expect_error<ShapeError>([&] { repeat(a, {2}); }, "repeat", "at least one per dim");
  expect_error<ShapeError>([&] { repeat(a, {1, -1}); }, "repeat", "non-negative");
  expect_error<ShapeError>([&] { tile(a, {-2}); }, "tile", "non-negative");
  expect_error<ShapeError>([&] { repeat_interleave(a, -1, 0); }, "repeat_interleave", "non-negative");
  expect_error<IndexError>([&] { repeat_interleave(a, 2, 2); }, "repeat_interleave", "2");
  expect_error<ShapeError>([&] { repeat_interleave(a, int64s({1, -1}), 0); }, "repeat_interleave", "-1 at position 1");
  expect_error<ShapeError>([&] { repeat_interleave(a, int64s({1, 2, 3}), 0); }, "repeat_interleave", "3 entries");
  expect_error<DTypeError>([&] { repeat_interleave(a, from_vector<double>({1, 2}), 0); }, "repeat_interleave", "float64");
  expect_error<ShapeError>([&] { repeat_interleave(a, zeros({2, 2}, {.dtype = kInt64}), 0); }, "repeat_interleave",
                           "[2, 2]");
  expect_error<ShapeError>([&] { split(a, -1, 1); }, "split", "-1");
  expect_error<ShapeError>([&] { split(a, {1, 1}, 1); }, "split", "sum to 2");
  expect_error<ShapeError>([&] { chunk(a, 0); }, "chunk", "positive");
  expect_error<ShapeError>([&] { tril(zeros({3})); }, "tril", "[3]");
  expect_error<ShapeError>([&] { triu(scalar_tensor(1.0)); }, "triu", ">= 2 dims");
}

TEST(ShapeOps, PadErrors) {
  const Tensor a = zeros({2, 3});
  expect_error<ShapeError>([&] { pad(a, {1}); }, "pad", "even");
  expect_error<ShapeError>([&] { pad(a, {1, 1, 1, 1, 1, 1}); }, "pad", "cover 3 dims");
  expect_error<ShapeError>([&] { pad(a, {3, 0}, PadMode::Reflect); }, "pad", "smaller than its size 3");
  expect_error<ShapeError>([&] { pad(a, {0, 0, 0, 2}, PadMode::Reflect); }, "pad", "dimension 0");
  expect_error<ShapeError>([&] { pad(a, {-1, 0}, PadMode::Reflect); }, "pad", "non-negative");
  expect_error<ShapeError>([&] { pad(a, {0, -1}, PadMode::Replicate); }, "pad", "non-negative");
  expect_error<ShapeError>([&] { pad(zeros({2, 0}), {1, 1}, PadMode::Replicate); }, "pad", "size 0");
  expect_error<ShapeError>([&] { pad(zeros({2, 0}), {1, 1}, PadMode::Reflect); }, "pad", "smaller than its size 0");
  expect_error<ShapeError>([&] { pad(a, {-2, -2}); }, "pad", "negative (-1)");
  constexpr std::int64_t huge = std::numeric_limits<std::int64_t>::max();
  expect_error<ShapeError>([&] { pad(a, {huge, 1}); }, "pad", "overflows");
  expect_error<ShapeError>([&] { pad(a, {huge, 0}, PadMode::Replicate); }, "pad", "overflows");
  expect_error<ShapeError>([&] { repeat(a, {huge, 2}); }, "repeat", "overflows");
  expect_error<ShapeError>([&] { repeat(a, {huge / 2, huge / 3}); }, "repeat", "");
  expect_error<ShapeError>([&] { repeat_interleave(a, huge / 2, 1); }, "repeat_interleave", "");
}

TEST(ShapeOps, ReorderErrors) {
  const Tensor a = zeros({2, 3, 4});
  expect_error<IndexError>([&] { flip(a, {0, -3}); }, "flip", "more than once");
  expect_error<IndexError>([&] { flip(a, {3}); }, "flip", "3");
  expect_error<ShapeError>([&] { roll(a, {1, 2}, {0}); }, "roll", "differ in length");
  expect_error<ShapeError>([&] { roll(a, {1, 2}); }, "roll", "exactly one shift");
  expect_error<IndexError>([&] { roll(a, 1, 5); }, "roll", "5");
  expect_error<IndexError>([&] { movedim(a, {0, 0}, {1, 2}); }, "movedim", "repeated dim 0 in source");
  expect_error<IndexError>([&] { movedim(a, {0, 1}, {2, -1}); }, "movedim", "repeated dim -1 in destination");
  expect_error<ShapeError>([&] { movedim(a, {0, 1}, {2}); }, "movedim", "differ in length");
  expect_error<IndexError>([&] { movedim(a, 3, 0); }, "movedim", "3");
}

// ---- dtypes ----

TEST(ShapeOps, KeepsAnyDType) {
  const Tensor i = from_vector<std::int64_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(values(cat({i, i}, 1)), (std::vector<double>{1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6}));
  EXPECT_EQ(cat({i, i}).dtype(), kInt64);
  const Tensor b = from_vector<bool>({true, false, false});
  EXPECT_EQ(values(flip(b, {0})), (std::vector<double>{0, 0, 1}));
  EXPECT_EQ(flip(b, {0}).dtype(), kBool);
  EXPECT_EQ(values(stack({b, b}, 1)), (std::vector<double>{1, 1, 0, 0, 0, 0}));
  EXPECT_EQ(values(roll(i.to(kInt32), 1, 1)), (std::vector<double>{3, 1, 2, 6, 4, 5}));
  EXPECT_EQ(values(tril(i)), (std::vector<double>{1, 0, 0, 4, 5, 0}));
  EXPECT_EQ(values(triu(gt(i, 2), 1)), (std::vector<double>{0, 0, 1, 0, 0, 1}));
  EXPECT_EQ(values(pad(i, {1, 0}, PadMode::Constant, 7)), (std::vector<double>{7, 1, 2, 3, 7, 4, 5, 6}));
  const Tensor h = pad(i.to(kFloat16), {0, 1}, PadMode::Constant, 1.5);
  EXPECT_EQ(h.dtype(), kFloat16);
  EXPECT_EQ(values(h), (std::vector<double>{1, 2, 3, 1.5, 4, 5, 6, 1.5}));
  const Tensor r = pad(i.to(kBFloat16), {2, 1}, PadMode::Reflect);
  EXPECT_EQ(r.dtype(), kBFloat16);
  EXPECT_EQ(values(r), (std::vector<double>{3, 2, 1, 2, 3, 2, 6, 5, 4, 5, 6, 5}));
  EXPECT_EQ(values(repeat(from_vector<std::uint8_t>({1, 2}), {2})), (std::vector<double>{1, 2, 1, 2}));
  EXPECT_EQ(tile(from_vector<std::int16_t>({1, 2}), {2}).dtype(), kInt16);
  EXPECT_EQ(values(repeat_interleave(from_vector<std::int8_t>({1, 2}), int64s({2, 1}))), (std::vector<double>{1, 1, 2}));
  EXPECT_EQ(repeat_interleave(from_vector<std::int8_t>({1, 2}), 2).dtype(), kInt8);
}

TEST(ShapeOps, HalfPrecisionGradients) {
  // replicate [a, b, c] by (2, 1): [a, a, a, b, c, c]; each entry's gradient counts its copies
  for (DataType t : {kFloat16, kBFloat16, kFloat32}) {
    Tensor x = from_vector<float>({1, 2, 3}).to(t).requires_grad_();
    sum(pad(x, {2, 1}, PadMode::Replicate)).backward();
    EXPECT_EQ(x.grad().dtype(), t);
    EXPECT_EQ(values(x.grad()), (std::vector<double>{3, 1, 2}));
  }
}

// ---- gradients worked out by hand ----

TEST(ShapeOps, PaddingGradientsAccumulate) {
  Tensor x = from_vector<double>({1, 2, 3}).requires_grad_();
  // reflect by (2, 2): [3, 2, 1, 2, 3, 2, 1]: x0 appears twice, x1 three times, x2 twice
  const Tensor y = pad(x, {2, 2}, PadMode::Reflect);
  EXPECT_EQ(values(y), (std::vector<double>{3, 2, 1, 2, 3, 2, 1}));
  y.backward(from_vector<double>({1, 10, 100, 1000, 10000, 100000, 1000000}));
  EXPECT_EQ(values(x.grad()), (std::vector<double>{100 + 1000000, 10 + 1000 + 100000, 1 + 10000}));
  // a constant pad that crops passes the gradient of the kept entries only
  Tensor z = from_vector<double>({1, 2, 3}).requires_grad_();
  pad(z, {-1, 1}).backward(from_vector<double>({5, 6, 7}));
  EXPECT_EQ(values(z.grad()), (std::vector<double>{0, 5, 6}));
}

TEST(ShapeOps, RepeatGradientsSumCopies) {
  Tensor x = from_vector<double>({1, 2}).requires_grad_();
  repeat(x, {2, 3}).backward(ones({2, 6}, {.dtype = kFloat64}));
  EXPECT_EQ(values(x.grad()), (std::vector<double>{6, 6}));
  Tensor y = from_vector<double>({1, 2, 3}).requires_grad_();
  repeat_interleave(y, int64s({3, 0, 1})).backward(from_vector<double>({1, 2, 4, 8}));
  EXPECT_EQ(values(y.grad()), (std::vector<double>{7, 0, 8}));
  // no copies at all: zero gradient
  Tensor z = sample({2, 300}).requires_grad_();
  const Tensor none = repeat_interleave(z, int64s({0, 0}), 0);
  EXPECT_EQ(none.shape(), (Shape{0, 300}));
  none.backward(zeros({0, 300}, {.dtype = kFloat64}));
  EXPECT_EQ(values(z.grad()), std::vector<double>(600, 0.0));
}

// ---- aliasing and grad mode ----

TEST(ShapeOps, CopiesAndViews) {
  Tensor x = from_vector<double>({1, 2, 3, 4}, {2, 2});
  const TensorList copies = {cat({x}), stack({x}), repeat(x, {1, 1}), tile(x, {}), repeat_interleave(x, 1, 0),
                             tril(x, 5), pad(x, {}), pad(x, {}, PadMode::Reflect), flip(x, {}), roll(x, 0)};
  for (const Tensor& c : copies) EXPECT_FALSE(c.storage().is_same(x.storage()));
  EXPECT_TRUE(movedim(x, 0, 1).storage().is_same(x.storage()));
  EXPECT_TRUE(split(x, 1)[1].storage().is_same(x.storage()));
  EXPECT_TRUE(chunk(x, 2, 1)[0].storage().is_same(x.storage()));
  x.fill_(0);
  for (const Tensor& c : copies) EXPECT_NE(values(c)[0], 0.0);
}

TEST(ShapeOps, SplitGradientIsTheGradientsSideBySide) {
  // GPT-2's q, k, v: qkv (B, T, 3C) split along the channels, each piece viewed as heads
  // (B, nh, T, hs). One node takes all pieces; qkv's gradient is theirs side by side, zeros
  // for the piece that got none (k here).
  const std::int64_t B = 2, T = 3, nh = 2, hs = 2, C = nh * hs;
  const Tensor x = sample({B, T, 3 * C}).requires_grad_();
  const TensorList parts = split(mul(x, 1.0), C, 2);
  ASSERT_EQ(parts.size(), 3u);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    EXPECT_EQ(parts[i].grad_fn()->name(), "SplitBackward");
    EXPECT_EQ(parts[i].output_nr(), i);
  }
  auto heads = [&](const Tensor& part) { return part.view({B, T, nh, hs}).transpose(1, 2); };
  const Tensor gq = sample({B, nh, T, hs}, -1, 1, 3), gv = sample({B, nh, T, hs}, -1, 1, 4);
  const Tensor grad = autograd::grad({heads(parts[0]), heads(parts[2])}, {x}, {gq, gv})[0];
  const Values q(gq), v(gv);
  const Tensor expected = build({B, T, 3 * C}, [&](const Index& i) {
    const std::int64_t piece = i[2] / C, h = i[2] % C / hs, s = i[2] % hs;
    return piece == 0 ? q({i[0], h, i[1], s}) : piece == 2 ? v({i[0], h, i[1], s}) : 0.0;
  });
  EXPECT_TRUE(same(grad, expected));
  // the pieces are views inside the graph: writing into one is refused
  Tensor k = parts[1];
  expect_error<Error>([&] { k.copy_(zeros({B, T, C}, {.dtype = kFloat64})); }, "copy_", "view");
}

TEST(ShapeOps, SplitOfAnEmptyDimGivesDistinctPieces) {
  const Tensor x = sample({0, 4}).requires_grad_();
  const TensorList pieces = chunk(mul(x, 1.0), 3, 0);  // three (0, 4) pieces, like PyTorch
  ASSERT_EQ(pieces.size(), 3u);
  for (std::size_t i = 0; i < pieces.size(); ++i) EXPECT_EQ(pieces[i].output_nr(), i);
  const Tensor grad = autograd::grad({sum(pieces[0]), sum(pieces[2])}, {x})[0];
  EXPECT_EQ(grad.shape(), (Shape{0, 4}));
  const TensorList whole = split(mul(x, 1.0), 0, 0);  // split_size 0 of an empty dim: one piece
  ASSERT_EQ(whole.size(), 1u);
  EXPECT_EQ(whole[0].grad_fn()->name(), "SplitBackward");
}

TEST(ShapeOps, NoGradRecordsNothing) {
  const Tensor x = sample({2, 3}).requires_grad_();
  {
    NoGradGuard no_grad;
    for (const Tensor& y : {cat({x, x}), stack({x}), repeat(x, {2, 1}), repeat_interleave(x, 2), tril(x),
                            pad(x, {1, 1}, PadMode::Reflect), flip(x, {0}), roll(x, 1)})
      EXPECT_FALSE(y.requires_grad());
  }
  EXPECT_TRUE(cat({x, zeros({1, 3}, {.dtype = kFloat64})}).requires_grad());
  EXPECT_EQ(cat({x, x}).grad_fn()->name(), "CatBackward");
  EXPECT_EQ(pad(x, {1, 1}, PadMode::Replicate).grad_fn()->name(), "PadBackward");
}

// ---- large inputs (the kernels' multi-threaded paths) ----

TEST(ShapeOps, LargeInputsMatchReferences) {
  const Tensor x = sample({300, 200}, -2, 2, 7).requires_grad_();  // 60000 elements
  const Tensor xt = x.t();                                          // strided input
  EXPECT_TRUE(same(flip(xt, {0, 1}), flip_ref(xt, {0, 1})));
  EXPECT_TRUE(same(roll(xt, {17, -3}, {0, 1}), roll_ref(xt, {17, -3}, {0, 1})));
  EXPECT_TRUE(same(roll(x, 12345), roll_flat_ref(x, 12345)));
  const Tensor padded = pad(xt, {5, 7, 3, 2}, PadMode::Reflect);
  EXPECT_TRUE(same(padded, pad_ref(xt, {5, 7, 3, 2}, PadMode::Reflect)));
  // gradient of the reflect pad: scatter-add of g, against a naive sum over the index map
  const Tensor g = sample(padded.shape(), -1, 1, 8);
  const Tensor grad = autograd::grad({padded}, {x}, {g})[0];
  const Values gv(g);
  std::vector<double> expected(static_cast<std::size_t>(x.numel()), 0.0);
  for (std::int64_t k = 0; k < g.numel(); ++k) {
    const Index j = multi_index(g.shape(), k);
    auto reflect = [](std::int64_t p, std::int64_t n) { return p < 0 ? -p : p >= n ? 2 * n - 2 - p : p; };
    const std::int64_t r = reflect(j[0] - 3, 200), c = reflect(j[1] - 5, 300);  // (r, c) of xt = x[c, r]
    expected[static_cast<std::size_t>(c * 200 + r)] += gv.flat(k);
  }
  const std::vector<double> got = values(grad);
  for (std::size_t k = 0; k < got.size(); ++k) ASSERT_NEAR(got[k], expected[k], 1e-12) << k;
  // repeat_interleave with counts: gather forward, scatter-add backward
  std::vector<std::int64_t> counts(300);
  for (std::size_t i = 0; i < counts.size(); ++i) counts[i] = static_cast<std::int64_t>(i % 4);
  const Tensor inter = repeat_interleave(x, int64s(counts), 0);
  EXPECT_TRUE(same(inter, interleave_ref(x, 0, counts)));
  const Tensor ginter = autograd::grad({inter}, {x}, {ones_like(inter)})[0];
  const std::vector<double> gi = values(ginter);
  for (std::int64_t k = 0; k < x.numel(); ++k) ASSERT_EQ(gi[k], static_cast<double>(counts[k / 200])) << k;
}

}  // namespace
}  // namespace infini::test::shape_ops_test
