// The batched SVD (SvdKernel): one thread per matrix runs infini::math::jacobi_svd, the
// CPU kernel's code, on its own slice of the float64 workspace in global memory. Slow for
// one large matrix (a single thread does all of it) and meant for batches of small ones.
#include <algorithm>
#include <cstdint>

#include "infini/cuda/linalg.h"
#include "infini/math/jacobi_svd.h"
#include "launch.cuh"
#include "strided.cuh"

namespace infini::cuda {
namespace {

// Few threads per block: each thread loops over a whole matrix, so blocks spread the
// matrices over the SMs.
constexpr int kSvdThreads = 32;

// The Jacobi loops keep about a hundred values live: bounds of (32 threads, 1 block per SM)
// let ptxas give them registers (with (32) alone it caps them at 96 and spills).
template <class T>
__global__ void __launch_bounds__(kSvdThreads, 1) svd_kernel(const SvdProblem p) {
  const std::int64_t k = p.m < p.n ? p.m : p.n;
  const std::int64_t u_size = p.m * (p.full ? p.m : k), vh_size = (p.full ? p.n : k) * p.n;
  const std::int64_t scratch = math::jacobi_svd_workspace(p.m, p.n, p.full);
  for (std::int64_t b = detail::first_index(); b < p.batch; b += detail::grid_step()) {
    p.status[b] = math::jacobi_svd(static_cast<const T*>(p.a) + b * p.m * p.n, p.m, p.n, p.full,
                                   static_cast<T*>(p.u) + b * u_size, static_cast<T*>(p.s) + b * k,
                                   static_cast<T*>(p.vh) + b * vh_size, p.work + b * scratch);
  }
}

}  // namespace

void svd(const SvdProblem& p, int device) {
  if (p.type != ElementType::F32 && p.type != ElementType::F64)
    throw CudaError("linalg_svd: expected float32 or float64 matrices");
  if (p.batch == 0) return;
  detail::use_device(device);
  const auto blocks = static_cast<unsigned>(
      std::min<std::int64_t>((p.batch + kSvdThreads - 1) / kSvdThreads, detail::kMaxBlocks));
  if (p.type == ElementType::F32) svd_kernel<float><<<blocks, kSvdThreads, 0, detail::stream()>>>(p);
  else svd_kernel<double><<<blocks, kSvdThreads, 0, detail::stream()>>>(p);
  detail::after_launch("linalg_svd", {static_cast<long long>(p.type), p.m, p.n});
}

}  // namespace infini::cuda
