// torch.nn.functional's softmax family, losses (cross entropy, NLL, MSE, L1, smooth L1,
// Huber, KL divergence, BCE), normalisations, embedding, dropout and rotary embeddings. The
// activations are in activations.cpp, the distances in distances.cpp.
module;
#include <cmath>
#include <cstdint>
module infini.autograd;
import infini.std;

namespace infini {
namespace {

// options with its class weights cast by an autocast region.
CrossEntropyOptions float32_options(const AutocastRegion& cast, CrossEntropyOptions options) {
  options.weight = cast(options.weight);
  return options;
}

void check_floating(std::string_view op, const Tensor& x) {
  if (!is_floating_point(x.dtype())) throw DTypeError(op, concat("expected a floating-point input, got ", x.dtype()));
}

// The row max along dim, as a constant: softmax is invariant to the shift, so the
// gradient through it is zero and it need not be recorded.
Tensor row_max(const Tensor& x, std::int64_t dim) {
  NoGradGuard no_grad;
  if (x.numel() == 0) {  // nothing to shift; also avoids max over an empty dim
    Shape kept = x.shape();
    kept[dim] = 1;
    return zeros(kept, {.dtype = x.dtype(), .device = x.device()});
  }
  Tensor m = kernels::reduce(ReduceOp::Max, x, {dim}, true);
  // Rows of -inf (or NaN) must not turn the shift itself into NaN.
  return where(isinf(m), zeros_like(m), m);
}

// Reduction::BatchMean belongs to kl_div; every other loss raises this.
[[noreturn]] void reject_batch_mean(std::string_view op) {
  throw Error(op, "reduction BatchMean (the sum divided by the batch size) is only supported by kl_div; "
                  "use Mean, Sum or None");
}

Tensor reduce(std::string_view op, const Tensor& loss, Reduction reduction) {
  switch (reduction) {
    case Reduction::None: return loss;
    case Reduction::Sum: return sum(loss);
    case Reduction::Mean: return mean(loss);
    case Reduction::BatchMean: reject_batch_mean(op);
  }
  return loss;
}

void check_same_shape(std::string_view op, const Tensor& input, const Tensor& target) {
  if (input.shape() != target.shape())
    throw ShapeError(op, concat("input of shape ", input.shape(), " and target of shape ", target.shape(),
                                " must have the same shape"));
}

// Shape (1, C, 1, ...) of a per-channel vector for an (N, C, ...) input.
Shape channel_shape(const Tensor& x) {
  Shape s(static_cast<std::size_t>(x.dim()), 1);
  s[1] = x.shape()[1];
  return s;
}

void check_vector(std::string_view op, std::string_view what, const std::optional<Tensor>& v, std::int64_t size) {
  if (v && (v->dim() != 1 || v->shape()[0] != size))
    throw ShapeError(op, concat(what, " of shape ", v->shape(), " does not match ", size, " channels"));
}

// The trailing dims of x that normalized_shape names, after checking it and the affine
// parameters' shapes.
std::vector<std::int64_t> normalized_dims(std::string_view op, const Tensor& x, const Shape& normalized_shape,
                                          const std::optional<Tensor>& weight, const std::optional<Tensor>& bias) {
  check_floating(op, x);
  const auto k = static_cast<std::int64_t>(normalized_shape.size());
  if (k == 0 || k > x.dim() || !std::equal(normalized_shape.begin(), normalized_shape.end(), x.shape().end() - k))
    throw ShapeError(op, concat("normalized_shape ", normalized_shape, " does not match the trailing dims of ",
                                x.shape()));
  if (weight && weight->shape() != normalized_shape)
    throw ShapeError(op, concat("weight of shape ", weight->shape(), ", expected ", normalized_shape));
  if (bias && bias->shape() != normalized_shape)
    throw ShapeError(op, concat("bias of shape ", bias->shape(), ", expected ", normalized_shape));
  std::vector<std::int64_t> dims;
  for (std::int64_t d = x.dim() - k; d < x.dim(); ++d) dims.push_back(d);
  return dims;
}

// Whether cross_entropy can run as the fused kernel: class indices for floating logits
// (N, C) or (C), no class weights, no label smoothing. Everything else (and every shape
// error) takes the composed path.
bool fused_cross_entropy_applies(const Tensor& input, const Tensor& target, const CrossEntropyOptions& options) {
  const bool indices = !is_floating_point(target.dtype()) && target.dtype() != kBool;
  const bool shapes = (input.dim() == 2 && target.dim() == 1 && target.shape()[0] == input.shape()[0]) ||
                      (input.dim() == 1 && target.dim() == 0);
  return indices && shapes && input.device() == target.device() && is_floating_point(input.dtype()) &&
         !options.weight && options.label_smoothing == 0;
}

// cross_entropy through the fused kernel (see fused_cross_entropy_applies) over the first
// `classes` columns of the input, whose further columns are padding (no probability, zero
// gradient). 16-bit logits are computed in float32 (rows of float32 loss, the gradient rounded
// once into the logits' dtype); the result is returned in `result_dtype`. The backward is the
// kernel's (softmax - one-hot) rows, or the same formula in differentiable ops when the
// gradient needs a graph (create_graph).
Tensor fused_cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyOptions& options,
                           DataType result_dtype, std::int64_t classes) {
  const bool unbatched = input.dim() == 1;
  const Tensor padded = unbatched ? input.unsqueeze(0) : input;  // (N, Cp)
  const std::int64_t width = padded.shape()[1];
  const Tensor logits = classes < width ? padded.narrow(1, 0, classes) : padded;  // (N, C), read in place
  const Tensor t = (unbatched ? target.reshape({1}) : target).to(kInt64);
  const std::int64_t ignore = options.ignore_index;
  auto [rows, lse] = kernels::cross_entropy_forward(logits, t, ignore);
  record("cross_entropy", {padded}, {rows}, {logits, lse, t}, [ignore, width](const TensorList& g, const TensorList& s) {
    if (!g[0].defined()) return TensorList{Tensor()};
    if (!GradMode::is_enabled())
      return TensorList{kernels::cross_entropy_backward(g[0], s[0], s[1], s[2], ignore, width)};
    const Tensor x = s[0].to(g[0].dtype());  // the loss's dtype: float32 for 16-bit logits
    const std::int64_t n = x.shape()[0], c = x.shape()[1];
    const Tensor classes = arange(c, {.dtype = kInt64, .device = x.device()}).unsqueeze(0);
    const Tensor onehot = eq(s[2].unsqueeze(1), classes).to(x.dtype());
    const Tensor row_grad = mul(g[0], ne(s[2], ignore).to(x.dtype())).unsqueeze(1);  // (N, 1)
    Tensor grad = mul(sub(softmax(x, 1), onehot), row_grad);
    if (width > c) grad = cat({grad, zeros({n, width - c}, {.dtype = grad.dtype(), .device = grad.device()})}, 1);
    return TensorList{grad.to(s[0].dtype())};
  });
  Tensor loss = rows;
  switch (options.reduction) {
    case Reduction::None: loss = unbatched ? rows.reshape({}) : rows; break;
    case Reduction::Sum: loss = sum(rows); break;
    case Reduction::Mean: loss = div(sum(rows), sum(ne(t, ignore).to(rows.dtype()))); break;
    case Reduction::BatchMean: reject_batch_mean("cross_entropy");
  }
  return loss.to(result_dtype);
}

// log(1 + exp(-x)) = max(-x, 0) + log1p(exp(-|x|)): no exp overflows, for any x. Its
// derivative -sigmoid(-x) is recorded as one node (the composition's abs and relu would
// give 0 at x = 0).
Tensor log1p_exp_neg(const Tensor& x) {
  Tensor y;
  {
    NoGradGuard no_grad;
    y = add(relu(neg(x)), log1p(exp(neg(abs(x)))));
  }
  record("binary_cross_entropy_with_logits", {x}, {y}, {x}, [](const TensorList& g, const TensorList& s) {
    if (!g[0].defined()) return TensorList{Tensor()};
    return TensorList{neg(mul(g[0], sigmoid(neg(s[0]))))};
  });
  return y;
}

// Elementwise -(t log p + (1 - t) log(1 - p)), the logs clamped at -100 so that 0 * log(0)
// stays finite. Gradients as PyTorch's: (p - t) / max(p (1 - p), 1e-12) for p, finite at
// p = 0 and 1 (where the logs' 1/p and 1/(1 - p) are not), and log(1 - p) - log(p) for t.
Tensor binary_cross_entropy_terms(const Tensor& p, const Tensor& t) {
  const auto logs = [](const Tensor& p) {
    return std::pair{clamp(log(p), -100.0, std::nullopt), clamp(log(rsub(p, 1.0)), -100.0, std::nullopt)};
  };
  Tensor loss;
  {
    NoGradGuard no_grad;
    const auto [log_p, log_q] = logs(p);
    loss = neg(add(mul(t, log_p), mul(rsub(t, 1.0), log_q)));
  }
  record("binary_cross_entropy", {p, t}, {loss}, {p, t},
         [logs, p_needs = p.requires_grad(), t_needs = t.requires_grad(), p_dtype = p.dtype(),
          t_dtype = t.dtype()](const TensorList& g, const TensorList& s) {
           if (!g[0].defined()) return TensorList{Tensor(), Tensor()};
           const Tensor &p = s[0], &t = s[1];
           Tensor grad_p, grad_t;
           if (p_needs && autograd::input_grad_needed(0))
             grad_p = div(mul(g[0], sub(p, t)), clamp(mul(p, rsub(p, 1.0)), 1e-12, std::nullopt)).to(p_dtype);
           if (t_needs && autograd::input_grad_needed(1)) {
             const auto [log_p, log_q] = logs(p);
             grad_t = mul(g[0], sub(log_q, log_p)).to(t_dtype);
           }
           return TensorList{grad_p, grad_t};
         });
  return loss;
}

}  // namespace

