// clip_grad_norm_ / clip_grad_value_ (see clip_grad.cppm). The norm is accumulated in float64
// on every device: per CPU grad in fixed chunks, and for the CUDA grads of each device in one
// fixed-order reduction over all of them (infini/cuda/optim.h); the scaling and clamping are
// the library's mul_ and clamp, which run where the grads are.
module;
#include <cmath>
#include <cstdint>

#if INFINI_HAS_CUDA
#include "infini/cuda/optim.h"
#endif
module infini.nn;
import infini.std;

namespace infini::optim {
namespace {

// Elements per partial result: partials are summed in a fixed order, so the total does not
// depend on how OpenMP spreads the chunks.
constexpr std::int64_t kChunk = 1 << 16;

std::vector<Tensor> grads_of(std::string_view op, const std::vector<Tensor>& params) {
  std::vector<Tensor> grads;
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (!params[i].defined()) throw Error(op, concat("parameter ", i, " is an undefined tensor"));
    const Tensor& grad = params[i].grad();
    if (!grad.defined()) continue;
    if (!is_floating_point(grad.dtype()))
      throw DTypeError(op, concat("the grad of parameter ", i, " has dtype ", grad.dtype()));
    grads.push_back(grad);
  }
  return grads;
}

// How the magnitudes of all elements combine into a norm of order p.
enum class NormKind { One, Two, Inf, Power };

NormKind norm_kind(double p) {
  if (std::isinf(p)) return NormKind::Inf;
  return p == 1 ? NormKind::One : p == 2 ? NormKind::Two : NormKind::Power;
}

// Sum of |x|^p, or for Inf the largest |x| (NaN when any element is NaN).
template <NormKind kKind>
double combine(double a, double b) {
  if constexpr (kKind == NormKind::Inf) return a > b || a != a ? a : b;  // max; NaN wins
  else return a + b;
}

double combine(NormKind kind, double a, double b) {
  return kind == NormKind::Inf ? combine<NormKind::Inf>(a, b) : combine<NormKind::Two>(a, b);
}

// The type an element converts through on its way to double (float for float16/bfloat16).
template <class T>
using wide_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// combine() over x[begin, end) in kLanes independent partial results (so the loop vectorizes),
// merged in a fixed order.
template <NormKind kKind, class T>
double combine_range(const T* x, std::int64_t begin, std::int64_t end, double p) {
  auto term = [&](T value) {
    const double a = std::abs(static_cast<double>(static_cast<wide_t<T>>(value)));
    if constexpr (kKind == NormKind::Two) return a * a;
    else if constexpr (kKind == NormKind::Power) return std::pow(a, p);
    else return a;
  };
  constexpr int kLanes = 8;
  double lanes[kLanes] = {};
  std::int64_t i = begin;
  for (; i + kLanes <= end; i += kLanes)
    for (int k = 0; k < kLanes; ++k) lanes[k] = combine<kKind>(lanes[k], term(x[i + k]));
  double s = 0;
  for (; i < end; ++i) s = combine<kKind>(s, term(x[i]));
  for (double lane : lanes) s = combine<kKind>(s, lane);
  return s;
}

// combine() over every element of one grad, in float64.
double combine_grad(const Tensor& grad, double p) {
  const NormKind kind = norm_kind(p);
  const Tensor g = grad.contiguous();
  const std::int64_t n = g.numel();
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(static_cast<std::size_t>(chunks), 0.0);
  dispatch(g.dtype(), [&]<class T>() {
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      const T* x = g.data_ptr<T>();
#pragma omp parallel for schedule(static) if (chunks > 1)
      for (std::int64_t c = 0; c < chunks; ++c) {
        const std::int64_t begin = c * kChunk, end = std::min(n, begin + kChunk);
        double s = 0;
        switch (kind) {
          case NormKind::One: s = combine_range<NormKind::One>(x, begin, end, p); break;
          case NormKind::Two: s = combine_range<NormKind::Two>(x, begin, end, p); break;
          case NormKind::Inf: s = combine_range<NormKind::Inf>(x, begin, end, p); break;
          case NormKind::Power: s = combine_range<NormKind::Power>(x, begin, end, p); break;
        }
        partial[static_cast<std::size_t>(c)] = s;
      }
    }
  });
  double total = 0;
  for (double s : partial) total = combine(kind, total, s);
  return total;
}

