// Linear and Bilinear: affine maps of one and of two inputs (torch.nn.Linear / Bilinear),
// initialised as PyTorch does: every weight and bias entry ~ U(-k, k), k = 1/sqrt(in_features)
// (in1_features for Bilinear).
export module infini.nn:linear;
import infini.std;
import infini.autograd;
import :module_base;

export namespace infini::nn {

// y = x W^T + b: x (*, in_features) -> y (*, out_features).
class LinearImpl : public Cloneable<LinearImpl> {
 public:
  LinearImpl(std::int64_t in_features, std::int64_t out_features, bool bias = true);
  void reset() override;
  // Draws weight and bias again (from `generator`, or the default generator).
  void reset_parameters(Generator* generator = nullptr);
  Tensor forward(const Tensor& x) override;

  std::int64_t in_features, out_features;
  Tensor weight;  // (out_features, in_features)
  Tensor bias;    // (out_features); undefined when built with bias = false

 protected:
  std::string extra_repr() const override;

 private:
  bool with_bias_;
};
using Linear = ModuleHolder<LinearImpl>;

// y[..., o] = sum_ij x1[..., i] W[o, i, j] x2[..., j] + b[o]:
// x1 (*, in1_features), x2 (*, in2_features) with the same leading dims -> (*, out_features).
class BilinearImpl : public Cloneable<BilinearImpl> {
 public:
  BilinearImpl(std::int64_t in1_features, std::int64_t in2_features, std::int64_t out_features, bool bias = true);
  void reset() override;
  void reset_parameters(Generator* generator = nullptr);
  using Module::forward;  // the one-tensor form raises: Bilinear takes two
  Tensor forward(const Tensor& x1, const Tensor& x2);
  // forward(x1, x2) between the forward hooks.
  Tensor operator()(const Tensor& x1, const Tensor& x2);

  std::int64_t in1_features, in2_features, out_features;
  Tensor weight;  // (out_features, in1_features, in2_features)
  Tensor bias;    // (out_features); undefined when built with bias = false

 protected:
  std::string extra_repr() const override;

 private:
  bool with_bias_;
};
using Bilinear = ModuleHolder<BilinearImpl>;

}  // namespace infini::nn
