// CPU batched SVD (SvdKernel, linalg.cppm): each matrix through the one-sided Jacobi of
// infini/math/jacobi_svd.h, the code the CUDA kernel runs too; the matrices of a batch are
// spread over the OpenMP threads, each thread with its own float64 scratch.
module;
#include <omp.h>

#include <cstdint>

#include "infini/math/jacobi_svd.h"
module infini.kernels;
import infini.std;

namespace infini::kernels {
namespace {

// a (batch, m, n) -> u (batch, m, m or k), s (batch, k), vh (batch, n or k, n), status (batch).
template <class T>
void svd_typed(const Tensor& u, const Tensor& s, const Tensor& vh, const Tensor& status, const Tensor& a) {
  const std::int64_t batch = a.shape()[0], m = a.shape()[1], n = a.shape()[2];
  const std::int64_t k = std::min(m, n);
  const bool full = u.shape()[2] != k || vh.shape()[1] != k;
  const std::int64_t u_size = u.shape()[1] * u.shape()[2], vh_size = vh.shape()[1] * vh.shape()[2];
  const std::int64_t scratch = math::jacobi_svd_workspace(m, n, full);
  const T* pa = a.data_ptr<T>();
  T* pu = u.data_ptr<T>();
  T* ps = s.data_ptr<T>();
  T* pvh = vh.data_ptr<T>();
  std::int32_t* pstatus = status.data_ptr<std::int32_t>();
  // Scratch for every thread, allocated here (an exception must not leave a parallel region).
  const int threads = static_cast<int>(std::min<std::int64_t>(omp_get_max_threads(), batch));
  std::vector<double> work(static_cast<std::size_t>(std::max(threads, 1) * scratch));
#pragma omp parallel for schedule(dynamic) num_threads(threads) if (threads > 1)
  for (std::int64_t b = 0; b < batch; ++b) {
    double* mine = work.data() + omp_get_thread_num() * scratch;
    pstatus[b] = math::jacobi_svd(pa + b * m * n, m, n, full, pu + b * u_size, ps + b * k, pvh + b * vh_size, mine);
  }
}

void svd_cpu(const Tensor& u, const Tensor& s, const Tensor& vh, const Tensor& status, const Tensor& a) {
  if (a.shape()[0] == 0) return;
  switch (a.dtype()) {
    case kFloat32: return svd_typed<float>(u, s, vh, status, a);
    case kFloat64: return svd_typed<double>(u, s, vh, status, a);
    default: throw DTypeError("linalg_svd", concat("the CPU SVD computes float32 and float64, got ", a.dtype()));
  }
}

const bool registered = [] {
  KernelTable<SvdKernel>::set(DeviceType::CPU, &svd_cpu);
  return true;
}();

}  // namespace
}  // namespace infini::kernels
