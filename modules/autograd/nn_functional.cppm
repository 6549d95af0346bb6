// Neural-network functional ops (torch.nn.functional): softmax family, activations, losses,
// distances, normalisations, dropout and rotary embeddings. Most are compositions of
// differentiable ops, so every derivative (including create_graph) follows from theirs;
// the few that record their own node say so.
export module infini.autograd:nn_functional;
import infini.std;
import infini.kernels;

export namespace infini {

inline constexpr std::array<std::string_view, 34> kNNFunctionalOps = {"embedding",
    "softmax", "log_softmax", "cross_entropy", "padded_cross_entropy", "nll_loss", "mse_loss", "l1_loss", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "layer_norm", "layer_norm_with_residual", "rms_norm", "batch_norm", "group_norm", "dropout",
    "rope", "rope_frequencies", "silu_and_mul", "hardtanh", "relu6", "logsigmoid", "selu", "celu", "mish",
    "hardswish", "hardsigmoid", "glu", "prelu", "kl_div", "smooth_l1_loss", "huber_loss",
    "cosine_similarity", "pairwise_distance"};

Tensor softmax(const Tensor& x, std::int64_t dim);
Tensor log_softmax(const Tensor& x, std::int64_t dim);

// BatchMean (the sum divided by the batch size, input.size(0)) is for kl_div only.
enum class Reduction { None, Mean, Sum, BatchMean };

struct CrossEntropyOptions {
  std::optional<Tensor> weight = std::nullopt;  // (C) per-class weights
  std::int64_t ignore_index = -100;
  Reduction reduction = Reduction::Mean;
  double label_smoothing = 0.0;
};
// input (N, C) or (N, C, d1, ...) logits, or (C) for one sample. target: int64 class
// indices (N) / (N, d1, ...), or float class probabilities of input's shape.
Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyOptions& options = {});
// cross_entropy(input.narrow(1, 0, classes), target, options) for logits input (N, Cp) whose
// columns from `classes` on are padding (a vocabulary padded to a round width, as llm.c's
// Vp): the logits are read in place and their gradient (N, Cp), zero in the padding, is
// written once, with no sliced copy and no zero-filled (N, Cp) scatter.
Tensor padded_cross_entropy(const Tensor& input, const Tensor& target, std::int64_t classes,
                            const CrossEntropyOptions& options = {});
// input: log-probabilities (N, C, ...); target: int64 class indices.
Tensor nll_loss(const Tensor& input, const Tensor& target, const CrossEntropyOptions& options = {});

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
// 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta, for d = input - target (beta 0: l1).
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean,
                      double beta = 1.0);
// 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta): smooth_l1_loss times delta.
Tensor huber_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean,
                  double delta = 1.0);
// input: log-probabilities; target: probabilities (log-probabilities with log_target).
// Pointwise target (log target - input), 0 where target is 0. Mean averages over every
// element (PyTorch's default); BatchMean divides the sum by the batch size, the KL divergence.
Tensor kl_div(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean,
              bool log_target = false);

// ---- activations (torch.nn.functional's; gradients as PyTorch's at the kinks) ----
// clamp(x, min_val, max_val); the gradient passes where min_val < x < max_val.
Tensor hardtanh(const Tensor& x, double min_val = -1.0, double max_val = 1.0);
Tensor relu6(const Tensor& x);  // hardtanh(x, 0, 6)
Tensor logsigmoid(const Tensor& x);  // log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|))
// scale * elu(x, alpha) with PyTorch's constants alpha = 1.6732632423543772848170429916717,
// scale = 1.0507009873554804934193349852946.
Tensor selu(const Tensor& x);
Tensor celu(const Tensor& x, double alpha = 1.0);  // max(0, x) + min(0, alpha (exp(x / alpha) - 1))
Tensor mish(const Tensor& x);  // x tanh(softplus(x))
Tensor hardswish(const Tensor& x);  // x relu6(x + 3) / 6
Tensor hardsigmoid(const Tensor& x);  // relu6(x + 3) / 6
// a * sigmoid(b) for the halves a, b of x along dim (its size must be even).
Tensor glu(const Tensor& x, std::int64_t dim = -1);
// x where x > 0, else weight * x; weight has 1 element or one per channel (dim 1 of x, or
// dim 0 of a 1-d x).
Tensor prelu(const Tensor& x, const Tensor& weight);