Tensor softmax(const Tensor& x, std::int64_t dim) {
  if (const AutocastRegion cast(CastPolicy::kFloat32, x); cast) return softmax(cast(x), dim);
  check_floating("softmax", x);
  dim = wrap_dim("softmax", dim, x.dim());
  const Tensor e = exp(sub(x, row_max(x, dim)));
  return div(e, sum(e, {dim}, true));
}

Tensor log_softmax(const Tensor& x, std::int64_t dim) {
  if (const AutocastRegion cast(CastPolicy::kFloat32, x); cast) return log_softmax(cast(x), dim);
  check_floating("log_softmax", x);
  dim = wrap_dim("log_softmax", dim, x.dim());
  const Tensor shifted = sub(x, row_max(x, dim));
  return sub(shifted, log(sum(exp(shifted), {dim}, true)));
}

Tensor nll_loss(const Tensor& input, const Tensor& target, const CrossEntropyOptions& options) {
  if (const AutocastRegion cast(CastPolicy::kFloat32, input); cast)
    return nll_loss(cast(input), target, float32_options(cast, options));
  check_floating("nll_loss", input);
  if (is_floating_point(target.dtype()) || target.dtype() == kBool)
    throw DTypeError("nll_loss", concat("target must hold class indices (int64), got ", target.dtype()));
  const bool unbatched = input.dim() == 1;
  const Tensor logp = unbatched ? input.unsqueeze(0) : input;
  const Tensor t = unbatched ? target.reshape({1}) : target;
  if (logp.dim() < 2) throw ShapeError("nll_loss", concat("input of shape ", input.shape(), " needs a class dim"));
  Shape expected = logp.shape();
  expected.erase(expected.begin() + 1);
  if (t.shape() != expected)
    throw ShapeError("nll_loss", concat("target of shape ", target.shape(), " does not match input of shape ",
                                        input.shape(), " (expected ", expected, ")"));
  const std::int64_t classes = logp.shape()[1];
  check_vector("nll_loss", "weight", options.weight, classes);
  const Tensor valid = ne(t, options.ignore_index);
  {
    const Tensor checked = where(valid, t, scalar_tensor(0, {.dtype = t.dtype()}));
    if (checked.numel() > 0) {
      const auto lo = kernels::reduce(ReduceOp::Min, checked).item<std::int64_t>();
      const auto hi = kernels::reduce(ReduceOp::Max, checked).item<std::int64_t>();
      if (lo < 0 || hi >= classes)
        throw IndexError("nll_loss", concat("target ", lo < 0 ? lo : hi, " is out of bounds for ", classes,
                                            " classes"));
    }
  }
  // onehot (N, C, ...): 1 where the class is the target of a counted position.
  Shape class_index_shape(static_cast<std::size_t>(logp.dim()), 1);
  class_index_shape[1] = classes;
  const Tensor classes_range = arange(classes, {.dtype = kInt64, .device = logp.device()}).view(class_index_shape);
  const Tensor onehot = logical_and(eq(t.unsqueeze(1), classes_range), valid.unsqueeze(1)).to(logp.dtype());
  Tensor picked = onehot;  // weight of each picked class, or 1
  if (options.weight) picked = mul(onehot, options.weight->view(class_index_shape));
  const Tensor per_sample_weight = sum(picked, {1});                 // (N, ...)
  Tensor loss = neg(sum(mul(logp, picked), {1}));                    // (N, ...)
  if (unbatched) loss = loss.reshape({});
  switch (options.reduction) {
    case Reduction::None: return loss;
    case Reduction::Sum: return sum(loss);
    case Reduction::Mean: return div(sum(loss), sum(per_sample_weight));
    case Reduction::BatchMean: reject_batch_mean("nll_loss");
  }
  return loss;
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyOptions& options) {
  if (const AutocastRegion cast(CastPolicy::kFloat32, input); cast) {
    // The fused kernel reads 16-bit logits as they are and computes in float32: the float32
    // result of casting them first, without float32 copies of the logits and their gradient.
    if (fused_cross_entropy_applies(input, target, options) && input.dtype() != kFloat64)
      return fused_cross_entropy(input, target, options, kFloat32, input.shape().back());
    return cross_entropy(cast(input), cast(target), float32_options(cast, options));
  }
  check_floating("cross_entropy", input);
  if (options.reduction == Reduction::BatchMean) reject_batch_mean("cross_entropy");  // before nll_loss sees it
  if (options.label_smoothing < 0 || options.label_smoothing > 1)
    throw Error("cross_entropy", concat("label_smoothing must be in [0, 1], got ", options.label_smoothing));
  if (fused_cross_entropy_applies(input, target, options))
    return fused_cross_entropy(input, target, options, input.dtype(), input.shape().back());
  const std::int64_t class_dim = input.dim() == 1 ? 0 : 1;
  const Tensor logp = log_softmax(input, class_dim);
  const std::int64_t classes = input.shape()[class_dim];
  const double eps = options.label_smoothing;
  Shape class_shape(static_cast<std::size_t>(input.dim()), 1);
  class_shape[class_dim] = classes;

  if (is_floating_point(target.dtype())) {  // class probabilities
    check_same_shape("cross_entropy", input, target);
    Tensor p = eps > 0 ? add(mul(target, 1 - eps), eps / static_cast<double>(classes)) : target;
    if (options.weight) {
      check_vector("cross_entropy", "weight", options.weight, classes);
      p = mul(p, options.weight->view(class_shape));
    }
    const Tensor loss = neg(sum(mul(logp, p), {class_dim}));
    if (options.reduction == Reduction::Mean)
      return div(sum(loss), static_cast<double>(input.dim() == 1 ? 1 : input.numel() / classes));
    return reduce("cross_entropy", loss, options.reduction);
  }

  const Tensor nll = nll_loss(logp, target, options);
  if (eps == 0) return nll;
  // Label smoothing: (1 - eps) * nll + eps / C * (the loss against a uniform target).
  Tensor all_classes = options.weight ? mul(logp, options.weight->view(class_shape)) : logp;
  Tensor smooth = neg(sum(all_classes, {class_dim}));
  const Tensor valid = ne(target, options.ignore_index);
  smooth = mul(smooth, valid.to(smooth.dtype()));
  Tensor smooth_reduced;
  switch (options.reduction) {
    case Reduction::None: smooth_reduced = smooth; break;
    case Reduction::Sum: smooth_reduced = sum(smooth); break;
    case Reduction::Mean: {
      Tensor denominator;
      if (options.weight) {
        // Sum of the target classes' weights over counted positions.
        const Tensor safe_target = where(valid, target, scalar_tensor(0, {.dtype = target.dtype()}));
        const Tensor onehot = eq(safe_target.unsqueeze(class_dim),
                                 arange(classes, {.dtype = kInt64, .device = target.device()}).view(class_shape));
        denominator = sum(mul(mul(onehot.to(logp.dtype()), options.weight->view(class_shape)),
                              valid.unsqueeze(class_dim).to(logp.dtype())));
      } else {
        denominator = sum(valid.to(logp.dtype()));
      }
      smooth_reduced = div(sum(smooth), denominator);
      break;
    }
    case Reduction::BatchMean: reject_batch_mean("cross_entropy");
  }
  return add(mul(nll, 1 - eps), mul(smooth_reduced, eps / static_cast<double>(classes)));
}

