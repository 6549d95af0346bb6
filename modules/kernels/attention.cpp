// Argument checks and layout preparation for the fused attention kernels.
module;
#include <cstdint>
module infini.kernels;
import infini.std;

namespace infini::kernels {
namespace {

constexpr std::string_view kOp = "scaled_dot_product_attention";

// The mask as a (B, H, Tq, Tk) view (broadcasting allowed), or undefined.
Tensor expand_mask(const Tensor& mask, const Tensor& q, const Tensor& k) {
  if (!mask.defined()) return mask;
  if (mask.device() != q.device())
    throw DeviceError(kOp, concat("attn_mask is on ", mask.device(), ", the query on ", q.device()));
  const Shape scores{q.shape()[0], q.shape()[1], q.shape()[2], k.shape()[2]};
  if (mask.dtype() != kBool && mask.dtype() != q.dtype())
    throw DTypeError(kOp, concat("attn_mask must be bool or ", q.dtype(), " like the query, got ", mask.dtype()));
  if (broadcast_shapes(kOp, mask.shape(), scores) != scores)
    throw ShapeError(kOp, concat("attn_mask of shape ", mask.shape(), " does not broadcast to the scores' ", scores));
  return mask.expand(scores);
}

void check(const Tensor& q, const Tensor& k, const Tensor& v) {
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4)
    throw ShapeError(kOp, concat("expected 4-d query, key, value (B, H, T, D), got ", q.shape(), ", ", k.shape(),
                                 ", ", v.shape()));
  if (!is_floating_point(q.dtype()) || k.dtype() != q.dtype() || v.dtype() != q.dtype())
    throw DTypeError(kOp, concat("query, key and value must share one floating-point dtype, got ", q.dtype(), ", ",
                                 k.dtype(), ", ", v.dtype()));
  if (k.device() != q.device() || v.device() != q.device())
    throw DeviceError(kOp, concat("query, key and value must be on one device, got ", q.device(), ", ", k.device(),
                                  ", ", v.device()));
  const auto& qs = q.shape();
  const auto& ks = k.shape();
  const auto& vs = v.shape();
  if (ks[0] != qs[0] || vs[0] != qs[0] || ks[3] != qs[3] || vs[1] != ks[1] || vs[2] != ks[2] || ks[1] == 0 ||
      qs[1] % ks[1] != 0)
    throw ShapeError(kOp, concat("incompatible shapes: query ", qs, ", key ", ks, ", value ", vs,
                                 " (expected key (B, Hkv, Tk, D), value (B, Hkv, Tk, Dv), Hkv dividing H)"));
}

// Whether a kernel takes 16-bit inputs as they are: on CUDA, the tensor-core kernels, for
// problems without mask or dropout whose D = Dv is 16, 32, 64 or 128 (the rule of
// cuda::attention_runs_in_16_bit). Their lse is float32.
bool runs_in_16_bit(const Tensor& q, const Tensor& v, const Tensor& mask, const AttentionParams& params) {
  const std::int64_t d = q.shape()[3];
  return q.device().type == DeviceType::CUDA && (q.dtype() == kBFloat16 || q.dtype() == kFloat16) &&
         !mask.defined() && params.dropout_p == 0 && v.shape()[3] == d && (d == 16 || d == 32 || d == 64 || d == 128);
}

// An operand of the tensor-core kernels as it is when its rows are contiguous and 16-byte
// aligned (so a (B, T, H, D) view is read in place), else a contiguous copy.
Tensor rows_in_place(const Tensor& t) {
  bool aligned = t.strides()[3] == 1 && reinterpret_cast<std::uintptr_t>(t.data_ptr()) % 16 == 0;
  for (int d = 0; d < 3; ++d) aligned = aligned && (t.shape()[d] == 1 || t.strides()[d] % 8 == 0);
  return aligned ? t : t.contiguous();
}

// An uninitialised (B, H, T, D) tensor laid out as (B, T, H, D): the tensor-core kernels'
// outputs, whose heads then merge into (B, T, H D) without a copy.
Tensor heads_interleaved(const Shape& shape, const Tensor& like) {
  const Shape interleaved{shape[0], shape[2], shape[1], shape[3]};
  return empty(interleaved, {.dtype = like.dtype(), .device = like.device()}).transpose(1, 2);
}

// Uninitialised gradients for the tensor-core kernels, dq (B, H, T, D) and dk, dv
// (B, Hkv, T, D): when queries and keys have one length, views of one (B, T, H + 2 Hkv, D)
// buffer, which is where split's backward finds the heads of a split qkv projection's
// gradient and joins them without a copy; otherwise each laid out as (B, T, heads, D).
AttentionGrads interleaved_grads(const Tensor& q, const Tensor& k, const Tensor& v) {
  const Shape &qs = q.shape(), &ks = k.shape();
  if (qs[2] != ks[2] || v.shape()[3] != qs[3])
    return {heads_interleaved(qs, q), heads_interleaved(ks, k), heads_interleaved(v.shape(), v)};
  const Tensor buffer = empty({qs[0], qs[2], qs[1] + 2 * ks[1], qs[3]}, {.dtype = q.dtype(), .device = q.device()});
  auto heads = [&](std::int64_t first, std::int64_t count) { return buffer.narrow(2, first, count).transpose(1, 2); };
  return {heads(0, qs[1]), heads(qs[1], ks[1]), heads(qs[1] + ks[1], ks[1])};
}

// The dtype the kernels compute in: float64 stays, 16-bit inputs run in float32 unless a
// kernel takes them as they are.
DataType compute_type(const Tensor& q, const Tensor& v, const Tensor& mask, const AttentionParams& params) {
  if (q.dtype() == kFloat64) return kFloat64;
  return runs_in_16_bit(q, v, mask, params) ? q.dtype() : kFloat32;
}

}  // namespace

