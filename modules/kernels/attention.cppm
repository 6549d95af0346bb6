// Fused scaled dot-product attention (FlashAttention's online softmax on the CPU): no
// (Tq, Tk) score matrix is ever stored; the forward keeps one log-sum-exp per query row
// for the backward, which recomputes the scores row by row.
export module infini.kernels:attention;
import infini.std;
import infini.tensor;

export namespace infini {

// Shapes: q (B, H, Tq, D), k (B, Hkv, Tk, D), v (B, Hkv, Tk, Dv) with H a multiple of Hkv
// (grouped-query attention: query head h reads key/value head h / (H / Hkv)); mask, when
// defined, is (B, H, Tq, Tk) (a broadcast view is fine): bool (true = attend) or additive
// float. Causal masking keeps j <= i (top-left aligned, like PyTorch). Dropout keeps a
// weight when the Philox uniform of element ((b H + h) Tq + i) Tk + j is >= dropout_p.
struct AttentionParams {
  double scale = 1.0;
  bool causal = false;
  double dropout_p = 0.0;
  PhiloxState dropout_state;
};

// q, k, v contiguous float32/64, or bfloat16/float16 where a kernel takes them as they are (on
// CUDA: no mask, no dropout, D = Dv of 16, 32, 64 or 128; those kernels read any layout whose
// rows are contiguous and 16-byte aligned, such as (B, T, H, D) heads in place); out
// (B, H, Tq, Dv) of q's dtype (for the 16-bit CUDA kernels laid out as (B, Tq, H, Dv), so the
// heads merge without a copy) and lse (B, H, Tq), float32 for 16-bit q, written by the kernel.
struct AttentionForwardKernel {
  static constexpr std::string_view name = "scaled_dot_product_attention";
  using Fn = void (*)(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                      const Tensor& mask, const AttentionParams& params);
};
// dq, dk, dv (shaped like q, k, v; zero-initialised by the caller, except for the 16-bit CUDA
// kernels, which write every row, in the (B, T, H, D) layout) from the output gradient.
struct AttentionBackwardKernel {
  static constexpr std::string_view name = "scaled_dot_product_attention_backward";
  using Fn = void (*)(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& grad_out,
                      const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                      const Tensor& mask, const AttentionParams& params);
};

namespace kernels {

struct AttentionResult {
  Tensor out;  // (B, H, Tq, Dv)
  Tensor lse;  // (B, H, Tq)
};
// Checks shapes/dtypes/devices (errors name "scaled_dot_product_attention"), makes the
// inputs contiguous where the kernel needs it (and 16-bit inputs float32 unless a kernel
// takes them) and runs the forward kernel.
AttentionResult attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                                  const AttentionParams& params);
struct AttentionGrads {
  Tensor dq, dk, dv;
};
AttentionGrads attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& out, const Tensor& lse, const Tensor& mask,
                                  const AttentionParams& params);

}  // namespace kernels
}  // namespace infini
