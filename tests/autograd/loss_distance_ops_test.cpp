// Op table entries for smooth_l1_loss, huber_loss, kl_div, cosine_similarity and
// pairwise_distance with naive float64 references, plus PyTorch's values and gradients at
// the edges (|d| = beta, target 0, zero and tiny vectors, 0-d inputs), the BatchMean
// reduction (kl_div's only), dtypes and errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "op_info.h"

namespace infini::test::loss_distance_ops_test {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Tensor make(const Shape& shape, const std::vector<double>& v) {
  return from_vector(v, {static_cast<std::int64_t>(v.size())}).reshape(shape);
}

Tensor leaf(const Shape& shape, double lo, double hi, std::uint64_t seed) {
  return sample(shape, lo, hi, seed).requires_grad_();
}

void expect_values(const Tensor& t, const std::vector<double>& expected, double tol = 1e-12,
                   const std::string& what = "") {
  const std::vector<double> v = values(t);
  ASSERT_EQ(v.size(), expected.size()) << what;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(expected[i])) EXPECT_TRUE(std::isnan(v[i])) << what << " element " << i << ": " << v[i];
    else EXPECT_NEAR(v[i], expected[i], tol * (1 + std::abs(expected[i]))) << what << " element " << i;
  }
}

// The pointwise loss f(a, b) over (broadcast) input and target: mean, sum and per element.
TensorList pointwise(const TensorList& in, const std::function<double(double, double)>& f) {
  const Shape shape = broadcast_shapes("test", in[0].shape(), in[1].shape());
  const std::vector<double> a = values(in[0].expand(shape)), b = values(in[1].expand(shape));
  double total = 0;
  std::vector<double> each;
  for (std::size_t i = 0; i < a.size(); ++i) each.push_back(f(a[i], b[i])), total += each.back();
  return {make({}, {total / static_cast<double>(a.size())}), make({}, {total}), make(shape, each)};
}

std::vector<OpSample> pair_samples(double lo, double hi, double tlo, double thi) {
  return {{"(3,4)", {leaf({3, 4}, lo, hi, 1), leaf({3, 4}, tlo, thi, 2)}},
          {"transposed", {leaf({4, 3}, lo, hi, 3), leaf({3, 4}, tlo, thi, 4)},
           [](const TensorList& l) { return TensorList{l[0].t(), l[1]}; }},
          {"0-d", {leaf({}, lo, hi, 5), leaf({}, tlo, thi, 6)}}};
}

using Loss = std::function<Tensor(const Tensor&, const Tensor&, Reduction)>;
Fn three_reductions(Loss f) {
  return [f](const TensorList& in) {
    return TensorList{f(in[0], in[1], Reduction::Mean), f(in[0], in[1], Reduction::Sum),
                      f(in[0], in[1], Reduction::None)};
  };
}

double smooth_l1_ref(double d, double beta) {
  return std::abs(d) < beta ? 0.5 * d * d / beta : std::abs(d) - 0.5 * beta;
}
double huber_ref(double d, double delta) {
  return std::abs(d) < delta ? 0.5 * d * d : delta * (std::abs(d) - 0.5 * delta);
}

// Cosine similarity along `dim` of the broadcast of x1 and x2 (at least 1-d), by loops,
// with PyTorch's clamp: each norm at least eps.
Tensor cosine_ref(const Tensor& x1, const Tensor& x2, std::int64_t dim, double eps) {
  const Shape shape = broadcast_shapes("test", x1.shape(), x2.shape());
  const auto nd = static_cast<std::int64_t>(shape.size());
  const std::int64_t d = dim < 0 ? dim + nd : dim;
  std::vector<std::int64_t> order;  // the other dims in order, then d
  for (std::int64_t k = 0; k < nd; ++k)
    if (k != d) order.push_back(k);
  order.push_back(d);
  const std::vector<double> a = values(x1.expand(shape).permute(order)), b = values(x2.expand(shape).permute(order));
  const std::int64_t n = shape[d];
  Shape out_shape = shape;
  out_shape.erase(out_shape.begin() + d);
  std::int64_t rows = 1;
  for (std::int64_t s : out_shape) rows *= s;
  std::vector<double> out;
  for (std::int64_t r = 0; r < rows; ++r) {
    double dot = 0, na = 0, nb = 0;
    for (std::int64_t k = r * n; k < (r + 1) * n; ++k) dot += a[k] * b[k], na += a[k] * a[k], nb += b[k] * b[k];
    out.push_back(dot / (std::max(std::sqrt(na), eps) * std::max(std::sqrt(nb), eps)));
  }
  return make(out_shape, out);
}