AttentionResult attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                                  const AttentionParams& params) {
  NoGradGuard no_grad;
  check(q, k, v);
  const auto& qs = q.shape();
  const DataType lse_type = q.dtype() == kFloat64 ? kFloat64 : kFloat32;
  const Tensor lse = empty({qs[0], qs[1], qs[2]}, {.dtype = lse_type, .device = q.device()});
  if (runs_in_16_bit(q, v, mask, params)) {
    const AttentionResult r{heads_interleaved(q.shape(), q), lse};
    KernelTable<AttentionForwardKernel>::call(q.device(), r.out, r.lse, rows_in_place(q), rows_in_place(k),
                                              rows_in_place(v), mask, params);
    return r;
  }
  const DataType t = compute_type(q, v, mask, params);
  const Tensor qc = q.to(t).contiguous(), kc = k.to(t).contiguous(), vc = v.to(t).contiguous();
  const Tensor m = expand_mask(mask.defined() && mask.dtype() != kBool ? mask.to(t) : mask, qc, kc);
  AttentionResult r{empty({qs[0], qs[1], qs[2], v.shape()[3]}, {.dtype = t, .device = q.device()}), lse};
  KernelTable<AttentionForwardKernel>::call(q.device(), r.out, r.lse, qc, kc, vc, m, params);
  if (t != q.dtype()) r.out = r.out.to(q.dtype());
  return r;
}

AttentionGrads attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& out, const Tensor& lse, const Tensor& mask,
                                  const AttentionParams& params) {
  NoGradGuard no_grad;
  if (runs_in_16_bit(q, v, mask, params)) {  // every gradient row is written
    const AttentionGrads g = interleaved_grads(q, k, v);
    KernelTable<AttentionBackwardKernel>::call(q.device(), g.dq, g.dk, g.dv, rows_in_place(grad_out),
                                               rows_in_place(q), rows_in_place(k), rows_in_place(v),
                                               rows_in_place(out), lse, mask, params);
    return g;
  }
  const DataType t = compute_type(q, v, mask, params);
  const Tensor qc = q.to(t).contiguous(), kc = k.to(t).contiguous(), vc = v.to(t).contiguous();
  const Tensor m = expand_mask(mask.defined() && mask.dtype() != kBool ? mask.to(t) : mask, qc, kc);
  AttentionGrads g{zeros(q.shape(), {.dtype = t, .device = q.device()}),
                   zeros(k.shape(), {.dtype = t, .device = q.device()}),
                   zeros(v.shape(), {.dtype = t, .device = q.device()})};
  KernelTable<AttentionBackwardKernel>::call(q.device(), g.dq, g.dk, g.dv, grad_out.to(t).contiguous(), qc, kc, vc,
                                             out.to(t).contiguous(), lse, m, params);
  if (t != q.dtype()) g = {g.dq.to(q.dtype()), g.dk.to(q.dtype()), g.dv.to(q.dtype())};
  return g;
}

}  // namespace infini::kernels
