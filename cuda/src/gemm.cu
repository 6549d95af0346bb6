// gemm: batched out = alpha * a @ b + beta * out (+ bias) through cuBLASLt, with one handle
// and one 32 MiB workspace per device, created on first use; gemm_with_row_sums: a @ b and
// the row sums of a from cuBLASLt's bias-gradient epilogue; gemm_bias_gelu and
// gemm_gelu_grad: GELU and its gradient in the product's epilogue.
//
// cuBLAS is column-major; out (m, n) row-major is the column-major (n, m) matrix out^T, so
// each product is computed as out^T = b^T a^T: b is cuBLAS's "A" and a its "B".
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "check.cuh"
#include "element_types.cuh"
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
  detail::RelaxedCapture relaxed;  // created on first use, which may be inside a capture
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

// How cuBLASLt stores and computes an element type: float16/bfloat16 operands and results
// with float32 products, sums and alpha/beta.
struct Types {
  cudaDataType_t data;
  cublasComputeType_t compute;
  cudaDataType_t scale;
  std::int64_t item;  // bytes per element
};

Types types_of(const GemmProblem& p) {
  switch (p.type) {
    case ElementType::F64: return {CUDA_R_64F, CUBLAS_COMPUTE_64F, CUDA_R_64F, 8};
    case ElementType::F32:
      return {CUDA_R_32F, p.allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F, 4};
    case ElementType::BF16: return {CUDA_R_16BF, CUBLAS_COMPUTE_32F, CUDA_R_32F, 2};
    case ElementType::F16: return {CUDA_R_16F, CUBLAS_COMPUTE_32F, CUDA_R_32F, 2};
    default: throw CudaError("matmul: the CUDA GEMM computes float64, float32, bfloat16 and float16");
  }
}

// A product's epilogue: none, a bias added to every row of out (cuBLASLt's BIAS), the row
// sums of a written (BGRADB: cuBLAS's B is a, summed over k), a bias then GELU with the sum
// before GELU written to an aux matrix (GELU_AUX_BIAS), or the product times GELU's
// derivative at an aux matrix (DGELU). The aux matrices are laid out like out.
enum class Epilogue : std::uint8_t { None, Bias, RowSums, BiasGelu, GeluGrad };

// The device memory an epilogue reads or writes besides out: its vector (bias or row sums)
// and its aux matrix.
struct EpilogueData {
  const void* vector = nullptr;
  const void* aux = nullptr;
};

