// Fused cross-entropy of logit rows against class indices: the forward keeps one
// log-sum-exp per row, the backward writes (softmax - one-hot) * grad row by row, so no
// (N, C) log-probability matrix is stored and each pass reads the logits once.
export module infini.kernels:cross_entropy;
import infini.std;
import infini.tensor;

export namespace infini {

// logits (N, C) float64/32/bfloat16/float16 with unit class stride (any row stride), target
// (N) int64 with each entry in [0, C) or equal to ignore_index. The kernel writes loss (N) =
// lse - logits[i, target[i]] (0 where ignored) and lse (N) = log(sum_c exp(logits[i, c])),
// and raises an IndexError naming an out-of-range target. 16-bit logits are computed in
// float32: loss and grad_loss are float32 for them (the logits' dtype otherwise).
struct CrossEntropyForwardKernel {
  static constexpr std::string_view name = "cross_entropy";
  using Fn = void (*)(const Tensor& loss, const Tensor& lse, const Tensor& logits, const Tensor& target,
                      std::int64_t ignore_index);
};
// grad_logits (N, Cp) contiguous of the logits' dtype, Cp >= C: columns c < C get
// grad_loss[i] * (exp(logits[i, c] - lse[i]) - [c == target[i]]), rounded once, columns from C
// on (padding: a vocabulary padded past its C classes) 0; rows of ignored targets 0;
// grad_loss (N).
struct CrossEntropyBackwardKernel {
  static constexpr std::string_view name = "cross_entropy_backward";
  using Fn = void (*)(const Tensor& grad_logits, const Tensor& grad_loss, const Tensor& logits, const Tensor& lse,
                      const Tensor& target, std::int64_t ignore_index);
};

namespace kernels {

struct CrossEntropyRows {
  Tensor loss;  // (N), the logits' dtype (float32 for 16-bit logits)
  Tensor lse;   // (N)
};
// Checks shapes/dtypes/devices (errors name "cross_entropy") and runs the forward kernel.
CrossEntropyRows cross_entropy_forward(const Tensor& logits, const Tensor& target, std::int64_t ignore_index);
// The gradient (N, padded_classes) of logits (N, C) padded to padded_classes >= C columns
// (the padding's gradient 0) for the loss rows' gradient grad_loss (N).
Tensor cross_entropy_backward(const Tensor& grad_loss, const Tensor& logits, const Tensor& lse, const Tensor& target,
                              std::int64_t ignore_index, std::int64_t padded_classes);

}  // namespace kernels
}  // namespace infini