Tensor padded_cross_entropy(const Tensor& input, const Tensor& target, std::int64_t classes,
                            const CrossEntropyOptions& options) {
  constexpr auto op = "padded_cross_entropy";
  if (input.dim() != 2) throw ShapeError(op, concat("expected logits (N, Cp), got shape ", input.shape()));
  if (classes < 1 || classes > input.shape()[1])
    throw Error(op, concat("classes must be in [1, ", input.shape()[1], "] for logits of shape ", input.shape(),
                           ", got ", classes));
  if (!fused_cross_entropy_applies(input, target, options))  // the same result, through a slice
    return cross_entropy(input.narrow(1, 0, classes), target, options);
  if (const AutocastRegion cast(CastPolicy::kFloat32, input); cast && input.dtype() != kFloat64)
    return fused_cross_entropy(input, target, options, kFloat32, classes);
  return fused_cross_entropy(input, target, options, input.dtype(), classes);
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  if (const AutocastRegion cast(CastPolicy::kFloat32, input); cast)
    return mse_loss(cast(input), cast(target), reduction);
  check_same_shape("mse_loss", input, target);
  const Tensor d = sub(input, target);
  return reduce("mse_loss", mul(d, d), reduction);
}

Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  if (const AutocastRegion cast(CastPolicy::kFloat32, input); cast)
    return l1_loss(cast(input), cast(target), reduction);
  check_same_shape("l1_loss", input, target);
  return reduce("l1_loss", abs(sub(input, target)), reduction);
}

