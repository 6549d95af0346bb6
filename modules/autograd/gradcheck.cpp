module;
#include <cmath>
#include <cstdint>
module infini.autograd;
import infini.std;

namespace infini::autograd {
namespace {

// Element k (row-major) of t as a 0-d view.
Tensor element(const Tensor& t, std::int64_t k) {
  Tensor e = t;
  std::vector<std::int64_t> index(static_cast<std::size_t>(t.dim()));
  for (std::int64_t d = t.dim() - 1, rest = k; d >= 0; --d) {
    index[d] = rest % t.shape()[d];
    rest /= t.shape()[d];
  }
  for (std::int64_t d = 0; d < t.dim(); ++d) e = e.select(0, index[d]);
  return e;
}

std::vector<double> values(const Tensor& t) {
  const Tensor flat = t.detach().to(kFloat64).contiguous();
  const double* p = flat.data_ptr<double>();
  return std::vector<double>(p, p + flat.numel());
}

}  // namespace

GradcheckResult gradcheck(const DifferentiableFn& fn, const TensorList& inputs, GradcheckOptions options) {
  TensorList diff;  // the inputs to check
  std::vector<std::size_t> diff_index;
  for (std::size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].defined() && inputs[i].requires_grad()) {
      diff.push_back(inputs[i]);
      diff_index.push_back(i);
    }
  const std::size_t output_count = fn(inputs).size();
  for (std::size_t o = 0; o < output_count; ++o) {
    // A fresh graph per output: the numerical part below perturbs the inputs in place.
    const TensorList outputs = fn(inputs);
    const Tensor& out = outputs[o];
    if (!out.defined() || !is_floating_point(out.dtype())) continue;
    // Analytical Jacobian rows: one backward per output element.
    std::vector<std::vector<std::vector<double>>> analytical(out.numel());  // [j][input][k]
    for (std::int64_t j = 0; j < out.numel(); ++j) {
      Tensor onehot = zeros_like(out);
      {
        NoGradGuard no_grad;
        element(onehot, j).fill_(1);
      }
      TensorList grads;
      if (out.requires_grad()) grads = grad({out}, diff, {onehot}, true, false, true);
      else grads.resize(diff.size());
      for (std::size_t i = 0; i < diff.size(); ++i)
        analytical[j].push_back(grads[i].defined() ? values(grads[i]) : std::vector<double>(diff[i].numel(), 0.0));
    }
    // Numerical columns: central differences, one input element at a time.
    for (std::size_t i = 0; i < diff.size(); ++i) {
      for (std::int64_t k = 0; k < diff[i].numel(); ++k) {
        // Perturb element k in place (without recording), evaluate fn as it is (it may
        // itself take gradients, as in gradgradcheck), restore.
        const Tensor x = element(diff[i].detach(), k);
        const double original = x.item<double>();
        auto evaluate_at = [&](double value) {
          {
            NoGradGuard no_grad;
            Tensor(x).fill_(value);
          }
          return values(fn(inputs)[o]);
        };
        const std::vector<double> plus = evaluate_at(original + options.eps);
        const std::vector<double> minus = evaluate_at(original - options.eps);
        {
          NoGradGuard no_grad;
          Tensor(x).fill_(original);
        }
        for (std::int64_t j = 0; j < out.numel(); ++j) {
          const double numerical = (plus[j] - minus[j]) / (2 * options.eps);
          const double a = analytical[j][i][k];
          if (!(std::abs(a - numerical) <= options.atol + options.rtol * std::abs(numerical)))
            return {false, concat("output ", o, " element ", j, " w.r.t. input ", diff_index[i], " element ", k,
                                  ": analytical ", a, ", numerical ", numerical)};
        }
      }
    }
  }
  return {};
}

GradcheckResult gradgradcheck(const DifferentiableFn& fn, const TensorList& inputs, GradcheckOptions options) {
  const TensorList outputs = fn(inputs);
  TensorList extended = inputs;
  std::vector<std::size_t> output_slots;
  Generator generator(1234);
  for (std::size_t o = 0; o < outputs.size(); ++o) {
    if (!outputs[o].defined() || !outputs[o].requires_grad()) continue;
    Tensor g = randn(outputs[o].shape(), {.dtype = outputs[o].dtype(), .device = outputs[o].device()}, &generator);
    extended.push_back(g.requires_grad_());
    output_slots.push_back(o);
  }
  const std::size_t n = inputs.size();
  auto first_derivatives = [&fn, n, output_slots](const TensorList& args) {
    const TensorList in(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(n));
    const TensorList out = fn(in);
    TensorList roots, grad_outputs, diff;
    for (std::size_t s = 0; s < output_slots.size(); ++s) {
      roots.push_back(out[output_slots[s]]);
      grad_outputs.push_back(args[n + s]);
    }
    for (const Tensor& t : in)
      if (t.defined() && t.requires_grad()) diff.push_back(t);
    return grad(roots, diff, grad_outputs, true, true, true);
  };
  return gradcheck(first_derivatives, extended, options);
}

}  // namespace infini::autograd