cublasLtEpilogue_t cublas_epilogue(Epilogue e) {
  switch (e) {
    case Epilogue::Bias: return CUBLASLT_EPILOGUE_BIAS;
    case Epilogue::RowSums: return CUBLASLT_EPILOGUE_BGRADB;
    case Epilogue::BiasGelu: return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case Epilogue::GeluGrad: return CUBLASLT_EPILOGUE_DGELU;
    case Epilogue::None: break;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

// The descriptors and the algorithm of one kind of product: every call with the same types,
// shapes, leading dims, batch strides and alignments runs the same plan. Looking the
// algorithm up costs up to a millisecond of host time for some shapes, so plans are kept
// for the life of the process (all of them dropped if there are ever more than kMaxPlans;
// a call still running one keeps it alive).
struct Plan {
  Descriptors d;
  cublasLtMatmulHeuristicResult_t heuristic{};
  std::mutex pointer_mutex;   // an epilogue's plan: held from setting its pointers to the call
  bool has_epilogue = false;  // the algorithm runs the key's epilogue; read and cleared under pointer_mutex
};

struct PlanKey {
  int device;
  ElementType type;
  bool tf32, a_col_major, b_col_major;
  Epilogue epilogue;
  std::int64_t m, n, k, lda, ldb, a_stride, b_stride, batch;
  std::uint32_t a_alignment, b_alignment, out_alignment;
  // The heuristic takes the epilogue's pointers' alignment from their values (0: not used).
  std::uint32_t vector_alignment, aux_alignment;
  auto operator<=>(const PlanKey&) const = default;
};

constexpr std::size_t kMaxPlans = 4096;

// Whether an epilogue may read or write a vector at p: aligned to 16 bytes (its loads and
// stores); the plan must also have the epilogue.
bool epilogue_aligned(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

PlanKey key_of(const GemmProblem& p, std::int64_t batch, std::int64_t item, int device, Epilogue epilogue,
               const EpilogueData& data) {
  const auto alignment_of = [](const void* v) { return v == nullptr ? 0 : alignment(v, 0, 1); };
  return {device, p.type, p.allow_tf32, p.a.col_major, p.b.col_major, epilogue, p.m, p.n, p.k, p.a.ld, p.b.ld,
          p.a.batch_stride, p.b.batch_stride, batch, alignment(p.a.data, p.a.batch_stride * item, batch),
          alignment(p.b.data, p.b.batch_stride * item, batch), alignment(p.out, p.m * p.n * item, batch),
          alignment_of(data.vector), alignment_of(data.aux)};
}

// Points the epilogue at its vector and aux matrix (the aux with out's leading dim, n).
void set_epilogue_pointers(const Descriptors& d, const GemmProblem& p, Epilogue epilogue, const EpilogueData& data) {
  if (epilogue == Epilogue::Bias || epilogue == Epilogue::RowSums || epilogue == Epilogue::BiasGelu)
    check_status(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &data.vector,
                                                sizeof(data.vector)),
                 "cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
  if (epilogue == Epilogue::BiasGelu || epilogue == Epilogue::GeluGrad) {
    const std::int64_t ld = p.n;
    check_status(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &data.aux,
                                                sizeof(data.aux)),
                 "cublasLtMatmulDescSetAttribute(EPILOGUE_AUX_POINTER)");
    check_status(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof(ld)),
                 "cublasLtMatmulDescSetAttribute(EPILOGUE_AUX_LD)");
  }
}

std::shared_ptr<Plan> make_plan(const LtContext& lt, const GemmProblem& p, const PlanKey& key,
                                const EpilogueData& data) {
  const Types t = types_of(p);
  const cudaDataType_t data_type = t.data;
  const auto count = static_cast<std::int32_t>(key.batch);
  auto plan = std::make_shared<Plan>();
  Descriptors& d = plan->d;
  check_status(cublasLtMatmulDescCreate(&d.op, t.compute, t.scale), "cublasLtMatmulDescCreate");
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
  set_preference(d.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.b_alignment,
                 "cublasLtMatmulPreferenceSetAttribute(ALIGNMENT_A)");
  set_preference(d.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.a_alignment,
                 "cublasLtMatmulPreferenceSetAttribute(ALIGNMENT_B)");
  set_preference(d.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.out_alignment,
                 "cublasLtMatmulPreferenceSetAttribute(ALIGNMENT_C)");
  set_preference(d.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.out_alignment,
                 "cublasLtMatmulPreferenceSetAttribute(ALIGNMENT_D)");
  // Split-K partial sums are reduced out of place, in a fixed order (in-place reduction
  // adds them up in the output buffer, in no promised order). 16-bit results keep them in
  // float32 (compute type), so each element is rounded once, as on the CPU; output-type
  // partial sums would each be rounded to 16 bits. Algorithms without split-K always pass.
  const std::uint32_t schemes = t.item == 2 ? CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE
                                            : CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE | CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE;
  set_preference(d.preference, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, schemes,
                 "cublasLtMatmulPreferenceSetAttribute(REDUCTION_SCHEME_MASK)");

  // The heuristic's first choice: a fixed function of the problem and the GPU, with a
  // fixed-order reduction (above), so results are reproducible. With an epilogue, the first
  // choice among the algorithms that have it, its vector and aux matrix of the output's type
  // (cuBLASLt's defaults for BIAS_DATA_TYPE and EPILOGUE_AUX_DATA_TYPE):
  // - a bias, one per row of cuBLAS's column-major D = out^T, so one per column of out;
  // - row sums of a, one per column of D (row of out);
  // - a bias and GELU (tanh approximation), the sum before GELU written to the aux matrix;
  //   or GELU's derivative at the aux matrix times the product;
  // if no algorithm has the epilogue, a plan without an algorithm (never run: the caller
  // composes the epilogue from other kernels).
  int found = 0;
  if (key.epilogue != Epilogue::None) {
    const cublasLtEpilogue_t epilogue = cublas_epilogue(key.epilogue);
    check_status(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)),
                 "cublasLtMatmulDescSetAttribute(EPILOGUE)");
    set_epilogue_pointers(d, p, key.epilogue, data);
    plan->has_epilogue = cublasLtMatmulAlgoGetHeuristic(lt.handle, d.op, d.a, d.b, d.out, d.out, d.preference, 1,
                                                        &plan->heuristic, &found) == CUBLAS_STATUS_SUCCESS &&
                         found > 0;
    return plan;
  }
  check_status(cublasLtMatmulAlgoGetHeuristic(lt.handle, d.op, d.a, d.b, d.out, d.out, d.preference, 1,
                                              &plan->heuristic, &found),
               "cublasLtMatmulAlgoGetHeuristic");
  if (found == 0)
    throw CudaError("matmul: cuBLASLt has no algorithm for a " + std::to_string(p.m) + "x" + std::to_string(p.k) +
                    " @ " + std::to_string(p.k) + "x" + std::to_string(p.n) + " product");
  return plan;
}

