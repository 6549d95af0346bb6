// CPU scaled dot-product attention with an online softmax (one pass over the keys per
// query row, O(D) extra memory per row) and its backward, which recomputes each score
// from q, k and the saved log-sum-exp. Parallel over query rows (forward) and over
// (batch, key/value head) pairs (backward, so that dK and dV have a single writer).
module;
#include <cmath>
#include <cstdint>
module infini.kernels;
import infini.std;

namespace infini::kernels {
namespace {

// The reduction is reassociated (simd lanes) so that it vectorises.
template <class T>
T dot(const T* a, const T* b, std::int64_t n) {
  T s = 0;
#pragma omp simd reduction(+ : s)
  for (std::int64_t d = 0; d < n; ++d) s += a[d] * b[d];
  return s;
}

// Everything a kernel needs to locate rows and evaluate one score.
template <class T>
struct Layout {
  std::int64_t B, H, Hkv, Tq, Tk, D, Dv, group;
  const T* q;
  const T* k;
  const T* v;
  const Tensor& mask;
  const AttentionParams& p;

  Layout(const Tensor& q_, const Tensor& k_, const Tensor& v_, const Tensor& mask_, const AttentionParams& params)
      : B(q_.shape()[0]), H(q_.shape()[1]), Hkv(k_.shape()[1]), Tq(q_.shape()[2]), Tk(k_.shape()[2]),
        D(q_.shape()[3]), Dv(v_.shape()[3]), group(H / std::max<std::int64_t>(Hkv, 1)),
        q(static_cast<const T*>(q_.data_ptr())), k(static_cast<const T*>(k_.data_ptr())),
        v(static_cast<const T*>(v_.data_ptr())), mask(mask_), p(params) {}

  const T* q_row(std::int64_t b, std::int64_t h, std::int64_t i) const { return q + ((b * H + h) * Tq + i) * D; }
  const T* k_row(std::int64_t b, std::int64_t hk, std::int64_t j) const { return k + ((b * Hkv + hk) * Tk + j) * D; }
  const T* v_row(std::int64_t b, std::int64_t hk, std::int64_t j) const { return v + ((b * Hkv + hk) * Tk + j) * Dv; }
  std::int64_t keys(std::int64_t i) const { return p.causal ? std::min(Tk, i + 1) : Tk; }

  // The scaled score of (b, h, i, j) with the mask applied; -inf when masked out.
  T score(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) const {
    T s = static_cast<T>(p.scale) * dot(q_row(b, h, i), k_row(b, h / group, j), D);
    if (mask.defined()) {
      const std::int64_t at = mask.storage_offset() + b * mask.strides()[0] + h * mask.strides()[1] +
                              i * mask.strides()[2] + j * mask.strides()[3];
      if (mask.dtype() == kBool) {
        if (!static_cast<const bool*>(mask.storage().data())[at]) return -std::numeric_limits<T>::infinity();
      } else {
        s += static_cast<const T*>(mask.storage().data())[at];
      }
    }
    return s;
  }

  // The dropout factor of weight (b, h, i, j): 0 or 1 / (1 - p).
  T keep(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) const {
    if (p.dropout_p == 0) return 1;
    const auto element = static_cast<std::uint64_t>(((b * H + h) * Tq + i) * Tk + j);
    const auto w = philox4x32(p.dropout_state.seed, p.dropout_state.offset + element);
    const double u = static_cast<double>(w[0] >> 8) * 0x1p-24;
    return u >= p.dropout_p ? static_cast<T>(1 / (1 - p.dropout_p)) : T(0);
  }
};

template <class T>
void forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
             const Tensor& mask, const AttentionParams& params) {
  const Layout<T> L(q, k, v, mask, params);
  T* o = static_cast<T*>(out.data_ptr());
  T* l = static_cast<T*>(lse.data_ptr());
  const std::int64_t rows = L.B * L.H * L.Tq;
#pragma omp parallel
  {
    std::vector<T> acc(static_cast<std::size_t>(L.Dv));
#pragma omp for schedule(dynamic, 16)
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t b = r / (L.H * L.Tq), h = r / L.Tq % L.H, i = r % L.Tq, hk = h / L.group;
      std::fill(acc.begin(), acc.end(), T(0));
      T running_max = -std::numeric_limits<T>::infinity(), total = 0;
      for (std::int64_t j = 0; j < L.keys(i); ++j) {
        const T s = L.score(b, h, i, j);
        if (s == -std::numeric_limits<T>::infinity()) continue;
        if (s > running_max) {  // rescale what was accumulated under the old max
          const T c = std::exp(running_max - s);
          total *= c;
          for (T& a : acc) a *= c;
          running_max = s;
        }
        const T weight = std::exp(s - running_max);
        total += weight;
        const T w = weight * L.keep(b, h, i, j);
        if (w == 0) continue;
        const T* vj = L.v_row(b, hk, j);
        for (std::int64_t d = 0; d < L.Dv; ++d) acc[d] += w * vj[d];
      }
      // A fully masked row has no distribution: NaN, like PyTorch's reference implementation.
      const T inv = total > 0 ? T(1) / total : std::numeric_limits<T>::quiet_NaN();
      for (std::int64_t d = 0; d < L.Dv; ++d) o[r * L.Dv + d] = acc[d] * inv;
      l[r] = total > 0 ? running_max + std::log(total) : -std::numeric_limits<T>::infinity();
    }
  }
}

