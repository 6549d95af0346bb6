// Dropout: zero-or-scaled outputs with the right rate in training, identity in evaluation,
// seeding, gradients, clone and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "layer_test_util.h"

import infini.nn;

namespace infini::nn::test::dropout_test {
namespace {

TEST(Dropout, TrainingZeroesAtRatePAndScalesTheRest) {
  Dropout drop(0.3);
  const Tensor x = add(rand({100000}, {.dtype = kFloat64}), 1.0);  // values in [1, 2)
  const std::vector<double> xv = values(x), yv = values(drop(x));
  std::size_t zeros = 0;
  for (std::size_t i = 0; i < xv.size(); ++i) {
    if (yv[i] == 0) ++zeros;
    else EXPECT_NEAR(yv[i], xv[i] / 0.7, 1e-12) << i;
  }
  // 100000 Bernoulli(0.3): std of the rate 0.0014.
  EXPECT_NEAR(static_cast<double>(zeros) / xv.size(), 0.3, 0.01);
}

TEST(Dropout, EvalIsTheIdentityAndEdgeProbabilities) {
  Dropout drop;
  EXPECT_EQ(drop->p, 0.5);
  drop->eval();
  const Tensor x = random_input({50}, 1, false);
  EXPECT_EQ(values(drop(x)), values(x));
  Dropout none(0.0);
  EXPECT_EQ(values(none(x)), values(x));
  Dropout all(1.0);
  EXPECT_EQ(values(all(x)), std::vector<double>(50, 0.0));
}

TEST(Dropout, SeededMasksRepeat) {
  Dropout drop(0.5);
  const Tensor x = ones({1000});
  manual_seed(11);
  const std::vector<double> first = values(drop(x));
  manual_seed(11);
  EXPECT_EQ(values(drop(x)), first);
  EXPECT_NE(values(drop(x)), first);  // the generator moved on
}

TEST(Dropout, GradientIsTheScaledMask) {
  Dropout drop(0.25);
  const Tensor x = random_input({200}, 2);
  const Tensor y = drop(x);
  sum(y).backward();
  const std::vector<double> yv = values(y), g = values(x.grad());
  for (std::size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], yv[i] == 0 ? 0.0 : 1 / 0.75, 1e-12) << i;
}

TEST(Dropout, CloneAndErrors) {
  Dropout drop(0.2);
  drop->eval();
  auto copy = std::dynamic_pointer_cast<DropoutImpl>(drop->clone());
  ASSERT_TRUE(copy);
  EXPECT_EQ(copy->p, 0.2);
  EXPECT_FALSE(copy->is_training());
  EXPECT_EQ(drop->str(), "Dropout(p=0.2)");
  EXPECT_TRUE(drop->parameters().empty());
  expect_error([] { Dropout(-0.1); }, "Dropout", "[0, 1], got -0.1");
  expect_error([] { Dropout(1.5); }, "Dropout", "got 1.5");
  expect_error([] { Dropout(NAN); }, "Dropout", "got nan");
}

}  // namespace
}  // namespace infini::nn::test::dropout_test