// The plan of a product, made on first use.
std::shared_ptr<Plan> plan_for(const LtContext& lt, const GemmProblem& p, std::int64_t batch, int device,
                               Epilogue epilogue, const EpilogueData& data) {
  static std::mutex mutex;
  static auto* plans = new std::map<PlanKey, std::shared_ptr<Plan>>();  // never destroyed: see context()
  const PlanKey key = key_of(p, batch, types_of(p).item, device, epilogue, data);
  std::lock_guard lock(mutex);
  if (auto it = plans->find(key); it != plans->end()) return it->second;
  if (plans->size() >= kMaxPlans) plans->clear();
  const auto start = std::chrono::steady_clock::now();
  std::shared_ptr<Plan> plan = make_plan(lt, p, key, data);
  if (detail::profiling_ops())
    detail::profile_host("matmul plan",
                         std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  return plans->emplace(key, std::move(plan)).first->second;
}

// out[r, c] = bias[c] for the rows x n elements of out (of T): the bias written first, for
// a product then added with beta = 1.
template <class T>
__global__ void bias_rows_kernel(T* out, const T* bias, std::int64_t count, std::int64_t n) {
  for (std::int64_t i = detail::first_index(); i < count; i += detail::grid_step()) out[i] = bias[i % n];
}

void write_bias_rows(const GemmProblem& p) {
  const std::int64_t count = p.batch * p.m * p.n;
  detail::visit_floating(p.type, "matmul", [&](auto tag) {
    using T = typename decltype(tag)::type;
    bias_rows_kernel<<<detail::blocks_for(count), detail::kThreads, 0, detail::stream()>>>(
        static_cast<T*>(p.out), static_cast<const T*>(p.bias), count, p.n);
  });
}

// One cublasLtMatmul over batch <= INT_MAX products with `epilogue` on `data` (p.bias is
// not read: Epilogue::Bias passes it). Returns false, nothing launched, when the plan has no
// algorithm with the epilogue (the caller handles it); a plan whose epilogue call is refused
// (a status, nothing launched) is marked as having none.
bool lt_matmul(const LtContext& lt, const GemmProblem& p, std::int64_t batch, int device, Epilogue epilogue,
               const EpilogueData& data) {
  const bool f64 = p.type == ElementType::F64;
  const std::shared_ptr<Plan> plan = plan_for(lt, p, batch, device, epilogue, data);
  const Descriptors& d = plan->d;
  const float alpha32 = static_cast<float>(p.alpha), beta32 = static_cast<float>(p.beta);
  const void* alpha = f64 ? static_cast<const void*>(&p.alpha) : &alpha32;
  const void* beta = f64 ? static_cast<const void*>(&p.beta) : &beta32;
  std::unique_lock<std::mutex> pointer_lock;
  if (epilogue != Epilogue::None) {
    pointer_lock = std::unique_lock(plan->pointer_mutex);
    if (!plan->has_epilogue) return false;
    set_epilogue_pointers(d, p, epilogue, data);
  }
  // beta == 0: cuBLASLt does not read C, so old values (NaN included) do not leak.
  const cublasStatus_t status = cublasLtMatmul(lt.handle, d.op, alpha, p.b.data, d.a, p.a.data, d.b, beta, p.out,
                                               d.out, p.out, d.out, &plan->heuristic.algo, lt.workspace,
                                               kWorkspaceBytes, detail::stream());
  if (status != CUBLAS_STATUS_SUCCESS && epilogue != Epilogue::None) {
    plan->has_epilogue = false;
    return false;
  }
  check_status(status, "cublasLtMatmul");
  return true;
}

// out[i] = beta * out[i] for i < n, computed in C (float for 16-bit T) and rounded once;
// beta == 0 writes zeros whatever out held.
template <class T, class C>
__global__ void scale_kernel(T* out, std::int64_t n, C beta) {
  for (std::int64_t i = detail::first_index(); i < n; i += detail::grid_step())
    out[i] = detail::convert<T>(beta == 0 ? C(0) : beta * detail::widen(out[i]));
}

// The launch check of a product. The profile's variant ends with the epilogue (0 none, 1 a
// bias written into out first, 2 a bias in the epilogue, 3 row sums, 4 bias and GELU, 5
// GELU's gradient) and the operands' smallest alignment in bytes.
void after_gemm(const GemmProblem& p, int epilogue_variant) {
  const std::int64_t item = types_of(p).item;
  detail::after_launch("matmul", {static_cast<int>(p.type), p.batch, p.m, p.n, p.k, p.a.col_major, p.b.col_major,
                                  p.a.ld, p.b.ld, p.beta != 0, epilogue_variant,
                                  std::min({alignment(p.a.data, p.a.batch_stride * item, p.batch),
                                            alignment(p.b.data, p.b.batch_stride * item, p.batch),
                                            alignment(p.out, p.m * p.n * item, p.batch)})});
}

}  // namespace

