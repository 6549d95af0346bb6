// The CUDA GEMM as the entry of GemmKernel and the fused-epilogue kernels (GemmRowSumsKernel,
// GemmBiasGeluKernel, GemmGeluGradKernel): each operand's matrices
// are read in place when they are row- or column-major views (else copied contiguous), and
// the batch dims are merged into one strided batch per cuBLASLt call, the dims that do not
// merge looped here.
module;
#include <cstdint>

#include "infini/cuda/cuda.h"
#include "infini/cuda/linalg.h"
module infini.kernels;
import infini.std;
import :cuda_arrays;

namespace infini::kernels {
namespace {

using cuda_glue::run;

// How cuBLAS reads the last two dims (rows, cols) of t in place, if it can: unit stride along
// one of them and, along the other, a stride no smaller than the unit-stride dim's length.
bool matrix_layout(const Tensor& t, cuda::GemmMatrix& matrix) {
  const std::int64_t nd = t.dim();
  const std::int64_t rows = t.shape()[nd - 2], cols = t.shape()[nd - 1];
  const std::int64_t row_stride = t.strides()[nd - 2], col_stride = t.strides()[nd - 1];
  if (col_stride == 1 || cols == 1) {
    matrix.ld = rows == 1 ? std::max<std::int64_t>(cols, 1) : row_stride;
    matrix.col_major = false;
    if (matrix.ld >= std::max<std::int64_t>(cols, 1)) return true;
  }
  if (row_stride == 1 || rows == 1) {
    matrix.ld = cols == 1 ? std::max<std::int64_t>(rows, 1) : col_stride;
    matrix.col_major = true;
    if (matrix.ld >= std::max<std::int64_t>(rows, 1)) return true;
  }
  return false;
}

// The batch dims of (a, b, out) merged: dims of size 1 dropped, dim d folded into the kept
// dim before it when all three strides allow. sizes[i] with strides[i] = {a, b, out}.
struct Batch {
  std::vector<std::int64_t> sizes;
  std::vector<std::array<std::int64_t, 3>> strides;
};

Batch merged_batch(const Tensor& out, const Tensor& a, const Tensor& b) {
  Batch batch;
  for (std::int64_t d = 0; d < out.dim() - 2; ++d) {
    const std::int64_t size = out.shape()[d];
    if (size == 1) continue;
    const std::array<std::int64_t, 3> s{a.strides()[d], b.strides()[d], out.strides()[d]};
    if (!batch.sizes.empty()) {
      const auto& last = batch.strides.back();
      if (last[0] == s[0] * size && last[1] == s[1] * size && last[2] == s[2] * size) {
        batch.sizes.back() *= size;
        batch.strides.back() = s;
        continue;
      }
    }
    batch.sizes.push_back(size);
    batch.strides.push_back(s);
  }
  return batch;
}

void check_floating(const Tensor& out) {
  if (!is_floating_point(out.dtype()))
    throw DTypeError("matmul", concat("the CUDA GEMM computes float64, float32, bfloat16 and float16, got ",
                                      out.dtype()));
}

// The product out = a @ b of the last two dims (no data pointers yet; batch 1): a and b
// become contiguous copies where cuBLAS cannot read them in place.
cuda::GemmProblem matrix_problem(const Tensor& out, Tensor& a, Tensor& b) {
  check_floating(out);
  const std::int64_t nd = out.dim();
  cuda::GemmProblem p;
  p.type = cuda_glue::element_type(out.dtype());
  p.m = out.shape()[nd - 2];
  p.n = out.shape()[nd - 1];
  p.k = a.shape()[nd - 1];
  p.allow_tf32 = float32_matmul_precision() == MatmulPrecision::kMedium;
  if (p.k > 0) {
    if (!matrix_layout(a, p.a)) {
      a = a.contiguous();
      matrix_layout(a, p.a);
    }
    if (!matrix_layout(b, p.b)) {
      b = b.contiguous();
      matrix_layout(b, p.b);
    }
  }
  return p;
}

void gemm_cuda(const Tensor& out, const Tensor& a_in, const Tensor& b_in, double alpha, double beta,
               const Tensor& bias) {
  check_floating(out);
  if (out.numel() == 0) return;
  Tensor a = a_in, b = b_in;
  cuda::GemmProblem p = matrix_problem(out, a, b);
  p.alpha = alpha;
  p.beta = beta;
  p.bias = bias.defined() ? bias.data_ptr() : nullptr;
  const Batch batch = merged_batch(out, a, b);
  // The innermost merged dim is cuBLASLt's strided batch; the outer ones are looped here.
  std::int64_t outer = 1;
  if (!batch.sizes.empty()) {
    p.batch = batch.sizes.back();
    p.a.batch_stride = batch.strides.back()[0];
    p.b.batch_stride = batch.strides.back()[1];
    for (std::size_t d = 0; d + 1 < batch.sizes.size(); ++d) outer *= batch.sizes[d];
  }
  const std::int64_t item = static_cast<std::int64_t>(out.itemsize());
  auto* a_base = static_cast<const char*>(a.data_ptr());
  auto* b_base = static_cast<const char*>(b.data_ptr());
  auto* out_base = static_cast<char*>(out.data_ptr());
  run("matmul", out.device(), [&] {
    for (std::int64_t i = 0; i < outer; ++i) {
      std::array<std::int64_t, 3> at{};  // element offsets of a, b, out for outer index i
      for (std::int64_t d = static_cast<std::int64_t>(batch.sizes.size()) - 2, rest = i; d >= 0; --d) {
        const std::int64_t index = rest % batch.sizes[d];
        rest /= batch.sizes[d];
        for (int o = 0; o < 3; ++o) at[o] += index * batch.strides[d][o];
      }
      cuda::GemmProblem call = p;
      call.a.data = a_base + at[0] * item;
      call.b.data = b_base + at[1] * item;
      call.out = out_base + at[2] * item;
      cuda::gemm(call, out.device().index);
    }
  });
}

// One product out = a @ b with a fused epilogue, `fused(problem, device)` (a cuda::gemm_*
// call), its operands read in place where cuBLAS can: whether the epilogue ran.
template <class Fused>
bool fused_product(const Tensor& out, const Tensor& a_in, const Tensor& b_in, Fused fused) {
  Tensor a = a_in, b = b_in;
  cuda::GemmProblem p = matrix_problem(out, a, b);
  p.a.data = a.data_ptr();
  p.b.data = b.data_ptr();
  p.out = out.data_ptr();
  bool ran = false;
  run("matmul", out.device(), [&] { ran = fused(p, out.device().index); });
  return ran;
}

// cuBLASLt's bias-gradient epilogue (cuda::gemm_with_row_sums).
bool gemm_row_sums_cuda(const Tensor& out, const Tensor& row_sums, const Tensor& a, const Tensor& b) {
  return fused_product(out, a, b, [&](const cuda::GemmProblem& p, int device) {
    return cuda::gemm_with_row_sums(p, row_sums.data_ptr(), device);
  });
}

// cuBLASLt's GELU_AUX_BIAS epilogue (cuda::gemm_bias_gelu).
bool gemm_bias_gelu_cuda(const Tensor& out, const Tensor& pre, const Tensor& a, const Tensor& b, const Tensor& bias) {
  return fused_product(out, a, b, [&](cuda::GemmProblem p, int device) {
    p.bias = bias.data_ptr();
    return cuda::gemm_bias_gelu(p, pre.data_ptr(), device);
  });
}

// cuBLASLt's DGELU epilogue (cuda::gemm_gelu_grad).
bool gemm_gelu_grad_cuda(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& pre) {
  return fused_product(out, a, b, [&](const cuda::GemmProblem& p, int device) {
    return cuda::gemm_gelu_grad(p, pre.data_ptr(), device);
  });
}

const bool registered = [] {
  KernelTable<GemmKernel>::set(DeviceType::CUDA, &gemm_cuda);
  KernelTable<GemmRowSumsKernel>::set(DeviceType::CUDA, &gemm_row_sums_cuda);
  KernelTable<GemmBiasGeluKernel>::set(DeviceType::CUDA, &gemm_bias_gelu_cuda);
  KernelTable<GemmGeluGradKernel>::set(DeviceType::CUDA, &gemm_gelu_grad_cuda);
  return true;
}();

}  // namespace
}  // namespace infini::kernels
