// Activation layers over the elementwise, activation and softmax ops (torch.nn's names):
// ReLU, ReLU6, LeakyReLU, GELU, SiLU, Tanh, Sigmoid, LogSigmoid, SELU, CELU, Mish, Hardtanh,
// Hardswish, Hardsigmoid, GLU, Softmax, LogSoftmax, and PReLU (the one with a parameter).
export module infini.nn:activation;
import infini.std;
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

struct ReLU6Fn {
  static constexpr const char* name = "ReLU6";
  static Tensor apply(const Tensor& x) { return relu6(x); }
};
struct LogSigmoidFn {
  static constexpr const char* name = "LogSigmoid";
  static Tensor apply(const Tensor& x) { return logsigmoid(x); }
};
struct SELUFn {
  static constexpr const char* name = "SELU";
  static Tensor apply(const Tensor& x) { return selu(x); }
};
struct MishFn {
  static constexpr const char* name = "Mish";
  static Tensor apply(const Tensor& x) { return mish(x); }
};
struct HardswishFn {
  static constexpr const char* name = "Hardswish";
  static Tensor apply(const Tensor& x) { return hardswish(x); }
};
struct HardsigmoidFn {
  static constexpr const char* name = "Hardsigmoid";
  static Tensor apply(const Tensor& x) { return hardsigmoid(x); }
};

using ReLUImpl = ElementwiseActivationImpl<ReLUFn>;
using SiLUImpl = ElementwiseActivationImpl<SiLUFn>;
using TanhImpl = ElementwiseActivationImpl<TanhFn>;
using SigmoidImpl = ElementwiseActivationImpl<SigmoidFn>;
using ReLU6Impl = ElementwiseActivationImpl<ReLU6Fn>;
using LogSigmoidImpl = ElementwiseActivationImpl<LogSigmoidFn>;
using SELUImpl = ElementwiseActivationImpl<SELUFn>;
using MishImpl = ElementwiseActivationImpl<MishFn>;
using HardswishImpl = ElementwiseActivationImpl<HardswishFn>;
using HardsigmoidImpl = ElementwiseActivationImpl<HardsigmoidFn>;
using ReLU = ModuleHolder<ReLUImpl>;
using SiLU = ModuleHolder<SiLUImpl>;
using Tanh = ModuleHolder<TanhImpl>;
using Sigmoid = ModuleHolder<SigmoidImpl>;
using ReLU6 = ModuleHolder<ReLU6Impl>;
using LogSigmoid = ModuleHolder<LogSigmoidImpl>;
using SELU = ModuleHolder<SELUImpl>;
using Mish = ModuleHolder<MishImpl>;
using Hardswish = ModuleHolder<HardswishImpl>;
using Hardsigmoid = ModuleHolder<HardsigmoidImpl>;

// clamp(x, min_val, max_val), with min_val < max_val (an Error otherwise, as PyTorch's).
class HardtanhImpl : public Cloneable<HardtanhImpl> {
 public:
  explicit HardtanhImpl(double min_val = -1.0, double max_val = 1.0);
  void reset() override;
  Tensor forward(const Tensor& x) override;
  double min_val, max_val;

 protected:
  std::string extra_repr() const override;
};
using Hardtanh = ModuleHolder<HardtanhImpl>;

// max(0, x) + min(0, alpha (exp(x / alpha) - 1)); alpha must not be 0.
class CELUImpl : public Cloneable<CELUImpl> {
 public:
  explicit CELUImpl(double alpha = 1.0);
  void reset() override;
  Tensor forward(const Tensor& x) override;
  double alpha;

 protected:
  std::string extra_repr() const override;
};
using CELU = ModuleHolder<CELUImpl>;

// a * sigmoid(b) for the halves a, b of x along dim (of even size).
class GLUImpl : public Cloneable<GLUImpl> {
 public:
  explicit GLUImpl(std::int64_t dim = -1) : Cloneable("GLU"), dim(dim) {}
  void reset() override {}
  Tensor forward(const Tensor& x) override;
  std::int64_t dim;

 protected:
  std::string extra_repr() const override;
};
using GLU = ModuleHolder<GLUImpl>;

// x where x > 0, else weight * x, with a learnable weight: one value shared by every
// channel (num_parameters 1) or one per channel (dim 1 of the input), initialised to init.
class PReLUImpl : public Cloneable<PReLUImpl> {
 public:
  explicit PReLUImpl(std::int64_t num_parameters = 1, double init = 0.25);
  void reset() override;
  // Fills weight with init again.
  void reset_parameters();
  Tensor forward(const Tensor& x) override;
  std::int64_t num_parameters;
  double init;
  Tensor weight;  // (num_parameters)

 protected:
  std::string extra_repr() const override;
};
using PReLU = ModuleHolder<PReLUImpl>;

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
