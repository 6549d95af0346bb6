// The CUDA SVD as the entry of SvdKernel: the float64 workspace of every matrix is
// allocated here as a tensor on a's device, and the matrices run in cuda::svd
// (cuda/src/svd.cu), one thread each.
module;
#include <cstdint>

#include "infini/cuda/cuda.h"
#include "infini/cuda/linalg.h"
#include "infini/math/jacobi_svd.h"
module infini.kernels;
import infini.std;
import :cuda_arrays;

namespace infini::kernels {
namespace {

using cuda_glue::element_type;
using cuda_glue::run;

void svd_cuda(const Tensor& u, const Tensor& s, const Tensor& vh, const Tensor& status, const Tensor& a) {
  if (a.dtype() != kFloat32 && a.dtype() != kFloat64)
    throw DTypeError("linalg_svd", concat("the CUDA SVD computes float32 and float64, got ", a.dtype()));
  cuda::SvdProblem p;
  p.type = element_type(a.dtype());
  p.batch = a.shape()[0];
  p.m = a.shape()[1];
  p.n = a.shape()[2];
  if (p.batch == 0) return;
  const std::int64_t k = std::min(p.m, p.n);
  p.full = u.shape()[2] != k || vh.shape()[1] != k;
  const Tensor work = empty({p.batch * math::jacobi_svd_workspace(p.m, p.n, p.full)},
                            {.dtype = kFloat64, .device = a.device()});
  p.a = a.data_ptr();
  p.u = u.data_ptr();
  p.s = s.data_ptr();
  p.vh = vh.data_ptr();
  p.status = status.data_ptr<std::int32_t>();
  p.work = work.data_ptr<double>();
  run("linalg_svd", a.device(), [&] { cuda::svd(p, a.device().index); });
}

const bool registered = [] {
  KernelTable<SvdKernel>::set(DeviceType::CUDA, &svd_cuda);
  return true;
}();

}  // namespace
}  // namespace infini::kernels
