// Op table entries for reductions, with naive float64 loop references.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "op_info.h"

namespace infini::test {
namespace {

// Reduces x over the dims in `mask` with `fold` (from `init`), by visiting every element.
Tensor reduce_ref(const Tensor& x, const std::vector<bool>& mask, bool keepdim, double init,
                  const std::function<double(double, double)>& fold) {
  const std::vector<double> v = values(x);
  Shape kept, out_shape;
  for (std::int64_t d = 0; d < x.dim(); ++d) {
    kept.push_back(mask[d] ? 1 : x.shape()[d]);
    if (!mask[d] || keepdim) out_shape.push_back(mask[d] ? 1 : x.shape()[d]);
  }
  std::int64_t out_numel = 1;
  for (std::int64_t s : kept) out_numel *= s;
  std::vector<double> out(static_cast<std::size_t>(out_numel), init);
  std::vector<std::int64_t> index(static_cast<std::size_t>(x.dim()), 0);
  for (std::size_t n = 0; n < v.size(); ++n) {
    std::int64_t o = 0;
    for (std::int64_t d = 0; d < x.dim(); ++d) o = o * kept[d] + (mask[d] ? 0 : index[d]);
    out[o] = fold(out[o], v[n]);
    for (std::int64_t d = x.dim() - 1; d >= 0; --d) {
      if (++index[d] < x.shape()[d]) break;
      index[d] = 0;
    }
  }
  return from_vector(out, {out_numel}).reshape(out_shape);
}

std::vector<bool> mask_of(std::int64_t ndim, const std::vector<std::int64_t>& dims) {
  std::vector<bool> mask(static_cast<std::size_t>(ndim), dims.empty());
  for (std::int64_t d : dims) mask[d < 0 ? d + ndim : d] = true;
  return mask;
}

std::vector<OpSample> reduction_samples() {
  return {
      {"(3,4,5)", {sample({3, 4, 5}, -2, 2, 1).requires_grad_()}},
      {"transposed", {sample({5, 4, 3}, -2, 2, 2).requires_grad_()},
       [](const TensorList& l) { return TensorList{l[0].permute({2, 1, 0})}; }},
      {"expanded", {sample({1, 4, 5}, -2, 2, 3).requires_grad_()},
       [](const TensorList& l) { return TensorList{l[0].expand({3, 4, 5})}; }},
      {"zero-size", {sample({3, 0, 5}, -2, 2, 4).requires_grad_()}},
  };
}

const bool registered = [] {
  struct Case {
    std::vector<std::int64_t> dims;
    bool keepdim;
  };
  const std::vector<Case> cases = {{{}, false}, {{1}, false}, {{0, 2}, true}, {{-1}, true}};
  for (bool is_mean : {false, true}) {
    op_registry().push_back(
        {.name = is_mean ? "mean" : "sum",
         .fn = [cases, is_mean](const TensorList& in) {
           TensorList out;
           for (const Case& c : cases) out.push_back(is_mean ? mean(in[0], c.dims, c.keepdim) : sum(in[0], c.dims, c.keepdim));
           return out;
         },
         .reference = [cases, is_mean](const TensorList& in) {
           TensorList out;
           for (const Case& c : cases) {
             const std::vector<bool> mask = mask_of(in[0].dim(), c.dims);
             Tensor r = reduce_ref(in[0], mask, c.keepdim, 0, std::plus<double>());
             if (is_mean) {
               double count = 1;
               for (std::int64_t d = 0; d < in[0].dim(); ++d)
                 if (mask[d]) count *= static_cast<double>(in[0].shape()[d]);
               r = div(r, count);
             }
             out.push_back(r);
           }
           return out;
         },
         .samples = [is_mean] {
           auto s = reduction_samples();
           if (is_mean) s.pop_back();  // the mean over an empty dim is NaN: no gradient to check
           return s;
         },
         .gradgrad = true,
         .tolerance = 1e-12});
  }
  op_registry().push_back({.name = "sum_to",
                           .fn = [](const TensorList& in) { return TensorList{sum_to(in[0], {4, 1})}; },
                           .reference = [](const TensorList& in) {
                             return TensorList{reduce_ref(in[0], {true, false, true}, false, 0, std::plus<double>())
                                                   .reshape({4, 1})};
                           },
                           .samples = [] { auto s = reduction_samples(); s.pop_back(); return s; },
                           .gradgrad = true,
                           .tolerance = 1e-12});
  return true;
}();

TEST(Reductions, DTypesAndErrors) {
  EXPECT_EQ(sum(from_vector<std::int32_t>({1, 2})).dtype(), kInt64);
  EXPECT_EQ(sum(from_vector<bool>({true, true, false})).item<std::int64_t>(), 2);
  EXPECT_EQ(sum(zeros({2}, {.dtype = kFloat16})).dtype(), kFloat16);
  EXPECT_THROW(mean(from_vector<std::int64_t>({1, 2})), DTypeError);
  EXPECT_THROW(sum(zeros({2, 3}), {2}), IndexError);
  EXPECT_THROW(sum(zeros({2, 3}), {1, -1}), IndexError);
  EXPECT_THROW(sum_to(zeros({2, 3}), {3, 3}), ShapeError);
  EXPECT_EQ(sum(zeros({0})).item<double>(), 0.0);
}

}  // namespace
}  // namespace infini::test