// Both branches are compositions: the gradient is d / beta inside and sign(d) from
// |d| = beta on, PyTorch's smooth_l1_backward.
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction reduction, double beta) {
  if (const AutocastRegion cast(CastPolicy::kFloat32, input); cast)
    return smooth_l1_loss(cast(input), cast(target), reduction, beta);
  check_same_shape("smooth_l1_loss", input, target);
  check_floating("smooth_l1_loss", input);
  if (!(beta >= 0)) throw Error("smooth_l1_loss", concat("beta must be >= 0, got ", beta));
  const Tensor d = sub(input, target);
  const Tensor abs_d = abs(d);
  if (beta == 0) return reduce("smooth_l1_loss", abs_d, reduction);  // l1_loss
  const Tensor loss = where(lt(abs_d, beta), div(mul(mul(d, d), 0.5), beta), sub(abs_d, 0.5 * beta));
  return reduce("smooth_l1_loss", loss, reduction);
}

// The gradient is d inside and delta sign(d) from |d| = delta on (huber_backward).
Tensor huber_loss(const Tensor& input, const Tensor& target, Reduction reduction, double delta) {
  if (const AutocastRegion cast(CastPolicy::kFloat32, input); cast)
    return huber_loss(cast(input), cast(target), reduction, delta);
  check_same_shape("huber_loss", input, target);
  check_floating("huber_loss", input);
  if (!(delta > 0)) throw Error("huber_loss", concat("delta must be > 0, got ", delta));
  const Tensor d = sub(input, target);
  const Tensor abs_d = abs(d);
  const Tensor loss = where(lt(abs_d, delta), mul(mul(d, d), 0.5), mul(sub(abs_d, 0.5 * delta), delta));
  return reduce("huber_loss", loss, reduction);
}

