// einsum: op table entries for a table of equations (matrix products, diagonals, traces,
// transposes, batches, broadcast ellipses, outer and inner products, three operands,
// implicit outputs, zero-size dims) against a naive loop over every assignment of the
// labels, plus the equation language's errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "indexing_test_util.h"
#include "op_info.h"

namespace infini::test::einsum_test {
namespace {

using namespace indexing_util;

// The reference for a spelled-out equation (letters only, explicit output, no ellipsis):
// out[output labels] = sum over the other labels of the product of the operands' elements,
// a dim of size 1 read at 0 whatever its label's value (broadcast).
Tensor einsum_ref(const std::string& spec, const TensorList& operands) {
  std::string clean;
  for (char c : spec)
    if (c != ' ') clean += c;
  const std::size_t arrow = clean.find("->");
  const std::string output = clean.substr(arrow + 2);
  std::vector<std::string> terms{""};
  for (char c : clean.substr(0, arrow)) {
    if (c == ',') terms.emplace_back();
    else terms.back() += c;
  }
  std::map<char, std::int64_t> size;
  for (std::size_t k = 0; k < terms.size(); ++k)
    for (std::size_t d = 0; d < terms[k].size(); ++d) {
      const std::int64_t s = operands[k].shape()[d];
      if (!size.contains(terms[k][d]) || size[terms[k][d]] == 1) size[terms[k][d]] = s;
    }
  std::string labels = output;  // output labels first, then the summed ones
  for (const auto& [label, s] : size)
    if (output.find(label) == std::string::npos) labels += label;
  Shape out_shape, all_shape;
  for (char c : output) out_shape.push_back(size[c]);
  for (char c : labels) all_shape.push_back(size[c]);
  std::vector<std::vector<double>> v;
  for (const Tensor& t : operands) v.push_back(values(t));
  std::vector<double> out(static_cast<std::size_t>(numel_of(out_shape)), 0.0);
  for (std::int64_t a = 0; a < numel_of(all_shape); ++a) {
    const Coords at = unravel(a, all_shape);
    double product = 1;
    for (std::size_t k = 0; k < terms.size(); ++k) {
      Coords c;
      for (std::size_t d = 0; d < terms[k].size(); ++d)
        c.push_back(operands[k].shape()[d] == 1 ? 0 : at[labels.find(terms[k][d])]);
      product *= v[k][ravel(c, operands[k].shape())];
    }
    out[ravel(Coords(at.begin(), at.begin() + static_cast<std::ptrdiff_t>(output.size())), out_shape)] += product;
  }
  return f64(out_shape, out);
}

// A sample of float64 leaves of the given shapes.
OpSample operands(std::string label, const std::vector<Shape>& shapes, Fn view = nullptr) {
  TensorList leaves;
  for (std::size_t k = 0; k < shapes.size(); ++k) leaves.push_back(leaf(shapes[k], 11 + k));
  return {std::move(label), leaves, std::move(view)};
}

void entry(const std::string& equation, const std::string& spec, std::vector<OpSample> (*samples)(),
           bool gradgrad = false) {
  op_registry().push_back({.name = "einsum",
                           .fn = [equation](const TensorList& in) { return TensorList{einsum(equation, in)}; },
                           .reference = [spec](const TensorList& in) { return TensorList{einsum_ref(spec, in)}; },
                           .samples = samples,
                           .gradgrad = gradgrad,
                           .tolerance = 1e-12});
}

const bool registered = [] {
  entry("ij,jk->ik", "ij,jk->ik", [] {
    return std::vector<OpSample>{
        operands("(3,4) @ (4,2)", {{3, 4}, {4, 2}}),
        operands("transposed", {{4, 3}, {2, 4}}, [](const TensorList& l) { return TensorList{l[0].t(), l[1].t()}; }),
        operands("j broadcast from size 1", {{3, 4}, {1, 2}}),
        operands("k = 0", {{3, 0}, {0, 2}}),
        operands("i = 0", {{0, 4}, {4, 2}}),
    };
  }, true);
  entry(" i j , j k -> i k ", "ij,jk->ik", [] { return std::vector<OpSample>{operands("spaces", {{2, 3}, {3, 2}})}; });
  entry("ii->i", "ii->i", [] {
    return std::vector<OpSample>{
        operands("diagonal", {{3, 3}}),
        operands("of a transposed matrix", {{3, 3}}, [](const TensorList& l) { return TensorList{l[0].t()}; }),
    };
  }, true);
  entry("ii", "ii->", [] { return std::vector<OpSample>{operands("trace", {{3, 3}})}; });
  entry("iij->j", "iij->j", [] { return std::vector<OpSample>{operands("diagonal summed", {{2, 2, 3}})}; });
  entry("jii", "jii->j", [] { return std::vector<OpSample>{operands("implicit, diagonal", {{3, 2, 2}})}; });
  entry("ij->ji", "ij->ji", [] { return std::vector<OpSample>{operands("transpose", {{2, 3}})}; });
  entry("ba", "ba->ab", [] { return std::vector<OpSample>{operands("implicit transpose", {{2, 3}})}; });
  entry("bA", "bA->Ab", [] { return std::vector<OpSample>{operands("uppercase first", {{2, 3}})}; });
  entry("bij,bjk->bik", "bij,bjk->bik", [] {
    return std::vector<OpSample>{operands("batched", {{2, 3, 4}, {2, 4, 2}}),
                                 operands("zero batch", {{0, 3, 4}, {0, 4, 2}})};
  });
  entry("...ij,...jk->...ik", "abij,bjk->abik", [] {
    return std::vector<OpSample>{operands("broadcast ellipsis (2,1) with (5)", {{2, 1, 3, 4}, {5, 4, 2}})};
  }, true);
  entry("...ij->ij", "aij->ij", [] { return std::vector<OpSample>{operands("ellipsis summed", {{2, 3, 4}})}; });
  entry("i...->...", "iab->ab", [] { return std::vector<OpSample>{operands("leading label summed", {{3, 2, 2}})}; });
  entry("ij->...ij", "ij->ij", [] { return std::vector<OpSample>{operands("empty ellipsis", {{2, 3}})}; });
  entry("i,i->", "i,i->", [] {
    return std::vector<OpSample>{operands("dot", {{4}, {4}}), operands("empty", {{0}, {0}})};
  });
  entry("i,j->ij", "i,j->ij", [] { return std::vector<OpSample>{operands("outer", {{3}, {2}})}; });
  entry(",ij->ij", ",ij->ij", [] { return std::vector<OpSample>{operands("0-d operand", {{}, {2, 3}})}; });
  entry("ab,ab->ab", "ab,ab->ab", [] {
    return std::vector<OpSample>{operands("hadamard", {{2, 3}, {2, 3}}),
                                 operands("broadcast b", {{2, 1}, {2, 3}})};
  });
  entry("ijk,ikl,ilm->jm", "ijk,ikl,ilm->jm", [] {
    return std::vector<OpSample>{operands("three operands", {{2, 3, 2}, {2, 2, 3}, {2, 3, 2}}),
                                 operands("i = 0", {{0, 3, 2}, {0, 2, 3}, {0, 3, 2}})};
  }, true);
  entry("ij,jk->i", "ij,jk->i", [] {
    return std::vector<OpSample>{operands("k summed in its only operand", {{3, 4}, {4, 2}})};
  });
  entry("ij->", "ij->", [] { return std::vector<OpSample>{operands("sum", {{2, 3}})}; });
  return true;
}();

TEST(Einsum, KnownValues) {
  EXPECT_EQ(values(einsum("i,i->", {f64({2}, {1, 2}), f64({2}, {3, 4})})), (std::vector<double>{11}));
  const Tensor x = f64({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor t = einsum("bA", {x});  // implicit output "Ab": uppercase labels sort first
  EXPECT_EQ(t.shape(), (Shape{3, 2}));
  EXPECT_EQ(values(t), (std::vector<double>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(values(einsum("ii", {f64({2, 2}, {1, 2, 3, 4})})), (std::vector<double>{5}));
  EXPECT_EQ(einsum("Ba,aB", {x, x.t()}).shape(), (Shape{}));
  const Tensor ones23 = full({2, 3}, 1.0, {.dtype = kFloat32}), halves32 = full({3, 2}, 0.5, {.dtype = kFloat32});
  const Tensor y = einsum("ij,jk->ik", {ones23, halves32});
  EXPECT_EQ(y.dtype(), kFloat32);
  EXPECT_EQ(values(y), (std::vector<double>{1.5, 1.5, 1.5, 1.5}));
}

TEST(Einsum, Gradients) {
  // d/dA of sum(A B) for "ij,jk->" is B summed over k, broadcast over i.
  const Tensor a = f64({2, 2}, {1, 2, 3, 4}).requires_grad_(), b = f64({2, 3}, {1, 2, 3, 4, 5, 6}).requires_grad_();
  einsum("ij,jk->", {a, b}).backward();
  EXPECT_EQ(values(a.grad()), (std::vector<double>{6, 15, 6, 15}));
  EXPECT_EQ(values(b.grad()), (std::vector<double>{4, 4, 4, 6, 6, 6}));
}

TEST(Einsum, BadEquations) {
  const Tensor m = f64({2, 3}, {1, 2, 3, 4, 5, 6});
  expect_error<Error>([&] { einsum("ij->ik", {m}); }, "einsum", {"subscript 'k'", "does not appear"});
  expect_error<Error>([&] { einsum("ij->ii", {m}); }, "einsum", {"subscript 'i'", "more than once"});
  expect_error<Error>([&] { einsum("ij,jk", {m}); }, "einsum", {"2 input terms but 1 operands"});
  expect_error<Error>([&] { einsum("ij", {m, m}); }, "einsum", {"1 input terms but 2 operands"});
  expect_error<Error>([&] { einsum("", {}); }, "einsum", {"0 operands"});
  expect_error<ShapeError>([&] { einsum("ij", {m.unsqueeze(0)}); }, "einsum", {"[1, 2, 3]", "3 dims", "2 subscripts"});
  expect_error<ShapeError>([&] { einsum("...ijk", {m}); }, "einsum", {"2 dims", "3 subscripts and an ellipsis"});
  expect_error<ShapeError>([&] { einsum("ij,jk->ik", {m, f64({2, 2}, {1, 2, 3, 4})}); }, "einsum",
                           {"subscript 'j' has size 2 in operand 1 but 3 in operand 0"});
  expect_error<ShapeError>([&] { einsum("ii->i", {m}); }, "einsum", {"subscript 'i' is repeated", "2 and 3"});
  const Tensor a234 = zeros({2, 3, 4}, {.dtype = kFloat64}), b542 = zeros({5, 4, 2}, {.dtype = kFloat64});
  expect_error<ShapeError>([&] { einsum("...ij,...jk->...ik", {a234, b542}); }, "einsum",
                           {"dim 0 of the ellipsis has size 5 in operand 1 but 2 in operand 0"});
  expect_error<Error>([&] { einsum("i.j", {m}); }, "einsum", {"'.' at index 1"});
  expect_error<Error>([&] { einsum("...i...", {m}); }, "einsum", {"second ellipsis"});
  expect_error<Error>([&] { einsum("ij->j->i", {m}); }, "einsum", {"unexpected '-' at index 5"});
  expect_error<Error>([&] { einsum("ij1", {m}); }, "einsum", {"unexpected '1' at index 2"});
  expect_error<Error>([&] { einsum("ij->i,j", {m}); }, "einsum", {"unexpected ','"});
  expect_error<DTypeError>([&] { einsum("ij->ji", {i64({1, 1}, {1})}); }, "einsum", {"int64", "floating-point"});
  expect_error<DTypeError>([&] { einsum("ij,jk->ik", {m, m.t().to(kFloat32)}); }, "einsum", {"float64", "float32"});
}

}  // namespace
}  // namespace infini::test::einsum_test
