// CPU batched GEMM: the product of each batch index through gemm_eigen.h (Eigen, the
// packed SGEMM, or AMX tiles under float32_matmul_precision() == kMedium); 16-bit floats
// through the float32 GEMM.
// Operands whose matrices are row- or column-major (transposed) views are read in place;
// other layouts are copied first. A large product is split over the OpenMP threads
// (inside gemm); a batch of small ones is spread over them, one whole product per thread.
module;
#include <cstdint>

#include "gemm_eigen.h"
#include "sgemm_amx.h"
#include "sgemm_packed.h"
module infini.kernels;
import infini.std;

namespace infini::kernels {
namespace {

// Products of at most this many multiply-adds are computed one per thread in a batch,
constexpr std::int64_t kSmallGemm = 128 * 128 * 128;
// once the whole batch has this many.
constexpr std::int64_t kBatchParallelWork = 1 << 17;

// How the GEMM reads the last two dims (rows, cols) of t in place, if it can: unit stride
// along one of them and a positive stride along the other.
template <class T>
bool matrix_layout(const Tensor& t, cpu::MatrixArg<T>& arg) {
  const std::int64_t nd = t.dim();
  const std::int64_t rows = t.shape()[nd - 2], cols = t.shape()[nd - 1];
  const std::int64_t row_stride = t.strides()[nd - 2], col_stride = t.strides()[nd - 1];
  if (col_stride == 1 || cols == 1) {
    arg.ld = rows == 1 ? std::max<std::int64_t>(cols, 1) : row_stride;
    arg.col_major = false;
    if (arg.ld >= 1) return true;
  }
  if (row_stride == 1 || rows == 1) {
    arg.ld = cols == 1 ? std::max<std::int64_t>(rows, 1) : col_stride;
    arg.col_major = true;
    if (arg.ld >= 1) return true;
  }
  return false;
}

// Element offsets of the matrix of every batch index in a, b and out (batch dims first).
std::vector<std::array<std::int64_t, 3>> batch_offsets(const Tensor& out, const Tensor& a, const Tensor& b) {
  const std::int64_t nb = out.dim() - 2;
  std::int64_t count = 1;
  for (std::int64_t d = 0; d < nb; ++d) count *= out.shape()[d];
  std::vector<std::array<std::int64_t, 3>> offsets(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) {
    std::array<std::int64_t, 3> at{};
    for (std::int64_t d = nb - 1, rest = i; d >= 0; --d) {
      const std::int64_t index = rest % out.shape()[d];
      rest /= out.shape()[d];
      at[0] += index * a.strides()[d];
      at[1] += index * b.strides()[d];
      at[2] += index * out.strides()[d];
    }
    offsets[i] = at;
  }
  return offsets;
}

template <class T>
void gemm_typed(const Tensor& out, Tensor a, Tensor b, double alpha, double beta) {
  const std::int64_t nd = out.dim();
  const std::int64_t m = out.shape()[nd - 2], n = out.shape()[nd - 1], k = a.shape()[nd - 1];
  if (out.numel() == 0) return;
  T* pc = static_cast<T*>(out.data_ptr());
  if (k == 0) {  // empty sums, a and b hold nothing: out = beta * out, all batch indices at once
    const cpu::MatrixArg<T> none{nullptr, 1, false};
    cpu::gemm(out.numel() / n, n, 0, static_cast<T>(alpha), none, none, static_cast<T>(beta), pc, n, false);
    return;
  }
  cpu::MatrixArg<T> ma{}, mb{};
  if (!matrix_layout(a, ma)) {
    a = a.contiguous();
    matrix_layout(a, ma);
  }
  if (!matrix_layout(b, mb)) {
    b = b.contiguous();
    matrix_layout(b, mb);
  }
  const T* pa = static_cast<const T*>(a.data_ptr());
  const T* pb = static_cast<const T*>(b.data_ptr());
  const auto offsets = batch_offsets(out, a, b);
  const auto count = static_cast<std::int64_t>(offsets.size());
  const bool bf16_operands = float32_matmul_precision() == MatmulPrecision::kMedium;
  auto product = [&](std::int64_t i, bool parallel) {
    cpu::MatrixArg<T> ai = ma, bi = mb;
    ai.data = pa + offsets[i][0];
    bi.data = pb + offsets[i][1];
    if constexpr (std::is_same_v<T, float>)
      return cpu::gemm(m, n, k, static_cast<T>(alpha), ai, bi, static_cast<T>(beta), pc + offsets[i][2], n, parallel,
                       bf16_operands);
    else
      return cpu::gemm(m, n, k, static_cast<T>(alpha), ai, bi, static_cast<T>(beta), pc + offsets[i][2], n, parallel);
  };
  std::atomic<bool> ok{true};
  if (count == 1 || m * n * k > kSmallGemm) {
    for (std::int64_t i = 0; i < count && ok; ++i) ok = product(i, true);
  } else {
#pragma omp parallel for schedule(static) if (count * m * n * k >= kBatchParallelWork)
    for (std::int64_t i = 0; i < count; ++i)
      if (!product(i, false)) ok = false;
  }
  if (!ok)
    throw OutOfMemoryError("matmul", concat("no memory for the packing buffers of a ", m, "x", k, " @ ", k, "x", n,
                                           " product"));
}

// t widened to float32 (exactly), its broadcast (stride-0) dims kept broadcast rather than
// copied out.
Tensor widen(const Tensor& t) {
  Tensor distinct = t;
  for (std::int64_t d = 0; d < t.dim(); ++d)
    if (t.strides()[d] == 0 && t.shape()[d] > 1) distinct = distinct.narrow(d, 0, 1);
  return distinct.to(kFloat32).expand(t.shape());
}

// float16/bfloat16: the float32 product of the widened operands, each result rounded once
// into out.
void gemm_16bit(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta) {
  const Tensor sums = beta == 0 ? empty(out.shape(), {.dtype = kFloat32}) : out.to(kFloat32);
  gemm_typed<float>(sums, widen(a), widen(b), alpha, beta);
  Tensor(out).copy_(sums);
}

void gemm_cpu(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta, const Tensor& bias) {
  if (bias.defined()) {  // the bias rows first, the product added to them
    Tensor(out).copy_(bias.expand(out.shape()));
    beta = 1;
  }
  switch (out.dtype()) {
    case kFloat32: return gemm_typed<float>(out, a, b, alpha, beta);
    case kFloat64: return gemm_typed<double>(out, a, b, alpha, beta);
    case kFloat16:
    case kBFloat16: return gemm_16bit(out, a, b, alpha, beta);
    default:
      throw DTypeError("matmul", concat("the CPU GEMM computes float64, float32, bfloat16 and float16, got ",
                                        out.dtype()));
  }
}

const bool registered = [] {
  KernelTable<GemmKernel>::set(DeviceType::CPU, &gemm_cpu);
  return true;
}();

}  // namespace
}  // namespace infini::kernels

bool infini::has_bfloat16_matmul() { return cpu::amx_bf16_ready() || cpu::packed_bf16_built(); }