// ||x1 - x2 + eps||_p over the last dim of the broadcast, by loops (p = inf: max).
Tensor pairwise_ref(const Tensor& x1, const Tensor& x2, double p, double eps, bool keepdim) {
  const Shape shape = broadcast_shapes("test", x1.shape(), x2.shape());
  const std::vector<double> a = values(x1.expand(shape)), b = values(x2.expand(shape));
  const std::size_t n = shape.empty() ? 1 : static_cast<std::size_t>(shape.back());
  std::vector<double> out;
  for (std::size_t start = 0; start < a.size(); start += n) {
    double acc = 0;
    for (std::size_t k = 0; k < n; ++k) {
      const double v = std::abs(a[start + k] - b[start + k] + eps);
      acc = std::isinf(p) ? std::max(acc, v) : acc + std::pow(v, p);
    }
    out.push_back(std::isinf(p) ? acc : std::pow(acc, 1 / p));
  }
  Shape out_shape = shape;
  if (!out_shape.empty()) {
    if (keepdim) out_shape.back() = 1;
    else out_shape.pop_back();
  }
  return make(out_shape, out);
}

const bool registered = [] {
  op_registry().push_back(
      {.name = "smooth_l1_loss",
       .fn = [](const TensorList& in) {
         TensorList out = three_reductions([](const Tensor& a, const Tensor& b, Reduction r) {
           return smooth_l1_loss(a, b, r, 0.6);
         })(in);
         out.push_back(smooth_l1_loss(in[0], in[1], Reduction::Sum, 0.0));  // beta 0: l1
         return out;
       },
       .reference = [](const TensorList& in) {
         TensorList out = pointwise(in, [](double a, double b) { return smooth_l1_ref(a - b, 0.6); });
         out.push_back(pointwise(in, [](double a, double b) { return std::abs(a - b); })[1]);
         return out;
       },
       .samples = [] { return pair_samples(-2, 2, -2, 2); },
       .gradgrad = true});
  op_registry().push_back(
      {.name = "huber_loss",
       .fn = three_reductions([](const Tensor& a, const Tensor& b, Reduction r) { return huber_loss(a, b, r, 0.7); }),
       .reference = [](const TensorList& in) {
         return pointwise(in, [](double a, double b) { return huber_ref(a - b, 0.7); });
       },
       .samples = [] { return pair_samples(-2, 2, -2, 2); },
       .gradgrad = true});

  // kl_div: input log-probabilities, target probabilities (or log-probabilities); every
  // reduction, BatchMean dividing the sum by input.size(0).
  op_registry().push_back(
      {.name = "kl_div",
       .fn = [](const TensorList& in) {
         TensorList out =
             three_reductions([](const Tensor& a, const Tensor& b, Reduction r) { return kl_div(a, b, r); })(in);
         out.push_back(kl_div(in[0], in[1], Reduction::BatchMean));
         out.push_back(kl_div(in[0], log(in[1]), Reduction::None, true));
         return out;
       },
       .reference = [](const TensorList& in) {
         TensorList out = pointwise(in, [](double x, double t) { return t * (std::log(t) - x); });
         const double batch = in[0].dim() == 0 ? 1.0 : static_cast<double>(in[0].shape()[0]);
         out.push_back(make({}, {values(out[1])[0] / batch}));
         out.push_back(out[2]);  // log_target with log(t): the same pointwise terms
         return out;
       },
       .samples = [] {
         return std::vector<OpSample>{{"(3,4)", {leaf({3, 4}, -3, 0, 7), leaf({3, 4}, 0.05, 1, 8)}},
                                      {"broadcast target (4)", {leaf({3, 4}, -3, 0, 9), leaf({4}, 0.05, 1, 10)}},
                                      {"0-d", {leaf({}, -3, 0, 11), leaf({}, 0.05, 1, 12)}}};
       },
       .gradgrad = true});

  // eps small enough that no norm here is clamped: below eps the gradient passes the clamp
  // (PyTorch's), which finite differences cannot see; CosineSimilarityOfZeroAndTinyVectors checks it.
  op_registry().push_back(
      {.name = "cosine_similarity",
       .fn = [](const TensorList& in) {
         return TensorList{cosine_similarity(in[0], in[1], -1), cosine_similarity(in[0], in[1], 0, 0.01)};
       },
       .reference = [](const TensorList& in) {
         return TensorList{cosine_ref(in[0], in[1], -1, 1e-8), cosine_ref(in[0], in[1], 0, 0.01)};
       },
       .samples = [] {
         return std::vector<OpSample>{{"(3,4)", {leaf({3, 4}, -2, 2, 13), leaf({3, 4}, -2, 2, 14)}},
                                      {"broadcast (2,1,3) x (4,3)",
                                       {leaf({2, 1, 3}, -2, 2, 15), leaf({4, 3}, -2, 2, 16)}},
                                      {"transposed", {leaf({4, 3}, -2, 2, 17), leaf({3, 4}, -2, 2, 18)},
                                       [](const TensorList& l) { return TensorList{l[0].t(), l[1]}; }}};
       },
       .gradgrad = true});

  op_registry().push_back(
      {.name = "pairwise_distance",
       .fn = [](const TensorList& in) {
         return TensorList{pairwise_distance(in[0], in[1]), pairwise_distance(in[0], in[1], 1, 1e-6, true),
                           pairwise_distance(in[0], in[1], INFINITY, 0.1), pairwise_distance(in[0], in[1], 3),
                           pairwise_distance(in[0], in[1], 0.5)};
       },
       .reference = [](const TensorList& in) {
         return TensorList{pairwise_ref(in[0], in[1], 2, 1e-6, false), pairwise_ref(in[0], in[1], 1, 1e-6, true),
                           pairwise_ref(in[0], in[1], INFINITY, 0.1, false), pairwise_ref(in[0], in[1], 3, 1e-6, false),
                           pairwise_ref(in[0], in[1], 0.5, 1e-6, false)};
       },
       .samples = [] {
         return std::vector<OpSample>{{"(3,4)", {leaf({3, 4}, -2, 2, 19), leaf({3, 4}, -2, 2, 20)}},
                                      {"broadcast (4) x (2,4)", {leaf({4}, -2, 2, 21), leaf({2, 4}, -2, 2, 22)}},
                                      {"1-d", {leaf({5}, -2, 2, 23), leaf({5}, -2, 2, 24)}},
                                      {"0-d", {leaf({}, -2, 2, 25), leaf({}, -2, 2, 26)}}};
       },
       .gradgrad = true});
  return true;
}();

