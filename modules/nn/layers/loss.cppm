// Loss modules (torch.nn's names, options and defaults) over the loss ops: CrossEntropyLoss,
// NLLLoss, MSELoss, L1Loss, SmoothL1Loss, HuberLoss, KLDivLoss, BCELoss and BCEWithLogitsLoss.
// Called as loss(input, target). Reduction::BatchMean is KLDivLoss's only.
// Class weights and pos_weight are buffers (in the state dict and moved by to()) when given.
export module infini.nn:loss;
import infini.std;
import infini.autograd;
import :module_base;

export namespace infini::nn {

// The two-tensor call shared by every loss: forward(input, target) between the hooks.
template <class Derived>
class LossImpl : public Cloneable<Derived> {
 public:
  using Cloneable<Derived>::Cloneable;
  using Module::forward;  // the one-tensor form raises: losses take two tensors
  virtual Tensor forward(const Tensor& input, const Tensor& target) = 0;
  Tensor operator()(const Tensor& input, const Tensor& target) {
    return this->call({input, target}, [&] { return forward(input, target); });
  }
};

// input (N, C) / (N, C, d1, ...) / (C) logits; target class indices (int64) or class
// probabilities of input's shape. Options: weight (C), ignore_index, reduction,
// label_smoothing in [0, 1].
class CrossEntropyLossImpl : public LossImpl<CrossEntropyLossImpl> {
 public:
  explicit CrossEntropyLossImpl(CrossEntropyOptions options = {});
  void reset() override;
  Tensor forward(const Tensor& input, const Tensor& target) override;
  CrossEntropyOptions options;
  Tensor weight;  // (C) buffer, or undefined
};
// The handles with options spell out their constructor (ModuleHolder's forwarding one cannot
// take braced arguments), so that `NLLLoss loss({.ignore_index = 0})` works.
class CrossEntropyLoss : public ModuleHolder<CrossEntropyLossImpl> {
 public:
  using ModuleHolder::ModuleHolder;
  CrossEntropyLoss(CrossEntropyOptions options = {}) : ModuleHolder(std::move(options)) {}
};

struct NLLLossOptions {
  std::optional<Tensor> weight = std::nullopt;  // (C) per-class weights
  std::int64_t ignore_index = -100;
  Reduction reduction = Reduction::Mean;
};

// input (N, C, ...) log-probabilities, target int64 class indices (N, ...).
class NLLLossImpl : public LossImpl<NLLLossImpl> {
 public:
  explicit NLLLossImpl(NLLLossOptions options = {});
  void reset() override;
  Tensor forward(const Tensor& input, const Tensor& target) override;
  NLLLossOptions options;
  Tensor weight;  // (C) buffer, or undefined
};
class NLLLoss : public ModuleHolder<NLLLossImpl> {
 public:
  using ModuleHolder::ModuleHolder;
  NLLLoss(NLLLossOptions options = {}) : ModuleHolder(std::move(options)) {}
};

// (input - target)^2, reduced; input and target of one shape.
class MSELossImpl : public LossImpl<MSELossImpl> {
 public:
  explicit MSELossImpl(Reduction reduction = Reduction::Mean) : LossImpl("MSELoss"), reduction(reduction) {}
  void reset() override {}
  Tensor forward(const Tensor& input, const Tensor& target) override;
  Reduction reduction;
};
using MSELoss = ModuleHolder<MSELossImpl>;

// |input - target|, reduced; input and target of one shape.
class L1LossImpl : public LossImpl<L1LossImpl> {
 public:
  explicit L1LossImpl(Reduction reduction = Reduction::Mean) : LossImpl("L1Loss"), reduction(reduction) {}
  void reset() override {}
  Tensor forward(const Tensor& input, const Tensor& target) override;
  Reduction reduction;
};
using L1Loss = ModuleHolder<L1LossImpl>;

struct SmoothL1LossOptions {
  Reduction reduction = Reduction::Mean;
  double beta = 1.0;  // >= 0; 0 is L1Loss
};

// 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta, for d = input - target (one shape).
class SmoothL1LossImpl : public LossImpl<SmoothL1LossImpl> {
 public:
  explicit SmoothL1LossImpl(SmoothL1LossOptions options = {});
  void reset() override;
  Tensor forward(const Tensor& input, const Tensor& target) override;
  SmoothL1LossOptions options;
};
class SmoothL1Loss : public ModuleHolder<SmoothL1LossImpl> {
 public:
  using ModuleHolder::ModuleHolder;
  SmoothL1Loss(SmoothL1LossOptions options = {}) : ModuleHolder(options) {}
};

struct HuberLossOptions {
  Reduction reduction = Reduction::Mean;
  double delta = 1.0;  // > 0
};

// 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta), for d = input - target (one shape).
class HuberLossImpl : public LossImpl<HuberLossImpl> {
 public:
  explicit HuberLossImpl(HuberLossOptions options = {});
  void reset() override;
  Tensor forward(const Tensor& input, const Tensor& target) override;
  HuberLossOptions options;
};
class HuberLoss : public ModuleHolder<HuberLossImpl> {
 public:
  using ModuleHolder::ModuleHolder;
  HuberLoss(HuberLossOptions options = {}) : ModuleHolder(options) {}
};

struct KLDivLossOptions {
  // Mean averages over every element (PyTorch's default); BatchMean divides the sum by the
  // batch size, the KL divergence of each sample's distribution.
  Reduction reduction = Reduction::Mean;
  bool log_target = false;  // target given as log-probabilities
};

// input log-probabilities, target probabilities: target (log target - input) pointwise.
class KLDivLossImpl : public LossImpl<KLDivLossImpl> {
 public:
  explicit KLDivLossImpl(KLDivLossOptions options = {}) : LossImpl("KLDivLoss"), options(options) {}
  void reset() override {}
  Tensor forward(const Tensor& input, const Tensor& target) override;
  KLDivLossOptions options;
};
class KLDivLoss : public ModuleHolder<KLDivLossImpl> {
 public:
  using ModuleHolder::ModuleHolder;
  KLDivLoss(KLDivLossOptions options = {}) : ModuleHolder(options) {}
};

struct BCELossOptions {
  std::optional<Tensor> weight = std::nullopt;  // broadcast against the per-element loss
  Reduction reduction = Reduction::Mean;
};

// -(t log p + (1 - t) log(1 - p)) with the logs clamped at -100; input p in [0, 1].
class BCELossImpl : public LossImpl<BCELossImpl> {
 public:
  explicit BCELossImpl(BCELossOptions options = {});
  void reset() override;
  Tensor forward(const Tensor& input, const Tensor& target) override;
  BCELossOptions options;
  Tensor weight;  // buffer, or undefined
};
class BCELoss : public ModuleHolder<BCELossImpl> {
 public:
  using ModuleHolder::ModuleHolder;
  BCELoss(BCELossOptions options = {}) : ModuleHolder(std::move(options)) {}
};

struct BCEWithLogitsLossOptions {
  std::optional<Tensor> weight = std::nullopt;  // broadcast against the per-element loss
  Reduction reduction = Reduction::Mean;
  std::optional<Tensor> pos_weight = std::nullopt;  // positive examples' weight, broadcast over the last dim (C)
};

// -(pos_weight t log sigmoid(x) + (1 - t) log(1 - sigmoid(x))), computed stably from logits x.
class BCEWithLogitsLossImpl : public LossImpl<BCEWithLogitsLossImpl> {
 public:
  explicit BCEWithLogitsLossImpl(BCEWithLogitsLossOptions options = {});
  void reset() override;
  Tensor forward(const Tensor& input, const Tensor& target) override;
  BCEWithLogitsLossOptions options;
  Tensor weight, pos_weight;  // buffers, or undefined
};
class BCEWithLogitsLoss : public ModuleHolder<BCEWithLogitsLossImpl> {
 public:
  using ModuleHolder::ModuleHolder;
  BCEWithLogitsLoss(BCEWithLogitsLossOptions options = {}) : ModuleHolder(std::move(options)) {}
};

}  // namespace infini::nn
