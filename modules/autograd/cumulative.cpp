// Running reductions along one dim beyond cumsum/cumprod: cummax / cummin (values and the
// index where the running value was reached) and logcumsumexp. Forward through
// infini.kernels' scans; backward written with differentiable ops (create_graph works).
module;
#include <cstdint>
module infini.autograd;
import infini.std;

namespace infini {
namespace {

// cummax / cummin: every element's gradient goes to the index its running value came from.
ValuesIndices running_extreme(std::string_view name, ReduceOp op, const Tensor& x, std::int64_t dim) {
  auto [values, indices] = kernels::arg_scan(name, op, x, dim);
  record(name, {x}, {values}, {indices}, [dim](const TensorList& g, const TensorList& s) {
    if (!g[0].defined()) return TensorList{Tensor()};
    if (g[0].dim() == 0) return TensorList{g[0]};  // one element, its own running value
    return TensorList{scatter_add(zeros_like(g[0]), dim, s[0], g[0])};
  });
  return {values, indices};
}

// The most negative finite value of a floating-point dtype.
double lowest_finite(DataType dtype) {
  switch (dtype) {
    case kFloat16: return -65504.0;
    case kBFloat16: return -3.3895313892515355e38;
    case kFloat32: return std::numeric_limits<float>::lowest();
    default: return std::numeric_limits<double>::lowest();
  }
}

// log(cumsum(exp(x))) along dim, from the end when reverse; each direction's gradient uses
// the other. With out_j the result, dL/dx_i = sum over the j that x_i contributes to of
// g_j exp(x_i - out_j), computed without overflow as exp(x_i + lcse_j(log g_j - out_j)) for
// the positive and the negative parts of g separately (PyTorch's logcumsumexp_backward).
Tensor log_cumsum_exp(const Tensor& x, std::int64_t dim, bool reverse) {
  Tensor y = kernels::scan(ScanOp::LogSumExp, x, dim, reverse);
  record("logcumsumexp", {x}, {y}, {x, y}, [dim, reverse](const TensorList& g, const TensorList& s) {
    if (!g[0].defined()) return TensorList{Tensor()};
    const Tensor& x = s[0];
    const Tensor& out = s[1];
    // The dtype's lowest finite value stands for log 0, so that every term, and the
    // gradient of this backward, stays finite. Where out is -inf (only -inf so far)
    // nothing flows.
    const Tensor has_mass = ne(out, -std::numeric_limits<double>::infinity());
    auto part = [&](const Tensor& sign) {
      const Tensor use = logical_and(sign, has_mass);
      const Tensor log_g = log(where(use, abs(g[0]), 1.0));
      const Tensor term = where(use, sub(log_g, where(use, out, 0.0)), lowest_finite(g[0].dtype()));
      return exp(add(log_cumsum_exp(term, dim, !reverse), x));
    };
    return TensorList{sub(part(gt(g[0], 0)), part(lt(g[0], 0)))};
  });
  return y;
}

}  // namespace

ValuesIndices cummax(const Tensor& x, std::int64_t dim) { return running_extreme("cummax", ReduceOp::Max, x, dim); }
ValuesIndices cummin(const Tensor& x, std::int64_t dim) { return running_extreme("cummin", ReduceOp::Min, x, dim); }

Tensor logcumsumexp(const Tensor& x, std::int64_t dim) { return log_cumsum_exp(x, dim, false); }

}  // namespace infini