// d(sum(loss(x, 0)))/dx at the given points.
std::vector<double> loss_gradient(const std::function<Tensor(const Tensor&, const Tensor&)>& loss,
                                  const std::vector<double>& points) {
  Tensor x = make({static_cast<std::int64_t>(points.size())}, points).requires_grad_();
  sum(loss(x, zeros({static_cast<std::int64_t>(points.size())}, {.dtype = kFloat64}))).backward();
  return values(x.grad());
}

TEST(RegressionLosses, SmoothL1AndHuberAtTheirThresholds) {
  const std::vector<double> d = {-1, 1, 0, 0.5, -2};
  // PyTorch's backward: sign(d) from |d| = beta (delta) on, d / beta (d) inside.
  const auto smooth = [](double beta) {
    return [beta](const Tensor& x, const Tensor& t) { return smooth_l1_loss(x, t, Reduction::None, beta); };
  };
  const auto huber = [](double delta) {
    return [delta](const Tensor& x, const Tensor& t) { return huber_loss(x, t, Reduction::None, delta); };
  };
  expect_values(make({5}, loss_gradient(smooth(1), d)), {-1, 1, 0, 0.5, -1});
  expect_values(make({5}, loss_gradient(huber(1), d)), {-1, 1, 0, 0.5, -1});
  expect_values(make({5}, loss_gradient(huber(2), d)), {-1, 1, 0, 0.5, -2});
  const Tensor x = make({5}, d), t = zeros({5}, {.dtype = kFloat64});
  expect_values(smooth_l1_loss(x, t, Reduction::None, 2), {0.25, 0.25, 0, 0.0625, 1});
  expect_values(huber_loss(x, t, Reduction::None, 2), {0.5, 0.5, 0, 0.125, 2});
  expect_values(smooth_l1_loss(x, t, Reduction::Sum, 0), {4.5});
  // beta 0 is l1_loss, gradient sign(d) (0 at d = 0), as PyTorch >= 2.0 routes it (1.13: -1 there).
  expect_values(make({5}, loss_gradient(smooth(0), d)), {-1, 1, 0, 1, -1});
  // Mean over no elements is NaN, as PyTorch's.
  expect_values(smooth_l1_loss(zeros({0}), zeros({0})), {kNaN});
}

