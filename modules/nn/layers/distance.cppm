// Distance modules over the distance ops (torch.nn's names and defaults): CosineSimilarity
// and PairwiseDistance, called as module(x1, x2) on broadcastable inputs. No parameters.
export module infini.nn:distance;
import infini.std;
import infini.autograd;
import :module_base;

export namespace infini::nn {

// sum(x1 x2) / (max(|x1|, eps) max(|x2|, eps)) along dim.
class CosineSimilarityImpl : public Cloneable<CosineSimilarityImpl> {
 public:
  explicit CosineSimilarityImpl(std::int64_t dim = 1, double eps = 1e-8);
  void reset() override;
  using Module::forward;  // the one-tensor form raises: the module takes two
  Tensor forward(const Tensor& x1, const Tensor& x2);
  // forward(x1, x2) between the forward hooks.
  Tensor operator()(const Tensor& x1, const Tensor& x2);
  std::int64_t dim;
  double eps;
};
using CosineSimilarity = ModuleHolder<CosineSimilarityImpl>;

// The p-norm of x1 - x2 + eps over the last dim (kept as size 1 with keepdim).
class PairwiseDistanceImpl : public Cloneable<PairwiseDistanceImpl> {
 public:
  explicit PairwiseDistanceImpl(double p = 2, double eps = 1e-6, bool keepdim = false)
      : Cloneable("PairwiseDistance"), p(p), eps(eps), keepdim(keepdim) {}
  void reset() override {}
  using Module::forward;
  Tensor forward(const Tensor& x1, const Tensor& x2);
  Tensor operator()(const Tensor& x1, const Tensor& x2);
  double p, eps;
  bool keepdim;
};
using PairwiseDistance = ModuleHolder<PairwiseDistanceImpl>;

}  // namespace infini::nn
