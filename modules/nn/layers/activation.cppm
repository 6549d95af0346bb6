// Activation layers over the elementwise and softmax ops (torch.nn's names): ReLU,
// LeakyReLU, GELU, SiLU, Tanh, Sigmoid, Softmax, LogSoftmax. They hold no parameters.
module;
#include <cstdint>
#include <string>
export module infini.nn:activation;
import infini.autograd;
import :module_base;
import :layer_errors;

export namespace infini::nn {

// Shared shape of the parameterless activations: forward applies Fn::apply.
template <class Fn>
class ElementwiseActivationImpl : public Cloneable<ElementwiseActivationImpl<Fn>> {
 public:
  ElementwiseActivationImpl() : Cloneable<ElementwiseActivationImpl<Fn>>(Fn::name) {}
  void reset() override {}
  Tensor forward(const Tensor& x) override {
    return with_layer_name(this->type_name(), [&] { return Fn::apply(x); });
  }
};

struct ReLUFn {
  static constexpr const char* name = "ReLU";
  static Tensor apply(const Tensor& x) { return relu(x); }
};
struct SiLUFn {
  static constexpr const char* name = "SiLU";
  static Tensor apply(const Tensor& x) { return silu(x); }
};
struct TanhFn {
  static constexpr const char* name = "Tanh";
  static Tensor apply(const Tensor& x) { return tanh(x); }
};
struct SigmoidFn {
  static constexpr const char* name = "Sigmoid";
  static Tensor apply(const Tensor& x) { return sigmoid(x); }
};

using ReLUImpl = ElementwiseActivationImpl<ReLUFn>;
using SiLUImpl = ElementwiseActivationImpl<SiLUFn>;
using TanhImpl = ElementwiseActivationImpl<TanhFn>;
using SigmoidImpl = ElementwiseActivationImpl<SigmoidFn>;
using ReLU = ModuleHolder<ReLUImpl>;
using SiLU = ModuleHolder<SiLUImpl>;
using Tanh = ModuleHolder<TanhImpl>;
using Sigmoid = ModuleHolder<SigmoidImpl>;

// max(0, x) + negative_slope * min(0, x)
class LeakyReLUImpl : public Cloneable<LeakyReLUImpl> {
 public:
  explicit LeakyReLUImpl(double negative_slope = 0.01);
  void reset() override;
  Tensor forward(const Tensor& x) override;
  double negative_slope;

 protected:
  std::string extra_repr() const override;
};
using LeakyReLU = ModuleHolder<LeakyReLUImpl>;

// x * Phi(x) (approximate "none"), or the tanh approximation (approximate "tanh").
class GELUImpl : public Cloneable<GELUImpl> {
 public:
  explicit GELUImpl(GeluApproximation approximate = GeluApproximation::None);
  // "none" or "tanh", as in PyTorch; Error otherwise.
  explicit GELUImpl(const std::string& approximate);
  void reset() override {}
  Tensor forward(const Tensor& x) override;
  GeluApproximation approximate;

 protected:
  std::string extra_repr() const override;
};
using GELU = ModuleHolder<GELUImpl>;

// exp(x) / sum(exp(x)) along dim.
class SoftmaxImpl : public Cloneable<SoftmaxImpl> {
 public:
  explicit SoftmaxImpl(std::int64_t dim) : Cloneable("Softmax"), dim(dim) {}
  void reset() override {}
  Tensor forward(const Tensor& x) override;
  std::int64_t dim;

 protected:
  std::string extra_repr() const override;
};
using Softmax = ModuleHolder<SoftmaxImpl>;

// log(softmax(x, dim)), computed stably.
class LogSoftmaxImpl : public Cloneable<LogSoftmaxImpl> {
 public:
  explicit LogSoftmaxImpl(std::int64_t dim) : Cloneable("LogSoftmax"), dim(dim) {}
  void reset() override {}
  Tensor forward(const Tensor& x) override;
  std::int64_t dim;

 protected:
  std::string extra_repr() const override;
};
using LogSoftmax = ModuleHolder<LogSoftmaxImpl>;

}  // namespace infini::nn