void gemm(const GemmProblem& problem, int device) {
  const std::int64_t item = types_of(problem).item;
  if (problem.batch == 0 || problem.m == 0 || problem.n == 0) return;
  detail::use_device(device);
  if (problem.k == 0 && problem.bias != nullptr) {  // empty sums: out = bias
    write_bias_rows(problem);
    detail::after_launch("matmul");
    return;
  }
  if (problem.k == 0) {  // empty sums: out = beta * out
    const std::int64_t n = problem.batch * problem.m * problem.n;
    detail::visit(problem.type, "matmul", [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (detail::is_float_compute<T>) {
        using C = detail::compute_t<T>;
        scale_kernel<<<detail::blocks_for(n), detail::kThreads, 0, detail::stream()>>>(static_cast<T*>(problem.out), n,
                                                                                       static_cast<C>(problem.beta));
      }
    });
    detail::after_launch("matmul");
    return;
  }
  const LtContext& lt = context(device);
  // cuBLASLt counts a batch in int32: larger batches run in chunks.
  bool bias_written_first = false;
  for (std::int64_t start = 0; start < problem.batch; start += INT_MAX) {
    GemmProblem chunk = problem;
    chunk.a.data = static_cast<const char*>(problem.a.data) + start * problem.a.batch_stride * item;
    chunk.b.data = static_cast<const char*>(problem.b.data) + start * problem.b.batch_stride * item;
    chunk.out = static_cast<char*>(problem.out) + start * problem.m * problem.n * item;
    chunk.batch = std::min<std::int64_t>(problem.batch - start, INT_MAX);
    const bool fused_bias = chunk.bias != nullptr && epilogue_aligned(chunk.bias) &&
                            lt_matmul(lt, chunk, chunk.batch, device, Epilogue::Bias, {.vector = chunk.bias});
    if (fused_bias) continue;
    if (chunk.bias != nullptr) {  // no bias epilogue: the bias first, then out += a @ b
      write_bias_rows(chunk);
      chunk.bias = nullptr;
      chunk.beta = 1;
      bias_written_first = true;
    }
    lt_matmul(lt, chunk, chunk.batch, device, Epilogue::None, {});
  }
  after_gemm(problem, problem.bias == nullptr ? 0 : bias_written_first ? 1 : 2);
}

namespace {

// A single product (batch 1, alpha 1, beta 0, k > 0) that the fused epilogues take.
bool single_product(const GemmProblem& p) {
  return p.batch == 1 && p.m > 0 && p.n > 0 && p.k > 0 && p.alpha == 1 && p.beta == 0;
}

// An aux matrix laid out like out (leading dim n): cuBLASLt wants n a multiple of 8.
bool aux_fits(const GemmProblem& p, const void* aux) { return p.n % 8 == 0 && epilogue_aligned(aux); }

// Whether the GELU epilogues take p: bfloat16 and float16 only, whose rounding hides
// whatever approximation of tanh cuBLASLt's GELU takes (NVIDIA does not document it);
// float32 keeps the composed kernels' accurate GELU. INFINI_CUDA_GELU_EPILOGUE=0 turns them
// off (their callers then run the composed kernels), to compare the two; read once.
bool gelu_epilogue_takes(const GemmProblem& p) {
  static const bool enabled = [] {
    const char* value = std::getenv("INFINI_CUDA_GELU_EPILOGUE");
    return value == nullptr || std::string(value) != "0";
  }();
  return enabled && (p.type == ElementType::BF16 || p.type == ElementType::F16);
}

}  // namespace

bool gemm_with_row_sums(const GemmProblem& problem, void* row_sums, int device) {
  if (!single_product(problem) || problem.bias != nullptr || !epilogue_aligned(row_sums)) return false;
  detail::use_device(device);
  if (!lt_matmul(context(device), problem, 1, device, Epilogue::RowSums, {.vector = row_sums})) return false;
  after_gemm(problem, 3);
  return true;
}

bool gemm_bias_gelu(const GemmProblem& problem, void* pre, int device) {
  if (!gelu_epilogue_takes(problem) || !single_product(problem) || problem.bias == nullptr ||
      !epilogue_aligned(problem.bias) || !aux_fits(problem, pre))
    return false;
  detail::use_device(device);
  if (!lt_matmul(context(device), problem, 1, device, Epilogue::BiasGelu, {.vector = problem.bias, .aux = pre}))
    return false;
  after_gemm(problem, 4);
  return true;
}

bool gemm_gelu_grad(const GemmProblem& problem, const void* pre, int device) {
  if (!gelu_epilogue_takes(problem) || !single_product(problem) || problem.bias != nullptr || !aux_fits(problem, pre))
    return false;
  detail::use_device(device);
  if (!lt_matmul(context(device), problem, 1, device, Epilogue::GeluGrad, {.aux = pre})) return false;
  after_gemm(problem, 5);
  return true;
}

}  // namespace infini::cuda
