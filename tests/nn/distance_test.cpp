// CosineSimilarity and PairwiseDistance against float64 loops: options, broadcasting,
// gradients, hooks on both inputs, clone and errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "layer_test_util.h"

import infini.nn;

namespace infini::nn::test::distance_test {
namespace {

TEST(CosineSimilarity, RowsAlongDimWithEps) {
  const Tensor a = random_input({3, 4}, 1), b = random_input({3, 4}, 2);
  const std::vector<double> av = values(a), bv = values(b);
  std::vector<double> rows, cols;
  for (int i = 0; i < 3; ++i) {
    double dot = 0, na = 0, nb = 0;
    for (int j = 0; j < 4; ++j)
      dot += av[i * 4 + j] * bv[i * 4 + j], na += av[i * 4 + j] * av[i * 4 + j], nb += bv[i * 4 + j] * bv[i * 4 + j];
    rows.push_back(dot / (std::sqrt(na) * std::sqrt(nb)));
  }
  for (int j = 0; j < 4; ++j) {
    double dot = 0, na = 0, nb = 0;
    for (int i = 0; i < 3; ++i)
      dot += av[i * 4 + j] * bv[i * 4 + j], na += av[i * 4 + j] * av[i * 4 + j], nb += bv[i * 4 + j] * bv[i * 4 + j];
    cols.push_back(dot / (std::max(std::sqrt(na), 0.5) * std::max(std::sqrt(nb), 0.5)));
  }
  CosineSimilarity by_row;  // dim 1, eps 1e-8
  EXPECT_EQ(by_row->dim, 1);
  EXPECT_EQ(by_row->eps, 1e-8);
  expect_all_near(by_row(a, b), {3}, rows, 1e-12);
  expect_all_near(CosineSimilarity(0, 0.5)(a, b), {4}, cols, 1e-12);
  expect_gradcheck([&](const TensorList&) { return TensorList{by_row(a, b)}; }, {a, b});
  // Broadcast: (2, 1, 3) against (4, 3) along the last dim.
  EXPECT_EQ(CosineSimilarity(-1)(ones({2, 1, 3}), ones({4, 3})).shape(), (Shape{2, 4}));
  EXPECT_EQ(by_row->str(), "CosineSimilarity()");
  EXPECT_TRUE(by_row->parameters().empty());
}

TEST(PairwiseDistance, NormOfTheDifferencePlusEps) {
  const Tensor a = random_input({3, 4}, 3), b = random_input({3, 4}, 4);
  const std::vector<double> av = values(a), bv = values(b);
  std::vector<double> l2, l1;
  for (int i = 0; i < 3; ++i) {
    double s2 = 0, s1 = 0;
    for (int j = 0; j < 4; ++j) {
      const double d = av[i * 4 + j] - bv[i * 4 + j];
      s2 += (d + 1e-6) * (d + 1e-6);
      s1 += std::abs(d + 0.1);
    }
    l2.push_back(std::sqrt(s2));
    l1.push_back(s1);
  }
  PairwiseDistance l2_distance;  // p 2, eps 1e-6
  expect_all_near(l2_distance(a, b), {3}, l2, 1e-12);
  expect_all_near(PairwiseDistance(1, 0.1, true)(a, b), {3, 1}, l1, 1e-12);
  expect_gradcheck([&](const TensorList&) { return TensorList{l2_distance(a, b)}; }, {a, b});
  // The hooks see both inputs.
  TensorList seen;
  l2_distance->register_forward_hook([&](Module&, const TensorList& in, Tensor&) { seen = in; });
  l2_distance(a, b);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_TRUE(seen[1].is_same(b));
  auto copy = std::dynamic_pointer_cast<PairwiseDistanceImpl>(PairwiseDistance(1, 0.1, true)->clone());
  ASSERT_TRUE(copy);
  EXPECT_EQ(copy->p, 1);
  EXPECT_EQ(copy->eps, 0.1);
  EXPECT_TRUE(copy->keepdim);
  EXPECT_EQ(l2_distance->str(), "PairwiseDistance()");
}

TEST(DistanceModules, Errors) {
  expect_error([] { CosineSimilarity(1, -1.0); }, "CosineSimilarity", "eps must be >= 0, got -1");
  expect_error<ShapeError>([] { CosineSimilarity()(zeros({2, 3}), zeros({2, 4})); }, "CosineSimilarity", "[2, 4]");
  expect_error<IndexError>([] { CosineSimilarity()(zeros({3}), zeros({3})); }, "CosineSimilarity", "dimension 1");
  expect_error<ShapeError>([] { PairwiseDistance()(zeros({2, 3}), zeros({2, 4})); }, "PairwiseDistance", "[2, 4]");
  // A distance module placed where one tensor is passed on says it takes two.
  Sequential seq(PairwiseDistance{});
  expect_error([&] { seq(zeros({2})); }, "PairwiseDistance.forward", "single tensor");
}

}  // namespace
}  // namespace infini::nn::test::distance_test
