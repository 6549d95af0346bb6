// Per-sample normalisation layers: LayerNorm, RMSNorm and GroupNorm (torch.nn's names,
// options and defaults). Affine weights start at one, biases at zero.
export module infini.nn:normalization;
import infini.std;
import infini.autograd;
import :module_base;

export namespace infini::nn {

struct LayerNormOptions {
  double eps = 1e-5;
  bool elementwise_affine = true;  // learnable weight (and bias) of normalized_shape
  bool bias = true;                // with elementwise_affine: also a learnable bias
};

// Normalises x (*, normalized_shape) over its trailing dims to zero mean and unit
// (biased) variance, then y = x_hat * weight + bias.
class LayerNormImpl : public Cloneable<LayerNormImpl> {
 public:
  explicit LayerNormImpl(Shape normalized_shape, LayerNormOptions options = {});
  explicit LayerNormImpl(std::int64_t normalized_size, LayerNormOptions options = {});
  void reset() override;
  void reset_parameters();
  Tensor forward(const Tensor& x) override;
  // forward(x).to(out_dtype) without the intermediate (layer_norm's out_dtype): float32 rows
  // are written as float16/bfloat16 directly, for a product that reads them so under autocast.
  Tensor forward(const Tensor& x, DataType out_dtype);
  // layer_norm_with_residual through this layer: {forward(x) (in out_dtype if given), x's
  // passthrough for a pre-norm block's residual sum, whose gradient the norm's backward adds}.
  NormAndResidual forward_with_residual(const Tensor& x, std::optional<DataType> out_dtype = std::nullopt);

  Shape normalized_shape;
  LayerNormOptions options;
  Tensor weight;  // normalized_shape, or undefined without elementwise_affine
  Tensor bias;    // normalized_shape, or undefined without elementwise_affine and bias

 protected:
  std::string extra_repr() const override;

 private:
  Tensor normalize(const Tensor& x, std::optional<DataType> out_dtype);
};
// The handles spell out their constructors (ModuleHolder's forwarding one cannot take
// braced arguments), so that `LayerNorm ln(768, {.eps = 1e-6})` works.
class LayerNorm : public ModuleHolder<LayerNormImpl> {
 public:
  using ModuleHolder::ModuleHolder;
  LayerNorm(Shape normalized_shape, LayerNormOptions options = {})
      : ModuleHolder(std::move(normalized_shape), options) {}
  LayerNorm(std::int64_t normalized_size, LayerNormOptions options = {}) : ModuleHolder(normalized_size, options) {}
};

struct RMSNormOptions {
  // Unset: the machine epsilon of the input's dtype (torch.finfo(x.dtype).eps).
  std::optional<double> eps = std::nullopt;
  bool elementwise_affine = true;  // learnable weight of normalized_shape
};

// y = x / sqrt(mean(x^2 over the trailing dims) + eps) * weight, for x (*, normalized_shape).
class RMSNormImpl : public Cloneable<RMSNormImpl> {
 public:
  explicit RMSNormImpl(Shape normalized_shape, RMSNormOptions options = {});
  explicit RMSNormImpl(std::int64_t normalized_size, RMSNormOptions options = {});
  void reset() override;
  void reset_parameters();
  Tensor forward(const Tensor& x) override;

  Shape normalized_shape;
  RMSNormOptions options;
  Tensor weight;  // normalized_shape, or undefined without elementwise_affine

 protected:
  std::string extra_repr() const override;
};
class RMSNorm : public ModuleHolder<RMSNormImpl> {
 public:
  using ModuleHolder::ModuleHolder;
  RMSNorm(Shape normalized_shape, RMSNormOptions options = {}) : ModuleHolder(std::move(normalized_shape), options) {}
  RMSNorm(std::int64_t normalized_size, RMSNormOptions options = {}) : ModuleHolder(normalized_size, options) {}
};

struct GroupNormOptions {
  double eps = 1e-5;
  bool affine = true;  // learnable per-channel weight and bias
};

// x (N, C, *): the C channels are split into num_groups groups, each normalised over its
// channels and all positions; then y = x_hat * weight[c] + bias[c].
class GroupNormImpl : public Cloneable<GroupNormImpl> {
 public:
  GroupNormImpl(std::int64_t num_groups, std::int64_t num_channels, GroupNormOptions options = {});
  void reset() override;
  void reset_parameters();
  Tensor forward(const Tensor& x) override;

  std::int64_t num_groups, num_channels;
  GroupNormOptions options;
  Tensor weight, bias;  // (num_channels), or undefined without affine

 protected:
  std::string extra_repr() const override;
};
class GroupNorm : public ModuleHolder<GroupNormImpl> {
 public:
  using ModuleHolder::ModuleHolder;
  GroupNorm(std::int64_t num_groups, std::int64_t num_channels, GroupNormOptions options = {})
      : ModuleHolder(num_groups, num_channels, options) {}
};

}  // namespace infini::nn
