// Gradient clipping (torch.nn.utils.clip_grad_norm_ / clip_grad_value_), in place on the
// grads of `params`; parameters without a grad are skipped.
export module infini.nn:clip_grad;
import infini.std;
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

// The two halves of clip_grad_norm_, for an optimizer that folds the scaling into its update
// (Optimizer::scaled_step): the total norm, grads untouched, and the coefficient the grads
// would be multiplied by: max_norm / (total_norm + 1e-6) when that is below 1 or NaN, else 1.
//   optimizer.scaled_step(clip_coefficient(total_grad_norm(params), max_norm));
double total_grad_norm(const std::vector<Tensor>& params, double norm_type = 2.0, bool error_if_nonfinite = false);
double clip_coefficient(double total_norm, double max_norm);

// The same two as 0-d float64 tensors on the grads' device (all grads on one device), computed
// there without reading anything back, so a CUDA graph can capture them (with a capturable
// optimizer's scaled_step(Tensor)). The norm has total_grad_norm's value; on CUDA a norm_type
// other than 1, 2 and infinity takes its root with the device's pow.
Tensor total_grad_norm_tensor(const std::vector<Tensor>& params, double norm_type = 2.0);
Tensor clip_coefficient(const Tensor& total_norm, double max_norm);

// Clamps every grad to [-clip_value, clip_value] (NaN stays NaN); clip_value >= 0.
void clip_grad_value_(const std::vector<Tensor>& params, double clip_value);

}  // namespace infini::optim
