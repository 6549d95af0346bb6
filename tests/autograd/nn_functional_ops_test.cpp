// Op table entries for the nn functional family, with float64 references written as
// naive loops over rows, plus option, statistics and error tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <vector>

#include "op_info.h"

namespace infini::test::nn_functional_ops_test {
namespace {

Tensor make(const Shape& shape, const std::vector<double>& v) {
  return from_vector(v, {static_cast<std::int64_t>(v.size())}).reshape(shape);
}

Tensor leaf(const Shape& shape, double lo, double hi, std::uint64_t seed) {
  return sample(shape, lo, hi, seed).requires_grad_();
}

// Applies f to every 1-d row of x along `dim` (moved last), returning the same shape.
Tensor map_rows(const Tensor& x, std::int64_t dim, const std::function<std::vector<double>(std::vector<double>)>& f) {
  const Tensor moved = x.transpose(dim, -1).contiguous();
  const std::vector<double> v = values(moved);
  const std::int64_t n = moved.dim() ? moved.shape().back() : 1;
  std::vector<double> out;
  for (std::size_t start = 0; start < v.size(); start += static_cast<std::size_t>(n)) {
    const auto row = f(std::vector<double>(v.begin() + start, v.begin() + start + n));
    out.insert(out.end(), row.begin(), row.end());
  }
  return make(moved.shape(), out).transpose(dim, -1).contiguous();
}

std::vector<double> softmax_row(std::vector<double> r) {
  const double m = *std::max_element(r.begin(), r.end());
  double s = 0;
  for (double& e : r) s += (e = std::exp(e - m));
  for (double& e : r) e /= s;
  return r;
}

std::vector<double> log_softmax_row(std::vector<double> r) {
  const double m = *std::max_element(r.begin(), r.end());
  double s = 0;
  for (double e : r) s += std::exp(e - m);
  for (double& e : r) e = e - m - std::log(s);
  return r;
}

std::vector<OpSample> row_samples() {
  return {{"(3,5)", {leaf({3, 5}, -3, 3, 1)}},
          {"transposed (4,3)", {leaf({3, 4}, -3, 3, 2)}, [](const TensorList& l) { return TensorList{l[0].t()}; }},
          {"(2,3,4) sliced", {leaf({2, 3, 8}, -3, 3, 3)}, [](const TensorList& l) { return TensorList{l[0].slice(2, 0, 8, 2)}; }},
          {"zero rows", {leaf({0, 4}, -3, 3, 4)}}};
}

// Cross entropy of (N, C) logits against class indices, with every option, by hand.
double cross_entropy_ref(const std::vector<double>& logits, std::int64_t n, std::int64_t c,
                         const std::vector<std::int64_t>& target, const std::vector<double>& weight,
                         std::int64_t ignore, double smoothing, int reduction, std::vector<double>* per_sample) {
  double total = 0, weight_total = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const auto logp = log_softmax_row(std::vector<double>(logits.begin() + i * c, logits.begin() + (i + 1) * c));
    double loss = 0;
    if (target[i] != ignore) {
      const double w = weight.empty() ? 1 : weight[target[i]];
      double smooth = 0;
      for (std::int64_t k = 0; k < c; ++k) smooth -= (weight.empty() ? 1 : weight[k]) * logp[k];
      loss = (1 - smoothing) * (-w * logp[target[i]]) + smoothing / static_cast<double>(c) * smooth;
      weight_total += w;
    }
    if (per_sample) per_sample->push_back(loss);
    total += loss;
  }
  return reduction == 1 ? total / weight_total : total;
}

const bool registered = [] {
  op_registry().push_back({.name = "softmax",
                           .fn = [](const TensorList& in) { return TensorList{softmax(in[0], -1), softmax(in[0], 0)}; },
                           .reference = [](const TensorList& in) {
                             return TensorList{map_rows(in[0], -1, softmax_row), map_rows(in[0], 0, softmax_row)};
                           },
                           .samples = row_samples,
                           .gradgrad = true});
  op_registry().push_back(
      {.name = "log_softmax",
       .fn = [](const TensorList& in) { return TensorList{log_softmax(in[0], 1), log_softmax(in[0], 0)}; },
       .reference = [](const TensorList& in) {
         return TensorList{map_rows(in[0], 1, log_softmax_row), map_rows(in[0], 0, log_softmax_row)};
       },
       .samples = row_samples,
       .gradgrad = true});

  // cross_entropy / nll_loss with class-index targets: mean, sum, none, weights, ignore_index, smoothing.
  const std::vector<std::int64_t> targets = {2, 0, 4, -100};
  const std::vector<double> class_weight = {0.5, 1.0, 2.0, 1.5, 0.25};
  auto ce_samples = [] {
    return std::vector<OpSample>{{"(4,5)", {leaf({4, 5}, -2, 2, 5)}},
                                 {"transposed logits", {leaf({5, 4}, -2, 2, 6)},
                                  [](const TensorList& l) { return TensorList{l[0].t()}; }}};
  };
  op_registry().push_back(
      {.name = "cross_entropy",
       .fn = [=](const TensorList& in) {
         const Tensor t = from_vector(targets).to(in[0].device());
         const Tensor w = from_vector(class_weight).to(in[0].device());
         return TensorList{cross_entropy(in[0], t),
                           cross_entropy(in[0], t, {.weight = w, .reduction = Reduction::Sum}),
                           cross_entropy(in[0], t, {.weight = w, .label_smoothing = 0.1}),
                           cross_entropy(in[0], t, {.reduction = Reduction::None, .label_smoothing = 0.2})};
       },
       .reference = [=](const TensorList& in) {
         const std::vector<double> x = values(in[0]);
         std::vector<double> none;
         cross_entropy_ref(x, 4, 5, targets, {}, -100, 0.2, 0, &none);
         return TensorList{make({}, {cross_entropy_ref(x, 4, 5, targets, {}, -100, 0, 1, nullptr)}),
                           make({}, {cross_entropy_ref(x, 4, 5, targets, class_weight, -100, 0, 2, nullptr)}),
                           make({}, {cross_entropy_ref(x, 4, 5, targets, class_weight, -100, 0.1, 1, nullptr)}),
                           make({4}, none)};
       },
       .samples = ce_samples,
       .gradgrad = true});
  // padded_cross_entropy: (4, 7) logits whose last 2 columns are padding.
  op_registry().push_back(
      {.name = "padded_cross_entropy",
       .fn = [=](const TensorList& in) {
         const Tensor t = from_vector(targets).to(in[0].device());
         return TensorList{padded_cross_entropy(in[0], t, 5),
                           padded_cross_entropy(in[0], t, 5, {.reduction = Reduction::None})};
       },
       .reference = [=](const TensorList& in) {
         const std::vector<double> wide = values(in[0]);
         std::vector<double> x;  // the 5 class columns of each row
         for (std::int64_t i = 0; i < 4; ++i) x.insert(x.end(), wide.begin() + i * 7, wide.begin() + i * 7 + 5);
         std::vector<double> none;
         cross_entropy_ref(x, 4, 5, targets, {}, -100, 0, 0, &none);
         return TensorList{make({}, {cross_entropy_ref(x, 4, 5, targets, {}, -100, 0, 1, nullptr)}), make({4}, none)};
       },
       .samples = [] {
         return std::vector<OpSample>{{"(4,7)", {leaf({4, 7}, -2, 2, 7)}},
                                      {"transposed logits", {leaf({7, 4}, -2, 2, 8)},
                                       [](const TensorList& l) { return TensorList{l[0].t()}; }}};
       },
       .gradgrad = true});
  op_registry().push_back(
      {.name = "nll_loss",
       .fn = [=](const TensorList& in) {
         const Device device = in[0].device();
         return TensorList{nll_loss(log_softmax(in[0], 1), from_vector(targets).to(device),
                                    {.weight = from_vector(class_weight).to(device)})};
       },
       .reference = [=](const TensorList& in) {
         return TensorList{make({}, {cross_entropy_ref(values(in[0]), 4, 5, targets, class_weight, -100, 0, 1, nullptr)})};
       },
       .samples = ce_samples,
       .gradgrad = true});

  // Pointwise losses: (input, target) of one shape.
  auto pair_samples = [](double lo, double hi, double tlo, double thi) {
    return [=] {
      return std::vector<OpSample>{{"(3,4)", {leaf({3, 4}, lo, hi, 7), leaf({3, 4}, tlo, thi, 8)}},
                                   {"transposed", {leaf({4, 3}, lo, hi, 9), leaf({3, 4}, tlo, thi, 10)},
                                    [](const TensorList& l) { return TensorList{l[0].t(), l[1]}; }}};
    };
  };
  auto pointwise = [](const TensorList& in, const std::function<double(double, double)>& f) {
    const auto a = values(in[0]), b = values(in[1]);
    double total = 0;
    std::vector<double> each;
    for (std::size_t i = 0; i < a.size(); ++i) each.push_back(f(a[i], b[i])), total += each.back();
    return TensorList{make({}, {total / static_cast<double>(a.size())}), make({}, {total}), make(in[0].shape(), each)};
  };
  auto three_reductions = [](std::function<Tensor(const Tensor&, const Tensor&, Reduction)> f) {
    return [f](const TensorList& in) {
      return TensorList{f(in[0], in[1], Reduction::Mean), f(in[0], in[1], Reduction::Sum), f(in[0], in[1], Reduction::None)};
    };
  };
  op_registry().push_back({.name = "mse_loss",
                           .fn = three_reductions([](const Tensor& a, const Tensor& b, Reduction r) { return mse_loss(a, b, r); }),
                           .reference = [=](const TensorList& in) { return pointwise(in, [](double a, double b) { return (a - b) * (a - b); }); },
                           .samples = pair_samples(-2, 2, -2, 2),
                           .gradgrad = true});
  op_registry().push_back({.name = "l1_loss",
                           .fn = three_reductions([](const Tensor& a, const Tensor& b, Reduction r) { return l1_loss(a, b, r); }),
                           .reference = [=](const TensorList& in) { return pointwise(in, [](double a, double b) { return std::abs(a - b); }); },
                           .samples = pair_samples(-2, 2, -2, 2)});
  op_registry().push_back(
      {.name = "binary_cross_entropy",
       .fn = three_reductions([](const Tensor& a, const Tensor& b, Reduction r) { return binary_cross_entropy(a, b, {}, r); }),
       .reference = [=](const TensorList& in) {
         return pointwise(in, [](double p, double t) { return -(t * std::log(p) + (1 - t) * std::log(1 - p)); });
       },
       .samples = pair_samples(0.05, 0.95, 0, 1),
       .gradgrad = true});
  op_registry().push_back(
      {.name = "binary_cross_entropy_with_logits",
       .fn = three_reductions([](const Tensor& a, const Tensor& b, Reduction r) {
         return binary_cross_entropy_with_logits(a, b, {}, r, from_vector<double>({2.0, 0.5, 1.0, 3.0}).to(a.device()));
       }),
       .reference = [=](const TensorList& in) {
         const auto a = values(in[0]), b = values(in[1]);
         const double pw[4] = {2.0, 0.5, 1.0, 3.0};
         std::vector<double> each;
         double total = 0;
         for (std::size_t i = 0; i < a.size(); ++i) {
           const double s = 1 / (1 + std::exp(-a[i]));
           each.push_back(-(pw[i % 4] * b[i] * std::log(s) + (1 - b[i]) * std::log(1 - s)));
           total += each.back();
         }
         return TensorList{make({}, {total / static_cast<double>(a.size())}), make({}, {total}), make(in[0].shape(), each)};
       },
       .samples = pair_samples(-3, 3, 0, 1),
       .gradgrad = true});

  // Normalisations: rows of the trailing dims, by hand.
  auto normalize_rows = [](const Tensor& x, std::int64_t row, double eps, bool rms) {
    const std::vector<double> v = values(x);
    std::vector<double> out(v.size());
    for (std::size_t s = 0; s < v.size(); s += static_cast<std::size_t>(row)) {
      double m = 0, q = 0;
      for (std::int64_t i = 0; i < row; ++i) m += v[s + i];
      m = rms ? 0 : m / static_cast<double>(row);
      for (std::int64_t i = 0; i < row; ++i) q += (v[s + i] - m) * (v[s + i] - m);
      const double r = 1 / std::sqrt(q / static_cast<double>(row) + eps);
      for (std::int64_t i = 0; i < row; ++i) out[s + i] = (v[s + i] - m) * r;
    }
    return make(x.shape(), out);
  };
  op_registry().push_back(
      {.name = "layer_norm",
       .fn = [](const TensorList& in) {
         return TensorList{layer_norm(in[0], {4}, in[1], in[2], 1e-5), layer_norm(in[0], {3, 4}, {}, {}, 1e-3)};
       },
       .reference = [=](const TensorList& in) {
         const Tensor y = normalize_rows(in[0], 4, 1e-5, false);
         return TensorList{add(mul(y, in[1].detach()), in[2].detach()), normalize_rows(in[0], 12, 1e-3, false)};
       },
       .samples = [] {
         return std::vector<OpSample>{
             {"(2,3,4) affine", {leaf({2, 3, 4}, -2, 2, 11), leaf({4}, 0.5, 1.5, 12), leaf({4}, -1, 1, 13)}},
             {"transposed input", {leaf({2, 4, 3}, -2, 2, 14), leaf({4}, 0.5, 1.5, 15), leaf({4}, -1, 1, 16)},
              [](const TensorList& l) { return TensorList{l[0].transpose(1, 2), l[1], l[2]}; }},
             // 150 rows: the fused kernels sum the affine gradients over chunks of 64 rows.
             {"(50,3,4) affine", {leaf({50, 3, 4}, -2, 2, 21), leaf({4}, 0.5, 1.5, 22), leaf({4}, -1, 1, 23)}}};
       },
       .gradgrad = true});
  op_registry().push_back(
      {.name = "layer_norm_with_residual",
       .fn = [](const TensorList& in) {
         const auto [y, residual] = layer_norm_with_residual(in[0], {4}, in[1], in[2], 1e-5);
         return TensorList{y, residual};
       },
       .reference = [=](const TensorList& in) {
         const Tensor y = normalize_rows(in[0], 4, 1e-5, false);
         return TensorList{add(mul(y, in[1].detach()), in[2].detach()), in[0].detach()};
       },
       .samples = [] {
         return std::vector<OpSample>{
             {"(2,3,4) affine", {leaf({2, 3, 4}, -2, 2, 24), leaf({4}, 0.5, 1.5, 25), leaf({4}, -1, 1, 26)}},
             {"transposed input", {leaf({2, 4, 3}, -2, 2, 27), leaf({4}, 0.5, 1.5, 28), leaf({4}, -1, 1, 29)},
              [](const TensorList& l) { return TensorList{l[0].transpose(1, 2), l[1], l[2]}; }}};
       },
       .gradgrad = true});
  op_registry().push_back(
      {.name = "rms_norm",
       .fn = [](const TensorList& in) { return TensorList{rms_norm(in[0], {4}, in[1], 1e-6)}; },
       .reference = [=](const TensorList& in) { return TensorList{mul(normalize_rows(in[0], 4, 1e-6, true), in[1].detach())}; },
       .samples = [] {
         return std::vector<OpSample>{{"(3,4)", {leaf({3, 4}, -2, 2, 17), leaf({4}, 0.5, 1.5, 18)}},
                                      {"expanded", {leaf({1, 4}, -2, 2, 19), leaf({4}, 0.5, 1.5, 20)},
                                       [](const TensorList& l) { return TensorList{l[0].expand({3, 4}), l[1]}; }}};
       },
       .gradgrad = true});
  op_registry().push_back(
      {.name = "group_norm",
       .fn = [](const TensorList& in) { return TensorList{group_norm(in[0], 2, in[1], in[2])}; },
       .reference = [=](const TensorList& in) {
         // (N=2, C=4, L=3) with 2 groups: rows of 2 channels x 3 positions.
         const Tensor y = normalize_rows(in[0].contiguous().reshape({2, 2, 6}), 6, 1e-5, false).reshape({2, 4, 3});
         return TensorList{add(mul(y, in[1].detach().view({1, 4, 1})), in[2].detach().view({1, 4, 1}))};
       },
       .samples = [] {
         return std::vector<OpSample>{{"(2,4,3)", {leaf({2, 4, 3}, -2, 2, 21), leaf({4}, 0.5, 1.5, 22), leaf({4}, -1, 1, 23)}}};
       }});
  op_registry().push_back(
      {.name = "batch_norm",
       .fn = [](const TensorList& in) {
         return TensorList{batch_norm(in[0], {}, {}, in[1], in[2], true),
                           batch_norm(in[0], from_vector<double>({0.1, -0.2, 0.3}).to(in[0].device()),
                                      from_vector<double>({1.5, 0.5, 2.0}).to(in[0].device()), in[1], in[2], false)};
       },
       .reference = [=](const TensorList& in) {
         // Training: per-channel statistics over (N, L) of an (N=2, C=3, L=2) input.
         const std::vector<double> x = values(in[0]), w = values(in[1]), b = values(in[2]);
         const double rm[3] = {0.1, -0.2, 0.3}, rv[3] = {1.5, 0.5, 2.0};
         std::vector<double> train(x.size()), eval(x.size());
         for (int c = 0; c < 3; ++c) {
           double m = 0, q = 0;
           for (int n = 0; n < 2; ++n)
             for (int l = 0; l < 2; ++l) m += x[(n * 3 + c) * 2 + l] / 4;
           for (int n = 0; n < 2; ++n)
             for (int l = 0; l < 2; ++l) q += std::pow(x[(n * 3 + c) * 2 + l] - m, 2) / 4;
           for (int n = 0; n < 2; ++n)
             for (int l = 0; l < 2; ++l) {
               const int i = (n * 3 + c) * 2 + l;
               train[i] = (x[i] - m) / std::sqrt(q + 1e-5) * w[c] + b[c];
               eval[i] = (x[i] - rm[c]) / std::sqrt(rv[c] + 1e-5) * w[c] + b[c];
             }
         }
         return TensorList{make({2, 3, 2}, train), make({2, 3, 2}, eval)};
       },
       .samples = [] {
         return std::vector<OpSample>{{"(2,3,2)", {leaf({2, 3, 2}, -2, 2, 24), leaf({3}, 0.5, 1.5, 25), leaf({3}, -1, 1, 26)}}};
       }});
  op_registry().push_back(
      {.name = "dropout",
       .fn = [](const TensorList& in) {
         Generator g(99);
         return TensorList{dropout(in[0], 0.4, true, &g), dropout(in[0], 0.4, false)};
       },
       .reference = [](const TensorList& in) {
         Generator g(99);  // the mask is the generator's uniform draws >= p
         const std::vector<double> u = values(rand(in[0].shape(), {.dtype = in[0].dtype()}, &g)), x = values(in[0]);
         std::vector<double> out(x.size());
         for (std::size_t i = 0; i < x.size(); ++i) out[i] = u[i] >= 0.4 ? x[i] / 0.6 : 0.0;
         return TensorList{make(in[0].shape(), out), in[0].detach()};
       },
       .samples = [] { return std::vector<OpSample>{{"(4,5)", {leaf({4, 5}, -2, 2, 27)}}}; }});
  op_registry().push_back(
      {.name = "rope",
       .fn = [](const TensorList& in) {
         const RopeFrequencies f = rope_frequencies(4, 5, 10000.0, false);
         return TensorList{rope(in[0], f.cos.to(in[0].device()), f.sin.to(in[0].device()))};
       },
       .reference = [](const TensorList& in) {
         // x (2, 3, 4): position t = dim 1, pairs (0,1) and (2,3) with freq 1 and 1/100.
         const std::vector<double> x = values(in[0]);
         std::vector<double> out(x.size());
         for (int b = 0; b < 2; ++b)
           for (int t = 0; t < 3; ++t)
             for (int i = 0; i < 2; ++i) {
               const double angle = t * std::pow(10000.0, -2.0 * i / 4.0);
               const float c = static_cast<float>(std::cos(angle)), s = static_cast<float>(std::sin(angle));
               const int k = (b * 3 + t) * 4 + 2 * i;
               out[k] = x[k] * c - x[k + 1] * s;
               out[k + 1] = x[k] * s + x[k + 1] * c;
             }
         return TensorList{make({2, 3, 4}, out)};
       },
       .samples = [] {
         return std::vector<OpSample>{{"(2,3,4)", {leaf({2, 3, 4}, -2, 2, 28)}},
                                      {"transposed", {leaf({3, 2, 4}, -2, 2, 29)},
                                       [](const TensorList& l) { return TensorList{l[0].transpose(0, 1)}; }}};
       },
       .gradgrad = true});
  op_registry().push_back(
      {.name = "rope_frequencies",
       .fn = [](const TensorList&) {
         const RopeFrequencies f = rope_frequencies(8, 3, 500000.0, true, 8.0, 1.0, 4.0, 8192);
         return TensorList{f.cos, f.sin};
       },
       .reference = [](const TensorList&) {
         std::vector<double> c, s;
         for (int t = 0; t < 3; ++t)
           for (int i = 0; i < 4; ++i) {
             double f = std::pow(500000.0, -2.0 * i / 8.0);
             const double wavelen = 2 * std::numbers::pi / f;
             if (wavelen > 8192.0) f /= 8.0;
             else if (wavelen >= 2048.0) {
               const double smooth = (8192.0 / wavelen - 1.0) / 3.0;
               f = (1 - smooth) * f / 8.0 + smooth * f;
             }
             c.push_back(static_cast<float>(std::cos(t * f)));
             s.push_back(static_cast<float>(std::sin(t * f)));
           }
         return TensorList{make({3, 4}, c), make({3, 4}, s)};
       },
       .samples = [] { return std::vector<OpSample>{{"head_dim 8", {}}}; },
       .differentiable = false,
       .tolerance = 1e-7});
  op_registry().push_back(
      {.name = "embedding",
       .fn = [](const TensorList& in) {
         const Tensor idx = from_vector<std::int64_t>({3, 0, 3, 1, 4, 0}, {2, 3}).to(in[0].device());
         return TensorList{embedding(idx, in[0])};  // padding_idx: see EmbeddingPaddingRowGetsNoGradient
       },
       .reference = [](const TensorList& in) {
         const std::vector<std::int64_t> idx = {3, 0, 3, 1, 4, 0};
         const std::vector<double> w = values(in[0]);
         const std::int64_t c = in[0].shape()[1];
         std::vector<double> out;
         for (std::int64_t i : idx)
           for (std::int64_t k = 0; k < c; ++k) out.push_back(w[i * c + k]);
         return TensorList{make({2, 3, c}, out)};
       },
       .samples = [] {
         return std::vector<OpSample>{{"(5,3)", {leaf({5, 3}, -2, 2, 32)}},
                                      {"transposed weight", {leaf({3, 5}, -2, 2, 33)},
                                       [](const TensorList& l) { return TensorList{l[0].t()}; }}};
       }});
  op_registry().push_back(
      {.name = "silu_and_mul",
       .fn = [](const TensorList& in) { return TensorList{silu_and_mul(in[0], in[1])}; },
       .reference = [](const TensorList& in) {
         const auto a = values(in[0]), b = values(in[1]);
         std::vector<double> out(a.size());
         for (std::size_t i = 0; i < a.size(); ++i) out[i] = a[i] / (1 + std::exp(-a[i])) * b[i];
         return TensorList{make(in[0].shape(), out)};
       },
       .samples = [] { return std::vector<OpSample>{{"(3,4)", {leaf({3, 4}, -2, 2, 30), leaf({3, 4}, -2, 2, 31)}}}; },
       .gradgrad = true});
  return true;
}();

TEST(NNFunctional, CrossEntropyWithProbabilities) {
  const Tensor logits = sample({3, 4}, -2, 2, 40);
  const Tensor probs = softmax(sample({3, 4}, -1, 1, 41), 1);
  const auto x = values(logits), p = values(probs);
  double expected = 0;
  for (int i = 0; i < 3; ++i) {
    const auto logp = log_softmax_row(std::vector<double>(x.begin() + 4 * i, x.begin() + 4 * i + 4));
    for (int k = 0; k < 4; ++k) expected -= (p[4 * i + k] * 0.9 + 0.1 / 4) * logp[k] / 3;
  }
  EXPECT_NEAR(cross_entropy(logits, probs, {.label_smoothing = 0.1}).item<double>(), expected, 1e-12);
}

TEST(NNFunctional, BatchNormUpdatesRunningStatistics) {
  const Tensor x = sample({4, 2, 3}, -2, 2, 42);
  Tensor rm = zeros({2}, {.dtype = kFloat64}), rv = ones({2}, {.dtype = kFloat64});
  batch_norm(x, rm, rv, {}, {}, true, 0.1);
  const auto v = values(x);
  for (int c = 0; c < 2; ++c) {
    double m = 0, q = 0;
    for (int n = 0; n < 4; ++n)
      for (int l = 0; l < 3; ++l) m += v[(n * 2 + c) * 3 + l] / 12;
    for (int n = 0; n < 4; ++n)
      for (int l = 0; l < 3; ++l) q += std::pow(v[(n * 2 + c) * 3 + l] - m, 2) / 11;  // unbiased
    EXPECT_NEAR(values(rm)[c], 0.1 * m, 1e-12);
    EXPECT_NEAR(values(rv)[c], 0.9 + 0.1 * q, 1e-12);
  }
}

TEST(NNFunctional, EmbeddingPaddingRowGetsNoGradient) {
  Tensor w = sample({4, 2}, -1, 1, 50).requires_grad_();
  sum(embedding(from_vector<std::int64_t>({2, 2, 1, 3}), w, 2)).backward();
  EXPECT_EQ(values(w.grad()), (std::vector<double>{0, 0, 1, 1, 0, 0, 1, 1}));
  EXPECT_THROW(embedding(from_vector<std::int64_t>({4}), w), IndexError);
  EXPECT_THROW(embedding(from_vector<std::int64_t>({0}), w, 7), IndexError);
  EXPECT_THROW(embedding(from_vector<std::int64_t>({0}), zeros({3})), ShapeError);
}

TEST(NNFunctional, DropoutStatistics) {
  Generator g(5);
  const Tensor y = dropout(ones({100000}), 0.3, true, &g);
  const auto v = values(y);
  const double kept = static_cast<double>(std::count_if(v.begin(), v.end(), [](double e) { return e != 0; })) / 1e5;
  EXPECT_NEAR(kept, 0.7, 0.005);
  EXPECT_NEAR(values(mean(y))[0], 1.0, 0.01);
  for (double e : v) EXPECT_TRUE(e == 0 || std::abs(e - 1 / 0.7) < 1e-6);
}

TEST(NNFunctional, RopeKeepsEachRotatedEntryOfItsOwn) {
  // A pair (1, inf) at position 1: each rotated entry is infinite with the sign of the
  // rotation (cos 1 - inf sin 1, sin 1 + inf cos 1), not NaN from another entry times 0.
  const RopeFrequencies f = rope_frequencies(2, 2, 10000.0, false);
  const Tensor x = from_vector<float>({0, 0, 1, std::numeric_limits<float>::infinity()}, {2, 2});
  const std::vector<double> y = values(rope(x, f.cos, f.sin));
  EXPECT_EQ(y[0], 0.0);
  EXPECT_EQ(y[1], 0.0);
  EXPECT_EQ(y[2], -std::numeric_limits<double>::infinity());
  EXPECT_EQ(y[3], std::numeric_limits<double>::infinity());
}

TEST(NNFunctional, Errors) {
  const Tensor logits = zeros({3, 4});
  expect_error([&] { cross_entropy(logits, from_vector<std::int64_t>({0, 4, 1})); }, "cross_entropy", "out of bounds");
  expect_error([&] { cross_entropy(logits, from_vector<std::int64_t>({0, 1})); }, "nll_loss", "[2]");
  expect_error([&] { cross_entropy(logits, zeros({3, 5})); }, "cross_entropy", "[3, 5]");
  expect_error([&] { nll_loss(logits, zeros({3})); }, "nll_loss", "class indices");
  expect_error([&] { cross_entropy(logits, from_vector<std::int64_t>({0, 1, 2}), {.weight = ones({3})}); }, "nll_loss", "weight");
  expect_error([&] { softmax(zeros({2}, {.dtype = kInt64}), 0); }, "softmax", "int64");
  expect_error([&] { softmax(logits, 2); }, "softmax", "dimension 2");
  expect_error([&] { layer_norm(logits, {3}); }, "layer_norm", "[3]");
  expect_error([&] { layer_norm(logits, {4}, ones({3})); }, "layer_norm", "weight");
  expect_error([&] { batch_norm(zeros({1, 3}), {}, {}, {}, {}, true); }, "batch_norm", "more than 1 value");
  expect_error([&] { group_norm(zeros({2, 6, 2}), 4); }, "group_norm", "num_groups 4");
  expect_error([&] { mse_loss(zeros({2}), zeros({3})); }, "mse_loss", "[2]");
  expect_error([&] { binary_cross_entropy(full({2}, 1.5), zeros({2})); }, "binary_cross_entropy", "[0, 1]");
  expect_error([&] { dropout(logits, 1.5); }, "dropout", "[0, 1]");
  expect_error([&] { rope(zeros({2, 3}), zeros({2, 1}), zeros({2, 1})); }, "rope", "even");
  expect_error([&] { rope(zeros({3, 4}), zeros({2, 2}), zeros({2, 2})); }, "rope", "do not cover");
}

}  // namespace
}  // namespace infini::test::nn_functional_ops_test