// PyTorch's formula: xlogy(t, t) - t * input, where xlogy takes 0 log 0 as 0. Like
// PyTorch's, the loss is NaN where t = 0 meets input = -inf, and the gradient w.r.t. the
// target is NaN at t = 0 (log t's derivative); input and target broadcast.
Tensor kl_div(const Tensor& input, const Tensor& target, Reduction reduction, bool log_target) {
  if (const AutocastRegion cast(CastPolicy::kFloat32, input); cast)
    return kl_div(cast(input), cast(target), reduction, log_target);
  if (!is_floating_point(input.dtype()) || !is_floating_point(target.dtype()))
    throw DTypeError("kl_div", concat("expected floating-point input and target, got ", input.dtype(), " and ",
                                      target.dtype()));
  broadcast_shapes("kl_div", input.shape(), target.shape());
  const Tensor loss = log_target ? mul(exp(target), sub(target, input))
                                 : sub(where(eq(target, 0.0), 0.0, mul(target, log(target))), mul(target, input));
  if (reduction != Reduction::BatchMean) return reduce("kl_div", loss, reduction);
  // The sum over the batch size input.size(0) (over 1 for a 0-d input).
  return input.dim() == 0 ? sum(loss) : div(sum(loss), input.shape()[0]);
}

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight,
                            Reduction reduction) {
  if (const AutocastRegion cast(CastPolicy::kFloat32, input); cast)
    return binary_cross_entropy(cast(input), cast(target), cast(weight), reduction);
  check_same_shape("binary_cross_entropy", input, target);
  check_floating("binary_cross_entropy", input);
  {
    NoGradGuard no_grad;
    if (input.numel() > 0 && (kernels::reduce(ReduceOp::Min, input).item<double>() < 0 ||
                              kernels::reduce(ReduceOp::Max, input).item<double>() > 1))
      throw Error("binary_cross_entropy", "input values must be probabilities in [0, 1]");
  }
  Tensor loss = binary_cross_entropy_terms(input, target);
  if (weight) loss = mul(loss, *weight);
  return reduce("binary_cross_entropy", loss, reduction);
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight,
                                        Reduction reduction, const std::optional<Tensor>& pos_weight) {
  if (const AutocastRegion cast(CastPolicy::kFloat32, input); cast)
    return binary_cross_entropy_with_logits(cast(input), cast(target), cast(weight), reduction, cast(pos_weight));
  check_same_shape("binary_cross_entropy_with_logits", input, target);
  check_floating("binary_cross_entropy_with_logits", input);
  // loss = (1 - t) x + (1 + (pw - 1) t) * log(1 + exp(-x))
  const Tensor neg_log_sigmoid = log1p_exp_neg(input);
  Tensor scale = pos_weight ? add(mul(target, sub(*pos_weight, 1.0)), 1.0) : ones_like(target);
  Tensor loss = add(mul(rsub(target, 1.0), input), mul(scale, neg_log_sigmoid));
  if (weight) loss = mul(loss, *weight);
  return reduce("binary_cross_entropy_with_logits", loss, reduction);
}