template <class T>
void backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& grad_out, const Tensor& q,
              const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse, const Tensor& mask,
              const AttentionParams& params) {
  const Layout<T> L(q, k, v, mask, params);
  T* gq = static_cast<T*>(dq.data_ptr());
  T* gk = static_cast<T*>(dk.data_ptr());
  T* gv = static_cast<T*>(dv.data_ptr());
  const T* go = static_cast<const T*>(grad_out.data_ptr());
  const T* o = static_cast<const T*>(out.data_ptr());
  const T* l = static_cast<const T*>(lse.data_ptr());
  const T scale = static_cast<T>(params.scale);
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t task = 0; task < L.B * L.Hkv; ++task) {
    const std::int64_t b = task / L.Hkv, hk = task % L.Hkv;
    for (std::int64_t h = hk * L.group; h < (hk + 1) * L.group; ++h) {
      for (std::int64_t i = 0; i < L.Tq; ++i) {
        const std::int64_t r = (b * L.H + h) * L.Tq + i;
        if (!std::isfinite(l[r])) continue;  // fully masked row: no gradient
        const T* go_i = go + r * L.Dv;
        const T row_dot = dot(go_i, o + r * L.Dv, L.Dv);  // sum_j P_ij z_ij (dO_i . v_j)
        T* gq_i = gq + r * L.D;
        const T* q_i = L.q_row(b, h, i);
        for (std::int64_t j = 0; j < L.keys(i); ++j) {
          const T s = L.score(b, h, i, j);
          if (s == -std::numeric_limits<T>::infinity()) continue;
          const T prob = std::exp(s - l[r]);
          const T z = L.keep(b, h, i, j);
          const T* vj = L.v_row(b, hk, j);
          T* gv_j = gv + ((b * L.Hkv + hk) * L.Tk + j) * L.Dv;
          if (z != 0)
            for (std::int64_t d = 0; d < L.Dv; ++d) gv_j[d] += prob * z * go_i[d];
          const T ds = prob * (z * dot(go_i, vj, L.Dv) - row_dot) * scale;
          const T* kj = L.k_row(b, hk, j);
          T* gk_j = gk + ((b * L.Hkv + hk) * L.Tk + j) * L.D;
          for (std::int64_t d = 0; d < L.D; ++d) {
            gq_i[d] += ds * kj[d];
            gk_j[d] += ds * q_i[d];
          }
        }
      }
    }
  }
}

void forward_cpu(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                 const Tensor& mask, const AttentionParams& params) {
  if (q.dtype() == kFloat64) return forward<double>(out, lse, q, k, v, mask, params);
  forward<float>(out, lse, q, k, v, mask, params);
}

void backward_cpu(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& grad_out, const Tensor& q,
                  const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse, const Tensor& mask,
                  const AttentionParams& params) {
  if (q.dtype() == kFloat64) return backward<double>(dq, dk, dv, grad_out, q, k, v, out, lse, mask, params);
  backward<float>(dq, dk, dv, grad_out, q, k, v, out, lse, mask, params);
}

const bool registered = [] {
  KernelTable<AttentionForwardKernel>::set(DeviceType::CPU, &forward_cpu);
  KernelTable<AttentionBackwardKernel>::set(DeviceType::CPU, &backward_cpu);
  return true;
}();

}  // namespace
}  // namespace infini::kernels