TEST(KLDiv, ZeroTargetsAndReductions) {
  // Zero targets contribute 0 (xlogy), unless the input is -inf there (NaN, as PyTorch's).
  expect_values(kl_div(make({3}, {-1, -3, -2}), make({3}, {0.5, 0, 0}), Reduction::None),
                {0.5 * (std::log(0.5) + 1), 0, 0});
  expect_values(kl_div(make({2}, {-1, -kInf}), make({2}, {0.5, 0}), Reduction::Sum), {kNaN});
  // Gradients: -t for the input; log t + 1 - input for the target, NaN at t = 0 (PyTorch 1.13).
  Tensor in = make({3}, {-1, -3, -2}).requires_grad_();
  Tensor t = make({3}, {0.5, 0, 0}).requires_grad_();
  sum(kl_div(in, t, Reduction::Sum)).backward();
  expect_values(in.grad(), {-0.5, 0, 0});
  expect_values(t.grad(), {std::log(0.5) + 1 + 1, kNaN, kNaN});
  // Mean over every element, BatchMean over input.size(0), and a 0-d input's BatchMean is its sum.
  const Tensor x = make({2, 2}, {-1, -2, -0.5, -1.5}), p = make({2, 2}, {0.2, 0.8, 0.6, 0.4});
  double total = 0;
  for (auto [xi, pi] : std::vector<std::pair<double, double>>{{-1, 0.2}, {-2, 0.8}, {-0.5, 0.6}, {-1.5, 0.4}})
    total += pi * (std::log(pi) - xi);
  expect_values(kl_div(x, p), {total / 4});
  expect_values(kl_div(x, p, Reduction::BatchMean), {total / 2});
  expect_values(kl_div(x, log(p), Reduction::BatchMean, true), {total / 2});
  expect_values(kl_div(make({}, {-1}), make({}, {0.5}), Reduction::BatchMean), {0.5 * (std::log(0.5) + 1)});
  // Negative targets have no logarithm: NaN, as PyTorch's xlogy.
  expect_values(kl_div(make({1}, {-1}), make({1}, {-0.5}), Reduction::None), {kNaN});
}