namespace {

// layer_norm of float32/64 rows through the fused kernels: x as rows (N, C) with C the
// normalized elements; weight and bias (when given) of x's dtype and device; y in y_dtype
// (float16/bfloat16 for float32 rows) or x's. With `residual`, the rows also pass through as
// a second output (sharing their storage), whose gradient the backward kernel adds to the
// input gradient. The backward is the kernels', or the same formula in differentiable ops
// when the gradient needs a graph (create_graph).
TensorList fused_layer_norm(const Tensor& x, const Shape& normalized_shape, const std::optional<Tensor>& weight,
                            const std::optional<Tensor>& bias, double eps, std::optional<DataType> y_dtype,
                            bool residual) {
  std::int64_t c = 1;
  for (std::int64_t d : normalized_shape) c *= d;
  const Tensor rows = x.reshape({-1, c});
  const Tensor w = weight ? weight->reshape({c}) : Tensor(), b = bias ? bias->reshape({c}) : Tensor();
  auto [y, row_mean, row_rstd] = kernels::layer_norm_forward(rows, w, b, eps, y_dtype);
  TensorList inputs{rows};
  if (w.defined()) inputs.push_back(w);
  if (b.defined()) inputs.push_back(b);
  TensorList outputs{y};
  if (residual) outputs.push_back(rows.detach());
  record("layer_norm", inputs, outputs, {rows, row_mean, row_rstd, w},
         [eps, has_w = w.defined(), has_b = b.defined(), count = inputs.size()](const TensorList& g,
                                                                                const TensorList& s) {
           TensorList grads(count);
           const Tensor passthrough = g.size() > 1 ? g[1] : Tensor();  // the residual's gradient
           if (!g[0].defined()) {
             grads[0] = passthrough;
             return grads;
           }
           const std::size_t bias_at = has_w ? 2 : 1;
           const bool need_w = has_w && autograd::input_grad_needed(1);
           const bool need_b = has_b && autograd::input_grad_needed(bias_at);
           if (!GradMode::is_enabled()) {
             auto [dx, dw, db] =
                 kernels::layer_norm_backward(g[0], s[0], s[1], s[2], s[3], need_w, need_b, passthrough);
             grads[0] = dx;
             if (need_w) grads[1] = dw;
             if (need_b) grads[bias_at] = db;
             return grads;
           }
           const Tensor gy = g[0].to(s[0].dtype());  // a float16/bfloat16 y's gradient, widened
           const Tensor centered = sub(s[0], mean(s[0], {1}, true));
           const Tensor r = rsqrt(add(mean(mul(centered, centered), {1}, true), eps));
           const Tensor x_hat = mul(centered, r);
           const Tensor gw = has_w ? mul(gy, s[3]) : gy;
           grads[0] = mul(r, sub(sub(gw, mean(gw, {1}, true)), mul(x_hat, mean(mul(gw, x_hat), {1}, true))));
           if (passthrough.defined()) grads[0] = add(passthrough, grads[0]);
           if (need_w) grads[1] = sum(mul(gy, x_hat), {0});
           if (need_b) grads[bias_at] = sum(gy, {0});
           return grads;
         });
  TensorList result;
  for (const Tensor& t : outputs) result.push_back(t.view(x.shape()));
  return result;
}

bool fused_layer_norm_applies(const Tensor& x, const std::optional<Tensor>& weight,
                              const std::optional<Tensor>& bias) {
  const auto fits = [&](const std::optional<Tensor>& p) {
    return !p || (p->dtype() == x.dtype() && p->device() == x.device());
  };
  return (x.dtype() == kFloat32 || x.dtype() == kFloat64) && x.numel() > 0 && fits(weight) && fits(bias);
}

// fused_layer_norm with its first output in out_dtype (when given): written so by the kernels
// for float32 rows and a 16-bit out_dtype, converted after them otherwise.
TensorList fused_layer_norm_as(const Tensor& x, const Shape& normalized_shape, const std::optional<Tensor>& weight,
                               const std::optional<Tensor>& bias, double eps, std::optional<DataType> out_dtype,
                               bool residual) {
  const bool direct = out_dtype && x.dtype() == kFloat32 && (*out_dtype == kFloat16 || *out_dtype == kBFloat16);
  const std::optional<DataType> written = direct ? out_dtype : std::nullopt;
  TensorList out = fused_layer_norm(x, normalized_shape, weight, bias, eps, written, residual);
  if (out_dtype && !direct) out[0] = out[0].to(*out_dtype);
  return out;
}

void check_out_dtype(std::optional<DataType> out_dtype) {
  if (out_dtype && !is_floating_point(*out_dtype))
    throw DTypeError("layer_norm", concat("out_dtype must be a floating-point dtype, got ", *out_dtype));
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, double eps, std::optional<DataType> out_dtype) {
  check_out_dtype(out_dtype);
  if (const AutocastRegion cast(CastPolicy::kFloat32, x); cast)
    return layer_norm(cast(x), normalized_shape, cast(weight), cast(bias), eps, out_dtype);
  const std::vector<std::int64_t> dims = normalized_dims("layer_norm", x, normalized_shape, weight, bias);
  if (fused_layer_norm_applies(x, weight, bias))
    return fused_layer_norm_as(x, normalized_shape, weight, bias, eps, out_dtype, false)[0];
  const Tensor centered = sub(x, mean(x, dims, true));
  const Tensor variance = mean(mul(centered, centered), dims, true);
  Tensor y = mul(centered, rsqrt(add(variance, eps)));
  if (weight) y = mul(y, *weight);
  if (bias) y = add(y, *bias);
  return out_dtype ? y.to(*out_dtype) : y;
}

NormAndResidual layer_norm_with_residual(const Tensor& x, const Shape& normalized_shape,
                                         const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
                                         double eps, std::optional<DataType> out_dtype) {
  check_out_dtype(out_dtype);
  normalized_dims("layer_norm", x, normalized_shape, weight, bias);
  // Float32/64 rows with parameters of their dtype: nothing for autocast to cast.
  if (!fused_layer_norm_applies(x, weight, bias))
    return {layer_norm(x, normalized_shape, weight, bias, eps, out_dtype), x};
  const TensorList out = fused_layer_norm_as(x, normalized_shape, weight, bias, eps, out_dtype, true);
  return {out[0], out[1]};
}

Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const std::optional<Tensor>& weight,
                std::optional<double> eps) {
  if (const AutocastRegion cast(CastPolicy::kFloat32, x); cast)
    return rms_norm(cast(x), normalized_shape, cast(weight), eps);
  const std::vector<std::int64_t> dims = normalized_dims("rms_norm", x, normalized_shape, weight, {});
  // PyTorch's default: the machine epsilon of the type it computes in (float32 for 16-bit floats).
  const double default_eps = x.dtype() == kFloat64 ? std::numeric_limits<double>::epsilon()
                                                   : std::numeric_limits<float>::epsilon();
  Tensor y = mul(x, rsqrt(add(mean(mul(x, x), dims, true), eps.value_or(default_eps))));
  return weight ? mul(y, *weight) : y;
}

