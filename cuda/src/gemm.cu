// gemm: batched out = alpha * a @ b + beta * out through cuBLASLt, with one handle and one
// 32 MiB workspace per device, created on first use.
//
// cuBLAS is column-major; out (m, n) row-major is the column-major (n, m) matrix out^T, so
// each product is computed as out^T = b^T a^T: b is cuBLAS's "A" and a its "B".
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "check.cuh"
#include "infini/cuda/linalg.h"
#include "launch.cuh"
#include "strided.cuh"

namespace infini::cuda {
namespace {

constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;

void check_status(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw CudaError(std::string("matmul: ") + what + ": " + cublasLtGetStatusString(status) + " (" +
                    cublasLtGetStatusName(status) + ")");
}

struct LtContext {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
};

// The handle and workspace of `device` (the current device). Both live until the process
// exits: the map holds plain handles, so its destructor releases nothing the CUDA runtime
// may already have torn down.
const LtContext& context(int device) {
  static std::mutex mutex;
  static std::map<int, LtContext> contexts;
  std::lock_guard lock(mutex);
  if (auto it = contexts.find(device); it != contexts.end()) return it->second;
  LtContext c;
  check_status(cublasLtCreate(&c.handle), "cublasLtCreate");
  if (cudaError_t err = cudaMalloc(&c.workspace, kWorkspaceBytes); err != cudaSuccess) {
    cublasLtDestroy(c.handle);
    detail::fail(err, "matmul: cudaMalloc of the cuBLASLt workspace on device " + std::to_string(device));
  }
  return contexts.emplace(device, c).first->second;
}

// The cuBLASLt descriptors of one call, destroyed with it.
struct Descriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, out = nullptr;  // cuBLAS's A (our b), B (our a), C = D
  cublasLtMatmulPreference_t preference = nullptr;
  Descriptors() = default;
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
  ~Descriptors() {
    if (preference) cublasLtMatmulPreferenceDestroy(preference);
    if (out) cublasLtMatrixLayoutDestroy(out);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

// A column-major (rows, cols) layout with leading dimension ld, `batch` matrices `stride`
// elements apart.
void make_layout(cublasLtMatrixLayout_t& layout, cudaDataType_t type, std::int64_t rows, std::int64_t cols,
                 std::int64_t ld, std::int32_t batch, std::int64_t stride) {
  check_status(cublasLtMatrixLayoutCreate(&layout, type, static_cast<std::uint64_t>(rows),
                                          static_cast<std::uint64_t>(cols), ld),
               "cublasLtMatrixLayoutCreate");
  check_status(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch)),
               "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)");
  check_status(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                sizeof(stride)),
               "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)");
}

// The largest power of two (at most 256) dividing the byte address of every matrix of an
// operand: its base and, in a batch, its batch stride.
std::uint32_t alignment(const void* data, std::int64_t batch_stride_bytes, std::int64_t batch) {
  auto bits = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(data));
  if (batch > 1) bits |= static_cast<std::uint64_t>(batch_stride_bytes);
  std::uint32_t a = 256;
  while (a > 1 && bits % a != 0) a /= 2;
  return a;
}

template <class T>
void set_preference(cublasLtMatmulPreference_t preference, cublasLtMatmulPreferenceAttributes_t attribute, T value,
                    const char* what) {
  check_status(cublasLtMatmulPreferenceSetAttribute(preference, attribute, &value, sizeof(value)), what);
}

