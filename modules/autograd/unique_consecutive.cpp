// unique_consecutive (torch.unique_consecutive): each run of equal consecutive elements (or
// slices along dim) collapsed to one. Built from elementwise comparisons of neighbours, a
// cumulative sum and a gather, so it runs wherever those do; no gradient (like PyTorch).
// NaN equals nothing, so every NaN (every slice holding one) is a run of its own.
module;
#include <cstdint>
module infini.autograd;
import infini.std;

namespace infini {
namespace {

constexpr std::string_view kOp = "unique_consecutive";

// rows (n, k) with n >= 1: whether each row starts a run (bool (n)): the first row does, and
// every row that differs from the one before it in some element.
Tensor run_starts(const Tensor& rows) {
  const std::int64_t n = rows.shape()[0];
  const Tensor first = ones({1}, {.dtype = kBool, .device = rows.device()});
  if (n == 1) return first;
  const Tensor differs = ne(rows.narrow(0, 1, n - 1), rows.narrow(0, 0, n - 1));  // (n - 1, k)
  return cat({first, any(differs, {1})});
}

struct Runs {
  Tensor starts;   // int64 (runs): the position where each run starts
  Tensor inverse;  // int64 (n): the run each position belongs to
  Tensor counts;   // int64 (runs): each run's length
};

// The runs of equal consecutive rows of rows (n, k), n >= 1.
Runs runs_of(const Tensor& rows) {
  const Tensor is_start = run_starts(rows);
  const Tensor starts = nonzero(is_start).view({-1});
  const std::int64_t n = rows.shape()[0], runs = starts.shape()[0];
  const Tensor ends = cat({starts.narrow(0, 1, runs - 1), full({1}, n, {.dtype = kInt64, .device = rows.device()})});
  return {starts, sub(cumsum(is_start, 0), 1), sub(ends, starts)};
}

UniqueResult result(const Tensor& values, const Tensor& inverse, const Tensor& counts, bool return_inverse,
                    bool return_counts) {
  return {values, return_inverse ? inverse : Tensor(), return_counts ? counts : Tensor()};
}

}  // namespace

UniqueResult unique_consecutive(const Tensor& self, bool return_inverse, bool return_counts,
                                std::optional<std::int64_t> dim) {
  NoGradGuard no_grad;
  const TensorOptions index_options{.dtype = kInt64, .device = self.device()};
  if (!dim) {  // the flattened self; inverse has self's shape
    const Tensor flat = self.detach().reshape({-1});
    if (flat.numel() == 0)
      return result(flat, empty(self.shape(), index_options), empty({0}, index_options), return_inverse, return_counts);
    const Runs r = runs_of(flat.unsqueeze(1));
    return result(index_select(flat, 0, r.starts), r.inverse.view(self.shape()), r.counts, return_inverse,
                  return_counts);
  }
  if (self.dim() == 0)
    throw IndexError(kOp, concat("dim ", *dim, " given for a 0-d tensor (it has no dims to compare slices along)"));
  const std::int64_t d = wrap_dim(kOp, *dim, self.dim());
  const std::int64_t n = self.shape()[d];
  if (n == 0)
    return result(self.detach(), empty({0}, index_options), empty({0}, index_options), return_inverse, return_counts);
  if (self.numel() == 0)
    throw ShapeError(kOp, concat("the slices along dim ", d, " of a tensor of shape ", self.shape(),
                                 " are empty: a dim other than dim has size 0, so they cannot be compared"));
  // Slices along d as the rows of an (n, numel / n) matrix.
  const Tensor rows = movedim(self.detach(), d, 0).reshape({n, self.numel() / n});
  const Runs r = runs_of(rows);
  return result(index_select(self.detach(), d, r.starts), r.inverse, r.counts, return_inverse, return_counts);
}

}  // namespace infini