TEST(LossReductions, BatchMeanIsKLDivOnly) {
  const Tensor a = sample({2, 3}, 0.1, 0.9, 30), b = sample({2, 3}, 0.1, 0.9, 31);
  const Tensor classes = from_vector<std::int64_t>({0, 2});
  const Reduction bm = Reduction::BatchMean;
  expect_error([&] { mse_loss(a, b, bm); }, "mse_loss", "BatchMean");
  expect_error([&] { l1_loss(a, b, bm); }, "l1_loss", "BatchMean");
  expect_error([&] { smooth_l1_loss(a, b, bm); }, "smooth_l1_loss", "BatchMean");
  expect_error([&] { smooth_l1_loss(a, b, bm, 0); }, "smooth_l1_loss", "BatchMean");
  expect_error([&] { huber_loss(a, b, bm); }, "huber_loss", "BatchMean");
  expect_error([&] { binary_cross_entropy(a, b, {}, bm); }, "binary_cross_entropy", "BatchMean");
  expect_error([&] { binary_cross_entropy_with_logits(a, b, {}, bm); }, "binary_cross_entropy_with_logits",
               "BatchMean");
  expect_error([&] { nll_loss(a, classes, {.reduction = bm}); }, "nll_loss", "BatchMean");
  // Fused (float64 class indices), composed (label smoothing, probabilities) paths alike.
  expect_error([&] { cross_entropy(a, classes, {.reduction = bm}); }, "cross_entropy", "BatchMean");
  expect_error([&] { cross_entropy(a, classes, {.reduction = bm, .label_smoothing = 0.1}); }, "cross_entropy",
               "BatchMean");
  expect_error([&] { cross_entropy(a, b, {.reduction = bm}); }, "cross_entropy", "BatchMean");
}

TEST(Distances, CosineSimilarityOfZeroAndTinyVectors) {
  Tensor a = make({2, 3}, {1, 2, 3, 0, 0, 0}).requires_grad_();
  Tensor b = make({2, 3}, {1, 0, -1, 1, 1, 1}).requires_grad_();
  const Tensor y = cosine_similarity(a, b);
  expect_values(y, {-2 / std::sqrt(14.0) / std::sqrt(2.0), 0});
  sum(y).backward();
  // A zero row: its gradient is the other row's unit vector over eps; the other row gets 0.
  const double r3 = 1 / std::sqrt(3.0);
  const std::vector<double> ga = values(a.grad()), gb = values(b.grad());
  EXPECT_NEAR(ga[3], r3 / 1e-8, 1e-6 * r3 / 1e-8);
  EXPECT_NEAR(ga[5], r3 / 1e-8, 1e-6 * r3 / 1e-8);
  expect_values(make({3}, {gb[3], gb[4], gb[5]}), {0, 0, 0});
  // Below eps the clamp's value is used, its gradient flows through the sum of squares
  // (PyTorch 1.13: 70003571.3375, 70710678.1187, 0).
  Tensor tiny = make({1, 3}, {1e-9, 0, 0}).requires_grad_();
  const Tensor yt = cosine_similarity(tiny, make({1, 3}, {1, 1, 0}));
  expect_values(yt, {0.1 / std::sqrt(2.0)});
  sum(yt).backward();
  expect_values(tiny.grad(), {70003571.33753, 70710678.11865, 0}, 1e-12);
  // |result| <= 1 for parallel vectors of large norm.
  const Tensor huge = make({3}, {1e200, 3e200, 2e200});
  EXPECT_LE(std::abs(values(cosine_similarity(huge, mul(huge, 2.0), 0))[0]), 1.0);
}

