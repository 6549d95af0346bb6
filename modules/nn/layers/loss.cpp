// The loss modules (see loss.cppm): option checks, buffers, and the loss ops.
module;
#include <cmath>
module infini.nn;
import infini.std;

namespace infini::nn {
namespace {

std::optional<Tensor> optional_tensor(const Tensor& t) { return t.defined() ? std::optional(t) : std::nullopt; }

// A defined floating-point tensor; class weights must also be 1-d.
void check_weight(const std::string& layer, const char* what, const std::optional<Tensor>& w, bool class_weights) {
  if (!w) return;
  if (!w->defined()) throw Error(layer, concat(what, " is an undefined tensor"));
  if (!is_floating_point(w->dtype())) throw DTypeError(layer, concat(what, " must be floating-point, got ", w->dtype()));
  if (class_weights && w->dim() != 1)
    throw ShapeError(layer, concat(what, " must be a 1-d tensor of per-class weights, got shape ", w->shape()));
}

}  // namespace

// ---- CrossEntropyLoss ----

CrossEntropyLossImpl::CrossEntropyLossImpl(CrossEntropyOptions options)
    : LossImpl("CrossEntropyLoss"), options(std::move(options)) {
  reset();
}

void CrossEntropyLossImpl::reset() {
  check_weight(type_name(), "weight", options.weight, true);
  if (!(options.label_smoothing >= 0 && options.label_smoothing <= 1))
    throw Error(type_name(), concat("label_smoothing must be in [0, 1], got ", options.label_smoothing));
  weight = options.weight ? register_buffer("weight", *options.weight) : Tensor();
}

Tensor CrossEntropyLossImpl::forward(const Tensor& input, const Tensor& target) {
  CrossEntropyOptions o = options;
  o.weight = optional_tensor(weight);
  return with_layer_name(type_name(), [&] { return cross_entropy(input, target, o); });
}

// ---- NLLLoss ----

NLLLossImpl::NLLLossImpl(NLLLossOptions options) : LossImpl("NLLLoss"), options(std::move(options)) { reset(); }

void NLLLossImpl::reset() {
  check_weight(type_name(), "weight", options.weight, true);
  weight = options.weight ? register_buffer("weight", *options.weight) : Tensor();
}

Tensor NLLLossImpl::forward(const Tensor& input, const Tensor& target) {
  const CrossEntropyOptions o{.weight = optional_tensor(weight), .ignore_index = options.ignore_index,
                              .reduction = options.reduction};
  return with_layer_name(type_name(), [&] { return nll_loss(input, target, o); });
}

// ---- MSELoss, L1Loss ----

Tensor MSELossImpl::forward(const Tensor& input, const Tensor& target) {
  return with_layer_name(type_name(), [&] { return mse_loss(input, target, reduction); });
}

Tensor L1LossImpl::forward(const Tensor& input, const Tensor& target) {
  return with_layer_name(type_name(), [&] { return l1_loss(input, target, reduction); });
}

// ---- SmoothL1Loss, HuberLoss, KLDivLoss ----

SmoothL1LossImpl::SmoothL1LossImpl(SmoothL1LossOptions options) : LossImpl("SmoothL1Loss"), options(options) {
  reset();
}

void SmoothL1LossImpl::reset() {
  if (!(options.beta >= 0)) throw Error(type_name(), concat("beta must be >= 0, got ", options.beta));
}

Tensor SmoothL1LossImpl::forward(const Tensor& input, const Tensor& target) {
  return with_layer_name(type_name(), [&] { return smooth_l1_loss(input, target, options.reduction, options.beta); });
}

HuberLossImpl::HuberLossImpl(HuberLossOptions options) : LossImpl("HuberLoss"), options(options) { reset(); }

void HuberLossImpl::reset() {
  if (!(options.delta > 0)) throw Error(type_name(), concat("delta must be > 0, got ", options.delta));
}

Tensor HuberLossImpl::forward(const Tensor& input, const Tensor& target) {
  return with_layer_name(type_name(), [&] { return huber_loss(input, target, options.reduction, options.delta); });
}

Tensor KLDivLossImpl::forward(const Tensor& input, const Tensor& target) {
  return with_layer_name(type_name(), [&] { return kl_div(input, target, options.reduction, options.log_target); });
}

// ---- BCELoss ----

BCELossImpl::BCELossImpl(BCELossOptions options) : LossImpl("BCELoss"), options(std::move(options)) { reset(); }

void BCELossImpl::reset() {
  check_weight(type_name(), "weight", options.weight, false);
  weight = options.weight ? register_buffer("weight", *options.weight) : Tensor();
}

Tensor BCELossImpl::forward(const Tensor& input, const Tensor& target) {
  return with_layer_name(type_name(),
                         [&] { return binary_cross_entropy(input, target, optional_tensor(weight), options.reduction); });
}

// ---- BCEWithLogitsLoss ----

BCEWithLogitsLossImpl::BCEWithLogitsLossImpl(BCEWithLogitsLossOptions options)
    : LossImpl("BCEWithLogitsLoss"), options(std::move(options)) {
  reset();
}

void BCEWithLogitsLossImpl::reset() {
  check_weight(type_name(), "weight", options.weight, false);
  check_weight(type_name(), "pos_weight", options.pos_weight, false);
  weight = options.weight ? register_buffer("weight", *options.weight) : Tensor();
  pos_weight = options.pos_weight ? register_buffer("pos_weight", *options.pos_weight) : Tensor();
}

Tensor BCEWithLogitsLossImpl::forward(const Tensor& input, const Tensor& target) {
  return with_layer_name(type_name(), [&] {
    return binary_cross_entropy_with_logits(input, target, optional_tensor(weight), options.reduction,
                                            optional_tensor(pos_weight));
  });
}

}  // namespace infini::nn
