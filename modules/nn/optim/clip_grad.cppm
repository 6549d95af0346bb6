// Gradient clipping (torch.nn.utils.clip_grad_norm_ / clip_grad_value_), in place on the
// grads of `params`; parameters without a grad are skipped.
module;
#include <limits>
#include <vector>
export module infini.nn:clip_grad;
import infini.autograd;

export namespace infini::optim {

inline constexpr double kInfNorm = std::numeric_limits<double>::infinity();

// The norm of all grads together (as if concatenated), of order norm_type: a finite p > 0
// or kInfNorm (largest magnitude). When max_norm / (total + 1e-6) < 1 (or NaN, like PyTorch's
// clamp) every grad is multiplied by it. Returns the total norm before clipping, computed in
// float64 (deterministic: the same for any thread count); 0 when no parameter has a grad.
// error_if_nonfinite: an Error instead of scaling when the total is NaN or infinite.
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);

// Clamps every grad to [-clip_value, clip_value] (NaN stays NaN); clip_value >= 0.
void clip_grad_value_(const std::vector<Tensor>& params, double clip_value);

}  // namespace infini::optim
