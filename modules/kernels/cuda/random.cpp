// The CUDA random kernels (uniform_, normal_, randint, multinomial) as entries of the
// kernel tables; they draw the CPU kernels' values from the same Philox counters.
module;
#include <cstddef>
#include <cstdint>

#include "infini/cuda/random.h"
module infini.kernels;
import infini.std;
import :cuda_arrays;

namespace infini::kernels {
namespace {

using cuda_glue::element_type;
using cuda_glue::run;

cuda::PhiloxCounters counters_of(PhiloxState state) { return {state.seed, state.offset}; }

void uniform_cuda(const Tensor& out, double low, double high, PhiloxState state) {
  if (!is_floating_point(out.dtype()))
    throw DTypeError("uniform_", concat("expected a floating-point tensor, got ", out.dtype()));
  run("uniform_", out.device(), [&] {
    cuda::uniform(out.data_ptr(), element_type(out.dtype()), out.numel(), low, high, counters_of(state),
                  out.device().index);
  });
}

void normal_cuda(const Tensor& out, double mean, double std, PhiloxState state) {
  if (!is_floating_point(out.dtype()))
    throw DTypeError("normal_", concat("expected a floating-point tensor, got ", out.dtype()));
  run("normal_", out.device(), [&] {
    cuda::normal(out.data_ptr(), element_type(out.dtype()), out.numel(), mean, std, counters_of(state),
                 out.device().index);
  });
}

void randint_cuda(const Tensor& out, std::int64_t low, std::int64_t high, PhiloxState state) {
  run("randint", out.device(), [&] {
    cuda::randint(out.data_ptr(), element_type(out.dtype()), out.numel(), low, high, counters_of(state),
                  out.device().index);
  });
}

static_assert(static_cast<int>(cuda::MultinomialProblem::Kind::TooFewPositive) ==
              static_cast<int>(MultinomialCheck::Problem::TooFewPositive));

MultinomialCheck multinomial_cuda(const Tensor& out, const Tensor& probs, bool replacement, PhiloxState state) {
  if (!is_floating_point(probs.dtype()))
    throw DTypeError("multinomial", concat("expected floating-point probabilities, got ", probs.dtype()));
  // Scratch device memory from the caching allocator, held until the kernels are queued.
  std::vector<Tensor> scratch;
  const cuda::Allocate allocate = [&](std::size_t bytes) {
    scratch.push_back(empty({static_cast<std::int64_t>(bytes)}, {.dtype = kUInt8, .device = probs.device()}));
    return scratch.back().data_ptr();
  };
  const cuda::MultinomialProblem problem = run("multinomial", probs.device(), [&] {
    return cuda::multinomial(out.data_ptr<std::int64_t>(), probs.data_ptr(), element_type(probs.dtype()),
                             probs.shape()[0], probs.shape()[1], out.shape()[1], replacement, counters_of(state),
                             allocate, probs.device().index);
  });
  return {static_cast<MultinomialCheck::Problem>(problem.kind), problem.row, problem.positive};
}

const bool registered = [] {
  KernelTable<UniformKernel>::set(DeviceType::CUDA, &uniform_cuda);
  KernelTable<NormalKernel>::set(DeviceType::CUDA, &normal_cuda);
  KernelTable<RandintKernel>::set(DeviceType::CUDA, &randint_cuda);
  KernelTable<MultinomialKernel>::set(DeviceType::CUDA, &multinomial_cuda);
  return true;
}();

}  // namespace
}  // namespace infini::kernels
