// The CUDA fused attention kernels as entries of Attention{Forward,Backward}Kernel.
module;
#include <cstdint>

#include "infini/cuda/attention.h"
#include "infini/cuda/cuda.h"
module infini.kernels;
import :cuda_arrays;

namespace infini::kernels {
namespace {

using cuda_glue::run;

// Where the rows of a 4-d operand lie (its last dim contiguous, the raw op's promise): the
// canonical layout when it is contiguous; strides of dims of size 1 count as 0.
cuda::RowLayout rows_of(const Tensor& t) {
  const Shape& s = t.shape();
  if (t.is_contiguous()) return cuda::contiguous_rows(s[1], s[2], s[3]);
  auto stride = [&](int d) { return s[d] == 1 ? 0 : t.strides()[d]; };
  return {stride(0), stride(1), stride(2)};
}

// q, k, v float32/64 (contiguous), or bfloat16/float16 for the tensor-core kernels (any
// layout with contiguous rows; the raw op's promise); mask undefined or a (B, H, Tq, Tk) view,
// bool or of q's dtype.
cuda::AttentionProblem problem_of(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                                  const AttentionParams& params) {
  cuda::AttentionProblem p;
  p.type = cuda_glue::element_type(q.dtype());
  p.batch = q.shape()[0];
  p.heads = q.shape()[1];
  p.q_len = q.shape()[2];
  p.head_dim = q.shape()[3];
  p.kv_heads = k.shape()[1];
  p.kv_len = k.shape()[2];
  p.value_dim = v.shape()[3];
  p.q = q.data_ptr();
  p.k = k.data_ptr();
  p.v = v.data_ptr();
  p.q_rows = rows_of(q);
  p.k_rows = rows_of(k);
  p.v_rows = rows_of(v);
  if (mask.defined()) {
    p.mask = mask.data_ptr();
    p.mask_is_bool = mask.dtype() == kBool;
    for (int d = 0; d < 4; ++d) p.mask_strides[d] = mask.strides()[d];
  }
  p.scale = params.scale;
  p.causal = params.causal;
  p.dropout_p = params.dropout_p;
  p.seed = params.dropout_state.seed;
  p.offset = params.dropout_state.offset;
  return p;
}

void forward_cuda(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                  const Tensor& mask, const AttentionParams& params) {
  cuda::AttentionProblem p = problem_of(q, k, v, mask, params);
  p.out_rows = rows_of(out);
  run(AttentionForwardKernel::name, q.device(),
      [&] { cuda::attention_forward(out.data_ptr(), lse.data_ptr(), p, q.device().index); });
}

void backward_cuda(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& grad_out, const Tensor& q,
                   const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse, const Tensor& mask,
                   const AttentionParams& params) {
  cuda::AttentionProblem p = problem_of(q, k, v, mask, params);
  p.out_rows = rows_of(out);
  p.grad_out_rows = rows_of(grad_out);
  p.dq_rows = rows_of(dq);
  p.dk_rows = rows_of(dk);
  p.dv_rows = rows_of(dv);
  // delta_i = dO_i . o_i of every query row, written by the dq pass for the dk/dv pass; like
  // lse, float32 for 16-bit inputs.
  const Tensor delta = empty({p.batch * p.heads * p.q_len}, {.dtype = lse.dtype(), .device = q.device()});
  run(AttentionBackwardKernel::name, q.device(), [&] {
    cuda::attention_backward(dq.data_ptr(), dk.data_ptr(), dv.data_ptr(), delta.data_ptr(), grad_out.data_ptr(),
                             out.data_ptr(), lse.data_ptr(), p, q.device().index);
  });
}

const bool registered = [] {
  KernelTable<AttentionForwardKernel>::set(DeviceType::CUDA, &forward_cuda);
  KernelTable<AttentionBackwardKernel>::set(DeviceType::CUDA, &backward_cuda);
  return true;
}();

}  // namespace
}  // namespace infini::kernels
