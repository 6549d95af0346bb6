// Op table entries for Python-style indexing (index, index_put, index_put_) and masks
// (masked_select, masked_scatter, masked_scatter_). Each index pattern has its own entry
// whose reference spells out, as loops, what t[...] means for that pattern.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "indexing_test_util.h"
#include "op_info.h"

namespace infini::test::indexing_python_test {
namespace {

using namespace indexing_util;
using indexing::Ellipsis;
using indexing::None;
using indexing::Slice;

// x (3,4,5) as contiguous, permuted and expanded views; `extra` are the index leaves.
std::vector<OpSample> cube_samples(const TensorList& extra, const TensorList& empty_extra) {
  auto with = [](Tensor x, const TensorList& rest) {
    TensorList l{std::move(x)};
    l.insert(l.end(), rest.begin(), rest.end());
    return l;
  };
  return {
      {"contiguous (3,4,5)", with(leaf({3, 4, 5}, 1), extra)},
      {"permuted", with(leaf({5, 4, 3}, 2), extra),
       [](const TensorList& l) {
         TensorList out = l;
         out[0] = l[0].permute({2, 1, 0});
         return out;
       }},
      {"sliced with step", with(leaf({3, 4, 10}, 3), extra),
       [](const TensorList& l) {
         TensorList out = l;
         out[0] = l[0].slice(2, 1, 10, 2);
         return out;
       }},
      {"expanded", with(leaf({1, 4, 5}, 4), extra),
       [](const TensorList& l) {
         TensorList out = l;
         out[0] = l[0].expand({3, 4, 5});
         return out;
       }},
      {"zero-size index", with(leaf({3, 4, 5}, 5), empty_extra)},
  };
}

// Registers an "index" entry: fn(x, extra...) against ref(x values, x shape, extra...).
void index_entry(std::function<Tensor(const TensorList&)> fn, std::function<Tensor(const TensorList&)> ref,
                 const TensorList& extra, const TensorList& empty_extra) {
  op_registry().push_back({.name = "index",
                           .fn = [fn](const TensorList& in) { return TensorList{fn(in)}; },
                           .reference = [ref](const TensorList& in) { return TensorList{ref(in)}; },
                           .samples = [extra, empty_extra] { return cube_samples(extra, empty_extra); },
                           .tolerance = 0});
}

// out of `shape` with out[c] = value(c).
Tensor build(const Shape& shape, const std::function<double(const Coords&)>& value) {
  std::vector<double> out(static_cast<std::size_t>(numel_of(shape)));
  for (std::size_t k = 0; k < out.size(); ++k) out[k] = value(unravel(static_cast<std::int64_t>(k), shape));
  return f64(shape, out);
}

// Element x[c] of a float tensor given by its values and shape.
struct Grid {
  std::vector<double> v;
  Shape shape;
  explicit Grid(const Tensor& t) : v(values(t)), shape(t.shape()) {}
  double operator()(const Coords& c) const { return v[ravel(c, shape)]; }
};

void register_index_entries() {
  // x[idx], idx (2,3): the index shape replaces dim 0.
  index_entry([](const TensorList& in) { return index(in[0], {in[1]}); },
              [](const TensorList& in) {
                const Grid x(in[0]);
                const std::vector<std::int64_t> i = ints(in[1]);
                Shape shape = in[1].shape();
                shape.insert(shape.end(), {4, 5});
                return build(shape, [&](const Coords& c) { return x({wrap(i[c[0] * 3 + c[1]], 3), c[2], c[3]}); });
              },
              {i64({2, 3}, {0, 2, -1, 1, 1, -3})}, {i64({2, 0}, {})});
  // x[:, idx]: dim 1 replaced in place.
  index_entry([](const TensorList& in) { return index(in[0], {Slice(), in[1]}); },
              [](const TensorList& in) {
                const Grid x(in[0]);
                const std::vector<std::int64_t> i = ints(in[1]);
                return build({3, static_cast<std::int64_t>(i.size()), 5},
                             [&](const Coords& c) { return x({c[0], wrap(i[c[1]], 4), c[2]}); });
              },
              {i64({4}, {3, -4, 1, 3})}, {i64({0}, {})});
  // x[i0, :, i1] with i0 (2,1), i1 (3): not adjacent, so the broadcast (2,3) goes in front.
  index_entry([](const TensorList& in) { return index(in[0], {in[1], Slice(), in[2]}); },
              [](const TensorList& in) {
                const Grid x(in[0]);
                const std::vector<std::int64_t> i0 = ints(in[1]), i1 = ints(in[2]);
                return build({in[1].shape()[0], static_cast<std::int64_t>(i1.size()), 4}, [&](const Coords& c) {
                  return x({wrap(i0[c[0]], 3), c[2], wrap(i1[c[1]], 5)});
                });
              },
              {i64({2, 1}, {2, -3}), i64({3}, {4, 0, -2})}, {i64({2, 1}, {2, 0}), i64({0}, {})});
  // x[..., i0, i1]: adjacent at the end.
  index_entry([](const TensorList& in) { return index(in[0], {Ellipsis, in[1], in[2]}); },
              [](const TensorList& in) {
                const Grid x(in[0]);
                const std::vector<std::int64_t> i0 = ints(in[1]), i1 = ints(in[2]);
                return build({3, static_cast<std::int64_t>(i0.size())},
                             [&](const Coords& c) { return x({c[0], wrap(i0[c[1]], 4), wrap(i1[c[1]], 5)}); });
              },
              {i64({3}, {1, 3, 1}), i64({3}, {4, 0, 4})}, {i64({0}, {}), i64({0}, {})});
  // x[0, :, idx]: the integer selects first (PyTorch), so idx stays at dim 1 of the rest.
  index_entry([](const TensorList& in) { return index(in[0], {-3, Slice(), in[1]}); },
              [](const TensorList& in) {
                const Grid x(in[0]);
                const std::vector<std::int64_t> i = ints(in[1]);
                return build({4, static_cast<std::int64_t>(i.size())},
                             [&](const Coords& c) { return x({0, c[0], wrap(i[c[1]], 5)}); });
              },
              {i64({2}, {-1, 2})}, {i64({0}, {})});
  // x[mask] with a (3,4) mask: the true coordinates, row-major, then dim 2.
  index_entry([](const TensorList& in) { return index(in[0], {in[1]}); },
              [](const TensorList& in) {
                const Grid x(in[0]);
                const std::vector<std::int64_t> m = ints(in[1]);
                std::vector<Coords> hits;
                for (std::int64_t k = 0; k < 12; ++k)
                  if (m[k]) hits.push_back(unravel(k, {3, 4}));
                return build({static_cast<std::int64_t>(hits.size()), 5},
                             [&](const Coords& c) { return x({hits[c[0]][0], hits[c[0]][1], c[1]}); });
              },
              {gt(sample({3, 4}, -1, 1, 7), 0)}, {zeros({3, 4}, {.dtype = kBool})});
  // Basic indexing only (a view): x[1, 0::2, None, -1].
  index_entry([](const TensorList& in) { return index(in[0], {1, Slice(0, {}, 2), None, -1}); },
              [](const TensorList& in) {
                const Grid x(in[0]);
                return build({2, 1}, [&](const Coords& c) { return x({1, 2 * c[0], 4}); });
              },
              {}, {});
  // Integer tensor and mask together: x[idx, :, mask5] with mask5 (5) selecting 2 entries.
  index_entry([](const TensorList& in) { return index(in[0], {in[1], Slice(1, 3), in[2]}); },
              [](const TensorList& in) {
                const Grid x(in[0]);
                const std::vector<std::int64_t> i = ints(in[1]), m = ints(in[2]);
                std::vector<std::int64_t> hits;
                for (std::int64_t k = 0; k < 5; ++k)
                  if (m[k]) hits.push_back(k);
                return build({static_cast<std::int64_t>(hits.size()), 2},
                             [&](const Coords& c) { return x({wrap(i[c[0]], 3), 1 + c[1], hits[c[0]]}); });
              },
              {i64({2}, {2, -1}), from_vector<bool>({true, false, false, true, false})},
              {i64({0}, {}), zeros({5}, {.dtype = kBool})});
}

// ---- index_put ----

// self (3,4) with the elements at (r[a], c[a]) set to (or incremented by) v[a], a in order.
Tensor put_ref(const Tensor& self, const std::vector<std::int64_t>& r, const std::vector<std::int64_t>& c,
               const std::vector<double>& v, bool accumulate) {
  std::vector<double> out = values(self);
  for (std::size_t a = 0; a < r.size(); ++a) {
    double& e = out[wrap(r[a], 3) * 4 + wrap(c[a], 4)];
    e = accumulate ? e + v[a] : v[a];
  }
  return f64({3, 4}, out);
}

// (self (3,4), index leaves..., values) samples: contiguous, transposed, sliced self.
std::vector<OpSample> put_samples(const TensorList& indices, const Shape& values_shape, const TensorList& empty_indices,
                                  const Shape& empty_values_shape) {
  auto make = [](Tensor self, const TensorList& idx, Tensor v) {
    TensorList l{std::move(self)};
    l.insert(l.end(), idx.begin(), idx.end());
    l.push_back(std::move(v));
    return l;
  };
  return {
      {"contiguous", make(leaf({3, 4}, 1), indices, leaf(values_shape, 2))},
      {"transposed self", make(leaf({4, 3}, 3), indices, leaf(values_shape, 4)),
       [](const TensorList& l) {
         TensorList out = l;
         out[0] = l[0].t();
         return out;
       }},
      {"sliced self", make(leaf({3, 8}, 5), indices, leaf(values_shape, 6)),
       [](const TensorList& l) {
         TensorList out = l;
         out[0] = l[0].slice(1, 1, 8, 2);
         return out;
       }},
      {"zero-size index", make(leaf({3, 4}, 7), empty_indices, leaf(empty_values_shape, 8))},
  };
}

using PutFn = std::function<Tensor(const Tensor& self, const TensorList& in)>;

// Registers `name` entries for one pattern: fn(self, in) writes; ref(in) is the expected result.
void put_entry(const std::string& name, PutFn put, std::function<Tensor(const TensorList&)> ref,
               std::function<std::vector<OpSample>()> samples, bool gradgrad = false) {
  const bool inplace = name.back() == '_';
  op_registry().push_back({.name = name,
                           .fn = [put, inplace](const TensorList& in) {
                             if (!inplace) return TensorList{put(in[0], in)};
                             Tensor x = mul(in[0], 1.0);
                             put(x, in);
                             return TensorList{x};
                           },
                           .reference = [ref](const TensorList& in) { return TensorList{ref(in)}; },
                           .samples = std::move(samples),
                           .gradgrad = gradgrad,
                           .tolerance = 1e-12});
}

void register_put_entries() {
  // self[r, c] = v, distinct targets; and += with duplicate targets.
  const TensorList rc{i64({3}, {2, 0, -2}), i64({3}, {1, -1, 3})};  // (2,1), (0,3), (1,3)
  const TensorList rc_dup{i64({4}, {2, -1, 0, 2}), i64({4}, {1, 1, 3, -3})};
  const TensorList none2{i64({0}, {}), i64({0}, {})};
  for (bool accumulate : {false, true}) {
    const TensorList idx = accumulate ? rc_dup : rc;
    auto ref = [accumulate](const TensorList& in) {
      return put_ref(in[0], ints(in[1]), ints(in[2]), values(in[3].expand({in[1].numel()})), accumulate);
    };
    put_entry("index_put", [accumulate](const Tensor& x, const TensorList& in) {
      return index_put(x, {in[1], in[2]}, in[3], accumulate);
    }, ref, [idx, none2] { return put_samples(idx, {idx[0].numel()}, none2, {0}); }, true);
    put_entry("index_put_", [accumulate](const Tensor& x, const TensorList& in) {
      Tensor self = x;
      return index_put_(self, {in[1], in[2]}, in[3], accumulate);
    }, ref, [idx, none2] { return put_samples(idx, {1}, none2, {1}); });
  }
  // self[:, c] = v (one index tensor, PyTorch's list form with an undefined tensor for `:`).
  put_entry("index_put", [](const Tensor& x, const TensorList& in) {
    return index_put(x, TensorList{Tensor(), in[1]}, in[2]);
  }, [](const TensorList& in) {
    const std::vector<std::int64_t> c = ints(in[1]);
    const std::vector<double> v = values(in[2].expand({3, in[1].numel()}));
    std::vector<std::int64_t> rows, cols;
    std::vector<double> vals;
    for (std::int64_t r = 0; r < 3; ++r)
      for (std::size_t a = 0; a < c.size(); ++a) {
        rows.push_back(r);
        cols.push_back(c[a]);
        vals.push_back(v[r * c.size() + a]);
      }
    return put_ref(in[0], rows, cols, vals, false);
  }, [] { return put_samples({i64({2}, {3, -4})}, {1, 2}, {i64({0}, {})}, {0}); });
  // self[mask] += v (broadcast): in place and out of place.
  for (bool inplace : {false, true}) {
    put_entry(inplace ? "index_put_" : "index_put", [inplace](const Tensor& x, const TensorList& in) -> Tensor {
      if (!inplace) return index_put(x, {in[1]}, in[2], true);
      Tensor self = x;
      return index_put_(self, {in[1]}, in[2], true);
    }, [](const TensorList& in) {
      const std::vector<std::int64_t> m = ints(in[1]);
      const double v = values(in[2])[0];
      std::vector<std::int64_t> rows, cols;
      std::vector<double> vals;
      for (std::int64_t k = 0; k < 12; ++k)
        if (m[k]) {
          rows.push_back(k / 4);
          cols.push_back(k % 4);
          vals.push_back(v);
        }
      return put_ref(in[0], rows, cols, vals, true);
    }, [] {
      return put_samples({gt(sample({3, 4}, -1, 1, 9), 0)}, {}, {zeros({3, 4}, {.dtype = kBool})}, {1});
    });
  }
  // Basic indexing only: self[0::2, 1] = v (2); and self[1, 1:3] = 5 (scalar, in place).
  put_entry("index_put", [](const Tensor& x, const TensorList& in) {
    return index_put(x, {Slice(0, {}, 2), 1}, in[1]);
  }, [](const TensorList& in) {
    return put_ref(in[0], {0, 2}, {1, 1}, values(in[1]), false);
  }, [] {
    return std::vector<OpSample>{{"contiguous", {leaf({3, 4}, 1), leaf({2}, 2)}},
                                 {"transposed", {leaf({4, 3}, 3), leaf({2}, 4)},
                                  [](const TensorList& l) { return TensorList{l[0].t(), l[1]}; }}};
  });
  put_entry("index_put_", [](const Tensor& x, const TensorList&) {
    Tensor self = x;
    return index_put_(self, {1, Slice(1, 3)}, 5.0);
  }, [](const TensorList& in) { return put_ref(in[0], {1, 1}, {1, 2}, {5, 5}, false); },
            [] { return std::vector<OpSample>{{"scalar value", {leaf({3, 4}, 1)}}}; });
}

// ---- masks ----

// x's elements where mask is true, both broadcast, row-major.
Tensor masked_select_ref(const Tensor& x, const Tensor& mask) {
  const Shape shape = broadcast_shapes("test", x.shape(), mask.shape());
  const std::vector<double> xv = values(x.expand(shape));
  const std::vector<std::int64_t> m = ints(mask.expand(shape));
  std::vector<double> out;
  for (std::size_t k = 0; k < xv.size(); ++k)
    if (m[k]) out.push_back(xv[k]);
  return f64({static_cast<std::int64_t>(out.size())}, out);
}

Tensor masked_scatter_ref(const Tensor& x, const Tensor& mask, const Tensor& source) {
  std::vector<double> out = values(x);
  const std::vector<std::int64_t> m = ints(mask.expand(x.shape()));
  const std::vector<double> s = values(source);
  std::size_t next = 0;
  for (std::size_t k = 0; k < out.size(); ++k)
    if (m[k]) out[k] = s[next++];
  return f64(x.shape(), out);
}

Tensor mask(const Shape& shape, std::uint64_t seed) { return gt(sample(shape, -1, 1, seed), 0); }

void register_mask_entries() {
  op_registry().push_back(
      {.name = "masked_select",
       .fn = [](const TensorList& in) { return TensorList{masked_select(in[0], in[1])}; },
       .reference = [](const TensorList& in) { return TensorList{masked_select_ref(in[0], in[1])}; },
       .samples = [] {
         return std::vector<OpSample>{
             {"same shape", {leaf({3, 4}, 1), mask({3, 4}, 2)}},
             {"broadcast mask (1,4)", {leaf({3, 4}, 3), mask({1, 4}, 4)}},
             {"broadcast input (4)", {leaf({4}, 5), mask({3, 4}, 6)}},
             {"transposed input", {leaf({4, 3}, 7), mask({3, 4}, 8)},
              [](const TensorList& l) { return TensorList{l[0].t(), l[1]}; }},
             {"zero-size", {leaf({0, 4}, 9), mask({0, 4}, 10)}},
             {"0-d", {leaf({}, 11), from_vector<bool>({true}).reshape({})}},
         };
       },
       .gradgrad = true,
       .tolerance = 0});
  for (bool inplace : {false, true}) {
    op_registry().push_back(
        {.name = inplace ? "masked_scatter_" : "masked_scatter",
         .fn = [inplace](const TensorList& in) {
           if (!inplace) return TensorList{masked_scatter(in[0], in[1], in[2])};
           Tensor x = mul(in[0], 1.0);
           masked_scatter_(x, in[1], in[2]);
           return TensorList{x};
         },
         .reference = [](const TensorList& in) { return TensorList{masked_scatter_ref(in[0], in[1], in[2])}; },
         .samples = [] {
           return std::vector<OpSample>{
               {"same shape", {leaf({3, 4}, 1), mask({3, 4}, 2), leaf({12}, 3)}},
               {"broadcast mask, source (3,5)", {leaf({3, 4}, 4), mask({4}, 5), leaf({3, 5}, 6)}},
               {"transposed input and source", {leaf({4, 3}, 7), mask({3, 4}, 8), leaf({4, 3}, 9)},
                [](const TensorList& l) { return TensorList{l[0].t(), l[1], l[2].t()}; }},
               {"zero-size", {leaf({0, 4}, 10), mask({0, 4}, 11), leaf({0}, 12)}},
               {"0-d", {leaf({}, 13), from_vector<bool>({true}).reshape({}), leaf({2}, 14)}},
           };
         },
         .tolerance = 0});
  }
}

const bool registered = [] {
  register_index_entries();
  register_put_entries();
  register_mask_entries();
  return true;
}();

}  // namespace
}  // namespace infini::test::indexing_python_test