#if INFINI_HAS_CUDA
// The grads on the CUDA device `device` as the norm kernels' tensors; `contiguous` keeps
// their contiguous copies alive.
std::vector<cuda::NormTensor> cuda_norm_tensors(const std::vector<Tensor>& grads, Device device,
                                                std::vector<Tensor>& contiguous) {
  std::vector<cuda::NormTensor> tensors;
  for (const Tensor& grad : grads) {
    if (grad.device() != device) continue;
    const Tensor& g = contiguous.emplace_back(grad.contiguous());
    tensors.push_back({.data = g.data_ptr(), .type = static_cast<cuda::ElementType>(g.dtype()), .numel = g.numel()});
  }
  return tensors;
}

// combine() over every element of the grads on the CUDA device `device`, in float64.
double combine_cuda_grads(std::string_view op, const std::vector<Tensor>& grads, Device device, double p) {
  std::vector<Tensor> contiguous;  // alive until the result is back
  const std::vector<cuda::NormTensor> tensors = cuda_norm_tensors(grads, device, contiguous);
  const Tensor scratch = empty({cuda::grad_norm_scratch(tensors)}, {.dtype = kFloat64, .device = device});
  try {
    return cuda::grad_norm_sum(tensors, p, scratch.data_ptr<double>(), device.index);
  } catch (const cuda::CudaError& e) {
    throw DeviceError(op, concat("on ", device, ": ", e.what()));
  }
}

// The same as a 0-d float64 tensor on `device`, nothing read back.
Tensor combine_cuda_grads_on_device(std::string_view op, const std::vector<Tensor>& grads, Device device, double p) {
  std::vector<Tensor> contiguous;  // the kernels are queued before these are freed
  const std::vector<cuda::NormTensor> tensors = cuda_norm_tensors(grads, device, contiguous);
  const std::int64_t slots = cuda::grad_norm_scratch(tensors);
  const Tensor scratch = empty({slots}, {.dtype = kFloat64, .device = device});
  try {
    cuda::grad_norm_sum_on_device(tensors, p, scratch.data_ptr<double>(), device.index);
  } catch (const cuda::CudaError& e) {
    throw DeviceError(op, concat("on ", device, ": ", e.what()));
  }
  return scratch.select(0, slots - 1);
}
#endif

}  // namespace

namespace {

double total_norm_of(std::string_view op, const std::vector<Tensor>& grads, double norm_type, bool error_if_nonfinite) {
  if (!(norm_type > 0)) throw Error(op, concat("norm_type must be > 0 or infinity, got ", norm_type));
  if (grads.empty()) return 0.0;
  const NormKind kind = norm_kind(norm_type);
  double sum = 0;
  for (const Tensor& g : grads)
    if (g.device().is_cpu()) sum = combine(kind, sum, combine_grad(g, norm_type));
#if INFINI_HAS_CUDA
  std::vector<Device> devices;  // the CUDA devices in order of first appearance
  for (const Tensor& g : grads)
    if (g.device().is_cuda() && std::find(devices.begin(), devices.end(), g.device()) == devices.end())
      devices.push_back(g.device());
  for (Device device : devices) sum = combine(kind, sum, combine_cuda_grads(op, grads, device, norm_type));
#endif
  const double total = kind == NormKind::Two ? std::sqrt(sum) : kind == NormKind::Power ? std::pow(sum, 1 / norm_type) : sum;
  if (error_if_nonfinite && !std::isfinite(total))
    throw Error(op, concat("the total norm of order ", norm_type, " of the gradients is non-finite (", total,
                           "), so they cannot be clipped (pass error_if_nonfinite = false to scale them by it anyway)"));
  return total;
}

void check_max_norm(std::string_view op, double max_norm) {
  if (!(max_norm >= 0)) throw Error(op, concat("max_norm must be >= 0, got ", max_norm));
}

}  // namespace