// ---- distances ----
// sum(x1 x2) / (max(|x1|, eps) max(|x2|, eps)) along dim, x1 and x2 broadcast.
Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, std::int64_t dim = 1, double eps = 1e-8);
// norm(x1 - x2 + eps, p) over the last dim, x1 and x2 broadcast.
Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p = 2, double eps = 1e-6,
                         bool keepdim = false);
// input: probabilities in [0, 1]; log terms are clamped at -100 like PyTorch.
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight = {},
                            Reduction reduction = Reduction::Mean);
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const std::optional<Tensor>& weight = {},
                                        Reduction reduction = Reduction::Mean,
                                        const std::optional<Tensor>& pos_weight = {});

// Normalises over the trailing dims given by normalized_shape; weight/bias of that shape.
// out_dtype (floating point): the result converted to it once, as layer_norm(...).to(out_dtype)
// gives, without the intermediate: float32 rows are written as float16/bfloat16 directly and
// their gradient read in it (a layer norm that feeds a product under autocast).
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const std::optional<Tensor>& weight = {},
                  const std::optional<Tensor>& bias = {}, double eps = 1e-5,
                  std::optional<DataType> out_dtype = std::nullopt);
// layer_norm(x, ...) and x itself as the two outputs of one node, for pre-norm residual blocks
// (x + f(layer_norm(x))): with `residual` in the sum in place of x, x's gradient (the norm's
// input gradient plus the residual's) is added up by the norm's backward kernel, not by a
// separate pass. `residual` holds x's values (a view of x where x reshapes to rows without a
// copy). Where the fused kernels do not apply (other dtypes, parameters of another dtype or
// device) it is {layer_norm(x, ...), x}.
struct NormAndResidual {
  Tensor normalized, residual;
};
NormAndResidual layer_norm_with_residual(const Tensor& x, const Shape& normalized_shape,
                                         const std::optional<Tensor>& weight = {},
                                         const std::optional<Tensor>& bias = {}, double eps = 1e-5,
                                         std::optional<DataType> out_dtype = std::nullopt);
// eps defaults to PyTorch's: the machine epsilon of float64 for float64 x, of float32 otherwise.
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const std::optional<Tensor>& weight = {},
                std::optional<double> eps = std::nullopt);
// x (N, C, ...). Training: batch statistics, and running_mean/var (C) updated in place
// with momentum (running_var gets the unbiased variance). Eval: the running statistics.
Tensor batch_norm(const Tensor& x, const std::optional<Tensor>& running_mean, const std::optional<Tensor>& running_var,
                  const std::optional<Tensor>& weight, const std::optional<Tensor>& bias, bool training,
                  double momentum = 0.1, double eps = 1e-5);
// x (N, C, ...), C divisible by num_groups; weight/bias (C).
Tensor group_norm(const Tensor& x, std::int64_t num_groups, const std::optional<Tensor>& weight = {},
                  const std::optional<Tensor>& bias = {}, double eps = 1e-5);

// Rows of weight (V, C) picked by int64 indices of any shape -> (..., C). The row
// padding_idx (if given) receives no gradient.
Tensor embedding(const Tensor& indices, const Tensor& weight, std::optional<std::int64_t> padding_idx = {});

// Zeroes each element with probability p and scales the rest by 1 / (1 - p) (training only).
Tensor dropout(const Tensor& x, double p, bool training = true, Generator* generator = nullptr);

// Rotary position embedding, LLaMA style: x (..., T, D) with D even; pairs (x[2i], x[2i+1])
// are rotated by angle t * freq[i]. cos/sin (T, D/2) come from rope_frequencies.
Tensor rope(const Tensor& x, const Tensor& cos, const Tensor& sin);
struct RopeFrequencies {
  Tensor cos, sin;  // (T, D/2), float32
};
// freq[i] = theta^(-2i/D), with LLaMA-3.1's scaling of long wavelengths when use_scaled.
RopeFrequencies rope_frequencies(std::int64_t head_dim, std::int64_t max_seq_len, double theta = 500000.0,
                                 bool use_scaled = true, double scale_factor = 8.0, double low_freq_factor = 1.0,
                                 double high_freq_factor = 4.0, std::int64_t original_context = 8192);

// silu(a) * b, the SwiGLU gate.
Tensor silu_and_mul(const Tensor& a, const Tensor& b);

}  // namespace infini
