// BatchNorm1d / BatchNorm2d / BatchNorm3d (torch.nn's names, options and defaults).
// Training normalises with the batch's statistics over every dim but the channel dim and
// updates the buffers running_mean/running_var (the latter with the unbiased variance):
// running = (1 - momentum) * running + momentum * batch. Evaluation normalises with the
// running statistics; without track_running_stats there are none and the batch's are used
// in both modes. State: weight, bias (affine), running_mean, running_var,
// num_batches_tracked (0-d int64) (track_running_stats).
export module infini.nn:batch_norm;
import infini.std;
import infini.autograd;
import :module_base;

export namespace infini::nn {

struct BatchNormOptions {
  double eps = 1e-5;
  // Unset: a cumulative moving average, momentum = 1 / num_batches_tracked.
  std::optional<double> momentum = 0.1;
  bool affine = true;               // learnable per-channel weight (ones) and bias (zeros)
  bool track_running_stats = true;  // keep running_mean (zeros) and running_var (ones)
};

// SpatialDims: 1 takes (N, C) or (N, C, L), 2 takes (N, C, H, W), 3 takes (N, C, D, H, W).
template <int SpatialDims>
class BatchNormNdImpl : public Cloneable<BatchNormNdImpl<SpatialDims>> {
 public:
  explicit BatchNormNdImpl(std::int64_t num_features, BatchNormOptions options = {});
  void reset() override;
  void reset_running_stats();
  void reset_parameters();  // running stats too
  Tensor forward(const Tensor& x) override;

  std::int64_t num_features;
  BatchNormOptions options;
  Tensor weight, bias;                 // (num_features), or undefined without affine
  Tensor running_mean, running_var;    // (num_features), or undefined without track_running_stats
  Tensor num_batches_tracked;          // 0-d int64, or undefined without track_running_stats

 protected:
  std::string extra_repr() const override;
};

using BatchNorm1dImpl = BatchNormNdImpl<1>;
using BatchNorm2dImpl = BatchNormNdImpl<2>;
using BatchNorm3dImpl = BatchNormNdImpl<3>;
// The handles spell out their constructor (ModuleHolder's forwarding one cannot take braced
// arguments), so that `BatchNorm2d bn(64, {.momentum = 0.01})` works.
template <int SpatialDims>
class BatchNormHolder : public ModuleHolder<BatchNormNdImpl<SpatialDims>> {
 public:
  using ModuleHolder<BatchNormNdImpl<SpatialDims>>::ModuleHolder;
  BatchNormHolder(std::int64_t num_features, BatchNormOptions options = {})
      : ModuleHolder<BatchNormNdImpl<SpatialDims>>(num_features, options) {}
};
using BatchNorm1d = BatchNormHolder<1>;
using BatchNorm2d = BatchNormHolder<2>;
using BatchNorm3d = BatchNormHolder<3>;

}  // namespace infini::nn