double total_grad_norm(const std::vector<Tensor>& params, double norm_type, bool error_if_nonfinite) {
  constexpr std::string_view op = "total_grad_norm";
  return total_norm_of(op, grads_of(op, params), norm_type, error_if_nonfinite);
}

double clip_coefficient(double total_norm, double max_norm) {
  check_max_norm("clip_coefficient", max_norm);
  const double coefficient = max_norm / (total_norm + 1e-6);
  return coefficient >= 1.0 ? 1.0 : coefficient;  // PyTorch clamps it to at most 1; NaN passes
}

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type, bool error_if_nonfinite) {
  constexpr std::string_view op = "clip_grad_norm_";
  check_max_norm(op, max_norm);
  const std::vector<Tensor> grads = grads_of(op, params);
  const double total = total_norm_of(op, grads, norm_type, error_if_nonfinite);
  if (grads.empty()) return total;
  const double coefficient = clip_coefficient(total, max_norm);
  if (coefficient != 1.0) {
    NoGradGuard no_grad;
    for (Tensor g : grads) mul_(g, coefficient);
  }
  return total;
}

Tensor total_grad_norm_tensor(const std::vector<Tensor>& params, double norm_type) {
  constexpr std::string_view op = "total_grad_norm_tensor";
  if (!(norm_type > 0)) throw Error(op, concat("norm_type must be > 0 or infinity, got ", norm_type));
  const std::vector<Tensor> grads = grads_of(op, params);
  if (grads.empty()) throw Error(op, "no parameter has a grad, so there is no device to put the norm on");
  const Device device = grads.front().device();
  for (const Tensor& g : grads)
    if (g.device() != device)
      throw DeviceError(op, concat("grads on ", device, " and ", g.device(), ", expected all on one device"));
  if (device.is_cpu()) return scalar_tensor(total_norm_of(op, grads, norm_type, false), {.dtype = kFloat64});
#if INFINI_HAS_CUDA
  NoGradGuard no_grad;
  const Tensor sum = combine_cuda_grads_on_device(op, grads, device, norm_type);
  switch (norm_kind(norm_type)) {
    case NormKind::Two: return sqrt(sum);
    case NormKind::Power: return pow(sum, 1 / norm_type);
    default: return sum;
  }
#else
  throw DeviceError(op, concat("grads on ", device, ", but this build has no CUDA backend"));
#endif
}

Tensor clip_coefficient(const Tensor& total_norm, double max_norm) {
  constexpr std::string_view op = "clip_coefficient";
  check_max_norm(op, max_norm);
  if (!total_norm.defined()) throw Error(op, "total_norm is an undefined tensor");
  if (total_norm.numel() != 1 || total_norm.dtype() != kFloat64)
    throw Error(op, concat("total_norm is ", total_norm.dtype(), total_norm.shape(), ", expected one float64 element"));
  NoGradGuard no_grad;
  // max_norm / (total + 1e-6), then at most 1 (clamp keeps a NaN), as the host version.
  return clamp(div(max_norm, add(total_norm.reshape({}), 1e-6)), std::nullopt, 1.0);
}

void clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  constexpr std::string_view op = "clip_grad_value_";
  if (!(clip_value >= 0)) throw Error(op, concat("clip_value must be >= 0, got ", clip_value));
  NoGradGuard no_grad;
  for (Tensor g : grads_of(op, params)) g.copy_(clamp(g, -clip_value, clip_value));
}

}  // namespace infini::optim
