// Neural-network functional ops (torch.nn.functional): softmax family, losses,
// normalisations, dropout and rotary embeddings. They are compositions of differentiable
// ops, so every derivative (including create_graph) follows from theirs.
module;
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>
export module infini.autograd:nn_functional;
import infini.kernels;

export namespace infini {

inline constexpr std::array<std::string_view, 17> kNNFunctionalOps = {"embedding",
    "softmax", "log_softmax", "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "layer_norm", "rms_norm", "batch_norm", "group_norm", "dropout",
    "rope", "rope_frequencies", "silu_and_mul"};

Tensor softmax(const Tensor& x, std::int64_t dim);
Tensor log_softmax(const Tensor& x, std::int64_t dim);

enum class Reduction { None, Mean, Sum };

struct CrossEntropyOptions {
  std::optional<Tensor> weight = std::nullopt;  // (C) per-class weights
  std::int64_t ignore_index = -100;
  Reduction reduction = Reduction::Mean;
  double label_smoothing = 0.0;
};
// input (N, C) or (N, C, d1, ...) logits, or (C) for one sample. target: int64 class
// indices (N) / (N, d1, ...), or float class probabilities of input's shape.
Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyOptions& options = {});
// input: log-probabilities (N, C, ...); target: int64 class indices.
Tensor nll_loss(const Tensor& input, const Tensor& target, const CrossEntropyOptions& options = {});

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
// input: probabilities in [0, 1]; log terms are clamped at -100 like PyTorch.
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight = {},
                            Reduction reduction = Reduction::Mean);
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const std::optional<Tensor>& weight = {},
                                        Reduction reduction = Reduction::Mean,
                                        const std::optional<Tensor>& pos_weight = {});

// Normalises over the trailing dims given by normalized_shape; weight/bias of that shape.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const std::optional<Tensor>& weight = {},
                  const std::optional<Tensor>& bias = {}, double eps = 1e-5);
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
