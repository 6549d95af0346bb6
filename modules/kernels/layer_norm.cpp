// Argument checks and layout preparation for the fused layer-norm kernels.
module;
#include <cstdint>
module infini.kernels;
import infini.std;

namespace infini::kernels {
namespace {

constexpr std::string_view kOp = "layer_norm";

void check(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (x.dim() != 2) throw ShapeError(kOp, concat("expected rows (N, C), got shape ", x.shape()));
  if (x.dtype() != kFloat32 && x.dtype() != kFloat64)
    throw DTypeError(kOp, concat("fused rows must be float32 or float64, got ", x.dtype()));
  for (const Tensor* p : {&weight, &bias}) {
    if (!p->defined()) continue;
    if (p->shape() != Shape{x.shape()[1]})
      throw ShapeError(kOp, concat("expected weight and bias of shape [", x.shape()[1], "], got ", p->shape()));
    if (p->dtype() != x.dtype())
      throw DTypeError(kOp, concat("weight and bias must be ", x.dtype(), " like the input, got ", p->dtype()));
    if (p->device() != x.device())
      throw DeviceError(kOp, concat("input on ", x.device(), " but weight or bias on ", p->device()));
  }
}

Tensor contiguous_or_undefined(const Tensor& t) { return t.defined() ? t.contiguous() : t; }

// The 16-bit types float32 rows may be written in, and their gradients read in.
bool is_half_of_float32(const Tensor& x, DataType other) {
  return x.dtype() == kFloat32 && (other == kFloat16 || other == kBFloat16);
}

}  // namespace

LayerNormRows layer_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                                 std::optional<DataType> y_dtype) {
  NoGradGuard no_grad;
  check(x, weight, bias);
  const DataType out = y_dtype.value_or(x.dtype());
  if (out != x.dtype() && !is_half_of_float32(x, out))
    throw DTypeError(kOp, concat("fused rows of ", x.dtype(), " cannot be written as ", out,
                                 " (float32 rows may be written as float16 or bfloat16)"));
  const std::int64_t n = x.shape()[0];
  const DataType stats = x.dtype();  // float32 or float64, as the kernels promise
  LayerNormRows r{empty(x.shape(), {.dtype = out, .device = x.device()}),
                  empty({n}, {.dtype = stats, .device = x.device()}), empty({n}, {.dtype = stats, .device = x.device()})};
  KernelTable<LayerNormForwardKernel>::call(x.device(), r.y, r.mean, r.rstd, x.contiguous(),
                                            contiguous_or_undefined(weight), contiguous_or_undefined(bias), eps);
  return r;
}

LayerNormGrads layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                                   const Tensor& weight, bool need_weight, bool need_bias, const Tensor& dx_add) {
  NoGradGuard no_grad;
  check(x, weight, Tensor());
  for (const Tensor* g : {&dy, &dx_add})
    if (g->defined() && g->shape() != x.shape())
      throw ShapeError(kOp, concat("gradient of shape ", g->shape(), " for an input of shape ", x.shape()));
  for (const Tensor* s : {&mean, &rstd}) {
    if (s->shape() != Shape{x.shape()[0]})
      throw ShapeError(kOp, concat("expected mean and rstd of shape [", x.shape()[0], "], got ", s->shape()));
    if (s->dtype() != x.dtype())
      throw DTypeError(kOp, concat("expected mean and rstd of ", x.dtype(), " like the input, got ", s->dtype()));
  }
  for (const Tensor* t : {&dy, &dx_add, &mean, &rstd})
    if (t->defined() && t->device() != x.device())
      throw DeviceError(kOp, concat("input on ", x.device(), " but a gradient or statistic on ", t->device()));
  const std::int64_t c = x.shape()[1];
  const TensorOptions options{.dtype = x.dtype(), .device = x.device()};
  LayerNormGrads g{empty(x.shape(), options), need_weight ? empty({c}, options) : Tensor(),
                   need_bias ? empty({c}, options) : Tensor()};
  const Tensor g_rows = is_half_of_float32(x, dy.dtype()) ? dy : dy.to(x.dtype());
  const Tensor add_rows = dx_add.defined() ? dx_add.to(x.dtype()).contiguous() : Tensor();
  KernelTable<LayerNormBackwardKernel>::call(x.device(), g.dx, g.dweight, g.dbias, g_rows.contiguous(), add_rows,
                                             x.contiguous(), mean, rstd, contiguous_or_undefined(weight));
  return g;
}

}  // namespace infini::kernels