TEST(Distances, ShapesAndDtypes) {
  EXPECT_EQ(cosine_similarity(ones({2, 1, 3}), ones({4, 3}), -1).shape(), (Shape{2, 4}));
  expect_values(cosine_similarity(make({}, {2}), make({}, {-3}), 0), {-1});
  expect_values(cosine_similarity(zeros({2, 0}), zeros({2, 0})), {0, 0});
  const Tensor mixed = cosine_similarity(from_vector<std::int64_t>({1, 2}), from_vector<float>({1, 2}), 0);
  EXPECT_EQ(mixed.dtype(), kFloat32);
  expect_values(mixed, {1}, 1e-6);
  const Tensor x1 = make({2, 2}, {1, 2, 3, 4}), x2 = make({2, 2}, {0, 0, 1, 1});
  expect_values(pairwise_distance(x1, x2), {std::hypot(1 + 1e-6, 2 + 1e-6), std::hypot(2 + 1e-6, 3 + 1e-6)});
  EXPECT_EQ(pairwise_distance(x1, x2, 2, 1e-6, true).shape(), (Shape{2, 1}));
  const Tensor one_d = pairwise_distance(make({2}, {1, 2}), make({2}, {0, 0}));
  EXPECT_EQ(one_d.shape(), Shape{});
  expect_values(pairwise_distance(make({}, {1}), make({}, {3})), {2 - 1e-6});
  expect_values(pairwise_distance(make({}, {1}), make({2}, {3, 4})), {std::hypot(2 - 1e-6, 3 - 1e-6)});
  expect_values(pairwise_distance(make({1, 2}, {1, -2}), zeros({1, 2}), INFINITY), {2 - 1e-6});
  // Any p, as PyTorch 1.13 gives for x1 - x2 = (1, -2): p = 1, 3, 0.5, 0 (nonzero count), -1.
  const Tensor d1 = make({1, 2}, {1, -2}), d0 = zeros({1, 2}, {.dtype = kFloat64});
  expect_values(pairwise_distance(d1, d0, 1), {3});
  expect_values(pairwise_distance(d1, d0, 3), {2.0800831296910918});
  expect_values(pairwise_distance(d1, d0, 0.5), {5.828427831852178});
  expect_values(pairwise_distance(d1, d0, 0), {2});
  expect_values(pairwise_distance(d1, d0, -1), {0.6666669999996667});
  const Tensor ints =
      pairwise_distance(from_vector<std::int64_t>({1, 2}, {1, 2}), from_vector<std::int64_t>({0, 0}, {1, 2}));
  EXPECT_EQ(ints.dtype(), kFloat32);
  expect_values(ints, {std::hypot(1 + 1e-6, 2 + 1e-6)}, 1e-6);
  expect_values(pairwise_distance(zeros({2, 0}), zeros({2, 0})), {0, 0});
}

TEST(LossDistanceOps, Errors) {
  const Tensor a = zeros({2, 3});
  expect_error([&] { smooth_l1_loss(a, a, Reduction::Mean, -1); }, "smooth_l1_loss", "beta must be >= 0, got -1");
  expect_error([&] { huber_loss(a, a, Reduction::Mean, 0); }, "huber_loss", "delta must be > 0, got 0");
  expect_error([&] { smooth_l1_loss(a, zeros({3})); }, "smooth_l1_loss", "[3]");
  expect_error([&] { huber_loss(a, zeros({2})); }, "huber_loss", "[2]");
  const Tensor one = from_vector<std::int64_t>({1});
  expect_error([&] { smooth_l1_loss(one, one); }, "smooth_l1_loss", "int64");
  expect_error([] { kl_div(from_vector<std::int64_t>({1}), zeros({1})); }, "kl_div", "int64");
  expect_error([&] { kl_div(a, zeros({4})); }, "kl_div", "[4]");
  expect_error([] { cosine_similarity(from_vector<std::int64_t>({1}), from_vector<std::int64_t>({1}), 0); },
               "cosine_similarity", "int64");
  expect_error([&] { cosine_similarity(a, zeros({2, 4})); }, "cosine_similarity", "[2, 4]");
  expect_error([] { cosine_similarity(zeros({3}), zeros({3})); }, "cosine_similarity", "dimension 1");
  expect_error([&] { cosine_similarity(a, a, 1, -1); }, "cosine_similarity", "eps must be >= 0");
  expect_error([&] { pairwise_distance(a, zeros({2, 4})); }, "pairwise_distance", "[2, 4]");
}

}  // namespace
}  // namespace infini::test::loss_distance_ops_test
