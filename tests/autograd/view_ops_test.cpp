// Op table entries for Tensor's own view and copy methods ("Tensor::view", ...), whose
// gradients come from infini.autograd's hooks (tensor_methods.cpp): naive index
// references, gradcheck for all, gradgradcheck for view, permute, slice, select, expand
// and unfold. Plain tests cover what the table cannot: dtype conversions' gradients,
// detach, and copies across devices.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "op_info.h"
#include "shape_reference.h"

namespace infini::test::view_ops_test {
namespace {

// ---- references ----

// The row-major values of x in `shape` (view, reshape, flatten, unflatten, squeeze, ...).
Tensor reshaped_ref(const Tensor& x, const Shape& shape) {
  const Values v(x);
  return build(shape, [&](const Index& j) { return v.flat(flat_index(shape, j)); });
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

std::vector<std::int64_t> swapped(std::int64_t ndim, std::int64_t a, std::int64_t b) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(ndim));
  for (std::int64_t d = 0; d < ndim; ++d) order[d] = d;
  std::swap(order[a], order[b]);
  return order;
}

// Entries start, start + step, ... (count of them) of x along d.
Tensor strided_ref(const Tensor& x, std::int64_t d, std::int64_t start, std::int64_t count, std::int64_t step = 1) {
  const Values v(x);
  Shape shape = x.shape();
  shape[d] = count;
  return build(shape, [&](const Index& j) {
    Index i = j;
    i[d] = start + j[d] * step;
    return v(i);
  });
}

Tensor select_ref(const Tensor& x, std::int64_t d, std::int64_t index) {
  const Values v(x);
  Shape shape = x.shape();
  shape.erase(shape.begin() + d);
  return build(shape, [&](const Index& j) {
    Index i = j;
    i.insert(i.begin() + d, index);
    return v(i);
  });
}

// x broadcast to shape (sizes 1 repeat; new dims in front).
Tensor expand_ref(const Tensor& x, const Shape& shape) {
  const Values v(x);
  const std::size_t lead = shape.size() - x.shape().size();
  return build(shape, [&](const Index& j) {
    Index i;
    for (std::size_t k = lead; k < shape.size(); ++k) i.push_back(x.shape()[k - lead] == 1 ? 0 : j[k]);
    return v(i);
  });
}

// Element offset + sum_k j_k strides_k of x's row-major values.
Tensor as_strided_ref(const Tensor& x, const Shape& shape, const Strides& strides, std::int64_t offset) {
  const Values v(x);
  return build(shape, [&](const Index& j) {
    std::int64_t at = offset;
    for (std::size_t k = 0; k < shape.size(); ++k) at += j[k] * strides[k];
    return v.flat(at);
  });
}

Tensor diagonal_ref(const Tensor& x, std::int64_t offset, std::int64_t d1, std::int64_t d2) {
  const Values v(x);
  Shape shape;
  for (std::int64_t d = 0; d < x.dim(); ++d)
    if (d != d1 && d != d2) shape.push_back(x.shape()[d]);
  const std::int64_t r0 = std::max<std::int64_t>(-offset, 0), c0 = std::max<std::int64_t>(offset, 0);
  shape.push_back(std::max<std::int64_t>(0, std::min(x.shape()[d1] - r0, x.shape()[d2] - c0)));
  return build(shape, [&](const Index& j) {
    Index i(static_cast<std::size_t>(x.dim()));
    std::size_t k = 0;
    for (std::int64_t d = 0; d < x.dim(); ++d)
      if (d != d1 && d != d2) i[d] = j[k++];
    i[d1] = r0 + j.back();
    i[d2] = c0 + j.back();
    return v(i);
  });
}

// All windows of `size` entries, `step` apart, along d, as a new last dim.
Tensor unfold_ref(const Tensor& x, std::int64_t d, std::int64_t size, std::int64_t step) {
  const Values v(x);
  Shape shape = x.shape();
  shape[d] = (shape[d] - size) / step + 1;
  shape.push_back(size);
  return build(shape, [&](const Index& j) {
    Index i(j.begin(), j.end() - 1);
    i[d] = j[d] * step + j.back();
    return v(i);
  });
}

TensorList pieces_ref(const Tensor& x, std::int64_t d, const std::vector<std::int64_t>& sizes) {
  TensorList out;
  std::int64_t start = 0;
  for (std::int64_t s : sizes) {
    out.push_back(strided_ref(x, d, start, s));
    start += s;
  }
  return out;
}

Tensor map_ref(const Tensor& x, const std::function<double(double)>& f) {
  const Values v(x);
  return build(x.shape(), [&](const Index& j) { return f(v(j)); });
}

// ---- samples ----

// A (rows, cols) operand: contiguous, transposed, sliced with step, expanded, zero-size.
std::vector<OpSample> matrix_samples(std::int64_t rows, std::int64_t cols, bool zero_size = true) {
  std::vector<OpSample> samples = {
      {"contiguous", {leaf({rows, cols}, 1)}},
      {"transposed", {leaf({cols, rows}, 2)}, [](const TensorList& l) { return TensorList{l[0].t()}; }},
      {"sliced with step", {leaf({rows, 2 * cols}, 3)},
       [](const TensorList& l) { return TensorList{l[0].slice(1, 0, std::nullopt, 2)}; }},
      {"expanded", {leaf({1, cols}, 4)},
       [rows, cols](const TensorList& l) { return TensorList{l[0].expand({rows, cols})}; }},
  };
  if (zero_size) samples.push_back({"zero-size", {leaf({0, cols}, 5)}});
  return samples;
}

// A (a, b, c) operand: contiguous, permuted, sliced with step, expanded.
std::vector<OpSample> cube_samples(std::int64_t a, std::int64_t b, std::int64_t c) {
  return {
      {"contiguous", {leaf({a, b, c}, 6)}},
      {"permuted", {leaf({c, b, a}, 7)}, [](const TensorList& l) { return TensorList{l[0].permute({2, 1, 0})}; }},
      {"sliced with step", {leaf({a, 2 * b, c}, 8)},
       [](const TensorList& l) { return TensorList{l[0].slice(1, 0, std::nullopt, 2)}; }},
      {"expanded", {leaf({1, b, c}, 9)}, [a, b, c](const TensorList& l) { return TensorList{l[0].expand({a, b, c})}; }},
  };
}

std::vector<OpSample> with(std::vector<OpSample> samples, std::vector<OpSample> more) {
  samples.insert(samples.end(), more.begin(), more.end());
  return samples;
}

void entry(const std::string& name, Fn fn, Fn reference, std::function<std::vector<OpSample>()> samples,
           bool gradgrad = false, bool differentiable = true) {
  op_registry().push_back({.name = name, .fn = std::move(fn), .reference = std::move(reference),
                           .samples = std::move(samples), .differentiable = differentiable, .gradgrad = gradgrad,
                           .tolerance = 0});
}

TensorList concat_lists(TensorList a, const TensorList& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

const bool registered = [] {
  // view: merging dims needs strides that allow it (contiguous, or evenly strided rows);
  // splitting a dim works on any layout.
  entry("Tensor::view",
        [](const TensorList& in) {
          const Tensor& x = in[0];
          return TensorList{x.view({-1}), x.view({x.shape()[0], 2, -1}), x.view({2, -1, x.shape()[1] / 2}).view({-1, 2})};
        },
        [](const TensorList& in) {
          const Tensor& x = in[0];
          const std::int64_t n = x.numel();
          return TensorList{reshaped_ref(x, {n}), reshaped_ref(x, {x.shape()[0], 2, x.shape()[1] / 2}),
                            reshaped_ref(x, {n / 2, 2})};
        },
        [] {
          return std::vector<OpSample>{
              {"contiguous", {leaf({4, 4}, 1)}},
              {"sliced with step", {leaf({4, 8}, 2)},
               [](const TensorList& l) { return TensorList{l[0].slice(1, 0, std::nullopt, 2)}; }},
          };
        },
        true);
  entry("Tensor::view",
        [](const TensorList& in) {
          const Tensor& x = in[0];
          return TensorList{x.view({x.shape()[0], 2, x.shape()[1] / 2}), x.view({-1, 1, 4})};
        },
        [](const TensorList& in) {
          const Tensor& x = in[0];
          return TensorList{reshaped_ref(x, {x.shape()[0], 2, x.shape()[1] / 2}), reshaped_ref(x, {x.shape()[0], 1, 4})};
        },
        [] {
          return std::vector<OpSample>{
              {"transposed", {leaf({4, 3}, 3)}, [](const TensorList& l) { return TensorList{l[0].t()}; }},
              {"zero-size", {leaf({0, 4}, 4)}},
          };
        },
        true);
  entry("Tensor::view", [](const TensorList& in) { return TensorList{in[0].view({1, 1}), in[0].view({1}).view({})}; },
        [](const TensorList& in) { return TensorList{reshaped_ref(in[0], {1, 1}), reshaped_ref(in[0], {})}; },
        [] { return std::vector<OpSample>{{"scalar", {leaf({}, 5)}}}; }, true);
  entry("Tensor::reshape",
        [](const TensorList& in) {
          const Tensor& x = in[0];
          return TensorList{x.reshape({-1}), x.dim() == 2 ? x.reshape({x.shape()[1], x.shape()[0]}) : x.reshape({1, 1})};
        },
        [](const TensorList& in) {
          const Tensor& x = in[0];
          return TensorList{reshaped_ref(x, {x.numel()}),
                            reshaped_ref(x, x.dim() == 2 ? Shape{x.shape()[1], x.shape()[0]} : Shape{1, 1})};
        },
        [] { return with(matrix_samples(3, 4), {{"scalar", {leaf({}, 6)}}}); });
  entry("Tensor::permute",
        [](const TensorList& in) { return TensorList{in[0].permute({2, 0, 1}), in[0].permute({-1, 1, 0})}; },
        [](const TensorList& in) { return TensorList{permute_ref(in[0], {2, 0, 1}), permute_ref(in[0], {2, 1, 0})}; },
        [] { return with(cube_samples(2, 3, 4), {{"zero-size", {leaf({2, 0, 3}, 10)}}}); }, true);
  entry("Tensor::transpose",
        [](const TensorList& in) {
          return TensorList{in[0].transpose(0, 2), in[0].transpose(-1, 1), in[0].transpose(1, 1)};
        },
        [](const TensorList& in) {
          return TensorList{permute_ref(in[0], swapped(3, 0, 2)), permute_ref(in[0], swapped(3, 2, 1)),
                            permute_ref(in[0], swapped(3, 1, 1))};
        },
        [] { return with(cube_samples(2, 3, 4), {{"zero-size", {leaf({2, 0, 3}, 10)}}}); });
  entry("Tensor::transpose", [](const TensorList& in) { return TensorList{in[0].transpose(0, -1)}; },
        [](const TensorList& in) { return TensorList{reshaped_ref(in[0], {})}; },
        [] { return std::vector<OpSample>{{"scalar", {leaf({}, 1)}}}; });
  entry("Tensor::t", [](const TensorList& in) { return TensorList{in[0].t()}; },
        [](const TensorList& in) {
          const Tensor& x = in[0];
          return TensorList{x.dim() == 2 ? permute_ref(x, {1, 0}) : reshaped_ref(x, x.shape())};
        },
        [] { return with(matrix_samples(3, 4), {{"1-d", {leaf({5}, 6)}}, {"scalar", {leaf({}, 7)}}}); });
  entry("Tensor::narrow",
        [](const TensorList& in) {
          const Tensor& x = in[0];
          return TensorList{x.narrow(1, 1, 2), x.narrow(0, -2, 2), x.narrow(1, x.shape()[1], 0)};
        },
        [](const TensorList& in) {
          const Tensor& x = in[0];
          return TensorList{strided_ref(x, 1, 1, 2), strided_ref(x, 0, x.shape()[0] - 2, 2),
                            strided_ref(x, 1, x.shape()[1], 0)};
        },
        [] { return with(matrix_samples(3, 4, false), {{"zero-size", {leaf({2, 4, 0}, 6)}}}); });
  entry("Tensor::slice",
        [](const TensorList& in) {
          const Tensor& x = in[0];
          return TensorList{x.slice(1, 1, std::nullopt, 2), x.slice(0, -2), x.slice(1, -100, 100, 3), x.slice(0, 5, 1),
                            x.slice(-1, 1, -1)};
        },
        [](const TensorList& in) {
          const Tensor& x = in[0];
          const std::int64_t rows = x.shape()[0], cols = x.shape()[1];
          return TensorList{strided_ref(x, 1, 1, cols / 2, 2), strided_ref(x, 0, std::max<std::int64_t>(rows - 2, 0),
                                                                           std::min<std::int64_t>(rows, 2)),
                            strided_ref(x, 1, 0, (cols + 2) / 3, 3), strided_ref(x, 0, 0, 0),
                            strided_ref(x, 1, 1, std::max<std::int64_t>(cols - 2, 0))};
        },
        [] { return matrix_samples(3, 4); }, true);
  entry("Tensor::select",
        [](const TensorList& in) { return TensorList{in[0].select(0, 1), in[0].select(-1, -1)}; },
        [](const TensorList& in) {
          const Tensor& x = in[0];
          return TensorList{select_ref(x, 0, 1), select_ref(x, x.dim() - 1, x.shape().back() - 1)};
        },
        [] { return with(matrix_samples(3, 4, false), {{"zero-size", {leaf({2, 0, 3}, 6)}}}); }, true);
  entry("Tensor::squeeze",
        [](const TensorList& in) {
          const Tensor& x = in[0];
          if (x.dim() == 0) return TensorList{x.squeeze(), x.squeeze(0), x.squeeze(-1)};
          return TensorList{x.squeeze(), x.squeeze(1), x.squeeze(0), x.squeeze(-1)};
        },
        [](const TensorList& in) {
          const Tensor& x = in[0];
          if (x.dim() == 0) return TensorList{reshaped_ref(x, {}), reshaped_ref(x, {}), reshaped_ref(x, {})};
          Shape all, at1 = x.shape(), at0 = x.shape(), at_last = x.shape();
          for (std::int64_t s : x.shape())
            if (s != 1) all.push_back(s);
          at1.erase(at1.begin() + 1);  // the samples have size 1 at dim 1
          if (at0[0] == 1) at0.erase(at0.begin());
          if (at_last.back() == 1) at_last.pop_back();
          return TensorList{reshaped_ref(x, all), reshaped_ref(x, at1), reshaped_ref(x, at0), reshaped_ref(x, at_last)};
        },
        [] {
          return std::vector<OpSample>{
              {"(3,1,4)", {leaf({3, 1, 4}, 1)}},
              {"(1,1,3) permuted", {leaf({3, 1, 1}, 2)},
               [](const TensorList& l) { return TensorList{l[0].permute({2, 1, 0})}; }},
              {"expanded", {leaf({1, 1, 4}, 3)}, [](const TensorList& l) { return TensorList{l[0].expand({3, 1, 4})}; }},
              {"zero-size", {leaf({0, 1, 4}, 4)}},
              {"scalar", {leaf({}, 5)}},
          };
        });
  entry("Tensor::unsqueeze",
        [](const TensorList& in) {
          const Tensor& x = in[0];
          if (x.dim() == 0) return TensorList{x.unsqueeze(0), x.unsqueeze(-1)};
          return TensorList{x.unsqueeze(0), x.unsqueeze(-1), x.unsqueeze(1)};
        },
        [](const TensorList& in) {
          const Tensor& x = in[0];
          const Shape s = x.shape();
          if (x.dim() == 0) return TensorList{reshaped_ref(x, {1}), reshaped_ref(x, {1})};
          return TensorList{reshaped_ref(x, {1, s[0], s[1]}), reshaped_ref(x, {s[0], s[1], 1}),
                            reshaped_ref(x, {s[0], 1, s[1]})};
        },
        [] { return with(matrix_samples(3, 4), {{"scalar", {leaf({}, 6)}}}); });
  entry("Tensor::flatten",
        [](const TensorList& in) {
          const Tensor& x = in[0];
          if (x.dim() == 0) return TensorList{x.flatten(), x.flatten(0, -1)};
          return TensorList{x.flatten(), x.flatten(1), x.flatten(0, 1), x.flatten(2, 2)};
        },
        [](const TensorList& in) {
          const Tensor& x = in[0];
          const Shape s = x.shape();
          if (x.dim() == 0) return TensorList{reshaped_ref(x, {1}), reshaped_ref(x, {1})};
          return TensorList{reshaped_ref(x, {x.numel()}), reshaped_ref(x, {s[0], s[1] * s[2]}),
                            reshaped_ref(x, {s[0] * s[1], s[2]}), reshaped_ref(x, s)};
        },
        [] { return with(cube_samples(2, 3, 4), {{"zero-size", {leaf({2, 0, 3}, 10)}}, {"scalar", {leaf({}, 11)}}}); });
  entry("Tensor::unflatten",
        [](const TensorList& in) {
          const Tensor& x = in[0];
          return TensorList{x.unflatten(1, {2, -1}), x.unflatten(-1, {x.shape()[1]}), x.unflatten(0, {1, -1, 1})};
        },
        [](const TensorList& in) {
          const Tensor& x = in[0];
          const Shape s = x.shape();
          return TensorList{reshaped_ref(x, {s[0], 2, s[1] / 2}), reshaped_ref(x, s), reshaped_ref(x, {1, s[0], 1, s[1]})};
        },
        [] { return matrix_samples(3, 4); });
  entry("Tensor::expand",
        [](const TensorList& in) {
          const Tensor& x = in[0];
          return TensorList{x.expand({2, x.shape()[0], 4}), x.expand({-1, 4}), x.expand(x.shape())};
        },
        [](const TensorList& in) {
          const Tensor& x = in[0];
          return TensorList{expand_ref(x, {2, x.shape()[0], 4}), expand_ref(x, {x.shape()[0], 4}),
                            expand_ref(x, x.shape())};
        },
        [] {
          return std::vector<OpSample>{
              {"(3,1)", {leaf({3, 1}, 1)}},
              {"transposed", {leaf({1, 3}, 2)}, [](const TensorList& l) { return TensorList{l[0].t()}; }},
              {"sliced with step", {leaf({6, 1}, 3)},
               [](const TensorList& l) { return TensorList{l[0].slice(0, 0, std::nullopt, 2)}; }},
              {"zero-size", {leaf({0, 1}, 4)}},
          };
        },
        true);
  entry("Tensor::expand", [](const TensorList& in) { return TensorList{in[0].expand({2, 3}), in[0].expand({})}; },
        [](const TensorList& in) { return TensorList{expand_ref(in[0], {2, 3}), expand_ref(in[0], {})}; },
        [] { return std::vector<OpSample>{{"scalar", {leaf({}, 5)}}}; }, true);
  entry("Tensor::broadcast_to", [](const TensorList& in) { return TensorList{in[0].broadcast_to({2, 3, 4})}; },
        [](const TensorList& in) { return TensorList{expand_ref(in[0], {2, 3, 4})}; },
        [] {
          return std::vector<OpSample>{{"(3,1)", {leaf({3, 1}, 1)}},
                                       {"(4)", {leaf({4}, 2)}},
                                       {"sliced", {leaf({1, 8}, 3)},
                                        [](const TensorList& l) { return TensorList{l[0].slice(1, 0, std::nullopt, 2)}; }},
                                       {"scalar", {leaf({}, 4)}}};
        });
  entry("Tensor::expand_as",
        [](const TensorList& in) { return TensorList{in[0].expand_as(in[1]), in[0].expand_as(in[0])}; },
        [](const TensorList& in) { return TensorList{expand_ref(in[0], in[1].shape()), expand_ref(in[0], in[0].shape())}; },
        [] {
          return std::vector<OpSample>{{"(3,1) as (2,3,4)", {leaf({3, 1}, 1), zeros({2, 3, 4}, {.dtype = kFloat64})}},
                                       {"transposed", {leaf({1, 3}, 2), zeros({3, 5}, {.dtype = kFloat64})},
                                        [](const TensorList& l) { return TensorList{l[0].t(), l[1]}; }}};
        });
  // as_strided addresses storage, so it is applied to a contiguous copy of the operand.
  entry("Tensor::as_strided",
        [](const TensorList& in) {
          const Tensor c = in[0].contiguous();
          return TensorList{c.as_strided({3, 3}, {1, 1}), c.as_strided({2, 2}, {2, 1}, 1), c.as_strided({2, 3}, {0, 2})};
        },
        [](const TensorList& in) {
          const Tensor& x = in[0];
          return TensorList{as_strided_ref(x, {3, 3}, {1, 1}, 0), as_strided_ref(x, {2, 2}, {2, 1}, 1),
                            as_strided_ref(x, {2, 3}, {0, 2}, 0)};
        },
        [] {
          return std::vector<OpSample>{
              {"1-d", {leaf({6}, 1)}},
              {"2-d", {leaf({2, 3}, 2)}},
              {"transposed", {leaf({3, 2}, 3)}, [](const TensorList& l) { return TensorList{l[0].t()}; }},
          };
        });
  entry("Tensor::diagonal",
        [](const TensorList& in) {
          const Tensor& x = in[0];
          return TensorList{x.diagonal(), x.diagonal(1, 1, 2), x.diagonal(-1, 2, 0), x.diagonal(5, 1, 2)};
        },
        [](const TensorList& in) {
          const Tensor& x = in[0];
          return TensorList{diagonal_ref(x, 0, 0, 1), diagonal_ref(x, 1, 1, 2), diagonal_ref(x, -1, 2, 0),
                            diagonal_ref(x, 5, 1, 2)};
        },
        [] { return with(cube_samples(2, 3, 4), {{"zero-size", {leaf({2, 0, 3}, 10)}}}); });
  entry("Tensor::split",
        [](const TensorList& in) { return concat_lists(in[0].split(3, 1), in[0].split({1, 0, 3}, -1)); },
        [](const TensorList& in) { return concat_lists(pieces_ref(in[0], 1, {3, 1}), pieces_ref(in[0], 1, {1, 0, 3})); },
        [] { return matrix_samples(3, 4); });
  entry("Tensor::chunk", [](const TensorList& in) { return concat_lists(in[0].chunk(3, 1), in[0].chunk(4, 0)); },
        [](const TensorList& in) {
          return concat_lists(pieces_ref(in[0], 1, {2, 2, 1}), pieces_ref(in[0], 0, {1, 1, 1}));
        },
        [] { return matrix_samples(3, 5, false); });
  entry("Tensor::unfold",
        [](const TensorList& in) {
          const Tensor& x = in[0];
          return TensorList{x.unfold(1, 2, 1), x.unfold(0, 2, 2), x.unfold(-1, 4, 3)};
        },
        [](const TensorList& in) {
          const Tensor& x = in[0];
          return TensorList{unfold_ref(x, 1, 2, 1), unfold_ref(x, 0, 2, 2), unfold_ref(x, 1, 4, 3)};
        },
        [] { return matrix_samples(3, 4, false); }, true);
  entry("Tensor::clone", [](const TensorList& in) { return TensorList{in[0].clone()}; },
        [](const TensorList& in) { return TensorList{reshaped_ref(in[0], in[0].shape())}; },
        [] { return with(matrix_samples(3, 4), {{"scalar", {leaf({}, 6)}}}); });
  entry("Tensor::contiguous", [](const TensorList& in) { return TensorList{in[0].contiguous()}; },
        [](const TensorList& in) { return TensorList{reshaped_ref(in[0], in[0].shape())}; },
        [] { return with(matrix_samples(3, 4), {{"scalar", {leaf({}, 6)}}}); });
  // Conversions to float32 or integers cannot pass a float64 finite-difference check; their
  // gradients are checked in DTypeConversionGradients below.
  entry("Tensor::to(dtype)",
        [](const TensorList& in) {
          return TensorList{in[0].to(kFloat32), in[0].to(kInt32), in[0].to(kFloat64), in[0].to(kBool)};
        },
        [](const TensorList& in) {
          return TensorList{map_ref(in[0], [](double v) { return static_cast<double>(static_cast<float>(v)); }),
                            map_ref(in[0], [](double v) { return std::trunc(v); }), map_ref(in[0], [](double v) { return v; }),
                            map_ref(in[0], [](double v) { return v != 0 ? 1.0 : 0.0; })};
        },
        [] { return matrix_samples(3, 4); }, false, false);
  // Round trip through the GPU where there is one.
  entry("Tensor::to(device)",
        [](const TensorList& in) {
          TensorList out = {in[0].to(Device::cpu())};
          if (cuda_device_count() > 0) out.push_back(in[0].to(Device::cuda(0)).to(Device::cpu()));
          return out;
        },
        [](const TensorList& in) {
          TensorList out = {reshaped_ref(in[0], in[0].shape())};
          if (cuda_device_count() > 0) out.push_back(out[0]);
          return out;
        },
        [] { return matrix_samples(3, 4); });
  entry("Tensor::detach", [](const TensorList& in) { return TensorList{in[0].detach()}; },
        [](const TensorList& in) { return TensorList{reshaped_ref(in[0], in[0].shape())}; },
        [] { return matrix_samples(3, 4); }, false, false);
  // copy_ into a tensor with history of its own: the gradient reaches the source (summed
  // over broadcast dims) and no longer the overwritten value.
  entry("Tensor::copy_",
        [](const TensorList& in) {
          Tensor dst = mul(in[1], 2.0);
          dst.copy_(in[0]);
          return TensorList{dst};
        },
        [](const TensorList& in) { return TensorList{expand_ref(in[0], in[1].shape())}; },
        [] {
          return std::vector<OpSample>{
              {"same shape", {leaf({3, 4}, 1), leaf({3, 4}, 2)}},
              {"broadcast source", {leaf({4}, 3), leaf({2, 3, 4}, 4)}},
              {"transposed source", {leaf({4, 3}, 5), leaf({3, 4}, 6)},
               [](const TensorList& l) { return TensorList{l[0].t(), l[1]}; }},
              {"scalar source", {leaf({}, 7), leaf({2, 2}, 8)}},
          };
        });
  // fill_ / zero_ replace a value with history by a constant: only the other use of x is differentiated.
  entry("Tensor::fill_",
        [](const TensorList& in) {
          Tensor y = mul(in[0], 1.0);
          y.fill_(3);
          return TensorList{mul(y, in[0])};
        },
        [](const TensorList& in) { return TensorList{map_ref(in[0], [](double v) { return 3 * v; })}; },
        [] { return matrix_samples(3, 4); });
  entry("Tensor::zero_",
        [](const TensorList& in) {
          Tensor y = mul(in[0], 1.0);
          y.zero_();
          return TensorList{add(y, in[0])};
        },
        [](const TensorList& in) { return TensorList{map_ref(in[0], [](double v) { return v; })}; },
        [] { return matrix_samples(3, 4); });
  return true;
}();

// ---- what the table does not cover ----

TEST(ViewOps, DTypeConversionGradients) {
  // float64 -> float32: the gradient comes back as float64
  Tensor x = from_vector<double>({1, 2, 3}).requires_grad_();
  mul(x.to(kFloat32), from_vector<float>({1, 10, 100})).backward(ones({3}));
  EXPECT_EQ(x.grad().dtype(), kFloat64);
  EXPECT_EQ(values(x.grad()), (std::vector<double>{1, 10, 100}));
  // float32 -> float64 and back, with create_graph: the second derivative flows too
  Tensor w = from_vector<float>({0.5f, -1.0f}).requires_grad_();
  const Tensor y = sum(mul(pow(w.to(kFloat64), 3.0), 1.0));
  const Tensor g = autograd::grad({y}, {w}, {}, true, true)[0];  // 3 w^2
  EXPECT_EQ(g.dtype(), kFloat32);
  EXPECT_EQ(values(g), (std::vector<double>{0.75, 3.0}));
  const Tensor gg = autograd::grad({sum(g)}, {w})[0];  // 6 w
  EXPECT_EQ(values(gg), (std::vector<double>{3.0, -6.0}));
  // integer results carry no gradient
  EXPECT_FALSE(x.to(kInt64).requires_grad());
}

TEST(ViewOps, DetachCutsHistory) {
  Tensor x = sample({2, 3}).requires_grad_();
  const Tensor d = mul(x, 2.0).detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.is_leaf());
  const Tensor m = mul(x, 2.0);
  EXPECT_TRUE(m.detach().storage().is_same(m.storage()));
  const Tensor y = add(mul(x, x.detach()), 0.0);  // d/dx (x * c) = c
  y.backward(ones({2, 3}, {.dtype = kFloat64}));
  EXPECT_EQ(values(x.grad()), values(x));
}

TEST(ViewOps, GradientsOfOverlappingViewsSum) {
  // unfold with step 1 and as_strided with stride 0 read entries several times
  Tensor x = from_vector<double>({1, 2, 3, 4}).requires_grad_();
  sum(x.unfold(0, 3, 1)).backward();  // windows [1,2,3], [2,3,4]
  EXPECT_EQ(values(x.grad()), (std::vector<double>{1, 2, 2, 1}));
  Tensor z = from_vector<double>({1, 2, 3, 4}).requires_grad_();
  sum(z.as_strided({3, 2}, {0, 2}, 1)).backward();  // rows [2, 4] three times
  EXPECT_EQ(values(z.grad()), (std::vector<double>{0, 3, 0, 3}));
}

TEST(ViewOps, ReorderingViewsPassTheGradientOnReordered) {
  // A permutation or a reshape reads each entry of its base once: the base's gradient is
  // the incoming one reordered (a view of it where its strides allow), not a scatter into
  // a zero-filled buffer.
  const Tensor x = sample({2, 3, 4}).requires_grad_();
  const Tensor h = mul(x, 1.0);
  Tensor seen;
  h.register_hook([&](const Tensor& g) {
    seen = g;
    return Tensor();
  });
  const Tensor g = sample({4, 3, 2}, -1, 1, 5);
  h.permute({2, 1, 0}).backward(g);
  EXPECT_TRUE(seen.storage().is_same(g.storage()));
  EXPECT_EQ(values(seen), values(permute_ref(g, {2, 1, 0})));
  EXPECT_EQ(values(x.grad()), values(permute_ref(g, {2, 1, 0})));
  // a reshape of a strided base (the second half of each row): the permuted incoming
  // gradient cannot be viewed as the base's shape, so it is copied once
  const Tensor base = mul(sample({3, 8}).requires_grad_(), 1.0).slice(1, 4, 8);  // (3, 4), row stride 8
  Tensor seen_base;
  const Tensor r = base.view({3, 2, 2});
  const Tensor gr = sample({2, 2, 3}, -1, 1, 6);
  base.register_hook([&](const Tensor& gb) {
    seen_base = gb;
    return Tensor();
  });
  r.permute({1, 2, 0}).backward(gr);
  EXPECT_EQ(seen_base.shape(), (Shape{3, 4}));
  EXPECT_EQ(values(seen_base), values(reshaped_ref(permute_ref(gr, {2, 0, 1}), {3, 4})));
  // a contiguous leaf seen through a transpose gets a contiguous gradient of its own
  Tensor w = sample({3, 4}).requires_grad_();
  const Tensor gw = sample({4, 3}, -1, 1, 7);
  w.t().backward(gw);
  EXPECT_TRUE(w.grad().is_contiguous());
  EXPECT_EQ(values(w.grad()), values(permute_ref(gw, {1, 0})));
}

TEST(ViewOps, ViewsOfOverlappingTensorsGetDistinctGradients) {
  // select row 0 of an expanded tensor: only that row's use of x counts, once
  Tensor x = from_vector<double>({1, 2, 3}, {1, 3}).requires_grad_();
  sum(x.expand({4, 3}).select(0, 0)).backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{1, 1, 1}));
  // a window of an unfolded tensor: each entry of it once
  Tensor z = from_vector<double>({1, 2, 3, 4}).requires_grad_();
  const Tensor w = z.unfold(0, 2, 1).select(0, 1);  // [2, 3]
  const Tensor g = autograd::grad({w}, {z}, {from_vector<double>({10, 100})})[0];
  EXPECT_EQ(values(g), (std::vector<double>{0, 10, 100, 0}));
}

TEST(ViewOps, CopyAcrossDevicesIsDifferentiable) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  Tensor x = sample({3, 4}).requires_grad_();
  const Tensor on_gpu = x.to(Device::cuda(0));
  EXPECT_EQ(on_gpu.device(), Device::cuda(0));
  on_gpu.to(Device::cpu(), kFloat32).backward(full({3, 4}, 2.0));
  EXPECT_EQ(x.grad().device(), Device::cpu());
  EXPECT_EQ(values(x.grad()), std::vector<double>(12, 2.0));
}

}  // namespace
}  // namespace infini::test::view_ops_test