Tensor batch_norm(const Tensor& x, const std::optional<Tensor>& running_mean, const std::optional<Tensor>& running_var,
                  const std::optional<Tensor>& weight, const std::optional<Tensor>& bias, bool training,
                  double momentum, double eps) {
  if (const AutocastRegion cast(CastPolicy::kFloat32, x); cast)
    return batch_norm(cast(x), running_mean, running_var, cast(weight), cast(bias), training, momentum, eps);
  check_floating("batch_norm", x);
  if (x.dim() < 2) throw ShapeError("batch_norm", concat("expected an (N, C, ...) input, got shape ", x.shape()));
  const std::int64_t channels = x.shape()[1];
  check_vector("batch_norm", "running_mean", running_mean, channels);
  check_vector("batch_norm", "running_var", running_var, channels);
  check_vector("batch_norm", "weight", weight, channels);
  check_vector("batch_norm", "bias", bias, channels);
  const Shape per_channel = channel_shape(x);
  std::vector<std::int64_t> dims{0};
  for (std::int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  Tensor centered, inv_std;
  if (training) {
    const std::int64_t count = x.numel() / std::max<std::int64_t>(channels, 1);
    if (count <= 1)
      throw Error("batch_norm", concat("expected more than 1 value per channel when training, got input of shape ",
                                       x.shape()));
    const Tensor batch_mean = mean(x, dims, true);
    centered = sub(x, batch_mean);
    const Tensor variance = mean(mul(centered, centered), dims, true);  // biased, used to normalise
    inv_std = rsqrt(add(variance, eps));
    NoGradGuard no_grad;
    const double unbias = static_cast<double>(count) / static_cast<double>(count - 1);
    if (running_mean)
      Tensor(*running_mean).copy_(add(mul(*running_mean, 1 - momentum), mul(batch_mean.detach().view({channels}), momentum)));
    if (running_var)
      Tensor(*running_var).copy_(add(mul(*running_var, 1 - momentum),
                                     mul(variance.detach().view({channels}), momentum * unbias)));
  } else {
    if (!running_mean || !running_var)
      throw Error("batch_norm", "running_mean and running_var are required in evaluation mode");
    centered = sub(x, running_mean->view(per_channel));
    inv_std = rsqrt(add(running_var->view(per_channel), eps));
  }
  Tensor y = mul(centered, inv_std);
  if (weight) y = mul(y, weight->view(per_channel));
  if (bias) y = add(y, bias->view(per_channel));
  return y;
}

Tensor group_norm(const Tensor& x, std::int64_t num_groups, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, double eps) {
  if (const AutocastRegion cast(CastPolicy::kFloat32, x); cast)
    return group_norm(cast(x), num_groups, cast(weight), cast(bias), eps);
  check_floating("group_norm", x);
  if (x.dim() < 2) throw ShapeError("group_norm", concat("expected an (N, C, ...) input, got shape ", x.shape()));
  const std::int64_t channels = x.shape()[1];
  if (num_groups <= 0 || channels % num_groups != 0)
    throw ShapeError("group_norm", concat("num_groups ", num_groups, " must divide the ", channels, " channels"));
  check_vector("group_norm", "weight", weight, channels);
  check_vector("group_norm", "bias", bias, channels);
  const Tensor grouped = x.reshape({x.shape()[0], num_groups, -1});
  const Tensor centered = sub(grouped, mean(grouped, {2}, true));
  const Tensor variance = mean(mul(centered, centered), {2}, true);
  Tensor y = mul(centered, rsqrt(add(variance, eps))).reshape(x.shape());
  const Shape per_channel = channel_shape(x);
  if (weight) y = mul(y, weight->view(per_channel));
  if (bias) y = add(y, bias->view(per_channel));
  return y;
}

Tensor embedding(const Tensor& indices, const Tensor& weight, std::optional<std::int64_t> padding_idx) {
  if (weight.dim() != 2) throw ShapeError("embedding", concat("weight must be (V, C), got shape ", weight.shape()));
  if (padding_idx && (*padding_idx < -weight.shape()[0] || *padding_idx >= weight.shape()[0]))
    throw IndexError("embedding", concat("padding_idx ", *padding_idx, " is out of range for ", weight.shape()[0],
                                         " rows"));
  Tensor table = weight;
  if (padding_idx && weight.requires_grad() && GradMode::is_enabled()) {
    // The padding row is read from a detached copy, so no gradient reaches it.
    const std::int64_t row = *padding_idx < 0 ? *padding_idx + weight.shape()[0] : *padding_idx;
    const Tensor rows = arange(weight.shape()[0], {.dtype = kInt64, .device = weight.device()});
    const Tensor is_padding = eq(rows, row).unsqueeze(1);
    table = where(is_padding, weight.detach(), weight);
  }
  Shape out_shape = indices.shape();
  out_shape.push_back(weight.shape()[1]);
  return index_select(table, 0, indices.reshape({-1})).view(out_shape);
}

Tensor dropout(const Tensor& x, double p, bool training, Generator* generator) {
  if (p < 0 || p > 1) throw Error("dropout", concat("probability must be in [0, 1], got ", p));
  if (!training || p == 0) return x;
  if (p == 1) return mul(x, 0.0);
  const Tensor keep = ge(rand(x.shape(), {.dtype = is_floating_point(x.dtype()) ? x.dtype() : kFloat32,
                                          .device = x.device()},
                              generator),
                         p);
  return mul(x, mul(keep.to(x.dtype()), 1.0 / (1.0 - p)));
}

Tensor rope(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  check_floating("rope", x);
  if (x.dim() < 2 || x.shape().back() % 2 != 0)
    throw ShapeError("rope", concat("expected x (..., T, D) with an even D, got shape ", x.shape()));
  const std::int64_t seq = x.shape()[x.dim() - 2], half = x.shape().back() / 2;
  if (cos.dim() != 2 || cos.shape()[0] < seq || cos.shape()[1] != half || sin.shape() != cos.shape())
    throw ShapeError("rope", concat("cos/sin of shape ", cos.shape(), " do not cover (T, D/2) = (", seq, ", ", half,
                                    ") of x ", x.shape()));
  const Tensor c = cos.narrow(0, 0, seq).to(x.dtype()), s = sin.narrow(0, 0, seq).to(x.dtype());
  // The pairs (..., T, D/2, 2) split into their even and odd entries (one node: its backward
  // is one cat), rotated, and interleaved back by a stack: [..., i, 0] = rotated_even,
  // [..., i, 1] = rotated_odd.
  const TensorList parts = split(x.unflatten(-1, {half, 2}), 1, -1);
  const Tensor even = parts[0].squeeze(-1), odd = parts[1].squeeze(-1);
  const Tensor rotated_even = sub(mul(even, c), mul(odd, s));
  const Tensor rotated_odd = add(mul(even, s), mul(odd, c));
  return stack({rotated_even, rotated_odd}, -1).flatten(-2, -1);
}

RopeFrequencies rope_frequencies(std::int64_t head_dim, std::int64_t max_seq_len, double theta, bool use_scaled,
                                 double scale_factor, double low_freq_factor, double high_freq_factor,
                                 std::int64_t original_context) {
  if (head_dim <= 0 || head_dim % 2 != 0 || max_seq_len < 0)
    throw ShapeError("rope_frequencies", concat("head_dim ", head_dim, " must be positive and even, max_seq_len ",
                                                max_seq_len, " non-negative"));
  const std::int64_t half = head_dim / 2;
  std::vector<double> freq(static_cast<std::size_t>(half));
  const double low_wavelen = static_cast<double>(original_context) / low_freq_factor;
  const double high_wavelen = static_cast<double>(original_context) / high_freq_factor;
  for (std::int64_t i = 0; i < half; ++i) {
    double f = 1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(head_dim));
    if (use_scaled) {  // LLaMA 3.1: slow down long wavelengths, blend the middle band
      const double wavelen = 2 * std::numbers::pi / f;
      if (wavelen > low_wavelen) {
        f /= scale_factor;
      } else if (wavelen >= high_wavelen) {
        const double smooth = (static_cast<double>(original_context) / wavelen - low_freq_factor) /
                              (high_freq_factor - low_freq_factor);
        f = (1 - smooth) * f / scale_factor + smooth * f;
      }
    }
    freq[i] = f;
  }
  std::vector<double> c(static_cast<std::size_t>(max_seq_len * half)), s(c.size());
  for (std::int64_t t = 0; t < max_seq_len; ++t)
    for (std::int64_t i = 0; i < half; ++i) {
      c[t * half + i] = std::cos(static_cast<double>(t) * freq[i]);
      s[t * half + i] = std::sin(static_cast<double>(t) * freq[i]);
    }
  return {from_vector(c, {max_seq_len, half}, {.dtype = kFloat32}), from_vector(s, {max_seq_len, half}, {.dtype = kFloat32})};
}

Tensor silu_and_mul(const Tensor& a, const Tensor& b) { return mul(silu(a), b); }

}  // namespace infini