// One cublasLtMatmul over batch <= INT_MAX products.
void lt_matmul(const LtContext& lt, const GemmProblem& p, std::int64_t batch) {
  const bool f64 = p.type == ElementType::F64;
  const cudaDataType_t data_type = f64 ? CUDA_R_64F : CUDA_R_32F;
  const cublasComputeType_t compute =
      f64 ? CUBLAS_COMPUTE_64F : (p.allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F);
  const std::int64_t item = f64 ? 8 : 4;
  const auto count = static_cast<std::int32_t>(batch);

  Descriptors d;
  check_status(cublasLtMatmulDescCreate(&d.op, compute, data_type), "cublasLtMatmulDescCreate");
  // cuBLAS's A is b: row-major b (k, n) is column-major (n, k) as it stands, a column-major
  // b is read transposed. Likewise cuBLAS's B is a.
  const cublasOperation_t trans_a = p.b.col_major ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t trans_b = p.a.col_major ? CUBLAS_OP_T : CUBLAS_OP_N;
  check_status(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a)),
               "cublasLtMatmulDescSetAttribute(TRANSA)");
  check_status(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b)),
               "cublasLtMatmulDescSetAttribute(TRANSB)");
  if (p.b.col_major) make_layout(d.a, data_type, p.k, p.n, p.b.ld, count, p.b.batch_stride);
  else make_layout(d.a, data_type, p.n, p.k, p.b.ld, count, p.b.batch_stride);
  if (p.a.col_major) make_layout(d.b, data_type, p.m, p.k, p.a.ld, count, p.a.batch_stride);
  else make_layout(d.b, data_type, p.k, p.m, p.a.ld, count, p.a.batch_stride);
  make_layout(d.out, data_type, p.n, p.m, p.n, count, p.m * p.n);

  check_status(cublasLtMatmulPreferenceCreate(&d.preference), "cublasLtMatmulPreferenceCreate");
  set_preference(d.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, std::uint64_t{kWorkspaceBytes},
                 "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)");
  set_preference(d.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                 alignment(p.b.data, p.b.batch_stride * item, batch),
                 "cublasLtMatmulPreferenceSetAttribute(ALIGNMENT_A)");
  set_preference(d.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                 alignment(p.a.data, p.a.batch_stride * item, batch),
                 "cublasLtMatmulPreferenceSetAttribute(ALIGNMENT_B)");
  const std::uint32_t out_alignment = alignment(p.out, p.m * p.n * item, batch);
  set_preference(d.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, out_alignment,
                 "cublasLtMatmulPreferenceSetAttribute(ALIGNMENT_C)");
  set_preference(d.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, out_alignment,
                 "cublasLtMatmulPreferenceSetAttribute(ALIGNMENT_D)");

  // The heuristic's first choice: a fixed function of the problem and the GPU, and every
  // cuBLASLt reduction scheme keeps a fixed order, so results are reproducible.
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  check_status(cublasLtMatmulAlgoGetHeuristic(lt.handle, d.op, d.a, d.b, d.out, d.out, d.preference, 1, &heuristic,
                                              &found),
               "cublasLtMatmulAlgoGetHeuristic");
  if (found == 0)
    throw CudaError("matmul: cuBLASLt has no algorithm for a " + std::to_string(p.m) + "x" + std::to_string(p.k) +
                    " @ " + std::to_string(p.k) + "x" + std::to_string(p.n) + " product");
  const float alpha32 = static_cast<float>(p.alpha), beta32 = static_cast<float>(p.beta);
  const void* alpha = f64 ? static_cast<const void*>(&p.alpha) : &alpha32;
  const void* beta = f64 ? static_cast<const void*>(&p.beta) : &beta32;
  // beta == 0: cuBLASLt does not read C, so old values (NaN included) do not leak.
  check_status(cublasLtMatmul(lt.handle, d.op, alpha, p.b.data, d.a, p.a.data, d.b, beta, p.out, d.out, p.out, d.out,
                              &heuristic.algo, lt.workspace, kWorkspaceBytes, detail::stream()),
               "cublasLtMatmul");
}

// out[i] = beta * out[i] for i < n; beta == 0 writes zeros whatever out held.
template <class T>
__global__ void scale_kernel(T* out, std::int64_t n, T beta) {
  for (std::int64_t i = detail::first_index(); i < n; i += detail::grid_step())
    out[i] = beta == 0 ? T(0) : beta * out[i];
}

}  // namespace

void gemm(const GemmProblem& problem, int device) {
  if (problem.type != ElementType::F32 && problem.type != ElementType::F64)
    throw CudaError("matmul: the CUDA GEMM computes float32 and float64");
  if (problem.batch == 0 || problem.m == 0 || problem.n == 0) return;
  detail::use_device(device);
  if (problem.k == 0) {  // empty sums: out = beta * out
    const std::int64_t n = problem.batch * problem.m * problem.n;
    if (problem.type == ElementType::F64)
      scale_kernel<<<detail::blocks_for(n), detail::kThreads, 0, detail::stream()>>>(static_cast<double*>(problem.out),
                                                                                     n, problem.beta);
    else
      scale_kernel<<<detail::blocks_for(n), detail::kThreads, 0, detail::stream()>>>(
          static_cast<float*>(problem.out), n, static_cast<float>(problem.beta));
    detail::after_launch("matmul");
    return;
  }
  const LtContext& lt = context(device);
  // cuBLASLt counts a batch in int32: larger batches run in chunks.
  const std::int64_t item = problem.type == ElementType::F64 ? 8 : 4;
  for (std::int64_t start = 0; start < problem.batch; start += INT_MAX) {
    GemmProblem chunk = problem;
    chunk.a.data = static_cast<const char*>(problem.a.data) + start * problem.a.batch_stride * item;
    chunk.b.data = static_cast<const char*>(problem.b.data) + start * problem.b.batch_stride * item;
    chunk.out = static_cast<char*>(problem.out) + start * problem.m * problem.n * item;
    lt_matmul(lt, chunk, std::min<std::int64_t>(problem.batch - start, INT_MAX));
  }
  detail::after_launch("matmul");
}

}  // namespace infini::cuda
