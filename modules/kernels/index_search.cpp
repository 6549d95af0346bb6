// Raw sorting and searching ops: argsort, top-k, unique, nonzero and multinomial. They
// check their arguments, allocate the results and call the device kernels.
module;
#include <cstdint>
module infini.kernels;
import infini.std;

namespace infini::kernels {

Tensor argsort(std::string_view op, const Tensor& self, std::int64_t dim, bool descending) {
  NoGradGuard no_grad;
  dim = wrap_dim(op, dim, self.dim());
  Tensor out = empty(self.shape(), {.dtype = kInt64, .device = self.device()});
  if (self.numel() > 0) {
    const Tensor x = self.dim() == 0 ? self.view({1}) : self;
    KernelTable<SortKernel>::call(self.device(), self.dim() == 0 ? out.view({1}) : out, x, dim, descending);
  }
  return out;
}

Tensor topk_indices(std::string_view op, const Tensor& self, std::int64_t k, std::int64_t dim, bool largest,
                    bool sorted) {
  NoGradGuard no_grad;
  dim = wrap_dim(op, dim, self.dim());
  const Tensor x = self.dim() == 0 ? self.view({1}) : self;
  const std::int64_t n = x.shape()[dim];
  if (k < 0 || k > n)
    throw IndexError(op, concat("k = ", k, " is out of range for dimension ", dim, " with size ", n));
  Shape shape = x.shape();
  shape[dim] = k;
  Tensor out = empty(shape, {.dtype = kInt64, .device = self.device()});
  if (out.numel() > 0) KernelTable<TopkKernel>::call(self.device(), out, x, dim, k, largest, sorted);
  return self.dim() == 0 && k == 1 ? out.view({}) : out;
}

UniqueOutputs unique(std::string_view, const Tensor& self, bool sorted) {
  NoGradGuard no_grad;
  return KernelTable<UniqueKernel>::call(self.device(), self.contiguous(), sorted);
}

Tensor nonzero(std::string_view, const Tensor& self) {
  NoGradGuard no_grad;
  return KernelTable<NonzeroKernel>::call(self.device(), self.contiguous());
}

Tensor multinomial(std::string_view op, const Tensor& probs, std::int64_t num_samples, bool replacement,
                   Generator* generator) {
  NoGradGuard no_grad;
  if (!is_floating_point(probs.dtype()))
    throw DTypeError(op, concat("expected floating-point probabilities, got ", probs.dtype()));
  if (probs.dim() < 1 || probs.dim() > 2)
    throw ShapeError(op, concat("expected a 1-d or 2-d probability tensor, got shape ", probs.shape()));
  const Tensor p = probs.dim() == 1 ? probs.unsqueeze(0) : probs;
  const std::int64_t rows = p.shape()[0], categories = p.shape()[1];
  if (categories == 0) throw ShapeError(op, concat("the probability tensor of shape ", probs.shape(), " has no categories"));
  if (num_samples <= 0) throw ShapeError(op, concat("num_samples must be positive, got ", num_samples));
  if (!replacement && num_samples > categories)
    throw ShapeError(op, concat("cannot draw ", num_samples, " samples from ", categories,
                                " categories without replacement"));
  Tensor out = empty({rows, num_samples}, {.dtype = kInt64, .device = probs.device()});
  Generator& gen = generator ? *generator : default_generator();
  const PhiloxState state = gen.reserve(static_cast<std::uint64_t>(rows * (replacement ? num_samples : categories)));
  if (rows > 0) {
    using Problem = MultinomialCheck::Problem;
    const MultinomialCheck check = KernelTable<MultinomialKernel>::call(probs.device(), out, p.contiguous(), replacement, state);
    if (check.problem == Problem::NotFiniteOrNegative)
      throw Error(op, concat("probabilities must be finite and non-negative (row ", check.row, " is not)"));
    if (check.problem == Problem::ZeroSum)
      throw Error(op, concat("every row of probabilities must have a positive sum (row ", check.row, " sums to 0)"));
    if (check.problem == Problem::TooFewPositive)
      throw Error(op, concat("cannot draw ", num_samples, " samples without replacement from row ", check.row,
                             ", which has only ", check.positive, " categories of positive probability"));
  }
  return probs.dim() == 1 ? out.view({num_samples}) : out;
}

}  // namespace infini::kernels
