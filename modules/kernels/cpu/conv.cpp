// CPU sliding-window kernels: im2col, its adjoint col2im, and the max-pool argmax. Each
// (n, c) plane is handled by one thread, so col2im's sums never race and results do not
// depend on the thread count. Geometries of 1 or 2 spatial dims run as 3-d ones with
// leading dims of size 1.
module;
#include <cstdint>
module infini.kernels;
import infini.std;

namespace infini::kernels {
namespace {

using Dims = std::array<std::int64_t, 3>;

std::int64_t floor_div(std::int64_t a, std::int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return -floor_div(-a, b); }

// The windows of one (n, c) plane, spatial dims right-aligned into three.
struct Windows {
  Dims in{1, 1, 1}, kernel{1, 1, 1}, stride{1, 1, 1}, padding{0, 0, 0}, dilation{1, 1, 1}, out{1, 1, 1};
  std::int64_t planes = 0, in_plane = 1, kernel_count = 1, out_count = 1;

  Windows(const Tensor& x, const WindowGeometry& g) {
    const std::size_t lead = 3 - g.kernel.size();
    for (std::size_t d = 0; d < g.kernel.size(); ++d) {
      in[lead + d] = x.size(2 + static_cast<std::int64_t>(d));
      kernel[lead + d] = g.kernel[d];
      stride[lead + d] = g.stride[d];
      padding[lead + d] = g.padding[d];
      dilation[lead + d] = g.dilation[d];
      out[lead + d] = g.out[d];
    }
    planes = x.size(0) * x.size(1);
    for (int d = 0; d < 3; ++d) {
      in_plane *= in[d];
      kernel_count *= kernel[d];
      out_count *= out[d];
    }
  }
  // Input position of output o's tap k along dim d (may lie outside [0, in[d])).
  std::int64_t at(int d, std::int64_t o, std::int64_t k) const { return o * stride[d] - padding[d] + k * dilation[d]; }
  bool inside(int d, std::int64_t i) const { return i >= 0 && i < in[d]; }
  // The outputs [lo, hi) of the last dim whose tap k lies inside the input.
  std::pair<std::int64_t, std::int64_t> inside_range(std::int64_t k) const {
    const std::int64_t shift = padding[2] - k * dilation[2];
    const std::int64_t lo = std::max<std::int64_t>(0, ceil_div(shift, stride[2]));
    const std::int64_t hi = std::min(out[2], floor_div(in[2] - 1 + shift, stride[2]) + 1);
    return {lo, std::max(lo, hi)};
  }

