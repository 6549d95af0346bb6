// BatchNorm1d/2d/3d (see batch_norm.cppm): the arithmetic is the batch_norm op.
module;
#include <cmath>
#include <cstdint>
module infini.nn;
import infini.std;

namespace infini::nn {
namespace {

std::optional<Tensor> optional_tensor(const Tensor& t) { return t.defined() ? std::optional(t) : std::nullopt; }

const char* flag(bool on) { return on ? "true" : "false"; }

}  // namespace

template <int SpatialDims>
BatchNormNdImpl<SpatialDims>::BatchNormNdImpl(std::int64_t num_features, BatchNormOptions options)
    : Cloneable<BatchNormNdImpl<SpatialDims>>(concat("BatchNorm", SpatialDims, "d")),
      num_features(num_features),
      options(options) {
  reset();
}

template <int SpatialDims>
void BatchNormNdImpl<SpatialDims>::reset() {
  const std::string& layer = this->type_name();
  if (num_features < 0) throw ShapeError(layer, concat("num_features must be >= 0, got ", num_features));
  if (!(options.eps >= 0) || !std::isfinite(options.eps))
    throw Error(layer, concat("eps must be finite and >= 0, got ", options.eps));
  if (options.momentum && !(*options.momentum >= 0 && *options.momentum <= 1))
    throw Error(layer, concat("momentum must be in [0, 1] (or unset), got ", *options.momentum));
  const bool affine = options.affine, track = options.track_running_stats;
  weight = affine ? this->register_parameter("weight", empty({num_features})) : Tensor();
  bias = affine ? this->register_parameter("bias", empty({num_features})) : Tensor();
  running_mean = track ? this->register_buffer("running_mean", empty({num_features})) : Tensor();
  running_var = track ? this->register_buffer("running_var", empty({num_features})) : Tensor();
  num_batches_tracked = track ? this->register_buffer("num_batches_tracked", zeros({}, {.dtype = kInt64})) : Tensor();
  reset_parameters();
}

template <int SpatialDims>
void BatchNormNdImpl<SpatialDims>::reset_running_stats() {
  if (!options.track_running_stats) return;
  init::zeros_(running_mean);
  init::ones_(running_var);
  init::zeros_(num_batches_tracked);
}

template <int SpatialDims>
void BatchNormNdImpl<SpatialDims>::reset_parameters() {
  reset_running_stats();
  if (weight.defined()) init::ones_(weight);
  if (bias.defined()) init::zeros_(bias);
}

template <int SpatialDims>
Tensor BatchNormNdImpl<SpatialDims>::forward(const Tensor& x) {
  const std::string& layer = this->type_name();
  const bool dims_ok = SpatialDims == 1 ? (x.dim() == 2 || x.dim() == 3) : x.dim() == SpatialDims + 2;
  const std::string expected = SpatialDims == 1 ? "(N, C) or (N, C, L)" : SpatialDims == 2 ? "(N, C, H, W)" : "(N, C, D, H, W)";
  if (!dims_ok) throw ShapeError(layer, concat("expected input of shape ", expected, ", got ", x.shape()));
  if (x.shape()[1] != num_features)
    throw ShapeError(layer, concat("input of shape ", x.shape(), " has ", x.shape()[1], " channels, expected ",
                                   num_features));
  const bool training = this->is_training();
  const bool update = training && options.track_running_stats;
  // With an unset momentum the running stats are the mean over all batches seen so far.
  double momentum = options.momentum.value_or(0.0);
  if (update && !options.momentum)
    momentum = 1.0 / static_cast<double>(num_batches_tracked.item<std::int64_t>() + 1);
  // Evaluation uses the running stats when there are any, the batch's otherwise.
  const bool use_batch_stats = training || !options.track_running_stats;
  Tensor y = with_layer_name(layer, [&] {
    return batch_norm(x, optional_tensor(running_mean), optional_tensor(running_var), optional_tensor(weight),
                      optional_tensor(bias), use_batch_stats, momentum, options.eps);
  });
  if (update) {
    NoGradGuard no_grad;
    Tensor counter = num_batches_tracked;
    add_(counter, 1);
  }
  return y;
}

template <int SpatialDims>
std::string BatchNormNdImpl<SpatialDims>::extra_repr() const {
  return concat(num_features, ", eps=", options.eps, ", momentum=",
                options.momentum ? concat(*options.momentum) : std::string("None"), ", affine=", flag(options.affine),
                ", track_running_stats=", flag(options.track_running_stats));
}

template class BatchNormNdImpl<1>;
template class BatchNormNdImpl<2>;
template class BatchNormNdImpl<3>;

}  // namespace infini::nn