  // Calls row(column_row, input_row, lo, hi, k2) for every row of a plane's columns: the
  // columns of output row (o0, o1) for taps (k0, k1, k2); input_row is the input row they
  // read (input_row[at(2, o, k2)] for o in [lo, hi)), or -1 when that row lies in the padding.
  template <class Row>
  void for_each_row(Row&& row) const {
    std::int64_t column_row = 0;
    for (std::int64_t k0 = 0; k0 < kernel[0]; ++k0)
      for (std::int64_t k1 = 0; k1 < kernel[1]; ++k1)
        for (std::int64_t k2 = 0; k2 < kernel[2]; ++k2) {
          const auto [lo, hi] = inside_range(k2);
          for (std::int64_t o0 = 0; o0 < out[0]; ++o0) {
            const std::int64_t i0 = at(0, o0, k0);
            for (std::int64_t o1 = 0; o1 < out[1]; ++o1, ++column_row) {
              const std::int64_t i1 = at(1, o1, k1);
              row(column_row, inside(0, i0) && inside(1, i1) ? i0 * in[1] + i1 : -1, lo, hi, k2);
            }
          }
        }
  }
};

// Runs body(plane) for every plane, over the OpenMP threads when there is enough work.
template <class Body>
void for_each_plane(std::int64_t planes, std::int64_t work_per_plane, Body&& body) {
#pragma omp parallel for schedule(static) if (planes > 1 && planes * work_per_plane >= kParallelGrain)
  for (std::int64_t p = 0; p < planes; ++p) body(p);
}

void im2col_cpu(const Tensor& columns, const Tensor& x, const WindowGeometry& g) {
  const Windows w(x, g);
  dispatch(x.dtype(), [&]<class T>() {
    const T* src = static_cast<const T*>(x.data_ptr());
    T* dst = static_cast<T*>(columns.data_ptr());
    const std::int64_t n = w.out[2], step = w.stride[2];
    for_each_plane(w.planes, w.kernel_count * w.out_count, [&](std::int64_t p) {
      const T* plane = src + p * w.in_plane;
      T* cols = dst + p * w.kernel_count * w.out_count;
      w.for_each_row([&](std::int64_t r, std::int64_t input_row, std::int64_t lo, std::int64_t hi, std::int64_t k2) {
        T* out = cols + r * n;
        if (input_row < 0 || lo == hi) {
          std::fill(out, out + n, T{});
          return;
        }
        const T* in = plane + input_row * w.in[2] + w.at(2, lo, k2);  // output lo's tap
        std::fill(out, out + lo, T{});
        if (step == 1) std::copy(in, in + (hi - lo), out + lo);
        else for (std::int64_t o = lo; o < hi; ++o) out[o] = in[(o - lo) * step];
        std::fill(out + hi, out + n, T{});
      });
    });
  });
}

void col2im_cpu(const Tensor& x, const Tensor& columns, const WindowGeometry& g) {
  const Windows w(x, g);
  dispatch(x.dtype(), [&]<class T>() {
    using C = compute_t<T>;
    T* dst = static_cast<T*>(x.data_ptr());
    const T* src = static_cast<const T*>(columns.data_ptr());
    const std::int64_t n = w.out[2], step = w.stride[2];
    for_each_plane(w.planes, w.kernel_count * w.out_count, [&](std::int64_t p) {
      T* plane = dst + p * w.in_plane;
      const T* cols = src + p * w.kernel_count * w.out_count;
      std::fill(plane, plane + w.in_plane, T{});
      w.for_each_row([&](std::int64_t r, std::int64_t input_row, std::int64_t lo, std::int64_t hi, std::int64_t k2) {
        if (input_row < 0 || lo == hi) return;
        const T* in = cols + r * n;
        T* out = plane + input_row * w.in[2] + w.at(2, lo, k2);  // output lo's tap
        for (std::int64_t o = lo; o < hi; ++o) {
          T& target = out[(o - lo) * step];
          target = T(static_cast<C>(target) + static_cast<C>(in[o]));
        }
      });
    });
  });
}

void max_pool_indices_cpu(const Tensor& indices, const Tensor& x, const WindowGeometry& g) {
  const Windows w(x, g);
  // taps[d][o]: the taps [lo, hi) of window o along dim d that lie inside the input.
  std::array<std::vector<std::pair<std::int64_t, std::int64_t>>, 3> taps;
  for (int d = 0; d < 3; ++d)
    for (std::int64_t o = 0; o < w.out[d]; ++o) {
      const std::int64_t start = w.at(d, o, 0);
      const std::int64_t lo = start >= 0 ? 0 : ceil_div(-start, w.dilation[d]);
      const std::int64_t hi = std::min(w.kernel[d], floor_div(w.in[d] - 1 - start, w.dilation[d]) + 1);
      taps[d].emplace_back(lo, std::max(lo, hi));
    }
  dispatch(x.dtype(), [&]<class T>() {
    using C = compute_t<T>;
    const T* src = static_cast<const T*>(x.data_ptr());
    std::int64_t* dst = static_cast<std::int64_t*>(indices.data_ptr());
    for_each_plane(w.planes, w.kernel_count * w.out_count, [&](std::int64_t p) {
      const T* plane = src + p * w.in_plane;
      std::int64_t* out = dst + p * w.out_count;
      for (std::int64_t o0 = 0; o0 < w.out[0]; ++o0)
        for (std::int64_t o1 = 0; o1 < w.out[1]; ++o1)
          for (std::int64_t o2 = 0; o2 < w.out[2]; ++o2) {
            const auto [lo0, hi0] = taps[0][o0];
            const auto [lo1, hi1] = taps[1][o1];
            const auto [lo2, hi2] = taps[2][o2];
            if (lo0 == hi0 || lo1 == hi1 || lo2 == hi2) {  // no tap inside the input
              *out++ = -1;
              continue;
            }
            // Row-major over the taps: the first maximum wins; a NaN beats every number
            // (and later NaNs).
            std::int64_t best_at = -1;
            C best{};
            for (std::int64_t k0 = lo0; k0 < hi0; ++k0)
              for (std::int64_t k1 = lo1; k1 < hi1; ++k1) {
                const std::int64_t row = (w.at(0, o0, k0) * w.in[1] + w.at(1, o1, k1)) * w.in[2];
                for (std::int64_t k2 = lo2; k2 < hi2; ++k2) {
                  const std::int64_t i = row + w.at(2, o2, k2);
                  const C v = static_cast<C>(plane[i]);
                  if (best_at < 0 || (!is_nan(best) && !(v <= best))) {
                    best = v;
                    best_at = i;
                  }
                }
              }
            *out++ = best_at;
          }
    });
  });
}

const bool registered = [] {
  KernelTable<Im2colKernel>::set(DeviceType::CPU, &im2col_cpu);
  KernelTable<Col2imKernel>::set(DeviceType::CPU, &col2im_cpu);
  KernelTable<MaxPoolIndicesKernel>::set(DeviceType::CPU, &max_pool_indices_cpu);
  return true;
}();

}  // namespace
}  // namespace infini::kernels
